"""Cluster-aware paired comparisons and the papers' aggregates (subset means, groupings)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from spotdiff.errors import DataError
from spotdiff.protocols import TESTS, UnitTable, evaluate_table, paired_comparison
from spotdiff.protocols.stats import percentile_ci

# the issue's example: 40 cases; A alone solves 6, B alone 2, both 10, neither 22
A_WINS = [1] * 6 + [0] * 2 + [1] * 10 + [0] * 22
B_WINS = [0] * 6 + [1] * 2 + [1] * 10 + [0] * 22


def repeated(outcomes, k: int, *, clustered: bool = True, metric: str = "acc_r", n_boot: int = 200):
    """An evaluation whose cases hold ``k`` units repeating the case's outcome; ``clustered=False``
    makes every unit its own case (what a unit-level test assumes)."""
    table = UnitTable()
    for c, o in enumerate(outcomes):
        for q in range(k):
            case = f"c{c}" if clustered else f"c{c}/{q}"
            table.add(f"c{c}/{q}", case, {"subset": "s"}, {metric: float(o)})
    protocol = "valse-pairwise" if metric == "acc_r" else "spec"
    return evaluate_table(protocol, table, n_boot=n_boot, seed=0)


def test_issue_example_unit_mcnemar_overstates_and_cluster_test_does_not():
    # treating the 9 units of a case as independent: McNemar on 54 vs 18 discordant units
    naive = paired_comparison(repeated(A_WINS, 9, clustered=False), repeated(B_WINS, 9, clustered=False), "acc_r")
    assert naive.test == "mcnemar-exact" and (naive.a_only, naive.b_only) == (54, 18)
    assert naive.p_value == pytest.approx(2.6e-05, rel=0.02)
    one = paired_comparison(repeated(A_WINS, 1), repeated(B_WINS, 1), "acc_r")
    assert one.test == "mcnemar-exact" and one.p_value == pytest.approx(0.29, abs=0.005)
    assert one.p_value == pytest.approx(binomtest(6, 8).pvalue)
    nine = paired_comparison(repeated(A_WINS, 9), repeated(B_WINS, 9), "acc_r", n_perm=20_000)
    assert nine.test == "sign-flip-cases" and nine.resampling == "cases"
    assert (nine.n_cases, nine.n_units) == (40, 360)
    assert nine.difference == pytest.approx(one.difference) == pytest.approx(10.0)
    mc_error = np.sqrt(one.p_value * (1 - one.p_value) / 20_000)
    assert abs(nine.p_value - one.p_value) < 4 * mc_error


@pytest.mark.parametrize("k", [2, 5])
def test_units_repeating_their_case_give_the_k1_p_value(k):
    """Invariant: k copies of each case's outcome give the same test as one unit per case."""
    rng = np.random.default_rng(k)
    a = (rng.random(60) < 0.55).astype(int)
    b = np.where(rng.random(60) < 0.3, 1 - a, a)  # B disagrees with A on about 30% of cases
    ref = paired_comparison(repeated(a, 1), repeated(b, 1), "acc_r")
    got = paired_comparison(repeated(a, k), repeated(b, k), "acc_r", n_perm=20_000)
    assert ref.test == "mcnemar-exact" and got.test == "sign-flip-cases"
    mc_error = np.sqrt(max(ref.p_value * (1 - ref.p_value), 1e-4) / 20_000)
    assert abs(got.p_value - ref.p_value) < 4 * mc_error + 1e-3
    # the interval resamples cases: as wide as with one unit per case, not sqrt(k) narrower
    assert got.ci[1] - got.ci[0] == pytest.approx(ref.ci[1] - ref.ci[0], rel=0.3)


def test_nan_bearing_spec_units_are_tested_by_case():
    """SPEC-style cases: i2t and t2i units (NaN on the other metric); the test swaps whole cases."""
    rng = np.random.default_rng(3)
    table_a, table_b = UnitTable(), UnitTable()
    for c in range(30):
        for q in range(3):
            hit_a, hit_b = float(rng.random() < 0.7), float(rng.random() < 0.4)
            for table, hit in ((table_a, hit_a), (table_b, hit_b)):
                table.add(f"c{c}/i2t/{q}", f"c{c}", {"subset": "s"}, {"i2t": hit, "t2i": np.nan})
                table.add(f"c{c}/t2i/{q}", f"c{c}", {"subset": "s"}, {"i2t": np.nan, "t2i": hit})
    a = evaluate_table("spec", table_a, n_boot=200)
    b = evaluate_table("spec", table_b, n_boot=200)
    r = paired_comparison(a, b, "i2t", n_perm=2000)
    assert r.test == "sign-flip-cases" and (r.n_cases, r.n_units) == (30, 90)
    assert r.difference > 0 and r.p_value < 0.01 and r.ci[0] > 0
    assert r.test in TESTS


