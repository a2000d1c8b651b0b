"""The answer-based protocols ``choice`` and ``choice-text`` (EqBen Sec. 5.5) on hand-worked 2 x 2
cases: text / image / group scores need every question right in both candidate orders, the per-order
group scores are EqBen Table 7's two rows, consistency and no-answer rates are counted per case, and
the generation reading is reported beside the likelihood one."""

from __future__ import annotations

import numpy as np
import pytest

from spotdiff.cases import ArrayImage, Case
from spotdiff.errors import DataError
from spotdiff.protocols import NEEDS, evaluate, get_protocol

IMG = tuple(ArrayImage(np.full((2, 2, 3), k, dtype=np.uint8), name=f"img{k}") for k in range(2))
NAN = np.nan


def case(cid: str, subset: str = "s", truth=None) -> Case:
    truth = np.eye(2, dtype=bool) if truth is None else np.asarray(truth, dtype=bool)
    return Case(cid, ("a mug in some grass", "some grass in a mug"), truth, IMG, {"subset": subset})


def answers(rows) -> np.ndarray:
    """[4 questions, 2 orders] chosen indices -> the [4, 2, 1] matrix of one likelihood reading."""
    return np.asarray(rows, dtype=np.float64)[..., None]


def test_registry():
    for name, need in (("choice", "choice"), ("choice-text", "choice-text")):
        p = get_protocol(name)
        assert p.needs == need and need in NEEDS and p.description


def test_hand_worked_cases():
    p = get_protocol("choice")
    perfect = answers([[0, 0], [1, 1], [0, 0], [1, 1]])
    follows_order = answers([[0, 1], [0, 1], [0, 1], [0, 1]])  # always "A": orig right for row 0 only
    text_only = answers([[0, 0], [1, 1], [1, 1], [1, 1]])  # text 0 -> image 1: wrong both times
    orig_only = answers([[0, 0], [1, 1], [0, 1], [1, 0]])  # image questions right only as presented
    one_tie = answers([[0, NAN], [1, 1], [0, 0], [1, 1]])
    expect = {
        "perfect": (perfect, dict(text=1, image=1, group=1, group_orig=1, group_swap=1, consistency=1, no_answer=0)),
        "follows": (follows_order, dict(text=0, image=0, group=0, group_orig=0, group_swap=0, consistency=0)),
        "text_only": (text_only, dict(text=1, image=0, group=0, group_orig=0, group_swap=0, consistency=1)),
        "orig_only": (orig_only, dict(text=1, image=0, group=0, group_orig=1, group_swap=0, consistency=0.5)),
        "one_tie": (one_tie, dict(text=0, image=1, group=0, group_orig=1, group_swap=0, consistency=0.75)),
    }
    for name, (mat, want) in expect.items():
        got = p.outcomes(case(name), mat)[0]
        assert {k: got[k] for k in want} == pytest.approx(want), name
    assert p.outcomes(case("t"), one_tie)[0]["no_answer"] == 1 / 8
    cases = [case(name, subset="ab"[k % 2]) for k, name in enumerate(expect)]
    result = evaluate(p, cases, [m for m, _ in expect.values()], n_boot=200, seed=0).metrics
    assert result["all"]["text"] == pytest.approx(60.0) and result["all"]["group"] == pytest.approx(20.0)
    assert result["all"]["group_orig"] == pytest.approx(60.0) and result["all"]["group_swap"] == pytest.approx(20.0)
    assert result["a"]["text"] == pytest.approx(200 / 3)  # perfect, text_only, one_tie -> 1, 1, 0
    lo, hi = result["all"]["text_ci95"]
    assert lo <= 60.0 <= hi
    assert "gen_text" not in result["all"]  # no generation reading asked


def test_off_diagonal_truth_and_the_generation_reading():
    p = get_protocol("choice")
    c = case("x", truth=[[False, True], [True, False]])  # image 0 <-> text 1
    lik = [[1, 1], [0, 0], [1, 1], [0, 0]]  # text 0's image is image 1, text 1's image is image 0
    gen = [[1, NAN], [0, 0], [NAN, NAN], [0, 1]]
    got = p.outcomes(c, np.stack([np.array(lik, float), np.array(gen, float)], axis=-1))[0]
    assert (got["text"], got["image"], got["group"]) == (1.0, 1.0, 1.0)
    assert (got["gen_text"], got["gen_image"], got["gen_group"]) == (0.0, 0.0, 0.0)
    assert got["gen_group_orig"] == 0.0 and got["unparsed"] == 3 / 8 and got["gen_consistency"] == 1 / 4
    assert "gen_no_answer" not in got and got["no_answer"] == 0.0


def test_choice_text_only_asks_captions():
    p = get_protocol("choice-text")
    got = p.outcomes(case("t"), np.array([[0, 0], [1, 0]], float)[..., None])[0]
    assert got == {"text": 0.0, "text_orig": 1.0, "text_swap": 0.0, "consistency": 0.5, "no_answer": 0.0}
    with pytest.raises(DataError, match=r"shape \(2, 2, 1 or 2\)"):
        p.outcomes(case("t"), answers([[0, 0], [1, 1], [0, 0], [1, 1]]))
    with pytest.raises(DataError, match=r"shape \(4, 2, 1 or 2\)"):
        get_protocol("choice").outcomes(case("t"), np.zeros((4, 2)))
