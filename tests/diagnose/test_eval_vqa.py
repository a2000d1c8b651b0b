"""`spotdiff eval --model vqa:PATH` end to end on fixture data in the published formats: tiny chat
VLMs built from configs and loaded by path, every benchmark family the issue names (Winoground,
EqBen, SugarCrepe, VALSE, SPEC) with bootstrap intervals, the answer-based protocols on the 2 x 2
benchmarks, per-case scores equal to the scorer's own, and a re-run served from the cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.formats import write_eqben, write_spec, write_sugarcrepe, write_valse, write_winoground
from spotdiff.testing.tiny_vlms import make_tiny_vlm


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e-vqa")


@pytest.fixture(scope="module")
def data(root: Path) -> dict[str, Path]:
    return {
        "winoground": write_winoground(root / "winoground", n=3),
        "eqben": write_eqben(root / "eqben", n=3),
        "sugarcrepe": write_sugarcrepe(root / "sugarcrepe", n=1),
        "valse": write_valse(root / "valse", n=3),
        "spec": write_spec(root / "spec", n=1, subsets=("absolute_size", "existence")),
    }


@pytest.fixture(scope="module")
def models(root: Path) -> dict[str, Path]:
    return {arch: make_tiny_vlm(arch, root / arch) for arch in ("qwen2_vl", "llava")}


CASES = [
    ("qwen2_vl", "winoground", "group", ("text", "image", "group")),
    ("qwen2_vl", "winoground", "choice", ("text", "image", "group", "group_orig", "group_swap", "consistency")),
    ("llava", "eqben", "group", ("text", "image", "group")),
    ("llava", "eqben", "choice-text", ("text", "text_orig", "text_swap", "consistency", "no_answer")),
    ("llava", "sugarcrepe", "i2t-top1", ("accuracy",)),
    ("qwen2_vl", "valse", "valse-prob", ("acc", "p_c", "p_f", "min_pc_pf", "acc_r")),
    ("qwen2_vl", "spec", "spec", ("i2t", "t2i")),
]


@pytest.mark.parametrize(("arch", "benchmark", "protocol", "metrics"), CASES)
def test_eval_vqa_by_path(arch, benchmark, protocol, metrics, models, data, tmp_path: Path) -> None:
    spec = f"vqa:{models[arch]}"

    def argv(out: Path) -> list[str]:
        return [
            "eval", "--model", spec, "--benchmark", benchmark, "--data", str(data[benchmark]),
            "--protocol", protocol, "--out", str(out), "--store", str(tmp_path / "runs.sqlite"),
            "--cache", str(tmp_path / "cache"), "--quiet", "--n-boot", "200", "--batch-size", "3",
        ] + (["--subset", "counting-hard"] if benchmark == "valse" else [])  # fmt: skip

    out = tmp_path / "out"
    assert main(argv(out)) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["model"] == spec and result["protocol"] == protocol and result["n_cases"] > 0
    for metric in metrics:
        value = result["metrics"]["all"][metric]
        assert 0.0 <= value <= 100.0
        lo, hi = result["metrics"]["all"][f"{metric}_ci95"]
        assert lo <= value <= hi
    lines = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert len(lines) == result["n_cases"]
    if protocol in ("group", "i2t-top1", "valse-prob"):  # the engine's matrices are the scorer's own scores
        scorer = load_scorer(spec, ScorerOptions(device="cpu"))
        case = get_benchmark(benchmark)(data[benchmark]).load("counting-hard" if benchmark == "valse" else None)[0]
        direct = scorer.score_pairs([r.load() for r in case.images], [list(case.texts)] * len(case.images))
        np.testing.assert_allclose(np.array(lines[0]["scores"]), np.stack(direct), rtol=1e-5)
    assert main(argv(tmp_path / "out2")) == 0  # everything from the cache, the same per-case scores
    assert (tmp_path / "out2" / "scores.jsonl").read_text() == (out / "scores.jsonl").read_text()


def test_single_image_model_with_image_questions_is_a_clear_error(models, data, capsys) -> None:
    argv = ["eval", "--model", f"vqa:{models['llava']}", "--benchmark", "winoground", "--data",
            str(data["winoground"]), "--protocol", "choice", "--no-store", "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'choice'" in err and "choice-text" in err and "multi_image=yes" in err
