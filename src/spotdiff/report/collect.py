"""Runs from the store, grouped into one result table per (benchmark, protocol, tie rule), with
significance marks.

Rows are models, columns ``(scope, metric)`` pairs; a column's best cell is marked only when a paired
test rejects against every other model. Details: docs/statistics.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.diagnose.store import Run, RunStore, stored_json
from spotdiff.errors import ConfigError, DataError, SpotdiffError
from spotdiff.naming import slugify
from spotdiff.protocols import (
    SUBSET_MEAN,
    TESTS,
    Evaluation,
    PairedComparison,
    Protocol,
    UnitTable,
    evaluate_table,
    get_protocol,
    mcnemar,
    paired_comparison,
)
from spotdiff.report.labels import RunKey, run_labels
from spotdiff.report.table import TIE_NOTES

#: Significance level of the best-cell test.
ALPHA = 0.05
#: Random swaps of the paired sign-flip test (clustered units, non-binary metrics, means over subsets).
#: The p-value ``(1 + #extreme) / (1 + N_PERM)`` is a valid p-value for any number of swaps; 200
#: resolve p down to 0.005, well below alpha, and keep a 50-model report fast (retrieval's rsum: 49
#: tests on thousands of queries).
N_PERM = 200


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


@dataclass
class RunData:
    """A run and its per-unit records (loaded once)."""

    run: Run
    units: list[dict]
    _evaluation: Evaluation | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def ties(self) -> str:
        return run_ties(self.run)

    @property
    def protocol(self) -> Protocol:
        return get_protocol(self.run.protocol, self.ties)

    _sorted: dict = field(default_factory=dict, repr=False)  # sorted unit arrays, by metric

    def evaluation(self) -> Evaluation:
        """Aggregates of the stored units (no bootstrap), for paired tests."""
        if self._evaluation is None:
            self._evaluation = evaluation_from_units(
                self.protocol, self.units, seed=self.run.seed, groups=subset_groups(self.run.benchmark)
            )
        return self._evaluation

    def sorted_values(self, metric: str, scope: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The scope's unit ids in sorted order, their case ids, and the metric's per-unit values
        (NaN where undefined) in that order, straight from the unit records."""
        if "_base" not in self._sorted:
            ids = np.array([u["unit_id"] for u in self.units], dtype=str)
            order = np.argsort(ids, kind="stable")
            subsets = np.array([u["subset"] for u in self.units], dtype=str)[order]
            cases = np.array([u["case_id"] for u in self.units], dtype=str)[order]
            self._sorted["_base"] = (ids[order], subsets, cases, order)
        ids, subsets, cases, order = self._sorted["_base"]
        if metric not in self._sorted:
            n = len(self.units)
            values = np.fromiter((_num(u["outcomes"].get(metric)) for u in self.units), dtype=float, count=n)
            self._sorted[metric] = values[order]
        values = self._sorted[metric]
        if scope is None:
            return ids, cases, values
        mask = subsets == scope
        return ids[mask], cases[mask], values[mask]


def run_ties(run: Run) -> str:
    """The tie rule a run was made with (runs recorded before ``--ties`` existed: strict)."""
    return str((run.info or {}).get("ties") or "strict")


def subset_groups(benchmark: str) -> dict[str, tuple[str, ...]]:
    """The paper groupings a benchmark declares (none for an unknown name)."""
    return BENCHMARKS.get(benchmark).metadata.subset_groups if benchmark in BENCHMARKS else {}


