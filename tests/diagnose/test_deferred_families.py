"""A fully cached re-run of every scorer family that computes in process opens no file of its model (issue 45,
item 8): the capability checks, the frame rule (a video processor's own included) and everything else a run
asks before its first cache miss are answered from the record :func:`spotdiff.scorers.deferred.remember` wrote.

Each family runs a tiny model twice on a benchmark it serves, with one cache; the second run must build nothing
and open nothing under the model's folder (a Python audit hook sees every ``open``), and give the same metrics.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.scorers.base import SCORERS
from spotdiff.testing.formats import write_sugarcrepe_pp, write_winoground

#: Folders whose files must not be opened (the audit hook below watches them while a test says so).
WATCHED: list[str] = []
OPENED: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if event == "open" and WATCHED and isinstance(args[0], str | bytes | os.PathLike):
        path = os.path.realpath(os.fsdecode(args[0]))
        if any(path == w or path.startswith(w + os.sep) for w in WATCHED):
            OPENED.append(path)


sys.addaudithook(_audit)  # for the process's life: it does nothing while WATCHED is empty


def _vinoground(root: Path) -> Path:
    from spotdiff.testing.hub_repos import unpack_repo, vinoground_repo

    return unpack_repo(vinoground_repo(n=2), root)


def _vitatecs(root: Path) -> Path:
    from spotdiff.testing.videos import write_vitatecs

    return write_vitatecs(root)


def _models(kind: str, root: Path) -> tuple[str, Path]:
    """The spec of a tiny model of ``kind`` built under ``root``, and its folder."""
    from spotdiff.testing import tiny_models as tm
    from spotdiff.testing import tiny_vgpt, tiny_vlms

    builders: dict[str, Callable[[], tuple[str, Path]]] = {
        "hf-clip": lambda: ("hf-clip:{}", tm.make_tiny_clip(root / "m")),
        "hf-siglip": lambda: ("hf-siglip:{}", tm.make_tiny_siglip(root / "m")),
        "hf-dual": lambda: ("hf-dual:{}", tm.make_tiny_clip(root / "m")),
        "blip-itc": lambda: ("blip-itc:{}", tm.make_tiny_blip_retrieval(root / "m")),
        "blip-itm": lambda: ("blip-itm:{}", tm.make_tiny_blip_retrieval(root / "m")),
        "open-clip": lambda: ("open-clip:local-dir:{}", tm.make_tiny_open_clip(root / "m")[0].parent),
        "sentence-transformers": lambda: ("sentence-transformers:{}", tm.make_tiny_sentence_transformer(root / "m")),
        "vgpt": lambda: ("vgpt:{}", tiny_vgpt.make_tiny_blip_captioner(root / "m")),
        "vqa": lambda: ("vqa:{}", tiny_vlms.make_tiny_vlm("qwen2_vl", root / "m")),
        "vqa-video": lambda: ("vqa:{}?generate=2&frames=processor:4", tiny_vlms.make_tiny_vlm("qwen2_vl", root / "m")),
        "xclip": lambda: ("xclip:{}", tm.make_tiny_xclip(root / "m", num_frames=4)),
    }
    template, folder = builders[kind]()
    return template.format(folder), Path(folder)


#: Each family (``vqa-video``: a chat VLM sampling a video by its processor's own rule) on a benchmark it serves:
#: (family, benchmark, protocol, data writer).
RUNS = [
    ("hf-clip", "winoground", "group", write_winoground),
    ("hf-siglip", "winoground", "group", write_winoground),
    ("hf-dual", "winoground", "group", write_winoground),
    ("blip-itc", "winoground", "group", write_winoground),
    ("blip-itm", "winoground", "group", write_winoground),
    ("open-clip", "winoground", "group", write_winoground),
    ("sentence-transformers", "sugarcrepe-pp", "visla-t2t", write_sugarcrepe_pp),
    ("vgpt", "winoground", "group", write_winoground),
    ("vqa", "winoground", "group", write_winoground),
    ("vqa-video", "vinoground-lmm", "vinoground", _vinoground),
    ("xclip", "vitatecs", "i2t-top1", _vitatecs),
]


def test_every_family_that_computes_here_is_covered() -> None:
    """A new family joins :data:`RUNS` (``lm:`` is a judge's model, tested below; ``api:`` computes on its server
    and loads nothing here)."""
    assert {family.split("-video")[0] for family, *_ in RUNS} == set(SCORERS.names()) - {"api", "lm"}


@pytest.mark.parametrize(("family", "benchmark", "protocol", "write"), RUNS, ids=[r[0] for r in RUNS])
def test_a_fully_cached_rerun_opens_no_model_file(family, benchmark, protocol, write, tmp_path, builds) -> None:
    spec, folder = _models(family, tmp_path / "model")
    data = write(tmp_path / "data")
    built = builds
    config = EvalConfig(model=spec, benchmark=benchmark, data=data, protocol=protocol, cache=tmp_path / "cache",
                        store=tmp_path / "runs.sqlite", n_boot=0, progress=False, device="cpu", workers=0)  # fmt: skip
    first = run_eval(config)
    assert built == [spec] and first.engine_stats["computed"] > 0
    again = _rerun(config, [folder])
    assert built == [spec], "the re-run built the model"
    assert again.engine_stats["computed"] == 0 and again.metrics == first.metrics


def _rerun(config: EvalConfig, folders: list[Path]):
    """``run_eval(config)``, asserting that it opens no file under ``folders``."""
    OPENED.clear()
    WATCHED.extend(os.path.realpath(f) for f in folders)
    try:
        again = run_eval(config)
    finally:
        WATCHED.clear()
    assert OPENED == [], f"the re-run opened {OPENED[:3]}"
    return again


def _chat_lm(folder: Path) -> Path:
    """A tiny causal LM (``lm:``) whose tokenizer has a chat template and whose positions hold the judge's prompt."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from spotdiff.testing.tiny_models import make_tiny_tokenizer

    tokenizer = make_tiny_tokenizer(folder, max_length=512)
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    tokenizer.save_pretrained(folder)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=32, n_layer=1, n_head=2,
                        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                        pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    torch.manual_seed(0)
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    return folder


def test_a_fully_cached_rerun_opens_no_file_of_an_in_process_judge(tmp_path: Path) -> None:
    """``lm:``, the family of in-process judges: a re-run whose verdicts are all cached loads neither the model
    nor its judge (the judge is remembered beside the model, under its own name)."""
    from spotdiff.testing.formats import mmvp_rows, write_mmvp
    from spotdiff.testing.tiny_vlms import make_tiny_vlm

    model = make_tiny_vlm("qwen2_vl", tmp_path / "qwen")
    judge = _chat_lm(tmp_path / "judge")
    config = EvalConfig(model=f"vqa:{model}?generate=2", benchmark="mmvp", protocol="answer", judge=f"lm:{judge}",
                        data=write_mmvp(tmp_path / "mmvp", mmvp_rows(2), images=2), cache=tmp_path / "cache",
                        store=tmp_path / "runs.sqlite", n_boot=0, progress=False, device="cpu", workers=0)  # fmt: skip
    first = run_eval(config)
    assert first.judge["replies"]["computed"] == 2  # one pair: two answers judged
    again = _rerun(config, [model, judge])
    assert again.judge["replies"] == {"computed": 0, "cached": 2} and again.metrics == first.metrics
