"""`spotdiff eval --debias`: a tiny BLIP captioner's VisualGPTScore, raw / PMI / blind / tuned.

Runs end to end through the command line on Winoground and ARO fixture data with real images,
and checks the recorded runs, metrics.json's debias block and the saved alpha curve.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.cli import main
from spotdiff.diagnose.store import RunStore
from spotdiff.testing.formats import write_aro_vg_relation, write_winoground
from spotdiff.testing.tiny_vgpt import make_tiny_blip_captioner


@pytest.fixture(scope="module")
def captioner(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"vgpt:{make_tiny_blip_captioner(tmp_path_factory.mktemp('vgpt') / 'blip')}"


@pytest.mark.parametrize(
    ("benchmark", "writer", "metric"),
    [("winoground", write_winoground, "text"), ("aro-vg-relation", write_aro_vg_relation, "accuracy")],
)
def test_eval_debias_tune(captioner: str, benchmark: str, writer, metric: str, tmp_path: Path, capsys) -> None:
    data = writer(tmp_path / "data", 8)
    out, store = tmp_path / "out", tmp_path / "runs.sqlite"
    protocol = ["--protocol", "i2t-top1"] if benchmark == "aro-vg-relation" else []
    argv = ["eval", "--model", captioner, "--benchmark", benchmark, "--data", str(data), "--out", str(out),
            "--store", str(store), "--cache", str(tmp_path / "cache"), "--quiet", "--n-boot", "100",
            "--debias", "null", "--null-n", "2", "--alpha", "tune", *protocol]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "[tuned, in-sample]" in printed and "[alpha=1]" in printed and "[tuned]" not in printed
    # the cross-validated test score leads, before any table
    assert printed.index("cross-validated test") < printed.index("[raw]")
    payload = json.loads((out / "metrics.json").read_text())
    lead = payload["debias"]["headline"]
    assert lead["metric"] == metric  # (metrics.json is written with sorted keys)
    assert lead["cross_validated_test_score_mean"] == payload["debias"]["cross_validation"]["test_score_mean"]
    assert "in-sample" in lead["note"] and payload["debias"]["tuned_label"] == "tuned, in-sample"
    variants = payload["debias"]["variants"]
    assert set(variants) == {"raw", "alpha=1", "blind", "tuned"}
    assert payload["metrics"] == variants["raw"]
    assert 0.0 <= payload["debias"]["alpha"] <= 1.0
    assert payload["debias"]["cross_validation"]["alpha_star_std"] >= 0.0
    curve = json.loads((out / "alpha_curve.json").read_text())
    assert len(curve["alphas"]) == 1001 and curve["metric"] == metric
    # the curve's end points are the raw and PMI scores of the whole set
    assert curve["curves"][metric][0] == pytest.approx(variants["raw"]["all"][metric], abs=0.01)
    assert curve["curves"][metric][-1] == pytest.approx(variants["alpha=1"]["all"][metric], abs=0.01)
    runs = {r.model: r for r in RunStore(store).runs()}
    labels = {"tuned": "tuned, in-sample"}
    assert set(runs) == {f"{captioner} [{labels.get(v, v)}]" for v in variants}
    assert "alpha_curve" in runs[f"{captioner} [tuned, in-sample]"].info
    raw = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    blind = [json.loads(line) for line in (out / "scores.blind.jsonl").read_text().splitlines()]
    assert len(raw) == len(blind) == payload["n_cases"]
    # the blind prior ignores the image: every row of a case's matrix is the same
    for line in blind:
        rows = np.array(line["scores"])
        assert np.allclose(rows, rows[0])


def test_debias_needs_an_image_text_protocol(captioner: str, tmp_path: Path, capsys) -> None:
    data = write_winoground(tmp_path / "data", 2)
    argv = ["eval", "--model", captioner, "--benchmark", "winoground", "--data", str(data), "--no-store",
            "--no-cache", "--quiet", "--debias", "images"]  # fmt: skip
    assert main(argv) == 2
    assert "--prior-images" in capsys.readouterr().err


def test_aro_alpha_is_tuned_on_the_macro_accuracy_it_reports(captioner: str, tmp_path: Path) -> None:
    from spotdiff.protocols import evaluate, get_protocol

    data = write_aro_vg_relation(tmp_path / "data", 12)
    out = tmp_path / "out"
    argv = ["eval", "--model", captioner, "--benchmark", "aro-vg-relation", "--data", str(data), "--out", str(out),
            "--no-store", "--cache", str(tmp_path / "cache"), "--quiet", "--n-boot", "50",
            "--debias", "null", "--null-n", "2"]  # fmt: skip
    assert main(argv) == 0
    payload = json.loads((out / "metrics.json").read_text())
    curve = json.loads((out / "alpha_curve.json").read_text())
    assert payload["protocol"] == "aro-macro" and curve["metric"] == "macro_accuracy"
    variants = payload["debias"]["variants"]
    macro = curve["curves"]["macro_accuracy"]
    assert macro[0] == pytest.approx(variants["raw"]["all"]["macro_accuracy"], abs=0.01)
    assert macro[-1] == pytest.approx(variants["alpha=1"]["all"]["macro_accuracy"], abs=0.01)
    best = max(v for v in curve["curves"]["macro_accuracy"] if v is not None)
    assert curve["alpha_star_all"]["score"] == pytest.approx(best, abs=1e-6)
    # the tuned variant's macro accuracy is the protocol's own aggregate of its per-case scores
    from spotdiff.benchmarks import get_benchmark

    cases = get_benchmark("aro-vg-relation")(data).load()
    lines = [json.loads(x) for x in (out / "scores.tuned.jsonl").read_text().splitlines()]
    again = evaluate(get_protocol("aro-macro"), cases, [np.array(x["scores"]) for x in lines], n_boot=0)
    assert again.metrics["all"]["macro_accuracy"] == pytest.approx(variants["tuned"]["all"]["macro_accuracy"], abs=0.01)


def test_tune_alpha_on_the_val_split_and_report_test(captioner: str, tmp_path: Path, capsys) -> None:
    from spotdiff.testing.formats import write_karpathy

    data = write_karpathy(tmp_path / "coco", "coco", n_images=3, seed=0)
    write_karpathy(tmp_path / "coco", "coco", n_images=3, seed=1, split="val")
    out = tmp_path / "out"
    argv = ["eval", "--model", captioner, "--benchmark", "coco-retrieval", "--data", str(data), "--out", str(out),
            "--no-store", "--cache", str(tmp_path / "cache"), "--quiet", "--n-boot", "50",
            "--debias", "gallery", "--alpha", "tune", "--tune-split", "val"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "[tuned on val]" in printed and "tuned on split val" in printed
    payload = json.loads((out / "metrics.json").read_text())
    block = payload["debias"]
    assert block["cross_validation"] is None and block["tuned_label"] == "tuned on val"
    tuned_on = block["headline"]["tuned_on"]
    assert tuned_on["split"] == "val" and tuned_on["n_cases"] == 1 and tuned_on["alpha_star"] == block["alpha"]
    assert payload["n_cases"] == 1 and block["variants"]["tuned"]["all"]["i2t_r1"] is not None
    wino = str(write_winoground(tmp_path / "w", 2))
    argv_bad = ["eval", "--model", captioner, "--benchmark", "winoground", "--data", wino, "--no-store",
                "--no-cache", "--quiet", "--debias", "null", "--null-n", "1", "--tune-split", "val"]  # fmt: skip
    assert main(argv_bad) == 2
    assert "no separate split" in capsys.readouterr().err


def test_overwrite_replaces_the_previous_run_only_once_every_variant_is_written(
    captioner: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    """A debiased run that fails between its variants leaves the previous run's claim and files as they
    were (not a new claim beside the old metrics.json); one that succeeds replaces them."""
    from spotdiff.diagnose import recorder as runner
    from spotdiff.diagnose.debias import evaluate
    from spotdiff.errors import DataError

    data = write_winoground(tmp_path / "data", 4)
    out = tmp_path / "out"
    argv = ["eval", "--model", captioner, "--benchmark", "winoground", "--data", str(data), "--out", str(out),
            "--no-store", "--cache", str(tmp_path / "cache"), "--quiet", "--n-boot", "0",
            "--debias", "null", "--null-n", "1", "--alpha", "0.5"]  # fmt: skip
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {runner.RUN_MARKER, "metrics.json", "alpha_curve.json", "scores.jsonl"} <= set(before)

    class FailsSecond(runner.RunRecorder):
        made = 0

        def finish(self, load_report, engine_stats):
            FailsSecond.made += 1
            if FailsSecond.made == 2:
                raise DataError("injected failure between variants")
            return super().finish(load_report, engine_stats)

    monkeypatch.setattr(evaluate, "RunRecorder", FailsSecond)
    changed = [*argv[:-1], "0.25", "--overwrite"]
    assert main(changed) == 2
    assert "injected failure between variants" in capsys.readouterr().err
    kept = {p.name: p.read_bytes() for p in out.iterdir() if p.name in before and p.name != "scores.jsonl"}
    assert kept == {k: v for k, v in before.items() if k != "scores.jsonl"}  # the old claim, metrics and curve
    monkeypatch.setattr(evaluate, "RunRecorder", runner.RunRecorder)
    assert main(changed) == 0
    assert json.loads((out / runner.RUN_MARKER).read_text())["debias"]["alpha"] == 0.25
    assert json.loads((out / "metrics.json").read_text())["debias"]["alpha"] == 0.25