def evaluation_from_units(
    protocol: Protocol | str,
    units: Iterable[dict],
    *,
    seed: int = 0,
    n_boot: int = 0,
    groups: dict[str, tuple[str, ...]] | None = None,
) -> Evaluation:
    """An :class:`Evaluation` rebuilt from the store's unit records (NaN outcomes are stored as null),
    with the means over subsets and the paper ``groups``.

    Args:
        protocol: the protocol (or its name) the units were scored under.
        units: the store's unit records.
        seed: the bootstrap seed.
        n_boot: the number of bootstrap resamples (0: no intervals).
        groups: the paper groupings, name -> subsets, or None.
    """
    protocol = get_protocol(protocol) if isinstance(protocol, str) else protocol
    table = UnitTable()
    shared: dict[str, dict] = {}  # one tags dict per case, shared by its units
    for u in units:
        tags = shared.get(u["case_id"])
        if tags is None:
            tags = shared[u["case_id"]] = {k: str(v) for k, v in (u.get("tags") or {}).items()}
            tags.setdefault("subset", u["subset"])
        outcomes = {k: _num(v) for k, v in (u.get("outcomes") or {}).items()}
        table.add(u["unit_id"], u["case_id"], tags, outcomes)
    if not len(table):
        raise DataError("the run has no stored units")
    return evaluate_table(protocol, table, n_boot=n_boot, seed=seed, groups=groups)


@dataclass
class Cell:
    """One table cell: a stored metric value with its interval and the run it comes from."""

    subset: str
    metric: str
    value: float | None
    ci: tuple[float | None, float | None] | None
    run_id: str
    best: bool = False
    p_value: float | None = None  # the largest p-value of the best cell's tests (the deciding one)
    test: str | None = None


@dataclass
class Row:
    label: str
    model: str
    runs: list[RunData]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    @property
    def run_ids(self) -> list[str]:
        return [r.id for r in self.runs]


@dataclass
class Column:
    subset: str
    metric: str
    note: str = ""  # why no cell is marked, when a test could not be made


@dataclass
class ResultTable:
    """One benchmark x protocol x tie rule: rows = models, columns = scopes x metrics."""

    benchmark: str
    protocol: str
    rows: list[Row]
    columns: list[Column]
    tests: list[dict] = field(default_factory=list)
    ties: str = "strict"

    @property
    def slug(self) -> str:
        suffix = "" if self.ties == "strict" else f"-ties-{self.ties}"
        return slugify(f"{self.benchmark}-{self.protocol}{suffix}")

    @property
    def notes(self) -> list[str]:
        """What the table's aggregates are, its tie rule, and the tests behind its marks."""
        groups = subset_groups(self.benchmark)
        scopes = set(self.subsets)
        out = []
        if "all" in scopes:
            out.append("all = pooled over every unit (micro average)")
        if SUBSET_MEAN in scopes:
            out.append(f"{SUBSET_MEAN} = unweighted mean over the subsets (stratified bootstrap)")
        out += [f"{g} = unweighted mean of {', '.join(subs)}" for g, subs in groups.items() if g in scopes]
        out.append(TIE_NOTES.get(self.ties, f"ties: {self.ties}"))
        used = sorted({d["test"] for d in self.tests})
        if used:
            out.append("tests: " + "; ".join(f"{t} = {TESTS.get(t, t)}" for t in used))
        return out

    @property
    def subsets(self) -> list[str]:
        """The columns' subsets, each once, in column order."""
        return list(dict.fromkeys(c.subset for c in self.columns))

    @property
    def metrics(self) -> list[str]:
        """The columns' metrics, each once, in column order."""
        return list(dict.fromkeys(c.metric for c in self.columns))

    @property
    def runs(self) -> list[RunData]:
        return [r for row in self.rows for r in row.runs]

    def column_of(self, subset: str, metric: str) -> Column:
        return next(c for c in self.columns if c.subset == subset and c.metric == metric)


def comparison_keys(c: PairedComparison) -> list[str]:
    """The cells that name a paired comparison's row in every table of comparisons: scope, metric, cases, units."""
    return [c.scope, c.metric, str(c.n_cases), str(c.n_units)]


def short_model(model: str, limit: int = 40) -> str:
    """A model spec short enough for a table row (long checkpoint paths keep their last parts)."""
    if len(model) <= limit:
        return model
    family, sep, rest = model.partition(":")
    parts = [p for p in re.split(r"[/\\]", rest) if p]
    tail = "/".join(parts[-2:]) if parts else rest
    text = f"{family}{sep}…/{tail}" if sep else f"…/{tail}"
    return text if len(text) <= limit + 10 else "…" + model[-limit:]


