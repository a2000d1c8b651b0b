"""The summary block a report opens with, and the order of the sections after it.

* A demo folder (``findings.json`` given): each finding's claim, whether it reproduced, its numbers
  and tests (:mod:`.findings`), then the table of main scores.
* Two runs of one benchmark and protocol: their paired differences on every metric and scope
  (:func:`spotdiff.report.compare.compare_runs`, as ``spotdiff compare`` prints them).
* Otherwise (a grid): runs x benchmarks, each benchmark's main score pooled over all units with its
  95% CI, the best cell of a column marked as in the result tables.

The per-benchmark sections follow in the order the summary names the benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.errors import SpotdiffError
from spotdiff.protocols import TESTS
from spotdiff.report.collect import ALPHA, ResultTable, RunData
from spotdiff.report.compare import compare_runs
from spotdiff.report.findings import FindingView, findings_order, read_findings
from spotdiff.report.table import TIE_NOTES


@dataclass
class SummaryCell:
    text: str
    best: bool = False
    title: str = ""


@dataclass
class SummaryTable:
    title: str
    header: list[str]
    rows: list[list[SummaryCell]]
    notes: list[str] = field(default_factory=list)


@dataclass
class Summary:
    """What the report's first screen shows: ``kind`` is ``demo``, ``comparison`` or ``grid``."""

    kind: str
    heading: str
    findings: list[FindingView] = field(default_factory=list)
    note: str = ""
    tables: list[SummaryTable] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # the benchmarks, in the order the summary names them


def main_table_and_metric(tables: Sequence[ResultTable], benchmark: str) -> tuple[ResultTable, str, str]:
    """A benchmark's table of its main score (the declared main protocol when reported, else its first
    table), that score's metric (the declared one, else the table's first) and scope (``all`` if present)."""
    own = [t for t in tables if t.benchmark == benchmark and t.columns]
    main_protocol, main_metric = BENCHMARKS.get(benchmark).metadata.main_score if benchmark in BENCHMARKS else ("", "")
    table = next((t for t in own if t.protocol == main_protocol), own[0])
    metric = main_metric if table.protocol == main_protocol and main_metric in table.metrics else table.metrics[0]
    scope = "all" if "all" in table.subsets else table.subsets[0]
    return table, metric, scope


def grid_table(tables: Sequence[ResultTable], benchmarks: Sequence[str], alpha: float = ALPHA) -> SummaryTable:
    """Rows = run labels, columns = ``benchmarks``: the main score with its 95% CI, best cells marked.

    Args:
        tables: the report's result tables.
        benchmarks: the columns, in order.
        alpha: the significance level of the marks.
    """
    header, labels, columns = ["run"], [], []
    benchmarks = [b for b in benchmarks if any(t.columns for t in tables if t.benchmark == b)]
    notes = ["values in %, 95% percentile-bootstrap CI in brackets (a case holding several units resampled whole)"]
    for b in benchmarks:
        table, metric, scope = main_table_and_metric(tables, b)
        columns.append((table, metric, scope))
        header.append(f"{b} {metric}" + ("" if scope == "all" else f" ({scope})"))
        labels += [row.label for row in table.rows if row.label not in labels]
        note = next((c.note for c in table.columns if (c.subset, c.metric) == (scope, metric)), "")
        used = sorted({d["test"] for d in table.tests if (d["subset"], d["metric"]) == (scope, metric)})
        tests = f"tests: {', '.join(used)}" if used else f"no mark: {note}" if note else "no test"
        aggregate = "every unit pooled" if scope == "all" else "its only subset"
        notes.append(f"{b}: {metric} on {scope} ({aggregate}); {TIE_NOTES.get(table.ties, table.ties)}; {tests}")
    notes.append(
        f"▲ = best of its column, and a paired test on the same units rejects “no difference” at p < {alpha} against "
        "every other run (intersection–union test); " + "; ".join(f"{k} = {v}" for k, v in TESTS.items())
    )
    by_label = [{r.label: r for r in table.rows} for table, _, _ in columns]
    rows = []
    for label in labels:
        cells = [SummaryCell(label)]
        for k, (_table, metric, scope) in enumerate(columns):
            row = by_label[k].get(label)
            cell = row.cells.get((scope, metric)) if row is not None else None
            if cell is None or cell.value is None:
                cells.append(SummaryCell("–"))
                continue
            ci = f" [{cell.ci[0]:.1f}, {cell.ci[1]:.1f}]" if cell.ci and None not in cell.ci else ""
            title = "" if cell.p_value is None else f"max p = {cell.p_value:.3g} ({cell.test}) against the others"
            cells.append(SummaryCell(f"{cell.value:.2f}{ci}", cell.best, title))
        rows.append(cells)
    return SummaryTable("Main score of each benchmark", header, rows, notes)


