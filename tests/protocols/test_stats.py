"""evaluate(): aggregation per subset, bootstrap intervals; paired_comparison(): McNemar / permutation."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from spotdiff.cases import ArrayImage, Case
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import (
    Evaluation,
    UnitTable,
    evaluate,
    evaluate_table,
    get_protocol,
    paired_comparison,
)
from spotdiff.protocols.stats import bootstrap

IMG = ArrayImage(np.zeros((2, 2, 3), dtype=np.uint8))


def pair_case(cid: str, subset: str = "a", caption_first: bool = True, **tags) -> Case:
    truth = [[True, False]] if caption_first else [[False, True]]
    return Case(
        id=cid, texts=("cap", "foil"), truth=np.array(truth), images=(IMG,), tags={"subset": subset, **tags}
    )


def pair_mats(wins):
    """1 x 2 similarity matrices (caption first) that win or lose as listed."""
    return [np.array([[1.0, 0.0]]) if w else np.array([[0.0, 1.0]]) for w in wins]


# ------------------------------------------------------------------------------- evaluate
def test_evaluate_hand_worked_subsets_and_records():
    cases = [pair_case(f"c{k}", subset="a" if k < 4 else "b") for k in range(6)]
    wins = [1, 1, 1, 0, 1, 0]
    ev = evaluate("valse-pairwise", cases, pair_mats(wins), n_boot=200, seed=3)
    assert isinstance(ev, Evaluation)
    assert ev.n_cases == 6 and ev.n_units == 6
    assert list(ev.metrics) == ["all", "subset_mean", "a", "b"]
    assert ev.metrics["all"]["acc_r"] == pytest.approx(400 / 6)  # pooled: 4 of 6 cases
    assert ev.metrics["subset_mean"]["acc_r"] == pytest.approx(62.5)  # (75 + 50) / 2
    assert ev.metrics["a"]["acc_r"] == pytest.approx(75.0)
    assert ev.metrics["b"]["acc_r"] == pytest.approx(50.0)
    for scope in ev.metrics.values():
        lo, hi = scope["acc_r_ci95"]
        assert 0.0 <= lo <= scope["acc_r"] <= hi <= 100.0
    js = ev.metrics_json()
    assert js["all"]["acc_r"] == 66.67
    json.dumps(js, allow_nan=False)  # valid JSON
    recs = ev.records()
    assert recs[3] == {"unit": "c3", "case": "c3", "subset": "a", "acc_r": 0.0}
    assert list(ev.by_case()) == [c.id for c in cases]
    assert ev.values["acc_r"].tolist() == wins
    assert ev.groups["subset"].tolist() == ["a"] * 4 + ["b"] * 2


def test_evaluate_accepts_mapping_and_name_and_instance():
    cases = [pair_case(f"c{k}") for k in range(3)]
    mats = pair_mats([1, 0, 1])
    a = evaluate("valse-pairwise", cases, mats, n_boot=50)
    b = evaluate(
        get_protocol("valse-pairwise"), cases, {c.id: m for c, m in zip(cases, mats, strict=True)}, n_boot=50
    )
    assert a.metrics == b.metrics
    with pytest.raises(DataError, match="no score matrix"):
        evaluate("valse-pairwise", cases, {"c0": mats[0]})
    with pytest.raises(DataError, match="2 score matrices for 3 cases"):
        evaluate("valse-pairwise", cases, mats[:2])


def test_evaluate_rejects_duplicate_case_ids():
    cases = [pair_case("same"), pair_case("same")]
    with pytest.raises(DataError, match="duplicate unit id"):
        evaluate("valse-pairwise", cases, pair_mats([1, 1]))


def test_n_boot_zero_leaves_out_intervals_and_ci_key_follows_level():
    cases = [pair_case(f"c{k}") for k in range(4)]
    mats = pair_mats([1, 0, 1, 1])
    assert evaluate("valse-pairwise", cases, mats, n_boot=0).metrics["all"] == {"acc_r": 75.0}
    ev = evaluate("valse-pairwise", cases, mats, n_boot=100, ci=0.9)
    assert "acc_r_ci90" in ev.metrics["all"]
    with pytest.raises(ConfigError):
        evaluate("valse-pairwise", cases, mats, ci=1.5)


def test_single_subset_equals_all():
    cases = [pair_case(f"c{k}") for k in range(5)]
    ev = evaluate("valse-pairwise", cases, pair_mats([1, 0, 1, 1, 0]), n_boot=100)
    assert ev.metrics["a"] == ev.metrics["all"]


def test_nan_metrics_become_null_in_json():
    c = Case(id="x", texts=("a", "b"), truth=np.array([[True, False]]), images=(IMG,), tags={"subset": "s"})
    ev = evaluate("aro-macro", [c], [np.array([[1.0, 0.0]])], n_boot=10)
    js = ev.metrics_json()
    assert js["all"]["macro_accuracy"] is None and js["all"]["macro_accuracy_ci95"] == [None, None]
    assert js["all"]["accuracy"] == 100.0


def test_unit_table_streaming_matches_evaluate():
    cases = [pair_case(f"c{k}", subset="ab"[k % 2]) for k in range(20)]
    rng = np.random.default_rng(0)
    mats = [rng.random((1, 2)) for _ in cases]
    p = get_protocol("valse-prob")
    table = UnitTable()
    for c, m in zip(cases, mats, strict=True):  # the runner's way: outcomes + unit_ids per case
        outs = p.outcomes(c, m)
        for uid, o in zip(p.unit_ids(c, len(outs)), outs, strict=True):
            table.add(uid, c.id, c.tags, o)
    direct = evaluate(p, cases, mats, n_boot=100, seed=5)
    assert evaluate_table(p, table, n_boot=100, seed=5, n_cases=len(cases)).metrics == direct.metrics
    assert evaluate_table("valse-prob", table, n_boot=100, seed=5).metrics == direct.metrics


def test_evaluation_builds_the_unit_names_only_when_asked(monkeypatch) -> None:
    """A run writing only metrics and aggregates never builds a string per unit; records still name every unit."""
    table = UnitTable()
    for k in range(6):
        table.add(f"c{k}/0", f"c{k}", {"subset": "ab"[k % 2]}, {"accuracy": float(k % 3 == 0)})
    built = []
    real = UnitTable.unit_ids
    monkeypatch.setattr(UnitTable, "unit_ids", property(lambda t: built.append(1) or real.fget(t)))
    evaluation = evaluate_table("i2t-top1", table, n_boot=20)
    assert evaluation.metrics["all"]["accuracy"] == pytest.approx(100 / 3) and evaluation.aggregates()
    assert evaluation.n_units == 6 and built == []
    assert [r["unit"] for r in evaluation.records()] == [f"c{k}/0" for k in range(6)] and built == [1]
    assert evaluation.unit_ids.tolist() == [f"c{k}/0" for k in range(6)] and built == [1]  # built once


# ------------------------------------------------------------------------------- bootstrap
@settings(max_examples=40, deadline=None)
@given(
    wins=st.lists(st.booleans(), min_size=1, max_size=60),
    seed=st.integers(0, 2**32 - 1),
)
def test_bootstrap_contains_mean_and_is_deterministic(wins, seed):
    cases = [pair_case(f"c{k}") for k in range(len(wins))]
    mats = pair_mats(wins)
    a = evaluate("valse-pairwise", cases, mats, n_boot=300, seed=seed)
    b = evaluate("valse-pairwise", cases, mats, n_boot=300, seed=seed)
    assert a.metrics == b.metrics
    lo, hi = a.metrics["all"]["acc_r_ci95"]
    assert lo <= a.metrics["all"]["acc_r"] <= hi


def test_bootstrap_seed_changes_interval_and_is_percentile():
    rng = np.random.default_rng(1)
    wins = rng.random(400) < 0.6
    cases = [pair_case(f"c{k}") for k in range(400)]
    a = evaluate("valse-pairwise", cases, pair_mats(wins), n_boot=500, seed=0)
    b = evaluate("valse-pairwise", cases, pair_mats(wins), n_boot=500, seed=1)
    assert not np.array_equal(a.boot["all"]["acc_r"], b.boot["all"]["acc_r"])
    samples = a.boot["all"]["acc_r"]
    assert samples.shape == (500,)
    assert a.metrics["all"]["acc_r_ci95"] == pytest.approx(list(np.percentile(samples, [2.5, 97.5])))
    # the interval is about +-1.96 standard errors of a proportion
    p = wins.mean()
    se = 100 * np.sqrt(p * (1 - p) / 400)
    lo, hi = a.metrics["all"]["acc_r_ci95"]
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.2)


def _cases_for(name, n, rng):
    """n cases and random matrices for protocols with derived / grouped / NaN-bearing metrics."""
    cases, mats = [], []
    for k in range(n):
        if name == "aro-macro":
            rel = ["on", "in", "near", "under"][k % 4]
            cases.append(Case(id=f"c{k}", texts=("a", "b"), truth=np.array([[False, True]]), images=(IMG,),
                              tags={"subset": "s", "relation": rel}))  # fmt: skip
            mats.append(rng.random((1, 2)))
        elif name == "valse-prob":
            cases.append(pair_case(f"c{k}"))
            mats.append(rng.random((1, 2)))
        else:  # spec: NaN-bearing units (i2t vs t2i)
            kk = 3
            eye = np.eye(kk, dtype=bool)
            cases.append(
                Case(id=f"c{k}", texts=("a", "b", "c"), truth=eye, images=(IMG,) * kk, tags={"subset": "s"})
            )
            mats.append(rng.random((kk, kk)))
    return cases, mats


@pytest.mark.parametrize("name", ["aro-macro", "valse-prob", "spec"])
def test_vectorised_resamples_equal_looped_aggregate(name):
    rng = np.random.default_rng(7)
    cases, mats = _cases_for(name, 40, rng)
    ev = evaluate(name, cases, mats, n_boot=0)
    p = ev.protocol
    idx = rng.integers(0, ev.n_units, size=(25, ev.n_units))
    vec = p.aggregate_resamples(ev.values, ev.groups, idx)
    for b in range(idx.shape[0]):
        v = {m: a[idx[b]] for m, a in ev.values.items()}
        g = {t: a[idx[b]] for t, a in ev.groups.items()}
        looped = p.aggregate(v, g)
        for m in p.metrics:
            assert vec[m][b] == pytest.approx(looped[m], nan_ok=True), (m, b)


def test_bootstrap_fast_path_10k_units_under_a_second():
    rng = np.random.default_rng(0)
    n = 10_000
    values = {"acc_r": (rng.random(n) < 0.7).astype(float)}
    groups = {"subset": np.array(["s"] * n, dtype=object), "case": np.arange(n).astype(str).astype(object)}
    p = get_protocol("valse-pairwise")
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        out = bootstrap(p, values, groups, n_boot=1000, rng=np.random.default_rng(0))
        best = min(best, time.perf_counter() - t0)
    assert out["acc_r"].shape == (1000,)
    assert best < 1.0, f"1000 resamples of 10k units took {best:.2f} s"


# ------------------------------------------------------------------------------- paired
def test_paired_identical_runs():
    rng = np.random.default_rng(2)
    wins = rng.random(300) < 0.5
    cases = [pair_case(f"c{k}", subset="ab"[k % 2]) for k in range(300)]
    a = evaluate("valse-pairwise", cases, pair_mats(wins), n_boot=200)
    b = evaluate("valse-pairwise", cases, pair_mats(wins), n_boot=200)
    r = paired_comparison(a, b, "acc_r")
    assert r.difference == 0.0 and r.p_value == 1.0 and r.ci == (0.0, 0.0)
    assert r.test == "mcnemar-exact" and r.a_only == 0 and r.b_only == 0 and r.n_units == 300
    r = paired_comparison(a, b, "acc_r", subset="b")
    assert r.scope == "b" and r.n_units == 150 and r.p_value == 1.0


def test_paired_mcnemar_hand_worked():
    # 10 discordant units: a right / b wrong on 8, a wrong / b right on 2; 20 concordant
    wa = [1] * 8 + [0] * 2 + [1] * 10 + [0] * 10
    wb = [0] * 8 + [1] * 2 + [1] * 10 + [0] * 10
    cases = [pair_case(f"c{k}") for k in range(30)]
    a = evaluate("valse-pairwise", cases, pair_mats(wa), n_boot=300)
    b = evaluate("valse-pairwise", cases, pair_mats(wb), n_boot=300)
    r = paired_comparison(a, b, "acc_r")
    assert (r.a_only, r.b_only) == (8, 2)
    assert r.difference == pytest.approx(20.0)
    # two-sided exact binomial: 2 * (C(10,8) + C(10,9) + C(10,10)) / 2^10 = 112 / 1024
    assert r.p_value == pytest.approx(112 / 1024)
    assert r.p_value == pytest.approx(binomtest(8, 10, 0.5).pvalue)
    assert r.ci[0] <= 20.0 <= r.ci[1]
    rev = paired_comparison(b, a, "acc_r")
    assert rev.difference == pytest.approx(-20.0) and rev.p_value == pytest.approx(r.p_value)


def test_paired_matches_units_by_id_not_order():
    wins = [1, 0, 1, 1, 0, 0, 1]
    cases = [pair_case(f"c{k}") for k in range(7)]
    a = evaluate("valse-pairwise", cases, pair_mats(wins), n_boot=100)
    order = [6, 2, 0, 5, 1, 4, 3]
    b = evaluate("valse-pairwise", [cases[k] for k in order], pair_mats([wins[k] for k in order]), n_boot=100)
    r = paired_comparison(a, b, "acc_r")
    assert r.difference == 0.0 and r.p_value == 1.0 and r.ci == (0.0, 0.0)


def test_paired_errors():
    cases = [pair_case(f"c{k}") for k in range(4)]
    a = evaluate("valse-pairwise", cases, pair_mats([1, 0, 1, 1]), n_boot=10)
    b = evaluate("valse-pairwise", cases[:3], pair_mats([1, 0, 1]), n_boot=10)
    with pytest.raises(DataError, match="same units"):
        paired_comparison(a, b, "acc_r")
    c = evaluate("i2t-top1", cases, pair_mats([1, 0, 1, 1]), n_boot=10)
    with pytest.raises(ConfigError, match="cannot compare"):
        paired_comparison(a, c, "acc_r")
    with pytest.raises(ConfigError, match="no metric"):
        paired_comparison(a, a, "accuracy")


def test_paired_permutation_for_derived_and_graded_metrics():
    rng = np.random.default_rng(4)
    cases = [pair_case(f"c{k}") for k in range(200)]
    good = [np.array([[rng.uniform(0.55, 1.0), rng.uniform(0.0, 0.45)]]) for _ in cases]
    noisy = [np.array([[rng.random(), rng.random()]]) for _ in cases]
    a = evaluate("valse-prob", cases, good, n_boot=200)
    b = evaluate("valse-prob", cases, noisy, n_boot=200)
    same = paired_comparison(a, a, "min_pc_pf")
    assert same.test == "sign-flip-units" and same.difference == 0.0 and same.p_value == 1.0
    assert same.ci == (0.0, 0.0)
    r = paired_comparison(a, b, "min_pc_pf", n_perm=999)
    assert r.test == "sign-flip-units" and r.a == 100.0 and r.difference > 30
    assert r.p_value == pytest.approx(1 / 1000)  # no permutation reaches the observed difference
    assert r.ci[0] > 0
    g = paired_comparison(a, b, "acc", n_perm=999)  # per-unit values 0, .5, 1: not a 0/1 outcome
    assert g.test == "sign-flip-units" and g.p_value < 0.01
    # deterministic for a seed
    assert paired_comparison(a, b, "acc", n_perm=999) == g


def test_cluster_bootstrap_resamples_whole_cases() -> None:
    """Units of a multi-unit case move together: a metric constant within cases keeps case means."""
    from spotdiff.protocols.stats import UnitTable, evaluate_table

    table = UnitTable()
    for c in range(40):
        hit = 1.0 if c % 2 == 0 else 0.0
        for q in range(3):
            table.add(f"c{c}/i{q}", f"c{c}", {"subset": "s"}, {"i2t": hit, "t2i": hit})
    ev = evaluate_table("spec", table, n_boot=300, seed=1)
    samples = ev.boot["all"]["i2t"]
    # every resample draws whole cases, so each value is a multiple of 100/40 (one case's share)
    assert np.allclose(np.round(samples / 2.5), samples / 2.5)
    lo, hi = ev.metrics["all"]["i2t_ci95"]
    assert lo < 50.0 < hi
