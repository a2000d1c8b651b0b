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
    assert "[tuned]" in printed and "[alpha=1]" in printed and "alpha* over" in printed
    payload = json.loads((out / "metrics.json").read_text())
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
    assert set(runs) == {f"{captioner} [{v}]" for v in variants}
    assert "alpha_curve" in runs[f"{captioner} [tuned]"].info
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