# ------------------------------------------------------------------------------------ selection
def select_runs(
    store: RunStore,
    run_ids: Sequence[str] | None = None,
    *,
    benchmarks: Sequence[str] | None = None,
    latest_only: bool = True,
) -> list[Run]:
    """The runs a report covers: the given ids (prefixes allowed), or every finished run that is not an
    evaluation made during training (those are drawn by :mod:`spotdiff.report.retention`).

    Without ids, ``latest_only`` keeps the newest run of each (benchmark, protocol, model, subset).

    Args:
        store: the run store.
        run_ids: the runs to report (id prefixes allowed), or None for every finished run.
        benchmarks: keep only the runs of these benchmarks, or None for all.
        latest_only: without ids, keep only the newest run of each (benchmark, protocol, model, subset).
    """
    if run_ids:
        runs = [store.get(r) for r in run_ids]
        seen: set[str] = set()
        runs = [r for r in runs if not (r.id in seen or seen.add(r.id))]
        not_done = [r.id for r in runs if r.status != "done"]
        if not_done:
            raise ConfigError(f"runs not finished: {', '.join(not_done)}")
    else:  # evaluations made during training go to the retention section, not the tables
        runs = [r for r in store.runs(status="done") if not r.training]  # newest first
        if latest_only:
            keep: dict[tuple, Run] = {}
            for r in runs:
                keep.setdefault((r.benchmark, r.protocol, r.model, r.subset), r)
            runs = list(keep.values())
    if benchmarks:
        runs = [r for r in runs if r.benchmark in set(benchmarks)]
    if not runs:
        raise ConfigError(f"no finished runs to report in {store.path}")
    return sorted(runs, key=lambda r: (r.benchmark, r.protocol, r.model, r.subset or "", r.created, r.id))


def load_run_data(store: RunStore, runs: Sequence[Run]) -> list[RunData]:
    """The runs with their unit records, read in one pass over the store's ``units`` table.

    Equivalent to ``store.units(run_id)`` for each run, but faster for large reports: identical
    outcome and tag JSON strings (most units share them) are decoded once and shared, and each score
    matrix stays a JSON string until :func:`unit_scores` needs it.
    """
    memo: dict[str, Any] = {}

    def decode(raw: str, run: str, unit: str, field: str) -> Any:
        value = memo.get(raw)
        if value is None:
            value = memo[raw] = stored_json(raw, store.path, f"run {run}, unit {unit}", field)
        return value

    out = []
    for r in runs:
        units = [
            {
                "unit_id": uid,
                "case_id": cid,
                "subset": sub,
                "scores_json": sc,
                "store": store.path,  # named, with the run, when the scores do not decode
                "run": r.id,
                "outcomes": decode(oc, r.id, uid, "outcomes"),
                "tags": decode(tg, r.id, uid, "tags"),
            }
            for uid, cid, sub, sc, oc, tg in store.unit_rows(r.id)
        ]
        out.append(RunData(r, units))
    return out


def unit_scores(unit: dict) -> Any:
    """A unit's score matrix (nested lists or None), decoding it on first use."""
    if "scores" not in unit:
        raw = unit.get("scores_json")
        where = f"run {unit.get('run')}, unit {unit['unit_id']}"
        unit["scores"] = None if raw is None else stored_json(raw, unit.get("store"), where, "scores")
    return unit["scores"]


# ------------------------------------------------------------------------------------ tables
def _scope_metrics(run: Run) -> dict[str, dict]:
    """``{subset: {metric: value, metric_ci95: [lo, hi]}}`` as the table's columns see it."""
    metrics = run.metrics or {}
    if run.subset is None:
        return metrics
    return {run.subset: metrics.get(run.subset) or metrics.get("all") or {}}


