"""``--ties strict|argmax``: every protocol under both rules, against numpy's argmax."""

from __future__ import annotations

import numpy as np
import pytest

from spotdiff.cases import ArrayImage, Case
from spotdiff.errors import ConfigError
from spotdiff.protocols import TIES, get_protocol
from spotdiff.protocols.base import beats
from spotdiff.protocols.retrieval import retrieval_ranks

IMG = ArrayImage(np.zeros((2, 2, 3), np.uint8))


def one_row(n_texts: int, pos: int) -> Case:
    truth = np.zeros((1, n_texts), bool)
    truth[0, pos] = True
    return Case("c", tuple(f"t{k}" for k in range(n_texts)), truth, (IMG,), {"subset": "s"})


def test_unknown_rule_is_a_config_error():
    assert TIES == ("strict", "argmax")
    with pytest.raises(ConfigError, match="unknown tie rule"):
        get_protocol("i2t-top1", "optimistic")


def test_top1_argmax_equals_numpy_argmax_on_tied_scores():
    """argmax: correct exactly when numpy's argmax (first maximum) picks the positive."""
    rng = np.random.default_rng(0)
    strict, argmax = get_protocol("i2t-top1"), get_protocol("i2t-top1", "argmax")
    for _ in range(300):
        m = int(rng.integers(2, 6))
        pos = int(rng.integers(0, m))
        s = rng.integers(0, 3, size=(1, m)).astype(float)  # many ties
        c = one_row(m, pos)
        assert argmax.outcomes(c, s)[0]["accuracy"] == float(np.argmax(s[0]) == pos)
        others = np.delete(s[0], pos)
        assert strict.outcomes(c, s)[0]["accuracy"] == float(s[0, pos] > others.max())


def test_nan_loses_under_both_rules():
    c = one_row(2, 0)
    for ties in TIES:
        assert get_protocol("i2t-top1", ties).outcomes(c, np.array([[np.nan, 0.1]]))[0]["accuracy"] == 0.0
        assert get_protocol("i2t-top1", ties).outcomes(c, np.array([[0.3, np.nan]]))[0]["accuracy"] == 0.0
    assert not beats(np.array([np.nan, np.nan]), np.array([0]), np.array([1]), "argmax")


def test_spec_and_group_argmax_follow_peer_code():
    # SPEC's wrappers: scores.argmax(dim=-1) == label, per query row / column
    case = Case("c", ("a", "b", "c"), np.eye(3, dtype=bool), (IMG,) * 3, {"subset": "count"})
    s = np.array([[0.5, 0.5, 0.1], [0.5, 0.5, 0.1], [0.2, 0.2, 0.2]])
    out = get_protocol("spec", "argmax").outcomes(case, s)
    want_i2t = [float(np.argmax(s[i]) == i) for i in range(3)]
    want_t2i = [float(np.argmax(s[:, t]) == t) for t in range(3)]
    assert [o["i2t"] for o in out[:3]] == want_i2t == [1.0, 0.0, 0.0]
    assert [o["t2i"] for o in out[3:]] == want_t2i == [1.0, 0.0, 1.0]
    assert all(o["i2t"] == 0.0 for o in get_protocol("spec").outcomes(case, s)[:3])
    # MTEB's ImageTextPairClassificationEvaluator: argmax per image row and per text column
    two = Case("w", ("x", "y"), np.eye(2, dtype=bool), (IMG, IMG), {"subset": "s"})
    tied = np.array([[0.4, 0.4], [0.1, 0.6]])
    text_ok = bool((tied.argmax(1) == np.arange(2)).all())
    image_ok = bool((tied.argmax(0) == np.arange(2)).all())
    assert get_protocol("group", "argmax").outcomes(two, tied) == [
        {"text": float(text_ok), "image": float(image_ok), "group": float(text_ok and image_ok)}
    ]
    assert get_protocol("group").outcomes(two, tied)[0]["text"] == 0.0


def test_visla_argmax_gives_a_tie_to_the_text_listed_first():
    c = Case("v", ("p1", "p2", "n"), np.array([[True, True, False]]), tags={"subset": "s"}, roles=("p1", "p2", "n"))
    s = np.array([[1.0, 0.5, 0.5], [0.5, 1.0, 0.4], [0.5, 0.4, 1.0]])  # S(P1, P2) == S(P1, N)
    assert get_protocol("visla-t2t").outcomes(c, s)[0]["p2_n"] == 0.0
    assert get_protocol("visla-t2t", "argmax").outcomes(c, s)[0]["p2_n"] == 1.0


def brute_ranks(s: np.ndarray, truth: np.ndarray, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Ranks by sorting each query's candidates, ties broken as the rule says."""
    def rank(row: np.ndarray, true: np.ndarray) -> float:
        t_idx = np.flatnonzero(true)
        best = t_idx[np.argmax(row[t_idx])]  # first true with the best score
        n = 0
        for j in np.flatnonzero(~true):
            if row[j] > row[best] or (row[j] == row[best] and (ties == "strict" or j < best)):
                n += 1
        return float(n)

    i2t = np.array([rank(s[i], truth[i]) for i in range(s.shape[0])])
    t2i = np.array([rank(s[:, t], truth[:, t]) for t in range(s.shape[1])])
    return i2t, t2i


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("chunk", [1, 3, None])
def test_retrieval_ranks_match_a_brute_force_sort(ties, chunk):
    rng = np.random.default_rng(1)
    n_img, per = 7, 3
    truth = np.zeros((n_img, n_img * per), bool)
    for i in range(n_img):
        truth[i, i * per : (i + 1) * per] = True
    s = rng.integers(0, 4, size=truth.shape).astype(float)  # heavy ties
    got = retrieval_ranks(s, truth, chunk=chunk, ties=ties)
    want = brute_ranks(s, truth, ties)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
