"""`spotdiff train`: the loss goes down, checkpoints load as models, resumption is exact, and two
CPU processes on gloo train the same model as one.

All runs use the ``tiny`` preset (32 px images, 2-layer towers of width 64) on a small synthetic set
written here: coloured squares left or right, as captions.jsonl pairs and as SPEC 2 x 2 cases.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from spotdiff.benchmarks import get_benchmark
from spotdiff.errors import ConfigError
from spotdiff.optimize.callbacks import Callback
from spotdiff.optimize.data import build_batch, prepare_case, read_captions
from spotdiff.optimize.loop import TrainConfig, Trainer, default_callbacks, train
from spotdiff.optimize.objective import create_loss
from spotdiff.testing.tiny_models import make_tiny_clip, make_tiny_siglip, make_tiny_tokenizer

COLORS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220), "yellow": (230, 220, 20)}
SIDES = ("left", "right")


def _square(color: str, side: str, size: int = 32) -> Image.Image:
    a = np.full((size, size, 3), 255, np.uint8)
    h = size // 2
    x0 = 0 if side == "left" else h
    a[size // 4 : size // 4 + h, x0 : x0 + h] = COLORS[color]
    return Image.fromarray(a)


def write_data(root: Path) -> Path:
    """captions.jsonl (8 pairs) and a SPEC subset folder (4 cases of 2 x 2) under ``root``."""
    (root / "img").mkdir(parents=True)
    lines = []
    for c in COLORS:
        for s in SIDES:
            _square(c, s).save(root / "img" / f"{c}_{s}.png")
            lines.append(json.dumps({"image": f"img/{c}_{s}.png", "caption": f"a {c} square on the {s}"}))
    (root / "captions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    sub = root / "spec" / "relative_spatial"
    sub.mkdir(parents=True)
    i2t, t2i = [], []
    for c in COLORS:
        images = []
        for s in SIDES:
            _square(c, s).save(sub / f"{c}_{s}.png")
            images.append(f"{c}_{s}.png")
        captions = [f"a {c} square on the {s}" for s in SIDES]
        for k in range(2):
            i2t.append({"query": images[k], "keys": captions, "label": k})
            t2i.append({"query": captions[k], "keys": images, "label": k})
    (sub / "image2text.json").write_text(json.dumps(i2t), encoding="utf-8")
    (sub / "text2image.json").write_text(json.dumps(t2i), encoding="utf-8")
    return root


TOKENIZER: list[Path] = []  # the small test vocabulary, written by the `data` fixture


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = write_data(tmp_path_factory.mktemp("train_data"))
    make_tiny_tokenizer(root / "tokenizer", max_length=32)
    TOKENIZER.append(root / "tokenizer")
    pairs = read_captions(root / "captions.jsonl")
    cases = get_benchmark("spec")(root / "spec").load()
    assert len(pairs) == 8 and len(cases) == 4 and cases[0].shape == (2, 2)
    return root, pairs, cases


def config(out: Path, **kw) -> TrainConfig:
    """A tiny-preset run; the small test vocabulary keeps the embedding table small."""
    base = dict(
        out=out,
        from_config="tiny",
        tokenizer=str(TOKENIZER[-1]),
        batch_size=8,
        cases_per_step=2,
        steps=6,
        lr=1e-3,
        warmup_steps=1,
        device="cpu",
        log_every=0,
    )
    base.update(kw)
    return TrainConfig(**base)


def weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


# ------------------------------------------------------------------------------------------- data


def test_case_anchors_and_hard_negatives(data):
    _, pairs, cases = data
    prepared = prepare_case(cases[0])
    assert prepared.anchors == ((0, 0), (1, 1))
    assert prepared.hn_texts == ((1,), (0,)) and prepared.hn_images == ((1,), (0,))
    batch = build_batch(pairs[:3], [prepared, prepare_case(cases[1])])
    assert len(batch.images) == 3 + 4 and len(batch.texts) == 3 + 4
    assert batch.case_img.tolist() == [3, 4, 5, 6] and batch.case_group.tolist() == [0, 0, 1, 1]
    assert batch.hn_text.tolist() == [[4], [3], [6], [5]] and batch.hn_text_mask.all()


# ----------------------------------------------------------------------------------------- losses


@pytest.mark.parametrize("loss", ["clip", "spec-hn", "eqsim"])
def test_a_few_steps_decrease_the_loss(tmp_path, data, loss):
    _, pairs, cases = data
    result = train(config(tmp_path / loss, loss=loss, steps=10, lr=2e-3, eqsim_k=2), pairs, cases)
    assert result.finished and result.step == 10 and len(result.losses) == 10
    assert all(np.isfinite(result.losses))
    assert np.mean(result.losses[-3:]) < np.mean(result.losses[:3]) - 0.1, result.losses
    log = [json.loads(line) for line in (tmp_path / loss / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 11))
    assert {"spec-hn": "hn", "eqsim": "eqsim", "clip": "clip"}[loss] in log[0]


@pytest.mark.parametrize(("loss", "objective", "names"), [
    ("clip", "softmax", ["total", "clip"]),
    ("spec-hn", "softmax", ["total", "hn", "clip"]),
    ("eqsim", "sigmoid", ["total", "siglip", "eqsim"]),
])  # fmt: skip
def test_create_loss_returns_named_terms(tmp_path, data, loss, objective, names):
    _, pairs, cases = data
    batch = build_batch(pairs[:3], [prepare_case(cases[0]), prepare_case(cases[1])])
    torch.manual_seed(0)
    image = torch.nn.functional.normalize(torch.randn(len(batch.images), 8), dim=-1)
    text = torch.nn.functional.normalize(torch.randn(len(batch.texts), 8), dim=-1)
    bias = torch.tensor([-1.0]) if objective == "sigmoid" else None
    terms = create_loss(config(tmp_path, loss=loss, eqsim_k=2), objective)(batch, image, text, torch.tensor(5.0), bias)
    assert list(terms) == names
    assert terms["total"].item() == pytest.approx(sum(terms[k].item() for k in names[1:] if k != "hn")
                                                  + (0.2 * terms["hn"].item() if "hn" in terms else 0.0))  # fmt: skip


def test_a_callback_sees_every_step_as_the_train_log_records_it(tmp_path, data):
    _, pairs, cases = data

    class Seen(Callback):
        def __init__(self):
            self.events = []

        def on_start(self, trainer):
            self.events.append(("start", trainer.step))

        def on_step(self, trainer, out):
            self.events.append(("step", out.record()))

        def on_end(self, trainer):
            self.events.append(("end", trainer.step))

    trainer = Trainer(config(tmp_path / "cb", loss="spec-hn", steps=3), pairs, cases)
    seen = Seen()
    trainer.callbacks = [*default_callbacks(trainer), seen]
    result = trainer.run()
    log = [json.loads(line) for line in (tmp_path / "cb" / "train_log.jsonl").read_text().splitlines()]
    assert seen.events == [("start", 0), *(("step", r) for r in log), ("end", 3)]
    assert [r["loss"] for r in log] == result.losses


# ------------------------------------------------------------------------- checkpoints and resume


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data):
    """The reference run: 6 steps of spec-hn in one go (also the single-process run for gloo)."""
    _, pairs, cases = data
    out = tmp_path_factory.mktemp("uninterrupted")
    result = train(config(out, loss="spec-hn"), pairs, cases)
    return out, result


def test_checkpoint_reloads_as_a_model(uninterrupted, data):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    out, result = uninterrupted
    assert result.eval_spec == f"hf-clip:{out}"
    model = CLIPModel.from_pretrained(out)
    for name, value in weights(out).items():
        assert torch.equal(model.state_dict()[name], value)
    assert AutoTokenizer.from_pretrained(out)("a red square")["input_ids"][0] == 2  # the tiny [CLS]
    assert AutoImageProcessor.from_pretrained(out).crop_size["height"] == 32
    ckpt = out / "checkpoint-0000006"
    assert (ckpt / "COMPLETE").is_file() and CLIPModel.from_pretrained(ckpt) is not None
    # the same path a user's model takes in `spotdiff eval`
    from spotdiff.scorers import load_scorer

    scorer = load_scorer(result.eval_spec)
    _, _, cases = data
    emb = scorer.encode_images([cases[0].images[0].load()])
    assert emb.shape[0] == 1 and np.isfinite(emb).all()


def test_resume_gives_the_uninterrupted_weights(tmp_path, uninterrupted, data):
    _, pairs, cases = data
    ref_out, ref = uninterrupted
    out = tmp_path / "resumed"
    first = train(config(out, loss="spec-hn", stop_after=3), pairs, cases)
    assert not first.finished and first.step == 3 and first.eval_spec is None
    assert (out / "checkpoint-0000003" / "COMPLETE").is_file()
    assert not (out / "model.safetensors").exists()
    second = train(config(out, loss="spec-hn", resume=True), pairs, cases)
    assert second.finished and second.step == 6 and len(second.losses) == 3  # continued at step 3
    assert first.losses + second.losses == ref.losses
    got, want = weights(out), weights(ref_out)
    assert got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in want)
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    # a fresh run into a folder holding checkpoints is refused rather than mixed with them
    with pytest.raises(ConfigError, match="--resume"):
        train(config(out, loss="spec-hn"), pairs, cases)


def test_resume_without_checkpoint_starts_fresh_and_options_are_checked(tmp_path, data):
    _, pairs, cases = data
    result = train(config(tmp_path / "fresh", loss="clip", steps=2, resume=True), pairs, cases)
    assert result.step == 2 and result.finished
    with pytest.raises(ConfigError, match="exactly one"):
        train(config(tmp_path / "x", model="hf-clip:/nowhere"), pairs, cases)
    with pytest.raises(ConfigError, match="no training data"):
        train(config(tmp_path / "y"), [], [])


# ---------------------------------------------------------------------------- other model sources


def test_finetune_a_saved_checkpoint_and_siglip(tmp_path, data):
    from transformers import CLIPModel, SiglipModel

    _, pairs, cases = data
    clip_dir = make_tiny_clip(tmp_path / "clip")
    before = weights(clip_dir)
    out = tmp_path / "ft-clip"
    result = train(config(out, from_config=None, model=f"hf-clip:{clip_dir}", steps=2, loss="eqsim"), pairs, cases)
    assert result.eval_spec == f"hf-clip:{out}"
    after = CLIPModel.from_pretrained(out).state_dict()
    assert any(not torch.equal(after[k], v) for k, v in before.items())
    siglip_dir = make_tiny_siglip(tmp_path / "siglip")
    result = train(config(tmp_path / "ft-siglip", from_config=None, model=str(siglip_dir), steps=2), pairs, cases)
    assert result.eval_spec.startswith("hf-siglip:")
    assert SiglipModel.from_pretrained(tmp_path / "ft-siglip") is not None


def test_finetune_open_clip(tmp_path, data):
    from spotdiff.scorers import load_scorer
    from spotdiff.testing.tiny_models import make_tiny_open_clip

    _, pairs, cases = data
    config_json, ckpt = make_tiny_open_clip(tmp_path / "oc")
    out = tmp_path / "ft-oc"
    result = train(config(out, from_config=None, model=f"open-clip:{config_json}@{ckpt}", steps=2), pairs, cases)
    assert result.eval_spec == f"open-clip:local-dir:{out}"
    assert (out / "open_clip_config.json").is_file() and (out / "open_clip_model.safetensors").is_file()
    assert load_scorer(result.eval_spec).encode_texts(["a red square"]).shape == (1, 16)


def test_cli_errors_exit_2(tmp_path, data, capsys, monkeypatch):
    from spotdiff.cli import main

    monkeypatch.setenv("SPOTDIFF_DATA", str(tmp_path / "home"))  # --cases spec: nothing fetched there
    root, _, _ = data
    base = ["train", "--out", str(tmp_path / "o"), "--captions", str(root / "captions.jsonl")]
    assert main([*base, "--from-config", "tiny", "--model", "x"]) == 2
    assert main([*base, "--from-config", "tiny", "--cases", "spec"]) == 2
    assert main([*base, "--from-config", "nonesuch"]) == 2
    err = capsys.readouterr().err
    assert "exactly one" in err and "spotdiff data fetch spec" in err and "preset" in err


def test_from_config_json(tmp_path, data):
    _, pairs, _ = data
    cfg = {
        "text_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 24,
        },
        "vision_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 16,
        },
        "projection_dim": 16,
    }
    path = tmp_path / "clip.json"
    path.write_text(json.dumps(cfg))
    # the default tokenizer: BERT WordPiece of the MiniLM package ([SEP] = 102)
    out = tmp_path / "out"
    result = train(config(out, from_config=str(path), tokenizer=None, steps=1, cases_per_step=0), pairs, [])
    assert result.finished
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert saved["projection_dim"] == 16 and saved["text_config"]["eos_token_id"] == 102


# ------------------------------------------------------------------------------- two processes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_cpu_processes_on_gloo_match_one(tmp_path, uninterrupted, data):
    """torchrun, 2 processes, gloo: both ranks finish, the checkpoint loads, and it matches the
    single-process run up to float summation order (the global batch is the same)."""
    from transformers import CLIPModel

    root, _, _ = data
    ref_out, _ = uninterrupted
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        "-m",
        "spotdiff",
        "train",
        "--from-config",
        "tiny",
        "--captions",
        str(root / "captions.jsonl"),
        "--cases",
        f"spec={root / 'spec'}",
        "--batch-size",
        "8",
        "--cases-per-step",
        "2",
        "--steps",
        "6",
        "--lr",
        "1e-3",
        "--warmup-steps",
        "1",
        "--loss",
        "spec-hn",
        "--device",
        "cpu",
        "--out",
        str(out),
        "--tokenizer",
        str(TOKENIZER[-1]),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ckpt = out / "checkpoint-0000006"
    assert (ckpt / "rng_state_0.pt").is_file() and (ckpt / "rng_state_1.pt").is_file()
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["finished"]
    model = CLIPModel.from_pretrained(out)
    got, want = model.state_dict(), weights(ref_out)
    assert max((got[k] - want[k]).abs().max().item() for k in want) < 1e-4