def comparison_table(a: RunData, b: RunData, labels: Mapping[str, str]) -> SummaryTable:
    """The paired differences of two runs (A - B) on every metric and scope, as ``spotdiff compare``."""
    cmp = compare_runs((a.run, a.units), (b.run, b.units))
    header = ["scope", "metric", "A", "B", "A − B [95% CI]", "p", "test", "cases / units"]
    rows = [
        [
            SummaryCell(c.scope),
            SummaryCell(c.metric),
            SummaryCell(f"{c.a:.2f}"),
            SummaryCell(f"{c.b:.2f}"),
            SummaryCell(f"{c.difference:+.2f} [{c.ci[0]:+.2f}, {c.ci[1]:+.2f}]", c.p_value < ALPHA),
            SummaryCell(f"{c.p_value:.3g}"),
            SummaryCell(c.test),
            SummaryCell(f"{c.n_cases} / {c.n_units}"),
        ]
        for c in cmp.results
    ]
    notes = [
        f"A = {labels[a.id]} (run {a.id}), B = {labels[b.id]} (run {b.id}); values in %, paired over the same units",
        "all = pooled over every unit; subset_mean and groups = unweighted means over subsets",
        TIE_NOTES.get(a.ties, a.ties),
        f"▲ = p < {ALPHA}; " + "; ".join(f"{t} = {TESTS[t]}" for t in sorted({c.test for c in cmp.results})),
        *cmp.notes,
    ]
    return SummaryTable(f"{a.run.benchmark} — {a.run.protocol}: paired differences", header, rows, notes)


def build_summary(
    tables: Sequence[ResultTable],
    labels: Mapping[str, str],
    *,
    findings: str | Path | None = None,
    benchmarks: Sequence[str] | None = None,
    alpha: float = ALPHA,
) -> Summary:
    """The summary of a report's result tables.

    Args:
        tables: the result tables.
        labels: run id -> label.
        findings: a demo's ``findings.json``, or None.
        benchmarks: the order of the benchmarks (others follow in table order), or None.
        alpha: the significance level of the marks.
    """
    present = list(dict.fromkeys(t.benchmark for t in tables))
    order = [b for b in benchmarks or [] if b in present]
    order += [b for b in present if b not in order]
    runs = [rd for t in tables for rd in t.runs]
    if findings is not None:
        views, note = read_findings(findings)
        order = findings_order(views, {rd.id: rd.run.benchmark for rd in runs}, order)
        main = [grid_table(tables, order, alpha)] if any(t.columns for t in tables) else []
        return Summary("demo", f"Findings ({sum(v.holds for v in views)} of {len(views)} reproduced)", views, note,
                       main, order)  # fmt: skip
    note = ""
    if len(tables) == 1 and len(runs) == 2 and len(tables[0].rows) == 2:
        try:
            table = comparison_table(runs[0], runs[1], labels)
        except SpotdiffError as exc:  # e.g. no unit in common: the table of main scores instead
            note = f"no paired comparison of the two runs: {exc}"
        else:
            heading = f"{labels[runs[0].id]} against {labels[runs[1].id]}"
            return Summary("comparison", heading, tables=[table], order=order)
    if not any(t.columns for t in tables):
        return Summary("grid", "No result tables", note="only evaluations made during training", order=order)
    grid = grid_table(tables, order, alpha)
    heading = f"{len(grid.rows)} models x {len(grid.header) - 1} benchmarks: main scores"
    return Summary("grid", heading, note=note, tables=[grid], order=order)