def test_subset_mean_and_groups_hand_worked():
    table = UnitTable()
    wins = {"x": [1, 1, 1, 0], "y": [1, 0], "z": [0, 0, 0, 1, 1, 1]}  # 75%, 50%, 50%
    for sub, ws in wins.items():
        for k, w in enumerate(ws):
            table.add(f"{sub}{k}", f"{sub}{k}", {"subset": sub}, {"acc_r": float(w)})
    groups = {"XY": ("x", "y"), "ZW": ("z", "w")}
    ev = evaluate_table("valse-pairwise", table, n_boot=300, seed=1, groups=groups)
    assert list(ev.metrics) == ["all", "subset_mean", "XY", "x", "y", "z"]
    assert ev.metrics["all"]["acc_r"] == pytest.approx(100 * 7 / 12)  # pooled
    assert ev.metrics["subset_mean"]["acc_r"] == pytest.approx((75 + 50 + 50) / 3)  # unweighted
    assert ev.metrics["XY"]["acc_r"] == pytest.approx(62.5)
    assert ev.missing_groups == {"ZW": ("w",)}  # a group with a missing subset is not averaged
    # stratified bootstrap: the mean, resample by resample, of each subset's own resamples
    stacked = np.mean([ev.boot[s]["acc_r"] for s in ("x", "y", "z")], axis=0)
    assert ev.metrics["subset_mean"]["acc_r_ci95"] == pytest.approx(percentile_ci(stacked, 0.95))
    agg = ev.aggregates()
    assert agg["subset_mean"]["mean_of"] == ["x", "y", "z"] and agg["XY"]["mean_of"] == ["x", "y"]
    assert agg["ties"] == "strict" and agg["not_computed"] == {"ZW": {"missing_subsets": ["w"]}}


def test_paired_comparison_on_a_subset_mean():
    rng = np.random.default_rng(5)
    ta, tb = UnitTable(), UnitTable()
    for sub, n in (("x", 40), ("y", 10)):
        for k in range(n):
            ta.add(f"{sub}{k}", f"{sub}{k}", {"subset": sub}, {"acc_r": float(rng.random() < 0.8)})
            tb.add(f"{sub}{k}", f"{sub}{k}", {"subset": sub}, {"acc_r": float(rng.random() < 0.4)})
    a = evaluate_table("valse-pairwise", ta, n_boot=200, groups={"G": ("x", "y")})
    b = evaluate_table("valse-pairwise", tb, n_boot=200, groups={"G": ("x", "y")})
    r = paired_comparison(a, b, "acc_r", subset="subset_mean", n_perm=999)
    want = np.mean([a.metrics[s]["acc_r"] - b.metrics[s]["acc_r"] for s in ("x", "y")])
    assert r.difference == pytest.approx(want) and r.a == pytest.approx(a.metrics["subset_mean"]["acc_r"])
    assert r.test == "sign-flip-units" and r.n_units == 50 and r.p_value < 0.05
    g = paired_comparison(a, b, "acc_r", subset="G", n_perm=999)
    assert g.difference == pytest.approx(r.difference)
    with pytest.raises(DataError, match="no units"):
        paired_comparison(a, b, "acc_r", subset="nope")


def test_sign_flip_p_value_matches_full_enumeration():
    """A subset mean over 4 + 6 one-unit cases: the randomization distribution enumerated exactly."""
    import itertools

    a = {"x": [1, 1, 1, 0], "y": [1, 1, 0, 1, 1, 0]}
    b = {"x": [0, 0, 1, 1], "y": [0, 1, 0, 0, 0, 1]}
    ta, tb = UnitTable(), UnitTable()
    for sub in a:
        for k, (wa, wb) in enumerate(zip(a[sub], b[sub], strict=True)):
            ta.add(f"{sub}{k}", f"{sub}{k}", {"subset": sub}, {"acc_r": float(wa)})
            tb.add(f"{sub}{k}", f"{sub}{k}", {"subset": sub}, {"acc_r": float(wb)})
    ea, eb = evaluate_table("valse-pairwise", ta, n_boot=0), evaluate_table("valse-pairwise", tb, n_boot=0)
    r = paired_comparison(ea, eb, "acc_r", subset="subset_mean", n_perm=20_000, n_boot=0)
    d = {s: np.array(a[s], float) - np.array(b[s], float) for s in a}
    observed = np.mean([100 * d[s].mean() for s in d])
    extreme = 0
    for signs in itertools.product([1, -1], repeat=10):
        sx, sy = np.array(signs[:4]), np.array(signs[4:])
        stat = np.mean([100 * (sx * d["x"]).mean(), 100 * (sy * d["y"]).mean()])
        extreme += abs(stat) >= abs(observed) - 1e-9
    exact = extreme / 2**10
    assert r.difference == pytest.approx(observed)
    assert abs(r.p_value - exact) < 4 * np.sqrt(exact * (1 - exact) / 20_000) + 1e-4


def test_as_json_has_the_issue_schema():
    r = paired_comparison(repeated(A_WINS, 3), repeated(B_WINS, 3), "acc_r", n_perm=200)
    js = r.as_json()
    assert list(js) == ["metric", "scope", "a", "b", "diff", "ci95", "p_value", "test", "n_cases", "n_units"]
    assert js["diff"] == r.difference and js["ci95"] == list(r.ci) and js["n_cases"] == 40
