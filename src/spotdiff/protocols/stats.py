"""Evaluation of a protocol over cases, percentile-bootstrap confidence intervals, paired comparisons.

``evaluate(protocol, cases, score_matrices)`` runs the protocol on every case, stacks the per-unit
outcomes, aggregates them overall (``"all"``) and per subset, and attaches a percentile bootstrap
interval to every metric: units are resampled with replacement (``numpy.random.default_rng(seed)``)
and the protocol's aggregate is recomputed on each resample. Mean metrics (and metrics derived from
means, such as ``min(p_c, p_f)``) are computed for all resamples at once from a ``[B, n]`` index
matrix, in chunks that bound memory.

``paired_comparison(a, b, metric)`` compares two evaluations of the same units: the difference of the
aggregate metric, a paired bootstrap interval for it (the same resampled units for both), and a
p-value: the exact McNemar test (two-sided binomial test on the discordant units) when the metric is
a per-unit 0/1 outcome, otherwise a paired permutation test (each unit's two outcomes swapped with
probability 1/2).
"""

from __future__ import annotations

import math
import numbers
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import binomtest

from spotdiff.cases import Case
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import round_values
from spotdiff.protocols import columns
from spotdiff.protocols.base import Protocol, get_protocol
from spotdiff.protocols.columns import CodeColumn, FloatColumn, StringColumn

#: Upper bound on the elements of one chunk of the resampling index matrix.
CHUNK_ELEMENTS = 4_000_000


def ci_key(metric: str, ci: float) -> str:
    """``accuracy_ci95`` for ``ci=0.95``."""
    return f"{metric}_ci{round(ci * 100):d}"


@dataclass
class Evaluation:
    """A protocol's results over a set of cases.

    Attributes:
        protocol: the protocol instance.
        unit_ids: unit names, aligned with every array below (unique).
        case_ids: each unit's case id.
        subsets: each unit's subset.
        values: metric -> per-unit float array (0/1 for strict outcomes, NaN where undefined); only
            the protocol's unit metrics (derived metrics have no per-unit value).
        groups: tag -> per-unit array of the case's tag values (``""`` when absent); always holds
            ``"case"`` and ``"subset"``.
        metrics: ``{"all": {metric: value, metric_ci95: [lo, hi]}, "<subset>": {...}}``, percentages
            at full precision (NaN where undefined). :meth:`metrics_json` rounds them.
        boot: scope ("all" or a subset) -> metric -> the ``[n_boot]`` bootstrap values.
        n_cases, n_boot, seed, ci: what was evaluated and how.
    """

    protocol: Protocol
    unit_ids: np.ndarray
    case_ids: np.ndarray
    subsets: np.ndarray
    values: dict[str, np.ndarray]
    groups: dict[str, np.ndarray]
    metrics: dict[str, dict[str, Any]]
    boot: dict[str, dict[str, np.ndarray]] = field(repr=False)
    n_cases: int = 0
    n_boot: int = 0
    seed: int = 0
    ci: float = 0.95

    @property
    def n_units(self) -> int:
        return len(self.unit_ids)

    def metrics_json(self, digits: int = 2) -> dict[str, dict[str, Any]]:
        """The ``metrics`` block of ``metrics.json``: rounded to ``digits``, NaN as ``None``."""
        return round_values(self.metrics, digits)

    def records(self) -> list[dict[str, Any]]:
        """One dict per unit: ``unit``, ``case``, ``subset`` and each unit metric (NaN as ``None``)."""
        names = list(self.values)
        cols = [self.values[m] for m in names]
        out = []
        for k, uid in enumerate(self.unit_ids):
            rec: dict[str, Any] = {
                "unit": str(uid),
                "case": str(self.case_ids[k]),
                "subset": str(self.subsets[k]),
            }
            for m, col in zip(names, cols, strict=True):
                v = float(col[k])
                rec[m] = None if math.isnan(v) else v
            out.append(rec)
        return out

    def by_case(self) -> dict[str, list[dict[str, Any]]]:
        """:meth:`records` grouped by case id, in case order (for ``scores.jsonl``)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for rec in self.records():
            out.setdefault(rec["case"], []).append(rec)
        return out

    def select(self, mask: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The unit values and groups of the units in ``mask``."""
        return ({m: v[mask] for m, v in self.values.items()}, {g: v[mask] for g, v in self.groups.items()})


