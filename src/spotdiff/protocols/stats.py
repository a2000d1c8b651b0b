"""Evaluation of a protocol over cases, with percentile-bootstrap confidence intervals.

:func:`evaluate` aggregates per-unit outcomes pooled (``"all"``), per subset, as the unweighted
``"subset_mean"`` and per paper grouping, each with a cluster or stratified bootstrap interval
(docs/statistics.md). Paired comparisons live in :mod:`spotdiff.protocols.paired`.
"""

from __future__ import annotations

import math
import numbers
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import round_values
from spotdiff.protocols import columns
from spotdiff.protocols.base import Protocol, get_protocol
from spotdiff.protocols.columns import CodeColumn, FloatColumn, StringColumn
from spotdiff.protocols.diagnostics import BOW_SCOPE, BOW_TAG

#: Upper bound on the elements of one chunk of the resampling index matrix.
CHUNK_ELEMENTS = 4_000_000
#: The scope of the unweighted mean over subsets.
SUBSET_MEAN = "subset_mean"
#: The most bootstrap resamples (``--n-boot``): every resample keeps one float64 per metric and scope
#: until the intervals are taken (10**8 held 3.4 GB); 1,000 to 10,000 give stable 95% intervals.
MAX_N_BOOT = 100_000


def check_n_boot(n_boot: int) -> int:
    """``n_boot`` when it is an integer in ``[0, MAX_N_BOOT]``; else a :class:`ConfigError` that says
    what so many resamples would hold in memory.

    Args:
        n_boot: bootstrap resamples asked for (0: no intervals).

    >>> check_n_boot(1000)
    1000
    >>> check_n_boot(10**8)
    Traceback (most recent call last):
    ...
    spotdiff.errors.ConfigError: --n-boot 100,000,000 is above the most, 100,000: ... would hold 800 MB for each ...
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, numbers.Integral):
        raise ConfigError(f"--n-boot must be an integer, got {n_boot!r}")
    if n_boot < 0:
        raise ConfigError(f"--n-boot must be >= 0, got {n_boot}")
    if n_boot > MAX_N_BOOT:
        raise ConfigError(
            f"--n-boot {n_boot:,} is above the most, {MAX_N_BOOT:,}: its bootstrap values alone would hold "
            f"{_megabytes(8 * n_boot)} for each metric and each scope (all, every subset, every mean), about twice "
            "that at peak; 1,000 to 10,000 resamples give stable 95% intervals"
        )
    return int(n_boot)


def _megabytes(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:,.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:,.0f} MB"


def ci_key(metric: str, ci: float) -> str:
    """``accuracy_ci95`` for ``ci=0.95``."""
    return f"{metric}_ci{round(ci * 100):d}"


@dataclass
class Evaluation:
    """A protocol's results over a set of cases.

    Attributes:
        protocol: the protocol instance.
        table: the units aggregated; :attr:`unit_ids` reads their names from it when first asked (a Python
            string per unit, which a run that only writes the metrics never builds).
        case_ids: each unit's case id.
        subsets: each unit's subset.
        values: metric -> per-unit float array (0/1 for strict outcomes, NaN where undefined); only
            the protocol's unit metrics (derived metrics have no per-unit value).
        groups: tag -> per-unit array of the case's tag values (``""`` when absent); always holds
            ``"case"`` and ``"subset"``.
        metrics: ``{"all": {metric: value, metric_ci95: [lo, hi]}, "subset_mean": {...},
            "<group>": {...}, "<subset>": {...}}``, percentages at full precision (NaN where
            undefined). :meth:`metrics_json` rounds them for display.
        boot: scope -> metric -> the ``[n_boot]`` bootstrap values.
        mean_scopes: ``subset_mean`` and each paper grouping -> the subsets it averages.
        missing_groups: paper groupings left out because some of their subsets were not evaluated
            -> those subsets.
        n_cases, n_boot, seed, ci: what was evaluated and how.
    """

    protocol: Protocol
    table: UnitTable = field(repr=False)
    case_ids: np.ndarray
    subsets: np.ndarray
    values: dict[str, np.ndarray]
    groups: dict[str, np.ndarray]
    metrics: dict[str, dict[str, Any]]
    boot: dict[str, dict[str, np.ndarray]] = field(repr=False)
    mean_scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    missing_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    n_cases: int = 0
    n_boot: int = 0
    seed: int = 0
    ci: float = 0.95

    @cached_property
    def unit_ids(self) -> np.ndarray:
        """Unit names, aligned with every array of the evaluation (unique)."""
        return self.table.unit_ids

    @property
    def n_units(self) -> int:
        return len(self.case_ids)

    def metrics_json(self, digits: int = 2) -> dict[str, dict[str, Any]]:
        """The metrics rounded to ``digits`` for display, NaN as ``None``."""
        return round_values(self.metrics, digits)

    def aggregates(self) -> dict[str, Any]:
        """What each scope of :attr:`metrics` is (the ``aggregates`` block of ``metrics.json``)."""
        return describe_aggregates(
            self.mean_scopes, self.missing_groups, self.protocol.ties, bag_of_words=BOW_SCOPE in self.metrics
        )

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


# --------------------------------------------------------------------------------- bootstrap
def scope_rng(seed: int, scope: str) -> np.random.Generator:
    """``default_rng(seed)`` for "all"; an independent, name-keyed stream for any other scope."""
    if scope == "all":
        return np.random.default_rng(seed)
    return np.random.default_rng([seed, zlib.crc32(scope.encode())])


def resample(
    fn: Callable[[np.ndarray], dict[str, np.ndarray]],
    n: int,
    n_boot: int,
    rng: np.random.Generator,
    high: int | None = None,
    width: int | None = None,
) -> dict[str, np.ndarray]:
    """Apply ``fn`` to ``n_boot`` rows of ``n`` draws in ``[0, high)``, drawn in memory-bounded chunks.

    Args:
        fn: ``[b, n]`` index rows -> ``{name: [b]}``.
        n: draws per row.
        n_boot: the number of rows.
        rng: the random generator.
        high: draws lie in ``[0, high)`` (default ``n``).
        width: the row length ``fn`` expands a row to, for the chunk size (default ``n``).
    """
    per_chunk = max(1, CHUNK_ELEMENTS // max(width or n, 1))
    parts: dict[str, list[np.ndarray]] = {}
    done = 0
    while done < n_boot:
        b = min(per_chunk, n_boot - done)
        idx = rng.integers(0, n if high is None else high, size=(b, n))
        for m, v in fn(idx).items():
            parts.setdefault(m, []).append(np.asarray(v, dtype=float))
        done += b
    return {m: np.concatenate(v) for m, v in parts.items()}


def percentile_ci(samples: np.ndarray, ci: float) -> list[float]:
    """The percentile interval of ``samples`` with coverage ``ci`` (NaN samples ignored)."""
    lo_q, hi_q = 50.0 * (1.0 - ci), 50.0 * (1.0 + ci)
    if samples.size == 0 or np.isnan(samples).all():
        return [float("nan"), float("nan")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(samples, [lo_q, hi_q])
    return [float(lo), float(hi)]


def clusters(groups: Mapping[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(cluster of each unit, cluster sizes)`` when units must move together, else None.

    Units are clustered by case when cases hold several units and there is more than one case; a
    single case holding every unit (a retrieval gallery, whose units are its queries) leaves the
    units independent, as do one-unit cases.
    """
    cases = groups.get("case")
    if cases is None or n == 0:
        return None
    _, inverse, sizes = np.unique(np.asarray(cases), return_inverse=True, return_counts=True)
    if 1 < len(sizes) < n:
        return inverse.reshape(-1), sizes
    return None


