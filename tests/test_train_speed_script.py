"""``measurements/train_speed.py``: its CPU mode at the smallest size writes every side's row (open_clip's "not
installed" where its training package does not import), the sides train the same steps on the same batches; its
clock counts the steps after the warm-up; its open_clip model has the CLIP's architecture."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"


@pytest.fixture(scope="module")
def ts() -> Iterator[ModuleType]:
    sys.path.insert(0, str(MEASUREMENTS))  # the script imports its neighbours (eval_speed, rows) by name
    try:
        spec = importlib.util.spec_from_file_location("train_speed_script", MEASUREMENTS / "train_speed.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("train_speed_script", None)
        sys.path.remove(str(MEASUREMENTS))


@pytest.fixture(scope="module")
def run(ts, tmp_path_factory) -> tuple[dict, str]:
    """The CPU mode at the smallest size: batches of 2, one warm-up step, one timed, one round, spotdiff's side
    profiled; the JSON it writes and its standard output."""
    out = tmp_path_factory.mktemp("train-speed") / "rows.json"
    argv = ["--model", "small", "--device", "cpu", "--batch-size", "2", "--warmup", "1", "--steps", "1",
            "--rounds", "1", "--workers", "0", "--photo-size", "48x36", "--profile", "--json", str(out)]  # fmt: skip
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert ts.main(argv) == 0
    return json.loads(out.read_text(encoding="utf-8")), text.getvalue()


def test_every_side_has_its_rows(run) -> None:
    table, text = run
    assert table["script"] == "train_speed" and table["device"] == "cpu" and table["batch_size"] == 2
    rows = {(r["figure"], r["side"]): r for r in table["rows"]}
    assert set(rows) == {
        ("train steps/s", "spotdiff train"),
        ("train steps/s", "plain PyTorch loop"),
        ("train steps/s", "open_clip train_one_epoch"),
        ("train steps/s, against open_clip", "spotdiff train"),
    }
    spotdiff = rows["train steps/s", "spotdiff train"]
    assert spotdiff["limit_side"] == "plain PyTorch loop" and spotdiff["goal"] == 0.9
    assert spotdiff["bound"] == "the CPU (no GPU profile on this device)"  # --profile: rows.profile_bound's answer
    measured = [r for r in table["rows"] if r["status"] == "measured"]
    for r in measured:
        assert math.isfinite(r["value"]) and r["value"] > 0
        assert r["images_per_s"] == pytest.approx(2 * r["value"])  # every timed step trains on a batch of 2
        if r["limit"] is not None:
            assert math.isfinite(r["ratio"]) and r["ratio"] > 0
            assert r["ratio"] == pytest.approx(r["value"] / r["limit"])
        assert f"{r['side']} {r['value']:.3f} steps/s" in text
    open_clip = rows["train steps/s", "open_clip train_one_epoch"]
    if table["open_clip_train"] == "installed":
        assert len(measured) == 4 and open_clip["ratio"] > 0
    else:  # the package's data module does not import here: said so, nothing measured
        assert open_clip["status"].startswith("not installed (") and open_clip["value"] is None
        assert len(measured) == 2


def test_the_sides_train_the_same_steps_on_the_same_batches(run) -> None:
    table, _ = run
    rounds = {r["side"]: r["rounds"] for r in table["rows"] if r["status"] == "measured"}
    for side in rounds.values():
        assert [(r["steps"], r["images"]) for r in side] == [(1, 2)]  # one timed step of two images
        assert all(r["seconds"] > 0 for r in side)


def test_the_clock_counts_the_steps_after_the_warm_up(ts) -> None:
    """Batches of 3, 2, 4 and 1 images with one warm-up step: the clock starts when the loop asks for the second
    batch and stops when it asks past the last; the three timed steps trained on 7 images."""
    clock = ts.Clock("cpu", warmup=1)
    seen = []
    for batch in clock.iterate([[list(range(n))] for n in (3, 2, 4, 1)]):
        seen.append(len(batch[0]))
        assert (clock.start is None) == (len(seen) == 1)
    assert seen == [3, 2, 4, 1]
    result = clock.result()
    assert (result["steps"], result["images"]) == (3, 7) and result["seconds"] >= 0


def test_the_clock_refuses_a_run_shorter_than_the_warm_up(ts) -> None:
    clock = ts.Clock("cpu", warmup=2)
    list(clock.iterate([[[0]], [[0]]]))  # two steps, both warm-up: nothing timed
    with pytest.raises(RuntimeError, match=r"did not see the warm-up's end and a step after it \(0 timed\)"):
        clock.result()


@pytest.mark.parametrize("name", ["small", "vit-b-32"])
def test_the_open_clip_model_has_the_clips_architecture(ts, name: str, tmp_path: Path) -> None:
    """open_clip's ``CLIP`` from :func:`open_clip_config` has as many parameters as the transformers CLIP of the
    same config, and for ViT-B/32 as open_clip's own ``ViT-B-32`` (151,277,313 with CLIP's vocabulary); built on
    the meta device, nothing is allocated."""
    import open_clip
    import torch
    from transformers import CLIPModel

    from eval_speed import clip_config
    from spotdiff.testing.tiny_models import make_tiny_tokenizer

    tokenizer = make_tiny_tokenizer(tmp_path, max_length=ts.CLIPS[name]["max_length"])
    config = clip_config(name, ts.VOCAB[name] or len(tokenizer))
    with torch.device("meta"):
        ours = open_clip.CLIP(**ts.open_clip_config(config, tmp_path))
        theirs = CLIPModel(config)
    n = sum(p.numel() for p in ours.parameters())
    assert n == sum(p.numel() for p in theirs.parameters())
    assert ours.text_pool_type == "eos" and ours.text_eos_id == config.text_config.eos_token_id == 3
    if name == "vit-b-32":
        with torch.device("meta"):
            builtin = open_clip.CLIP(**open_clip.get_model_config("ViT-B-32"))
        assert n == sum(p.numel() for p in builtin.parameters()) == 151_277_313