def run_key(rd: RunData) -> RunKey:
    """What a run's label is made from (:func:`spotdiff.report.labels.run_labels`)."""
    r = rd.run
    return RunKey(r.id, r.model, r.benchmark, r.subset, dict((r.info or {}).get("options") or {}))


def _rows(runs: list[RunData], labels: Mapping[str, str]) -> list[Row]:
    """One row per label: a model's full and per-subset runs share one (see :mod:`.labels`)."""
    by_label: dict[str, list[RunData]] = {}
    for rd in runs:
        by_label.setdefault(labels[rd.id], []).append(rd)
    rows = [
        Row(label, group[0].run.model, sorted(group, key=lambda rd: rd.run.subset is not None))
        for label, group in by_label.items()
    ]
    for row in rows:
        for rd in row.runs:
            for subset, values in _scope_metrics(rd.run).items():
                for metric, value in values.items():
                    if metric.endswith("_ci95") or (subset, metric) in row.cells:
                        continue
                    ci = values.get(f"{metric}_ci95")
                    row.cells[(subset, metric)] = Cell(
                        subset,
                        metric,
                        None if value is None else float(value),
                        (ci[0], ci[1]) if ci else None,
                        rd.id,
                    )
    return rows


def scope_order(benchmark: str, scopes: Iterable[str]) -> list[str]:
    """``"all"``, then ``"subset_mean"`` and the benchmark's groupings (declared order), then the
    subsets (sorted): the column order of a result table."""
    scopes = set(scopes)
    means = [SUBSET_MEAN, *subset_groups(benchmark)]
    head = [s for s in ["all", *means] if s in scopes]
    return head + sorted(scopes - set(head))


def build_tables(
    runs: Sequence[RunData],
    *,
    alpha: float = ALPHA,
    n_perm: int = N_PERM,
    test: bool = True,
    labels: Mapping[str, str] | None = None,
) -> list[ResultTable]:
    """One :class:`ResultTable` per (benchmark, protocol, tie rule), significance marks included.

    Args:
        runs: the runs with their stored units.
        alpha: the significance level of the marks.
        n_perm: the number of random swaps of a sign-flip test.
        test: run the paired tests (False: no marks).
        labels: run id -> row label (default: :func:`spotdiff.report.labels.run_labels` of ``runs``).
    """
    labels = labels if labels is not None else run_labels([run_key(rd) for rd in runs])
    groups: dict[tuple[str, str, str], list[RunData]] = {}
    for rd in runs:
        groups.setdefault((rd.run.benchmark, rd.run.protocol, rd.ties), []).append(rd)
    tables = []
    for (benchmark, protocol_name, ties), group in sorted(groups.items()):
        protocol = get_protocol(protocol_name, ties)
        rows = _rows(group, labels)
        present = {k for row in rows for k in row.cells}
        subsets = scope_order(benchmark, {s for s, _ in present})
        only = [sub for sub in subsets if sub != "all"]
        if "all" in subsets and len(only) == 1:  # one subset: its columns repeat "all" wherever both exist
            redundant = all((("all", m) in row.cells) for row in rows for (sub, m) in row.cells if sub == only[0])
            if redundant:
                subsets = ["all"]
        metric_order = [m for m in protocol.metrics if any(m == k for _, k in present)]
        metric_order += sorted({k for _, k in present} - set(metric_order))
        columns = [Column(s, m) for s in subsets for m in metric_order if (s, m) in present]
        table = ResultTable(benchmark, protocol_name, rows, columns, ties=ties)
        if test:
            for col in columns:
                mark_best(table, col, alpha=alpha, n_perm=n_perm)
        tables.append(table)
    return tables