@dataclass(frozen=True)
class PairedComparison:
    """``a - b`` on one metric over the same units.

    Attributes:
        metric: the compared metric.
        scope: ``"all"`` or the subset compared.
        n_units: the number of matched units on which the metric is defined.
        a, b: the metric of each evaluation on those units (percentages).
        difference: ``a - b`` in percentage points.
        ci: paired percentile bootstrap interval of the difference; ``ci_level`` its coverage.
        p_value: two-sided p-value of "no difference".
        test: ``"mcnemar-exact"`` or ``"permutation"``.
        a_only, b_only: discordant units (``a`` right and ``b`` wrong, and vice versa) for the
            McNemar test; ``None`` for the permutation test.
    """

    metric: str
    scope: str
    n_units: int
    a: float
    b: float
    difference: float
    ci: tuple[float, float]
    ci_level: float
    p_value: float
    test: str
    a_only: int | None = None
    b_only: int | None = None


# --------------------------------------------------------------------------------- bootstrap
def _scope_rng(seed: int, scope: str) -> np.random.Generator:
    """``default_rng(seed)`` for "all"; an independent, name-keyed stream for each subset."""
    if scope == "all":
        return np.random.default_rng(seed)
    return np.random.default_rng([seed, zlib.crc32(scope.encode())])


