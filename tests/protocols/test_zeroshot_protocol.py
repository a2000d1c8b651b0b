"""Protocol ``zeroshot``: hand-worked top-1 / top-5 / mean per-class recall with ties, the vectorised
bootstrap against a loop, and paired comparisons of the derived recall."""

from __future__ import annotations

import numpy as np
import pytest

from spotdiff.cases import ArrayImage, Case
from spotdiff.protocols import evaluate, paired_comparison
from spotdiff.protocols.zeroshot import ZeroShot, class_recall

IMG = (ArrayImage(np.zeros((2, 2, 3), np.uint8)),)
NAMES = tuple(f"class {k}" for k in range(6))


def case(cid: str, label: int, names=NAMES) -> Case:
    truth = np.zeros((1, len(names)), dtype=bool)
    truth[0, label] = True
    return Case(cid, names, truth, IMG, {"subset": "test", "label": names[label]}, prompts=("a {c}.",))


def test_top1_top5_and_ties_by_hand():
    p = ZeroShot()
    c = case("a", 2)
    # true class third: fails top-1, within top-5
    assert p.outcomes(c, np.array([[0.9, 0.8, 0.7, 0.1, 0.0, -1.0]])) == [{"top1": 0.0, "top5": 1.0, "rank": 2.0}]
    # five other classes tie with the true one: it ranks sixth, so top-5 fails too
    assert p.outcomes(c, np.full((1, 6), 0.3)) == [{"top1": 0.0, "top5": 0.0, "rank": 5.0}]
    # four ties: rank 4, inside the top five
    assert p.outcomes(c, np.array([[0.3, 0.3, 0.3, 0.3, 0.3, 0.0]]))[0]["top5"] == 1.0
    # a NaN true score fails everything; a NaN competitor counts as above
    assert p.outcomes(c, np.array([[0.0, 0.0, np.nan, 0.0, 0.0, 0.0]]))[0]["top1"] == 0.0
    assert p.outcomes(c, np.array([[np.nan, 0.0, 0.5, 0.0, 0.0, 0.0]]))[0]["rank"] == 1.0
    # fewer than five classes: top-5 is undefined, as in CLIP_benchmark
    small = case("b", 1, NAMES[:3])
    assert np.isnan(p.outcomes(small, np.array([[0.0, 1.0, 0.5]]))[0]["top5"])


def test_mean_per_class_recall_is_balanced_accuracy():
    # class 0: 3 images, 2 right; class 1: 1 image, right -> recall (2/3 + 1) / 2, top-1 3/4
    cases = [case("a", 0), case("b", 0), case("c", 0), case("d", 1)]
    right = np.array([[1.0, 0, 0, 0, 0, 0]])
    wrong = np.array([[0.0, 1, 0, 0, 0, 0]])
    mats = [right, right, wrong, wrong]
    ev = evaluate("zeroshot", cases, mats, n_boot=0)
    m = ev.metrics["all"]
    assert m["top1"] == pytest.approx(75.0)
    assert m["mean_per_class_recall"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert class_recall(np.array([1.0, 1.0, 0.0, 1.0]), np.array([0, 0, 0, 1]))[0] == pytest.approx(5 / 6)


def test_bootstrap_of_the_recall_matches_a_loop():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2, size=40).astype(float)
    classes = rng.integers(0, 5, size=40)
    idx = rng.integers(0, 40, size=(30, 40))
    got = class_recall(values, classes, idx)
    for b in range(30):
        v, c = values[idx[b]], classes[idx[b]]
        expected = np.mean([v[c == k].mean() for k in np.unique(c)])
        assert got[b] == pytest.approx(expected)


def test_intervals_and_paired_comparison_of_the_recall():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 6, size=60)
    cases = [case(f"i{k}", int(label)) for k, label in enumerate(labels)]
    good = [np.eye(6)[label][None, :] + rng.normal(0, 0.3, (1, 6)) for label in labels]
    bad = [rng.normal(0, 1, (1, 6)) for _ in labels]
    ev_good = evaluate("zeroshot", cases, good, n_boot=200, seed=0)
    ev_bad = evaluate("zeroshot", cases, bad, n_boot=200, seed=0)
    m = ev_good.metrics["all"]
    for metric in ("top1", "top5", "mean_per_class_recall"):
        lo, hi = m[f"{metric}_ci95"]
        assert lo <= m[metric] <= hi
    cmp = paired_comparison(ev_good, ev_bad, "mean_per_class_recall", n_boot=200, n_perm=500)
    assert cmp.test == "sign-flip-units" and cmp.difference > 0 and cmp.ci[0] > 0 and cmp.p_value < 0.01
    top1 = paired_comparison(ev_good, ev_bad, "top1", n_boot=200)
    assert top1.test == "mcnemar-exact" and top1.n_units == 60
