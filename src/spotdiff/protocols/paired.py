"""Paired comparison of two evaluations of the same units: a difference, its interval, a p-value.

:func:`paired_comparison` resamples and tests whole cases when cases hold several units: a paired
bootstrap interval and an exact McNemar or a sign-flip randomization test. The tests, when each
applies, and their references: docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols.base import Protocol
from spotdiff.protocols.stats import Evaluation, clusters, percentile_ci, resample, resample_units, scope_rng

#: The p-value tests :func:`paired_comparison` uses, and when (docs/statistics.md).
TESTS = {
    "mcnemar-exact": "exact McNemar test on discordant units (every case is one unit; 0/1 outcomes)",
    "sign-flip-cases": "paired sign-flip randomization test swapping whole cases (cases hold several units)",
    "sign-flip-units": "paired sign-flip randomization test swapping single units (non-0/1 metrics or means)",
}


@dataclass(frozen=True)
class PairedComparison:
    """``a - b`` on one metric and scope over the same units.

    Attributes:
        metric: the compared metric.
        scope: ``"all"``, a subset, ``"subset_mean"`` or a paper grouping.
        n_units: the matched units in the scope on which the metric is defined.
        n_cases: the cases those units belong to.
        a, b: the metric of each evaluation on those units (percentages).
        difference: ``a - b`` in percentage points.
        ci: paired percentile bootstrap interval of the difference; ``ci_level`` its coverage.
        p_value: two-sided p-value of "no difference".
        test: one of :data:`TESTS`.
        resampling: ``"cases"`` or ``"units"``: what the interval and the test resample.
        a_only, b_only: units that only ``a`` (only ``b``) gets right, for 0/1 metrics; else None.
    """

    metric: str
    scope: str
    n_units: int
    n_cases: int
    a: float
    b: float
    difference: float
    ci: tuple[float, float]
    ci_level: float
    p_value: float
    test: str
    resampling: str
    a_only: int | None = None
    b_only: int | None = None

    def as_json(self) -> dict[str, Any]:
        """``{"metric", "scope", "a", "b", "diff", "ci95", "p_value", "test", "n_cases", "n_units"}``
        at full precision (``spotdiff compare --json``)."""
        return {
            "metric": self.metric,
            "scope": self.scope,
            "a": self.a,
            "b": self.b,
            "diff": self.difference,
            "ci95": [self.ci[0], self.ci[1]],
            "p_value": self.p_value,
            "test": self.test,
            "n_cases": self.n_cases,
            "n_units": self.n_units,
        }


def _is_binary(v: np.ndarray) -> bool:
    d = v[~np.isnan(v)]
    return bool(np.all((d == 0.0) | (d == 1.0)))


def scope_subsets(ev: Evaluation, scope: str | None) -> list[str | None]:
    """The parts of a scope: ``[None]`` (every unit) for ``"all"``, the subset itself, or the subsets
    a mean scope averages."""
    if scope is None or scope == "all":
        return [None]
    if scope in ev.mean_scopes:
        return list(ev.mean_scopes[scope])
    if scope in set(ev.subsets.tolist()):
        return [scope]
    raise DataError(f"no units to compare in scope {scope!r}")


def mcnemar(xa: np.ndarray, xb: np.ndarray) -> tuple[float, int, int]:
    """The exact McNemar test of two aligned 0/1 columns (NaN in ``xa`` drops the unit): the two-sided
    binomial p-value of the discordant counts, and the counts (a right only, b right only).

    >>> mcnemar(np.array([1.0, 1.0, 0.0, np.nan]), np.array([0.0, 1.0, 0.0, 1.0]))
    (1.0, 1, 0)
    """
    from scipy.stats import binomtest  # scipy.stats costs half a second: only a comparison pays it

    d = ~np.isnan(xa)
    a_only = int(np.sum((xa[d] == 1) & (xb[d] == 0)))
    b_only = int(np.sum((xa[d] == 0) & (xb[d] == 1)))
    p = 1.0 if a_only + b_only == 0 else float(binomtest(a_only, a_only + b_only, 0.5).pvalue)
    return min(p, 1.0), a_only, b_only


def _aligned(eval_a: Evaluation, eval_b: Evaluation, parts: list, scope: str) -> tuple:
    """The units of ``scope`` in both evaluations, ``b``'s aligned to ``a``'s order: ``a``'s unit ids, both
    value columns, ``a``'s tags and the unit positions of each part (one part for the whole scope)."""

    def in_scope(e: Evaluation) -> np.ndarray:
        if parts == [None]:
            return np.ones(e.n_units, dtype=bool)
        return np.isin(e.subsets, np.array(parts, dtype=object))

    mask_a, mask_b = in_scope(eval_a), in_scope(eval_b)
    ids_a, ids_b = eval_a.unit_ids[mask_a], eval_b.unit_ids[mask_b]
    set_a, set_b = set(ids_a.tolist()), set(ids_b.tolist())
    if set_a != set_b:
        only_a, only_b = sorted(set_a - set_b), sorted(set_b - set_a)
        raise DataError(
            f"paired comparison needs the same units: {len(only_a)} only in a (e.g. {only_a[:3]}), "
            f"{len(only_b)} only in b (e.g. {only_b[:3]})"
        )
    if not set_a:
        raise DataError(f"no units to compare in scope {scope!r}")
    va, ga = eval_a.select(mask_a)
    vb, _ = eval_b.select(mask_b)
    pos_b = {u: k for k, u in enumerate(ids_b.tolist())}  # align b to a's unit order
    order = np.fromiter((pos_b[u] for u in ids_a.tolist()), dtype=int, count=len(ids_a))
    vb = {m: v[order] for m, v in vb.items()}
    cols = [np.arange(len(ids_a))] if parts == [None] else [np.flatnonzero(ga["subset"] == p) for p in parts]
    return ids_a, va, vb, ga, cols