def _resample(
    fn: Callable[[np.ndarray], dict[str, np.ndarray]],
    n: int,
    n_boot: int,
    rng: np.random.Generator,
    high: int | None = None,
) -> dict[str, np.ndarray]:
    """Apply ``fn`` to ``n_boot`` rows of ``n`` draws in ``[0, high)`` (default ``n``: resampling
    indices), drawn in memory-bounded chunks."""
    per_chunk = max(1, CHUNK_ELEMENTS // max(n, 1))
    parts: dict[str, list[np.ndarray]] = {}
    done = 0
    while done < n_boot:
        b = min(per_chunk, n_boot - done)
        idx = rng.integers(0, n if high is None else high, size=(b, n))
        for m, v in fn(idx).items():
            parts.setdefault(m, []).append(np.asarray(v, dtype=float))
        done += b
    return {m: np.concatenate(v) for m, v in parts.items()}


def _percentile_ci(samples: np.ndarray, ci: float) -> list[float]:
    lo_q, hi_q = 50.0 * (1.0 - ci), 50.0 * (1.0 + ci)
    if samples.size == 0 or np.isnan(samples).all():
        return [float("nan"), float("nan")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(samples, [lo_q, hi_q])
    return [float(lo), float(hi)]


def bootstrap(
    protocol: Protocol,
    values: dict[str, np.ndarray],
    groups: dict[str, np.ndarray],
    *,
    n_boot: int = 1000,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """``[n_boot]`` bootstrap values of each reported metric.

    Units are resampled with replacement when each case is one unit, or when one case holds every
    unit (a retrieval gallery, whose units are its queries). When cases hold several units (SPEC's
    K x K sets give one unit per query), whole cases are resampled (a cluster bootstrap), since
    the units of one case share its images and texts and are not independent.
    """
    arrays = list(groups.values()) or list(values.values())
    n = len(arrays[0]) if arrays else 0
    if n == 0 or n_boot <= 0:
        return {}
    cases = groups.get("case")
    if cases is not None:
        _, inverse, sizes = np.unique(cases, return_inverse=True, return_counts=True)
        if 1 < len(sizes) < n:
            return _cluster_resample(protocol, values, groups, inverse, sizes, n_boot, rng)
    return _resample(lambda idx: protocol.aggregate_resamples(values, groups, idx), n, n_boot, rng)


def _cluster_resample(
    protocol: Protocol,
    values: dict[str, np.ndarray],
    groups: dict[str, np.ndarray],
    inverse: np.ndarray,
    sizes: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Bootstrap by resampling cases; each resample takes all units of the drawn cases."""
    order = np.argsort(inverse, kind="stable")  # unit indices grouped by case
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    parts: dict[str, list[np.ndarray]] = {}
    for _ in range(n_boot):
        pick = rng.integers(0, len(sizes), size=len(sizes))
        lengths = sizes[pick]
        offsets = np.repeat(starts[pick] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        idx = order[offsets + np.arange(int(lengths.sum()))][None, :]
        for m, v in protocol.aggregate_resamples(values, groups, idx).items():
            parts.setdefault(m, []).append(np.asarray(v, dtype=float))
    return {m: np.concatenate(v) for m, v in parts.items()}


# --------------------------------------------------------------------------------- evaluate
class UnitTable:
    """Per-unit outcomes collected case by case (streaming: no score matrix is kept).

    ``add(unit_id, case_id, tags, outcomes)`` appends one unit; :meth:`add_case` runs a protocol on
    one case and appends its units. :func:`evaluate_table` aggregates the table. Storage is columnar
    (:mod:`spotdiff.protocols.columns`): a float64 column per outcome, int32 codes per tag, compact
    strings for the ids, filled every ``CHUNK`` units, so a million units take tens of megabytes.
    Unit ids must be unique; :meth:`arrays` checks it.
    """

    def __init__(self) -> None:
        self._unit_ids = StringColumn()
        self._case_ids = StringColumn()
        self._tags: dict[str, CodeColumn] = {}
        self._values: dict[str, FloatColumn] = {}
        self._pending: list[tuple[str, str, dict[str, int], Mapping[str, float]]] = []
        self._last_tags: Mapping[str, str] | None = None
        self._last_codes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._unit_ids) + len(self._pending)

    def add(self, unit_id: str, case_id: str, tags: Mapping[str, str], outcomes: Mapping[str, float]) -> None:
        if "subset" not in tags:
            raise DataError(f"unit {unit_id!r}: tags must include 'subset'")
        if tags is not self._last_tags:  # a case's units share one tags dict
            self._last_tags = tags
            for name in tags:
                if name not in self._tags:
                    self._tags[name] = CodeColumn()
            self._last_codes = {name: self._tags[name].code(str(value)) for name, value in tags.items()}
        self._pending.append((str(unit_id), str(case_id), self._last_codes, outcomes))
        if len(self._pending) >= columns.CHUNK:
            self._pack()

    def _pack(self) -> None:
        """Move the pending units into the columns (columns new since then start with ``""`` / NaN)."""
        rows = self._pending
        if not rows:
            return
        count = len(rows)
        for r in rows:
            for metric in r[3]:
                if metric not in self._values:
                    self._values[metric] = FloatColumn()
        blocks = {}
        for metric in self._values:
            try:
                blocks[metric] = np.fromiter((r[3].get(metric, math.nan) for r in rows), dtype=float, count=count)
            except (TypeError, ValueError) as exc:
                bad = next((r[0] for r in rows if not isinstance(r[3].get(metric, 0.0), numbers.Real)), "?")
                raise DataError(f"unit {bad!r}: outcome {metric!r} must be a number ({exc})") from None
        self._pending = []
        done = len(self._unit_ids)
        self._unit_ids.extend([r[0] for r in rows])
        self._case_ids.extend([r[1] for r in rows])
        for name, column in self._tags.items():
            empty = column.code("")
            column.extend_constant(empty, done - len(column))
            column.extend(np.fromiter((r[2].get(name, empty) for r in rows), dtype=np.int32, count=count))
        for metric, column in self._values.items():
            column.extend_constant(math.nan, done - len(column))
            column.extend(blocks[metric])

    def add_case(self, protocol: Protocol, case: Case, scores: Any) -> list[tuple[str, dict[str, float]]]:
        """Run ``protocol`` on ``case`` and append its units; returns ``(unit id, outcome)`` pairs."""
        units = protocol.units(case, scores)
        for uid, outcome in units:
            self.add(uid, case.id, case.tags, outcome)
        return units

    @property
    def unit_ids(self) -> np.ndarray:
        """Every unit's id (an object array of ``str``)."""
        self._pack()
        return self._unit_ids.objects()

    @property
    def case_ids(self) -> np.ndarray:
        """Every unit's case id (an object array of ``str``)."""
        self._pack()
        return self._case_ids.objects()

    @property
    def n_cases(self) -> int:
        """The number of distinct case ids."""
        self._pack()
        return int(np.unique(self._case_ids.array()).size)

    def arrays(self, protocol: Protocol) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """``(values, groups)``: metric -> per-unit floats (NaN where absent), tag -> per-unit str."""
        self._pack()
        ids, counts = np.unique(self._unit_ids.array(), return_counts=True)
        if np.any(counts > 1):
            raise DataError(
                f"duplicate unit id {str(ids[counts > 1][0])!r}: case ids must be unique within an evaluation"
            )
        n = len(self)
        values = {
            m: self._values[m].array().copy() if m in self._values else np.full(n, math.nan)
            for m in protocol.unit_metrics
        }
        groups = {name: column.objects() for name, column in self._tags.items()}
        groups["case"] = self.case_ids
        groups["subset"] = groups.get("subset", np.zeros(0, dtype=object))
        return values, groups


def _as_matrices(cases: Sequence[Case], score_matrices: Any) -> list[Any]:
    if isinstance(score_matrices, Mapping):
        try:
            return [score_matrices[c.id] for c in cases]
        except KeyError as exc:
            raise DataError(f"no score matrix for case {exc.args[0]}") from None
    mats = list(score_matrices)
    if len(mats) != len(cases):
        raise DataError(f"{len(mats)} score matrices for {len(cases)} cases")
    return mats


def evaluate(
    protocol: Protocol | str,
    cases: Sequence[Case],
    score_matrices: Sequence[np.ndarray] | Mapping[str, np.ndarray],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> Evaluation:
    """Run ``protocol`` over ``cases`` and aggregate, with percentile bootstrap intervals.

    Args:
        protocol: a protocol instance or its registered name.
        cases: the cases, in order.
        score_matrices: one matrix per case (aligned with ``cases``), or a mapping case id -> matrix.
        n_boot: bootstrap resamples (0 leaves the ``_ci`` entries out).
        seed: seed of ``numpy.random.default_rng`` for the resampling.
        ci: coverage of the interval; the key is ``<metric>_ci95`` for 0.95.
    """
    if isinstance(protocol, str):
        protocol = get_protocol(protocol)
    cases = list(cases)
    mats = _as_matrices(cases, score_matrices)
    table = UnitTable()
    for case, scores in zip(cases, mats, strict=True):
        table.add_case(protocol, case, scores)
    return evaluate_table(protocol, table, n_boot=n_boot, seed=seed, ci=ci, n_cases=len(cases))


def evaluate_units(
    protocol: Protocol | str, table: UnitTable, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, dict[str, Any]]:
    """The ``metrics`` block (full precision) of :func:`evaluate_table`, without building the
    :class:`Evaluation` (whose id arrays cost a Python string per unit)."""
    protocol = _checked(protocol, ci)
    values, groups = table.arrays(protocol)
    return _aggregate(protocol, values, groups, n_boot=n_boot, seed=seed, ci=ci)[0]


def _checked(protocol: Protocol | str, ci: float) -> Protocol:
    if not 0.0 < ci < 1.0:
        raise ConfigError(f"ci must be in (0, 1), got {ci}")
    return get_protocol(protocol) if isinstance(protocol, str) else protocol


def _aggregate(
    protocol: Protocol,
    values: dict[str, np.ndarray],
    groups: dict[str, np.ndarray],
    *,
    n_boot: int,
    seed: int,
    ci: float,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, np.ndarray]]]:
    """``(metrics, boot)`` overall and per subset (see :class:`Evaluation`)."""
    subsets = groups["subset"]
    n = len(subsets)
    metrics: dict[str, dict[str, Any]] = {}
    boot: dict[str, dict[str, np.ndarray]] = {}
    scopes = [("all", np.ones(n, dtype=bool))]
    scopes += [(str(s), subsets == s) for s in sorted(set(subsets.tolist()))]
    for scope, mask in scopes:
        if scope != "all" and mask.all():  # a single subset: the same units as "all"
            metrics[scope], boot[scope] = dict(metrics["all"]), boot["all"]
            continue
        if mask.all():
            v, g = values, groups
        else:
            v, g = ({m: a[mask] for m, a in values.items()}, {t: a[mask] for t, a in groups.items()})
        empty = {m: float("nan") for m in protocol.metrics}
        point = protocol.aggregate(v, g) if mask.any() else empty
        entry: dict[str, Any] = {}
        samples = bootstrap(protocol, v, g, n_boot=n_boot, rng=_scope_rng(seed, scope)) if n_boot > 0 else {}
        boot[scope] = samples
        for m in protocol.metrics:
            if m not in point:
                continue
            entry[m] = point[m]
            if n_boot > 0:
                entry[ci_key(m, ci)] = _percentile_ci(samples.get(m, np.array([])), ci)
        metrics[scope] = entry
    return metrics, boot


def evaluate_table(
    protocol: Protocol | str,
    table: UnitTable,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    n_cases: int | None = None,
) -> Evaluation:
    """Aggregate a :class:`UnitTable` overall and per subset, with percentile bootstrap intervals."""
    protocol = _checked(protocol, ci)
    values, groups = table.arrays(protocol)
    metrics, boot = _aggregate(protocol, values, groups, n_boot=n_boot, seed=seed, ci=ci)
    return Evaluation(
        protocol=protocol,
        unit_ids=table.unit_ids,
        case_ids=groups["case"],
        subsets=groups["subset"],
        values=values,
        groups=groups,
        metrics=metrics,
        boot=boot,
        n_cases=table.n_cases if n_cases is None else n_cases,
        n_boot=n_boot,
        seed=seed,
        ci=ci,
    )


# --------------------------------------------------------------------------------- paired
def _is_binary(v: np.ndarray) -> bool:
    d = v[~np.isnan(v)]
    return bool(np.all((d == 0.0) | (d == 1.0)))


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
    """Compare two evaluations of the same units on ``metric`` (``a - b``).

    Units are matched by id; the two evaluations must hold exactly the same unit ids (in the scope),
    and come from the same protocol. ``n_boot``, ``seed`` and ``ci`` default to ``eval_a``'s.
    The p-value is the exact McNemar test for per-unit 0/1 metrics, a paired permutation test
    (``n_perm`` random swaps, ``p = (1 + #|d*| >= |d|) / (1 + n_perm)``) for anything else,
    derived metrics included.
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

    def scoped(e: Evaluation) -> np.ndarray:
        return np.ones(e.n_units, dtype=bool) if subset is None else (e.subsets == subset)

    mask_a, mask_b = scoped(eval_a), scoped(eval_b)
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
    # align b to a's unit order
    pos_b = {u: k for k, u in enumerate(ids_b.tolist())}
    order = np.fromiter((pos_b[u] for u in ids_a.tolist()), dtype=int, count=len(ids_a))
    vb = {m: v[order] for m, v in vb.items()}
    n = len(ids_a)

    if metric in protocol.unit_metrics:  # units where the metric is defined (e.g. image queries)
        n_defined = int(np.sum(~np.isnan(va[metric]) | ~np.isnan(vb[metric])))
    else:
        n_defined = n
    a_val = protocol.aggregate(va, ga)[metric]
    b_val = protocol.aggregate(vb, ga)[metric]
    diff = a_val - b_val

    # paired bootstrap: the same resampled units for both runs
    rng = np.random.default_rng(seed)

    def boot_diff(idx: np.ndarray) -> dict[str, np.ndarray]:
        da = protocol.aggregate_resamples(va, ga, idx)[metric]
        db = protocol.aggregate_resamples(vb, ga, idx)[metric]
        return {"d": da - db}

    if n_boot > 0:
        d_samples = _resample(boot_diff, n, n_boot, rng)["d"]
        lo, hi = _percentile_ci(d_samples, ci)
    else:
        lo = hi = float("nan")

    if metric in protocol.unit_metrics:
        xa, xb = va[metric], vb[metric]
        same_defined = np.array_equal(np.isnan(xa), np.isnan(xb))
        if same_defined and _is_binary(xa) and _is_binary(xb):
            d = ~np.isnan(xa)
            a_only = int(np.sum((xa[d] == 1) & (xb[d] == 0)))
            b_only = int(np.sum((xa[d] == 0) & (xb[d] == 1)))
            p = 1.0 if a_only + b_only == 0 else float(binomtest(a_only, a_only + b_only, 0.5).pvalue)
            return PairedComparison(
                metric,
                scope,
                n_defined,
                a_val,
                b_val,
                diff,
                (lo, hi),
                ci,
                min(p, 1.0),
                "mcnemar-exact",
                a_only,
                b_only,
            )

    # paired permutation: swap each unit's (a, b) outcomes with probability 1/2
    both = {m: np.concatenate([va[m], vb[m]]) for m in va}
    both_groups = {g: np.concatenate([v, v]) for g, v in ga.items()}
    perm_rng = np.random.default_rng([seed, 1])
    base = np.arange(n)

    def perm_diff(coins: np.ndarray) -> dict[str, np.ndarray]:
        flip = coins.astype(bool)  # swap unit k's outcomes where flip[:, k]
        ia = base[None, :] + n * flip
        ib = base[None, :] + n * ~flip
        da = protocol.aggregate_resamples(both, both_groups, ia)[metric]
        db = protocol.aggregate_resamples(both, both_groups, ib)[metric]
        return {"d": da - db}

    if diff == 0 or math.isnan(diff):
        p = 1.0
    else:
        d_perm = _resample(perm_diff, n, n_perm, perm_rng, high=2)["d"]
        tol = 1e-9 * max(1.0, abs(diff))
        extreme = np.sum(np.abs(d_perm) >= abs(diff) - tol)
        p = float((1 + extreme) / (1 + n_perm))
    return PairedComparison(metric, scope, n_defined, a_val, b_val, diff, (lo, hi), ci, p, "permutation")
