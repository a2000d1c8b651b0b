"""NaturalBench with a chat VLM (``vqa:``): the candidate answers' log-probabilities equal the model's
own next-token log-probabilities, generated answers are read by the authors' extract_answer, and
`spotdiff eval` on a fixture in the hub layout writes Acc / Q-Acc / I-Acc / G-Acc with the yes rate
and the unparseable rate, the same from the cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.diagnose.engine import Engine
from spotdiff.protocols import get_protocol
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.hub_repos import naturalbench_repo
from spotdiff.testing.tiny_vlms import make_tiny_vlm, next_token_logprobs


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("qwen"), seed=1)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("naturalbench")
    for rel, blob in naturalbench_repo(n=4).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    return root


def test_answer_scores_equal_the_models_next_token_logprobs(qwen: Path, data: Path) -> None:
    case = get_benchmark("naturalbench")(data).load("multiple_choice")[0]
    scorer = load_scorer(f"vqa:{qwen}", ScorerOptions(device="cpu", batch_size=3))
    images = [ref.load() for ref in case.images]
    got = scorer.answer_scores(images, [list(case.texts)] * 2, ("A", "B"))
    assert [g.shape for g in got] == [(2, 2), (2, 2)]
    for i, image in enumerate(images):
        for q, question in enumerate(case.texts):
            np.testing.assert_allclose(got[i][q], next_token_logprobs(scorer.chat, [image], question, ("A", "B")),
                                       rtol=1e-4, atol=1e-5)  # fmt: skip
    with Engine(scorer, progress=False, workers=0) as engine:  # the engine's matrix: [image, question, answer]
        (matrix,) = list(engine.case_matrices([case], "answer-prob"))
    np.testing.assert_allclose(matrix, np.stack(got), rtol=1e-5)


def test_generated_answers_are_read_as_the_authors_do(qwen: Path, data: Path, monkeypatch) -> None:
    case = get_benchmark("naturalbench")(data).load("yes_no")[0]
    scorer = load_scorer(f"vqa:{qwen}?generate=4", ScorerOptions(device="cpu"))
    said = iter(["Yes.", "no, it is not", "I cannot say", "Nope. Yes"])  # [image 0: q0, q1], [image 1: q0, q1]
    monkeypatch.setattr(scorer.chat, "generate", lambda *args: next(said))
    got = np.stack(scorer.answer_scores([r.load() for r in case.images], [list(case.texts)] * 2, ("Yes", "No")))
    assert got.shape == (2, 2, 3)
    np.testing.assert_array_equal(got[..., 2], [[0, 1], [np.nan, 0]])
    out = get_protocol("naturalbench").outcomes(case, got)[0]
    # gold [image][question] = [[Yes, No], [No, Yes]]; read [[Yes, No], [none, Yes]]: 3 of 4 right
    assert (out["gen_acc"], out["gen_q_acc"], out["gen_i_acc"], out["gen_g_acc"]) == (0.75, 0.5, 0.5, 0.0)
    assert (out["gen_yes_rate"], out["unparsed"]) == (0.5, 0.25)


@pytest.mark.parametrize("generate", [0, 1])
def test_eval_naturalbench(qwen: Path, data: Path, tmp_path: Path, generate: int, capsys) -> None:
    spec = f"vqa:{qwen}" + (f"?generate={generate}" if generate else "")

    def argv(out: Path) -> list[str]:
        return [
            "eval", "--model", spec, "--benchmark", "naturalbench", "--data", str(data), "--protocol",
            "naturalbench", "--out", str(out), "--store", str(tmp_path / "runs.sqlite"), "--cache",
            str(tmp_path / "cache"), "--n-boot", "200", "--batch-size", "3",
        ]  # fmt: skip

    assert main(argv(tmp_path / "out")) == 0
    result = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert result["n_cases"] == 4
    every = result["metrics"]["all"]
    for metric in ("acc", "q_acc", "i_acc", "g_acc", "yes_rate"):
        lo, hi = every[f"{metric}_ci95"]
        assert 0.0 <= lo <= every[metric] <= hi <= 100.0
    assert result["yes_rate"] == every["yes_rate"] and result["n_yes_no_answers"] == 8  # 2 yes/no cases
    assert "yes_rate" not in result["metrics"]["multiple_choice"]
    assert ("unparseable_rate" in result) == bool(generate) == ("gen_acc" in every)
    if generate:
        assert result["n_answers"] == 16 and result["unparseable_rate"] == every["unparsed"]
    assert "yes rate:" in capsys.readouterr().out
    assert main(argv(tmp_path / "out2")) == 0  # from the cache: the same scores
    first, second = ([json.loads(x)["scores"] for x in (tmp_path / d / "scores.jsonl").read_text().splitlines()]
                     for d in ("out", "out2"))  # fmt: skip
    assert first == second