def resample_units(
    fn: Callable[[np.ndarray], dict[str, np.ndarray]],
    groups: Mapping[str, np.ndarray],
    n: int,
    n_boot: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """``fn`` (``[B, n']`` unit indices -> ``{name: [B]}``) over ``n_boot`` bootstrap resamples.

    Units are resampled with replacement, or whole cases when :func:`clusters` says the units of
    a case must move together (a cluster bootstrap: each resample draws as many cases as there are,
    with replacement, and takes all units of each).

    Args:
        fn: ``[B, n']`` unit indices -> ``{name: [B]}``.
        groups: tag -> per-unit tag values (``"case"`` decides the clusters).
        n: the number of units.
        n_boot: the number of resamples (at most :data:`MAX_N_BOOT`).
        rng: the random generator.
    """
    if n == 0 or check_n_boot(n_boot) == 0:
        return {}
    cl = clusters(groups, n)
    if cl is None:
        return resample(fn, n, n_boot, rng)
    inverse, sizes = cl
    order = np.argsort(inverse, kind="stable")  # unit indices grouped by case
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    if (sizes == sizes[0]).all():  # equal cases: whole resamples as one index matrix
        k = int(sizes[0])

        def draw(pick: np.ndarray) -> dict[str, np.ndarray]:
            return fn(order[(starts[pick][:, :, None] + np.arange(k)).reshape(len(pick), -1)])

        return resample(draw, len(sizes), n_boot, rng, width=n)
    parts: dict[str, list[np.ndarray]] = {}
    for _ in range(n_boot):
        pick = rng.integers(0, len(sizes), size=len(sizes))
        lengths = sizes[pick]
        offsets = np.repeat(starts[pick] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        idx = order[offsets + np.arange(int(lengths.sum()))][None, :]
        for m, v in fn(idx).items():
            parts.setdefault(m, []).append(np.asarray(v, dtype=float))
    return {m: np.concatenate(v) for m, v in parts.items()}


def bootstrap(
    protocol: Protocol,
    values: dict[str, np.ndarray],
    groups: dict[str, np.ndarray],
    *,
    n_boot: int = 1000,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """``[n_boot]`` bootstrap values of each reported metric (:func:`resample_units`: whole cases
    when cases hold several units, since the units of one case share its images and texts).

    Args:
        protocol: the protocol whose ``aggregate_resamples`` is applied.
        values: metric -> per-unit values.
        groups: tag -> per-unit tag values.
        n_boot: the number of resamples.
        rng: the random generator.
    """
    arrays = list(groups.values()) or list(values.values())
    n = len(arrays[0]) if arrays else 0
    return resample_units(lambda idx: protocol.aggregate_resamples(values, groups, idx), groups, n, n_boot, rng)


def subset_mean(values: Sequence[Any]) -> Any:
    """The unweighted mean of per-subset values (floats or ``[B]`` arrays); NaN when any is NaN.

    >>> float(subset_mean([80.0, 40.0, 60.0]))
    60.0
    """
    return np.mean(np.stack([np.asarray(v, dtype=float) for v in values]), axis=0)


def describe_aggregates(
    mean_scopes: Mapping[str, Sequence[str]],
    missing: Mapping[str, Sequence[str]],
    ties: str,
    *,
    bag_of_words: bool = False,
) -> dict[str, Any]:
    """The ``aggregates`` block of ``metrics.json``: what ``"all"``, each subset, ``subset_mean`` and
    each paper grouping are, how their intervals were computed, and the tie rule.

    Args:
        mean_scopes: ``subset_mean`` and each paper grouping -> the subsets it averages.
        missing: paper groupings not computed -> their subsets that were not evaluated.
        ties: the tie rule of the run.
        bag_of_words: the metrics hold the :data:`BOW_SCOPE` scope.
    """
    out: dict[str, Any] = {
        "all": "pooled: the protocol's aggregate over every unit (a micro average)",
        "<subset>": "the protocol's aggregate over the subset's units",
        "ci": "95% percentile bootstrap; a case holding several units is resampled whole; "
        "means over subsets use a stratified bootstrap (each subset resampled on its own)",
        "ties": ties,
    }
    if bag_of_words:
        out[BOW_SCOPE] = (
            "pooled over the units of the cases whose negatives have a positive's multiset of words "
            "(lowercased \\w+ tokens): no bag-of-words model can tell their texts apart"
        )
    for name, subs in mean_scopes.items():
        out[name] = {"mean_of": list(subs), "weights": "unweighted mean of the subsets' values"}
    if missing:
        out["not_computed"] = {name: {"missing_subsets": list(subs)} for name, subs in missing.items()}
    return out


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
        """Append one unit.

        Args:
            unit_id: the unit's id (unique in the table).
            case_id: the id of its case.
            tags: its case's tags, ``"subset"`` included.
            outcomes: metric -> the unit's value.
        """
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
        """Run ``protocol`` on ``case`` and append its units; returns ``(unit id, outcome)`` pairs.

        Args:
            protocol: the protocol to run.
            case: the case.
            scores: its score matrix.
        """
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
    groups: Mapping[str, Sequence[str]] | None = None,
) -> Evaluation:
    """Run ``protocol`` over ``cases`` and aggregate, with percentile bootstrap intervals.

    Args:
        protocol: a protocol instance or its registered name.
        cases: the cases, in order.
        score_matrices: one matrix per case (aligned with ``cases``), or a mapping case id -> matrix.
        n_boot: bootstrap resamples (0 leaves the ``_ci`` entries out).
        seed: seed of ``numpy.random.default_rng`` for the resampling.
        ci: coverage of the interval; the key is ``<metric>_ci95`` for 0.95.
        groups: paper groupings, name -> the subsets whose values it averages.
    """
    if isinstance(protocol, str):
        protocol = get_protocol(protocol)
    cases = list(cases)
    mats = _as_matrices(cases, score_matrices)
    table = UnitTable()
    for case, scores in zip(cases, mats, strict=True):
        table.add_case(protocol, case, scores)
    return evaluate_table(protocol, table, n_boot=n_boot, seed=seed, ci=ci, n_cases=len(cases), groups=groups)


def _checked(protocol: Protocol | str, ci: float) -> Protocol:
    if not 0.0 < ci < 1.0:
        raise ConfigError(f"ci must be in (0, 1), got {ci}")
    return get_protocol(protocol) if isinstance(protocol, str) else protocol


def mean_scopes(
    present: Sequence[str], groups: Mapping[str, Sequence[str]] | None
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """``(computed, missing)``: :data:`SUBSET_MEAN` over the ``present`` subsets (when there are
    several) and each grouping whose subsets are all present; the groupings left out -> the subsets
    they lack (a mean over part of a grouping would not be the paper's number).

    >>> mean_scopes(["a", "b", "c"], {"AB": ("a", "b"), "CD": ("c", "d")})
    ({'subset_mean': ('a', 'b', 'c'), 'AB': ('a', 'b')}, {'CD': ('d',)})
    """
    computed: dict[str, tuple[str, ...]] = {}
    missing: dict[str, tuple[str, ...]] = {}
    if len(present) > 1:
        computed[SUBSET_MEAN] = tuple(present)
    for name, subs in (groups or {}).items():
        lacking = tuple(s for s in subs if s not in present)
        if lacking:
            missing[name] = lacking
        else:
            computed[name] = tuple(subs)
    return computed, missing


def _aggregate(
    protocol: Protocol,
    values: dict[str, np.ndarray],
    tags: dict[str, np.ndarray],
    *,
    n_boot: int,
    seed: int,
    ci: float,
    groups: Mapping[str, Sequence[str]] | None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, np.ndarray]], dict, dict]:
    """``(metrics, boot, mean_scopes, missing_groups)``: pooled, per subset, the mean over subsets and
    the paper ``groups`` (see :class:`Evaluation`)."""
    subsets = tags["subset"]
    n = len(subsets)
    present = sorted(set(subsets.tolist()))
    means, missing = mean_scopes(present, groups)
    metrics: dict[str, dict[str, Any]] = {}
    boot: dict[str, dict[str, np.ndarray]] = {}
    bow = [(BOW_SCOPE, tags[BOW_TAG] == "identical")] if BOW_TAG in tags else []
    bow = [(scope, mask) for scope, mask in bow if mask.any() and not mask.all()]  # all of them: "all" says it
    for scope, mask in [("all", np.ones(n, dtype=bool)), *bow, *((s, subsets == s) for s in present)]:
        if scope != "all" and mask.all():  # a single subset: the same units as "all"
            metrics[scope], boot[scope] = dict(metrics["all"]), boot["all"]
            continue
        if mask.all():
            v, g = values, tags
        else:
            v, g = ({m: a[mask] for m, a in values.items()}, {t: a[mask] for t, a in tags.items()})
        empty = {m: float("nan") for m in protocol.metrics}
        point = protocol.aggregate(v, g) if mask.any() else empty
        boot[scope] = bootstrap(protocol, v, g, n_boot=n_boot, rng=scope_rng(seed, scope)) if n_boot > 0 else {}
        metrics[scope] = _entry(protocol, point, boot[scope], n_boot, ci)
    for scope, subs in means.items():  # stratified: the mean of independently resampled subsets
        point = {m: float(subset_mean([metrics[s].get(m, math.nan) for s in subs])) for m in protocol.metrics}
        if n_boot > 0:
            boot[scope] = {
                m: subset_mean([boot[s][m] for s in subs]) for m in protocol.metrics if all(m in boot[s] for s in subs)
            }
        metrics[scope] = _entry(protocol, point, boot.get(scope, {}), n_boot, ci)
    order = ["all", *means, *(scope for scope, _ in bow), *present]
    return {scope: metrics[scope] for scope in order}, boot, means, missing


def evaluate_table(
    protocol: Protocol | str,
    table: UnitTable,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    n_cases: int | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> Evaluation:
    """Aggregate a :class:`UnitTable`: pooled (``"all"``), per subset, the mean over subsets and the
    paper ``groups``, each with a percentile bootstrap interval (docs/statistics.md).

    Args:
        protocol: a protocol or its registered name.
        table: the collected units.
        n_boot: bootstrap resamples.
        seed: seed of the resamples.
        ci: the intervals' coverage.
        n_cases: the number of cases evaluated (default: the cases in ``table``).
        groups: paper groupings -> the subsets each averages.
    """
    protocol = _checked(protocol, ci)
    values, tags = table.arrays(protocol)
    metrics, boot, means, missing = _aggregate(
        protocol, values, tags, n_boot=n_boot, seed=seed, ci=ci, groups=groups
    )
    return Evaluation(
        protocol=protocol,
        table=table,
        case_ids=tags["case"],
        subsets=tags["subset"],
        values=values,
        groups=tags,
        metrics=metrics,
        boot=boot,
        mean_scopes=means,
        missing_groups=missing,
        n_cases=table.n_cases if n_cases is None else n_cases,
        n_boot=n_boot,
        seed=seed,
        ci=ci,
    )


def _entry(
    protocol: Protocol, point: Mapping[str, float], samples: Mapping[str, np.ndarray], n_boot: int, ci: float
) -> dict[str, Any]:
    """One scope's ``{metric: value, metric_ci95: [lo, hi]}`` in the protocol's metric order."""
    entry: dict[str, Any] = {}
    for m in protocol.metrics:
        if m not in point:
            continue
        entry[m] = point[m]
        if n_boot > 0:
            entry[ci_key(m, ci)] = percentile_ci(samples.get(m, np.array([])), ci)
    return entry
