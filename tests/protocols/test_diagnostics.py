"""The per-run diagnostics of issue 25: the tie rate (units whose outcome a tie decides), the
unparseable share of answers, the yes rate of yes/no questions, and the bag-of-words scope, from
hand-made score matrices to ``metrics.json`` and the table footer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from spotdiff.cases import ArrayImage, Case
from spotdiff.diagnose.recorder import EvalConfig, RunRecorder
from spotdiff.protocols import UnitTable, get_protocol
from spotdiff.protocols.diagnostics import BOW_SCOPE, RunDiagnostics, bag_of_words_identical, diagnostic_notes
from spotdiff.protocols.stats import evaluate_table
from spotdiff.report.table import format_metrics_table

_IMAGE = ArrayImage(np.zeros((2, 2, 3), np.uint8))


def one_image(cid: str, texts: tuple[str, ...], subset: str = "s") -> Case:
    truth = np.zeros((1, len(texts)), dtype=bool)
    truth[0, 0] = True
    return Case(cid, texts, truth, (_IMAGE,), {"subset": subset})


def test_bag_of_words_identical_cases() -> None:
    assert bag_of_words_identical(one_image("a", ("The dog bites the man.", "the man bites the dog")))
    assert not bag_of_words_identical(one_image("b", ("a dog bites a man", "a dog bites the man")))
    assert not bag_of_words_identical(one_image("c", ("a b", "b a", "a c")))  # one negative differs
    assert bag_of_words_identical(one_image("d", ("a b c", "c b a", "b, a c")))
    pair = Case("w", ("a mug in some grass", "some grass in a mug"), np.eye(2, dtype=bool), (_IMAGE, _IMAGE),
                {"subset": "s"})  # fmt: skip
    assert bag_of_words_identical(pair)
    alone = Case("e", ("only",), np.ones((1, 1), dtype=bool), (_IMAGE,), {"subset": "s"})
    assert not bag_of_words_identical(alone)


def test_tied_units_are_those_whose_outcome_a_tie_decides() -> None:
    top1 = get_protocol("i2t-top1")
    case = one_image("t", ("x", "y", "z"))
    for scores, tied in (([0.3, 0.3, 0.1], True), ([0.4, 0.3, 0.3], False), ([0.3, 0.4, 0.4], False)):
        s = np.array([scores])
        assert top1.tied_units(case, s, top1.outcomes(case, s)) == [tied]
    group = get_protocol("group", "argmax")
    pair = Case("g", ("p", "q"), np.eye(2, dtype=bool), (_IMAGE, _IMAGE), {"subset": "s"})
    s = np.array([[0.5, 0.5], [0.1, 0.9]])  # image 0 ties its two captions
    assert group.tied_units(pair, s, group.outcomes(pair, s)) == [True]
    s = np.array([[0.6, 0.5], [0.1, 0.9]])
    assert group.tied_units(pair, s, group.outcomes(pair, s)) == [False]


def test_distinct_scores_skip_the_second_rule_and_agree_with_it() -> None:
    """With no two scores equal the rules cannot differ: the shortcut gives what recomputing gives."""
    rng = np.random.default_rng(0)
    pair = Case("g", ("p", "q"), np.eye(2, dtype=bool), (_IMAGE, _IMAGE), {"subset": "s"})
    for name in ("group",):
        for ties in ("strict", "argmax"):
            protocol = get_protocol(name, ties)
            other = get_protocol(name, "argmax" if ties == "strict" else "strict")
            for _ in range(20):
                s = rng.choice([0.1, 0.2, 0.3, 0.4], size=(2, 2), replace=rng.random() < 0.5)
                own, alt = protocol.outcomes(pair, s), other.outcomes(pair, s)
                assert protocol.tied_units(pair, s, own) == [own[0] != alt[0]], s


def _latin(rng: np.random.Generator, k: int) -> np.ndarray:
    """A k x k matrix of k values, each once per row and once per column: equal values everywhere,
    never two in one row or one column."""
    values, perm = rng.permutation(k) / k, rng.permutation(k)
    return values[(perm[:, None] + np.arange(k)[None, :]) % k]


def test_equal_values_in_different_lines_decide_nothing() -> None:
    """For the protocols that compare only within a row or a column (``ties_within_lines``), equal
    values elsewhere (the mirrored halves of a text-text matrix) cannot change an outcome, so the
    shortcut holds: both rules give the same outcomes."""
    rng = np.random.default_rng(1)
    images = tuple(ArrayImage(np.full((2, 2, 3), k, np.uint8)) for k in range(3))
    square = Case("k", ("a", "b", "c"), np.eye(3, dtype=bool), images, {"subset": "s"})
    triplet = Case("v", ("p1", "p2", "n"), np.array([[True, True, False]]), tags={"subset": "s"})
    for name, case in (("group", square), ("spec", square), ("visla-t2t", triplet)):
        strict, argmax = get_protocol(name, "strict"), get_protocol(name, "argmax")
        assert strict.ties_within_lines
        for _ in range(30):
            s = _latin(rng, 3)
            if name == "visla-t2t":
                s = np.triu(s) + np.triu(s, 1).T  # symmetric: every off-diagonal value twice
                if not all(len(set(line)) == 3 for line in s):
                    continue
            own = strict.outcomes(case, s)
            assert strict.tied_units(case, s, own) == [False] * len(own)
            assert own == argmax.outcomes(case, s)


def test_choice_ties_and_unparseable_answers() -> None:
    choice = get_protocol("choice")
    pair = Case("c", ("a", "b"), np.eye(2, dtype=bool), (_IMAGE, _IMAGE), {"subset": "s"})
    answers = np.zeros((4, 2, 2))
    answers[:, 1, :] = 1
    answers[0, 0, 1] = np.nan  # one generated answer unparseable
    assert choice.answer_counts(pair, answers) == (8, 1)
    assert choice.tied_units(pair, answers, choice.outcomes(pair, answers)) == [False]
    answers[2, 1, 0] = np.nan  # a tie of the options' likelihoods: no answer
    assert choice.tied_units(pair, answers, choice.outcomes(pair, answers)) == [True]
    assert choice.answer_counts(pair, answers[..., :1]) is None  # no generation reading: nothing parsed
    diag = RunDiagnostics()
    diag.add([True], (8, 1))
    diag.add([False], (8, 3))
    assert diag.as_json() == {
        "tie_rate": 50.0,
        "n_tied_units": 1,
        "n_nan_cases": 0,
        "unparseable_rate": 25.0,
        "n_answers": 16,
    }
    assert diagnostic_notes(diag.as_json())[1] == "unparseable answers: 25.00% of 16"


def test_yes_rate_of_yes_no_questions() -> None:
    protocol = get_protocol("naturalbench")
    tags = {"subset": "yes_no", "answers": "Yes/No"}
    yes_no = Case("c", ("Is it red?", "Is it blue?"), np.eye(2, dtype=bool), (_IMAGE, _IMAGE), tags)
    mc = Case("d", ("Which? A: x; B: y;", "Which? A: y; B: x;"), np.eye(2, dtype=bool), (_IMAGE, _IMAGE),
              {"subset": "multiple_choice", "answers": "A/B"})  # fmt: skip
    says_yes = np.tile([-0.1, -2.0], (2, 2, 1))  # every question: Yes (or A)
    says_no = np.tile([-2.0, -0.1], (2, 2, 1))
    diag = RunDiagnostics()
    for case, scores in ((yes_no, says_yes), (yes_no, says_no), (yes_no, says_yes), (mc, says_yes)):
        diag.add([False], protocol.answer_counts(case, scores), protocol.yes_counts(case, scores))
    # 12 yes/no answers, 8 of them "Yes"; the multiple-choice case's "A" answers are not counted
    assert diag.as_json() == {
        "tie_rate": 0.0,
        "n_tied_units": 0,
        "n_nan_cases": 0,
        "yes_rate": 200 / 3,
        "n_yes_no_answers": 12,
    }
    assert diagnostic_notes(diag.as_json())[-1] == "yes rate: 66.67% of 12 yes/no answers"
    footer = format_metrics_table({"all": {"acc": 50.0}}, title="t", ties="strict", diagnostics=diag.as_json())
    assert "yes rate: 66.67% of 12 yes/no answers" in footer


def test_bag_of_words_scope_in_the_aggregates() -> None:
    table = UnitTable()
    outcomes = {"u0": 1.0, "u1": 0.0, "u2": 1.0, "u3": 0.0}
    bow = {"u0", "u1", "u2"}
    for uid, correct in outcomes.items():
        tags = {"subset": "s", "bag_of_words": "identical"} if uid in bow else {"subset": "s"}
        table.add(uid, uid, tags, {"accuracy": correct})
    evaluation = evaluate_table("i2t-top1", table, n_boot=50)
    metrics, aggregates = evaluation.metrics, evaluation.aggregates()
    assert list(metrics) == ["all", BOW_SCOPE, "s"]
    assert metrics["all"]["accuracy"] == 50.0
    assert math.isclose(metrics[BOW_SCOPE]["accuracy"], 200 / 3)
    assert "multiset of words" in aggregates[BOW_SCOPE]


def test_recorder_writes_the_diagnostics(tmp_path: Path) -> None:
    config = EvalConfig(model="m", benchmark="sugarcrepe", data=tmp_path, out=tmp_path / "out", n_boot=20)
    protocol = get_protocol("i2t-top1")
    cases = [
        (one_image("swap/0", ("a dog chases a cat", "a cat chases a dog"), "swap_obj"), [0.5, 0.5]),  # tie, BoW
        (one_image("swap/1", ("a red cup", "a cup red"), "swap_obj"), [0.6, 0.2]),  # BoW
        (one_image("add/0", ("a dog", "a dog and a hat"), "add_obj"), [0.2, 0.6]),
        (one_image("add/1", ("a cat", "a cat on a mat"), "add_obj"), [0.7, 0.1]),
    ]
    with RunRecorder(config, protocol, {"name_or_path": "m"}, "digest", store=None) as rec:
        for case, scores in cases:
            rec.add_case(case, np.array([scores]))
        result = rec.finish({"records": 4, "cases": 4, "skipped": {}}, {})
    meta = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert meta["tie_rate"] == 25.0 and meta["n_tied_units"] == 1 and "unparseable_rate" not in meta
    assert meta["metrics"][BOW_SCOPE]["accuracy"] == 50.0  # the tie fails, strict
    assert meta["metrics"]["all"]["accuracy"] == 50.0
    text = format_metrics_table(result.metrics, aggregates=result.aggregates, diagnostics=result.diagnostics)
    assert "tie rate: 25.00% of units" in text and f"{BOW_SCOPE} = pooled" in text
    rows = [line.split()[0] for line in text.splitlines()[2:6]]
    assert rows == ["all", "subset_mean", BOW_SCOPE, "add_obj"]


@pytest.mark.parametrize("ties", ["strict", "argmax"])
def test_tie_rate_does_not_depend_on_the_rule(ties: str) -> None:
    protocol = get_protocol("i2t-top1", ties)
    case = one_image("t", ("x", "y"))
    s = np.array([[0.2, 0.2]])
    assert protocol.tied_units(case, s, protocol.outcomes(case, s)) == [True]