def paired_comparison(
    eval_a: Evaluation,
    eval_b: Evaluation,
    metric: str,
    *,
    subset: str | None = None,
    n_boot: int | None = None,
    n_perm: int = 10_000,
    seed: int | None = None,
    ci: float | None = None,
) -> PairedComparison:
    """Compare two evaluations of the same units on ``metric`` (``a - b``), cluster-aware.

    Units are matched by id; the two evaluations must hold exactly the same unit ids in the scope
    and come from the same protocol. Which test is used when, with the formulas: docs/statistics.md.

    Args:
        eval_a: the first evaluation (A).
        eval_b: the second (B), of the same protocol and units.
        metric: the metric compared.
        subset: the scope: None or ``"all"``, a subset, ``"subset_mean"`` or a grouping of ``eval_a``.
        n_boot: bootstrap resamples (default ``eval_a``'s).
        n_perm: the number of random swaps of the sign-flip test.
        seed: seed of the resamples and swaps (default ``eval_a``'s).
        ci: the interval's coverage (default ``eval_a``'s).
    """
    if eval_a.protocol.name != eval_b.protocol.name:
        raise ConfigError(f"cannot compare protocol {eval_a.protocol.name!r} with {eval_b.protocol.name!r}")
    protocol = eval_a.protocol
    if metric not in protocol.metrics:
        raise ConfigError(
            f"protocol {protocol.name!r} has no metric {metric!r}; it has {', '.join(protocol.metrics)}"
        )
    n_boot = eval_a.n_boot if n_boot is None else n_boot
    seed = eval_a.seed if seed is None else seed
    ci = eval_a.ci if ci is None else ci
    scope = "all" if subset is None else subset
    parts = scope_subsets(eval_a, scope)

    ids_a, va, vb, ga, cols = _aligned(eval_a, eval_b, parts, scope)

    if metric in protocol.unit_metrics:  # units where the metric is defined (e.g. image queries)
        defined = ~np.isnan(va[metric]) | ~np.isnan(vb[metric])
    else:
        defined = np.ones(len(ids_a), dtype=bool)
    n_defined = int(defined.sum())
    n_cases = len(set(ga["case"][defined].tolist()))

    def value(v: dict[str, np.ndarray]) -> float:
        per_part = [protocol.aggregate({m: x[c] for m, x in v.items()}, {t: g[c] for t, g in ga.items()}) for c in cols]
        return float(np.mean([p.get(metric, math.nan) for p in per_part]))

    a_val, b_val = value(va), value(vb)
    diff = a_val - b_val
    clustered = clusters(ga, len(ids_a)) is not None
    paired = _Paired(protocol, metric, va, vb, ga, cols)
    lo, hi = (math.nan, math.nan)
    if n_boot > 0:
        lo, hi = paired.interval(parts, n_boot, seed, ci)
    resampling = "cases" if clustered else "units"
    xa, xb = va.get(metric), vb.get(metric)
    binary = (
        xa is not None
        and np.array_equal(np.isnan(xa), np.isnan(xb))
        and _is_binary(xa)
        and _is_binary(xb)
    )
    a_only = b_only = None
    if binary:
        p_mc, a_only, b_only = mcnemar(xa, xb)
        if not clustered and len(cols) == 1:
            return PairedComparison(
                metric, scope, n_defined, n_cases, a_val, b_val, diff, (lo, hi), ci, p_mc, "mcnemar-exact",
                resampling, a_only, b_only,
            )  # fmt: skip
    if diff == 0 or math.isnan(diff):
        p = 1.0
    else:
        d_perm = paired.sign_flips(n_perm, seed, clustered)
        tol = 1e-9 * max(1.0, abs(diff))
        p = float((1 + np.sum(np.abs(d_perm) >= abs(diff) - tol)) / (1 + n_perm))
    test = "sign-flip-cases" if clustered else "sign-flip-units"
    return PairedComparison(
        metric, scope, n_defined, n_cases, a_val, b_val, diff, (lo, hi), ci, p, test, resampling, a_only, b_only
    )