def mark_best(table: ResultTable, col: Column, *, alpha: float = ALPHA, n_perm: int = N_PERM) -> None:
    """Mark the column's top cell when it beats every other model significantly (docs/statistics.md).

    Args:
        table: the table; its tests and notes are added to.
        col: the column to mark.
        alpha: the significance level every paired test must reach.
        n_perm: the number of random swaps of a sign-flip test.
    """
    entries = []
    for row in table.rows:
        cell = row.cells.get((col.subset, col.metric))
        if cell is not None and cell.value is not None and math.isfinite(cell.value):
            entries.append((cell.value, row, cell))
    if len(entries) < 2:
        return
    entries.sort(key=lambda e: -e[0])
    top_value, top_row, top_cell = entries[0]
    if entries[1][0] >= top_value:
        col.note = "tie for the top value"
        return
    run_of = {rd.id: rd for row in table.rows for rd in row.runs}
    best = run_of[top_cell.run_id]
    scope = None if col.subset == "all" else col.subset
    worst_p = 0.0
    test_name = None
    for _value, row, cell in entries[1:]:  # closest competitor first: the likeliest to stop the claim
        other = run_of[cell.run_id]
        try:
            cmp = _paired_test(best, other, col.metric, scope, n_perm=n_perm)
        except SpotdiffError as exc:
            col.note = f"no paired test: {exc}"
            return
        table.tests.append(
            {
                "subset": col.subset,
                "metric": col.metric,
                "best": top_row.label,
                "best_run": best.id,
                "other": row.label,
                "other_run": other.id,
                "difference": cmp.difference,
                "p_value": cmp.p_value,
                "test": cmp.test,
                "n_cases": cmp.n_cases,
                "n_units": cmp.n_units,
            }
        )
        worst_p, test_name = max(worst_p, cmp.p_value), cmp.test
        if cmp.p_value >= alpha:
            top_cell.p_value, top_cell.test = worst_p, test_name
            return
    top_cell.best, top_cell.p_value, top_cell.test = True, worst_p, test_name


@dataclass(frozen=True)
class _McNemar:
    """The parts of a :class:`PairedComparison` the best-cell marks use."""

    difference: float
    p_value: float
    n_units: int
    n_cases: int
    test: str = "mcnemar-exact"


def _fast_mcnemar(a: RunData, b: RunData, metric: str, scope: str | None) -> _McNemar | None:
    """The exact McNemar test of :func:`paired_comparison` on aligned arrays, or None when that
    function would not use it: the scope is not pooled or a single subset, a case holds several
    units (the test must then swap whole cases), the metric has no per-unit values, the units
    differ, or the values are not 0/1 or are undefined on different units. Same p-value, without
    per-call Python loops."""
    if metric not in a.protocol.unit_metrics:
        return None
    ids_a, cases_a, xa = a.sorted_values(metric, scope)
    ids_b, _, xb = b.sorted_values(metric, scope)
    if len(ids_a) == 0 or len(ids_a) != len(ids_b) or not np.array_equal(ids_a, ids_b):
        return None
    n_cases = len(np.unique(cases_a))
    if 1 < n_cases < len(ids_a):  # clustered units: paired_comparison's sign-flip test over cases
        return None
    na, nb = np.isnan(xa), np.isnan(xb)
    if not np.array_equal(na, nb):
        return None
    d = ~na
    va, vb = xa[d], xb[d]
    if not (np.all((va == 0) | (va == 1)) and np.all((vb == 0) | (vb == 1))):
        return None
    p, _, _ = mcnemar(va, vb)
    diff = float((va.mean() - vb.mean()) * 100.0) if va.size else math.nan
    return _McNemar(diff, min(p, 1.0), int(d.sum()), len(np.unique(cases_a[d])))


def _paired_test(a: RunData, b: RunData, metric: str, scope: str | None, *, n_perm: int) -> PairedComparison | _McNemar:
    """The exact McNemar test for one-unit cases and per-unit 0/1 metrics (fast path), else
    :func:`paired_comparison`'s cluster-aware sign-flip test with ``n_perm`` swaps, without a
    bootstrap interval."""
    fast = _fast_mcnemar(a, b, metric, scope)
    if fast is not None:
        return fast
    return paired_comparison(a.evaluation(), b.evaluation(), metric, subset=scope, n_boot=0, n_perm=n_perm)
