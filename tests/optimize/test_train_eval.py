"""Evaluation during training: runs linked to the training run and step, retention curves, TensorBoard
events, the best checkpoint, resumption, an untouched training trajectory, and the in-memory scorer
agreeing with the saved checkpoint; SigLIP fine-tuning with the sigmoid loss."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_train import COLORS, SIDES, _square, config, data, weights  # noqa: F401  (the shared fixture)

from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.optimize.evaluation import KeepBest, TrainingScorer, parse_eval_target
from spotdiff.optimize.loop import train
from spotdiff.optimize.models import load_dual_encoder
from spotdiff.scorers import load_scorer
from spotdiff.testing.tiny_models import make_tiny_clip, make_tiny_siglip


@pytest.fixture(scope="module")
def zs_data(data):  # noqa: F811
    """The training squares as a zero-shot set: one class folder per colour."""
    root, _, _ = data
    zs = root / "zs"
    for c in COLORS:
        for s in SIDES:
            (zs / c).mkdir(parents=True, exist_ok=True)
            _square(c, s).save(zs / c / f"{s}.png")
    return zs


def _targets(root: Path, zs: Path) -> list:
    return [
        parse_eval_target(f"zeroshot-classification={zs}?templates={_templates(root)}"),
        parse_eval_target(f"spec={root / 'spec'}:relative_spatial"),
    ]


def _templates(root: Path) -> Path:
    path = root / "templates.json"
    path.write_text(json.dumps(["a {c} square", "a {c} square on the left"]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, data, zs_data):  # noqa: F811
    root, pairs, cases = data
    out = tmp_path_factory.mktemp("evaluated")
    store = out / "runs.sqlite"
    cfg = config(out / "run", loss="spec-hn", steps=4, evals=_targets(root, zs_data), eval_every=2,
                 eval_n_boot=50, keep="best:spec:relative_spatial/i2t", store=store)  # fmt: skip
    result = train(cfg, pairs, cases)
    return out / "run", store, result


def test_evaluations_are_runs_linked_to_the_training_and_step(evaluated):
    out, store, _ = evaluated
    ident = json.loads((out / "training.json").read_text())["id"]
    log = [json.loads(line) for line in (out / "eval_log.jsonl").read_text().splitlines()]
    assert [(r["step"], r["label"]) for r in log] == [
        (s, lab) for s in (0, 2, 4) for lab in ("zeroshot-classification", "spec:relative_spatial")
    ]
    with RunStore(store) as rs:
        runs = rs.runs(training=ident)
        assert sorted((r.step, r.benchmark) for r in runs) == sorted(
            (s, b) for s in (0, 2, 4) for b in ("zeroshot-classification", "spec")
        )
        for r in runs:
            assert r.status == "done" and r.training == ident and r.model == f"hf-clip:{out.resolve()}@step{r.step}"
            assert r.model_identity["family"] == "training" and r.model_identity["step"] == r.step
            assert r.info["training"]["label"] in ("zeroshot-classification", "spec:relative_spatial")
        by_id = {r.id: r for r in runs}
        for rec in log:  # the log's metrics are the stored run's
            assert by_id[rec["run_id"]].metrics["all"]["top1" if rec["protocol"] == "zeroshot" else "i2t"] == (
                rec["metrics"]["all"]["top1" if rec["protocol"] == "zeroshot" else "i2t"]
            )
        weights_at = {r.step: r.model_identity["weights_sha256"] for r in runs}
        assert len(set(weights_at.values())) == 3  # the weights change between evaluations
    assert (out / "evals" / "spec-relative_spatial" / "step-0000004" / "metrics.json").is_file()
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["training_id"] == ident and summary["objective"] == "softmax" and summary["eval_s"] > 0


def test_retention_curve_tensorboard_and_best_checkpoint(evaluated):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, _, _ = evaluated
    retention = json.loads((out / "retention.json").read_text())
    curves = {(c["label"], c["metric"]): c for c in retention["curves"]}
    top1 = curves[("zeroshot-classification", "top1")]
    assert [p["step"] for p in top1["points"]] == [0, 2, 4]
    assert all(p["ci95"][0] <= p["value"] <= p["ci95"][1] for p in top1["points"])
    assert (out / "retention.png").stat().st_size > 2000
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"loss/total", "loss/clip", "loss/hn", "train/lr", "train/logit_scale"} <= tags
    assert {"eval/zeroshot-classification/top1", "eval/spec:relative_spatial/i2t/ci_low"} <= tags
    assert [e.step for e in events.Scalars("loss/hn")] == [1, 2, 3, 4]
    assert [e.step for e in events.Scalars("eval/spec:relative_spatial/i2t")] == [0, 2, 4]
    best = json.loads((out / "best" / "best.json").read_text())
    values = [p["value"] for p in curves[("spec:relative_spatial", "i2t")]["points"]]
    assert best["value"] == max(values) and best["step"] == [0, 2, 4][values.index(max(values))]
    assert load_scorer(f"hf-clip:{out / 'best'}").encode_texts(["a red square"]).shape[0] == 1


def test_evaluation_leaves_the_training_trajectory_untouched(tmp_path, evaluated, data):  # noqa: F811
    out, _, result = evaluated
    _, pairs, cases = data
    plain = train(config(tmp_path / "plain", loss="spec-hn", steps=4, tensorboard=False), pairs, cases)
    assert plain.losses == result.losses
    got, want = weights(out), weights(tmp_path / "plain")
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_resumed_run_continues_the_same_curve(tmp_path, data, zs_data):  # noqa: F811
    _, pairs, cases = data
    targets = [parse_eval_target(f"zeroshot-classification={zs_data}?limit=4")]
    out = tmp_path / "r"
    cfg = dict(loss="clip", steps=4, evals=targets, eval_every=2, eval_n_boot=20, store=tmp_path / "s.sqlite")
    train(config(out, stop_after=3, **cfg), pairs, cases)
    first = json.loads((out / "training.json").read_text())["id"]
    train(config(out, resume=True, **cfg), pairs, cases)
    assert json.loads((out / "training.json").read_text())["id"] == first
    log = [json.loads(line) for line in (out / "eval_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 2, 4] and all(r["n_cases"] == 4 for r in log)


def test_in_memory_scores_equal_the_saved_checkpoint(tmp_path, data):  # noqa: F811
    _, _, cases = data
    path = make_tiny_clip(tmp_path / "clip", seed=5)
    core = load_dual_encoder(f"hf-clip:{path}").eval()
    mem = TrainingScorer(core, "x", device=torch.device("cpu"), batch_size=3, info={})
    disk = load_scorer(f"hf-clip:{path}")
    images = [r.load() for c in cases for r in c.images]
    texts = [t for c in cases for t in c.texts]
    np.testing.assert_allclose(mem.encode_images(images), disk.encode_images(images), atol=1e-5)
    np.testing.assert_allclose(mem.encode_texts(texts), disk.encode_texts(texts), atol=1e-5)
    assert mem.identity()["weights_sha256"] == mem.identity()["weights_sha256"]


def test_eval_target_and_keep_parsing(tmp_path, data, zs_data):  # noqa: F811
    root, _, _ = data
    t = parse_eval_target(f"spec={root / 'spec'}:count?protocol=spec&limit=3")
    assert (t.label, t.subset, t.protocol, t.limit, t.data) == ("spec:count", "count", "spec", 3, root / "spec")
    z = parse_eval_target(f"zeroshot-classification={zs_data}?dataset=imagenet1k&split=test")
    assert z.options == {"dataset": "imagenet1k", "split": "test"} and z.label == "zeroshot-classification"
    with pytest.raises(ConfigError, match="NAME=DIR"):
        parse_eval_target("spec")
    with pytest.raises(ConfigError, match="no subset"):
        parse_eval_target(f"spec={root / 'spec'}:sideways")
    assert KeepBest.parse("best:i2t", [t]).label == "spec:count"
    with pytest.raises(ConfigError, match="no metric"):
        KeepBest.parse("best:top1", [t])
    with pytest.raises(ConfigError, match="name the evaluation"):
        KeepBest.parse("best:i2t", [t, z])
    with pytest.raises(ConfigError, match="need at least one --eval"):
        config(tmp_path, eval_every=2).validate()


def test_eval_target_config_carries_the_target_and_the_run(data, zs_data):  # noqa: F811
    root, _, _ = data
    t = parse_eval_target(f"spec={root / 'spec'}:count?protocol=spec&limit=3")
    c = t.config(model="m@step2", seed=7, progress=False)
    assert (c.model, c.benchmark, c.data, c.subset, c.protocol, c.limit, c.seed, c.progress) == (
        "m@step2", "spec", root / "spec", "count", "spec", 3, 7, False
    )
    z = parse_eval_target(f"zeroshot-classification={zs_data}?dataset=imagenet1k&split=test")
    zc = z.config(model="")
    assert zc.options == {"dataset": "imagenet1k", "split": "test"}
    zc.options["split"] = "val"  # a run's options are its own copy: the target is not changed
    assert z.options["split"] == "test"


def test_siglip_finetunes_with_the_sigmoid_loss(tmp_path, data):  # noqa: F811
    _, pairs, cases = data
    path = make_tiny_siglip(tmp_path / "siglip")
    out = tmp_path / "ft"
    result = train(config(out, from_config=None, model=f"hf-siglip:{path}", loss="spec-hn", steps=3, lr=5e-3),
                   pairs, cases)  # fmt: skip
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert "siglip" in log[0] and "hn" in log[0] and "clip" not in log[0]
    assert log[0]["logit_bias"] != log[-1]["logit_bias"]  # the bias is learnt
    assert json.loads((out / "train_summary.json").read_text())["objective"] == "sigmoid"
    assert result.finished


def test_wandb_when_installed_and_asked_for(tmp_path, data, monkeypatch):  # noqa: F811
    _, pairs, cases = data
    cfg = config(tmp_path / "w", loss="clip", steps=2, wandb="spotdiff-test")
    try:
        import wandb  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="wandb package"):
            train(cfg, pairs, cases)
        return
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    train(cfg, pairs, cases)
    runs = list((tmp_path / "w" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))


def test_report_draws_the_retention_curves_and_keeps_them_out_of_the_tables(evaluated, tmp_path):
    from spotdiff.report.build import build_report, write_report

    _, store, _ = evaluated
    with RunStore(store) as rs:
        report = build_report(rs, jobs=1, load_cases=False)
    (sec,) = [s for s in report.sections if s.benchmark == "retention during training"]
    assert len(sec.plots) == 1 and not sec.tables and not report.tables
    assert len(report.runs) == 6  # every point is in the provenance table
    assert "zeroshot-classification top1: " in sec.plots[0].caption and "at step 4" in sec.plots[0].caption
    written = write_report(report, tmp_path / "report")
    assert f"figures/{sec.plots[0].key}.png" in written["md"].read_text()
    assert (tmp_path / "report" / "figures" / f"{sec.plots[0].key}.png").stat().st_size > 2000