@dataclass(frozen=True)
class _Paired:
    """The outcomes of two evaluations on the same units, in the same order, and the scope's parts."""

    protocol: Protocol
    metric: str
    #: per-unit outcomes of a and of b
    va: Mapping[str, np.ndarray]
    vb: Mapping[str, np.ndarray]
    #: the units' groupings (``case``, ``subset``, ...)
    ga: Mapping[str, np.ndarray]
    #: the unit indices of each part of the scope
    cols: list[np.ndarray]

    def interval(self, parts: list[str | None], n_boot: int, seed: int, ci: float) -> tuple[float, float]:
        """Percentile interval of ``a - b``: the same resamples (of cases or units) for both, drawn in
        each part (``parts``, one per column set) separately and averaged over the parts (stratified
        for a mean over subsets).

        Args:
            parts: the scope's subsets (None: all), one per entry of :attr:`cols`.
            n_boot: resamples.
            seed: seeds each part's generator.
            ci: the interval's coverage.
        """
        per_part = []
        for c, part in zip(self.cols, parts, strict=True):
            pa, pb = {m: x[c] for m, x in self.va.items()}, {m: x[c] for m, x in self.vb.items()}
            g = {t: x[c] for t, x in self.ga.items()}

            def diff(idx: np.ndarray, pa=pa, pb=pb, g=g) -> dict[str, np.ndarray]:
                da = self.protocol.aggregate_resamples(pa, g, idx)[self.metric]
                db = self.protocol.aggregate_resamples(pb, g, idx)[self.metric]
                return {"d": da - db}

            rng = scope_rng(seed, "all" if part is None else part)
            per_part.append(resample_units(diff, g, len(c), n_boot, rng)["d"])
        lo, hi = percentile_ci(np.mean(np.stack(per_part), axis=0), ci)
        return lo, hi

    def sign_flips(self, n_perm: int, seed: int, clustered: bool) -> np.ndarray:
        """``[n_perm]`` values of ``a - b`` with the A/B outcomes of whole cases (``clustered``) or
        single units swapped at random, each with probability 1/2 (the same swaps in every part)."""
        n = len(self.ga["case"])
        if clustered:
            _, unit_cluster = np.unique(np.asarray(self.ga["case"]), return_inverse=True)
            unit_cluster = unit_cluster.reshape(-1)
        else:
            unit_cluster = np.arange(n)
        n_clusters = int(unit_cluster.max()) + 1
        stacked = []
        for c in self.cols:  # each part's units stacked twice: [a outcomes, b outcomes]
            both = {m: np.concatenate([self.va[m][c], self.vb[m][c]]) for m in self.va}
            stacked.append((c, both, {t: np.concatenate([x[c], x[c]]) for t, x in self.ga.items()}))

        def flipped(coins: np.ndarray) -> dict[str, np.ndarray]:
            d = []
            for c, both, both_groups in stacked:
                flip = coins.astype(bool)[:, unit_cluster[c]]  # swap unit k's outcomes where flip[:, k]
                base = np.arange(len(c))[None, :]
                da = self.protocol.aggregate_resamples(both, both_groups, base + len(c) * flip)[self.metric]
                db = self.protocol.aggregate_resamples(both, both_groups, base + len(c) * ~flip)[self.metric]
                d.append(da - db)
            return {"d": np.mean(np.stack(d), axis=0)}

        return resample(flipped, n_clusters, n_perm, np.random.default_rng([seed, 1]), high=2, width=n)["d"]
