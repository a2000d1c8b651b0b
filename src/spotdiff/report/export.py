"""Every report table as CSV and LaTeX.

* result tables: CSV in long form (one row per model x subset x metric, with the interval, the run
  id and the significance mark), LaTeX in wide form (``booktabs``; subsets as column groups; the
  significantly best cell in bold);
* the provenance table of the runs (CSV and LaTeX);
* the paired tests behind the marks (CSV), and ``spotdiff compare`` results (CSV and LaTeX).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

from spotdiff.protocols import PairedComparison
from spotdiff.report.collect import ResultTable, RunData, comparison_keys

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "…": r"\ldots{}",
}


def latex_escape(text: Any) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def _f(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return f"{float(x):.{digits}f}"


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


# ------------------------------------------------------------------------------------ results
def table_csv(table: ResultTable) -> str:
    header = [
        "benchmark",
        "protocol",
        "ties",
        "model",
        "label",
        "subset",
        "metric",
        "value",
        "ci95_low",
        "ci95_high",
        "best_significant",
        "p_value",
        "test",
        "run_id",
    ]
    rows = []
    for row in table.rows:
        for col in table.columns:
            cell = row.cells.get((col.subset, col.metric))
            if cell is None:
                continue
            lo, hi = cell.ci if cell.ci else (None, None)
            rows.append(
                [
                    table.benchmark,
                    table.protocol,
                    table.ties,
                    row.model,
                    row.label,
                    col.subset,
                    col.metric,
                    _f(cell.value, 4),
                    _f(lo, 4),
                    _f(hi, 4),
                    int(cell.best),
                    "" if cell.p_value is None else f"{cell.p_value:.4g}",
                    cell.test or "",
                    cell.run_id,
                ]
            )
    return _csv(header, rows)


def table_latex(table: ResultTable, *, with_ci: bool = True) -> str:
    """A ``booktabs`` tabular; ``\\textbf`` marks the significantly best cell of a column."""
    subsets = table.subsets
    cols_of = {s: [c for c in table.columns if c.subset == s] for s in subsets}
    spec = "l" + "".join("r" * len(cols_of[s]) for s in subsets)
    lines = [
        f"% {table.benchmark} ({table.protocol}): values in %, 95% bootstrap CI in brackets;",
        "% bold: best in its column and significantly better than every other model (paired test, p < 0.05)",
        *(f"% {note}" for note in table.notes),
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
    ]
    head1 = ["Model"]
    rules = []
    k = 2
    for s in subsets:
        n = len(cols_of[s])
        head1.append(f"\\multicolumn{{{n}}}{{c}}{{{latex_escape(s)}}}")
        rules.append(f"\\cmidrule(lr){{{k}-{k + n - 1}}}")
        k += n
    lines.append(" & ".join(head1) + " \\\\")
    lines.append(" ".join(rules))
    head2 = [""] + [latex_escape(c.metric) for s in subsets for c in cols_of[s]]
    lines.append(" & ".join(head2) + " \\\\")
    lines.append("\\midrule")
    for row in table.rows:
        cells = [latex_escape(row.label)]
        for s in subsets:
            for c in cols_of[s]:
                cell = row.cells.get((c.subset, c.metric))
                if cell is None or cell.value is None:
                    cells.append("--")
                    continue
                text = _f(cell.value)
                if cell.best:
                    text = f"\\textbf{{{text}}}"
                if with_ci and cell.ci and cell.ci[0] is not None:
                    text += f" {{\\scriptsize[{_f(cell.ci[0], 1)}, {_f(cell.ci[1], 1)}]}}"
                cells.append(text)
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def tests_csv(tables: Sequence[ResultTable]) -> str:
    header = [
        "benchmark",
        "protocol",
        "subset",
        "metric",
        "best",
        "best_run",
        "other",
        "other_run",
        "difference",
        "p_value",
        "test",
        "n_cases",
        "n_units",
    ]
    rows = [
        [
            t.benchmark,
            t.protocol,
            d["subset"],
            d["metric"],
            d["best"],
            d["best_run"],
            d["other"],
            d["other_run"],
            _f(d["difference"], 4),
            f"{d['p_value']:.4g}",
            d["test"],
            d["n_cases"],
            d["n_units"],
        ]
        for t in tables
        for d in t.tests
    ]
    return _csv(header, rows)


# ------------------------------------------------------------------------------------ provenance
PROVENANCE_FIELDS = (
    "id",
    "created",
    "benchmark",
    "subset",
    "protocol",
    "model",
    "model_identity",
    "data_path",
    "data_digest",
    "seed",
    "version",
    "n_cases",
    "n_boot",
)


def identity_text(identity: dict, digits: int = 12) -> str:
    """``key=value`` pairs of a model identity, long digests shortened."""
    parts = []
    for k, v in sorted((identity or {}).items()):
        if isinstance(v, (dict, list)):
            continue
        text = str(v)
        if len(text) == 64 and all(ch in "0123456789abcdef" for ch in text):
            text = text[:digits]
        parts.append(f"{k}={text}")
    return " ".join(parts)


def provenance_rows(runs: Sequence[RunData], *, short: bool = False) -> list[list[str]]:
    rows = []
    for rd in runs:
        r = rd.run
        rows.append(
            [
                r.id,
                r.created,
                r.benchmark,
                r.subset or "",
                r.protocol,
                r.model,
                identity_text(r.model_identity, 12 if short else 64),
                r.data_path,
                r.data_digest[:12] if short else r.data_digest,
                str(r.seed),
                r.version,
                "" if r.n_cases is None else str(r.n_cases),
                str((r.info or {}).get("n_boot", "")),
            ]
        )
    return rows


def provenance_csv(runs: Sequence[RunData]) -> str:
    return _csv(PROVENANCE_FIELDS, provenance_rows(runs))


def provenance_latex(runs: Sequence[RunData]) -> str:
    fields = ("id", "benchmark", "protocol", "model", "data_digest", "seed", "version", "n_cases")
    idx = [PROVENANCE_FIELDS.index(f) for f in fields]
    lines = [
        "\\begin{tabular}{" + "l" * len(fields) + "}",
        "\\toprule",
        " & ".join(latex_escape(f) for f in fields) + " \\\\",
        "\\midrule",
    ]
    for row in provenance_rows(runs, short=True):
        lines.append(" & ".join(f"\\texttt{{{latex_escape(row[i])}}}" for i in idx) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ compare
COMPARE_FIELDS = (
    "scope",
    "metric",
    "n_cases",
    "n_units",
    "a",
    "b",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "test",
    "a_only",
    "b_only",
)


def comparison_rows(results: Sequence[PairedComparison]) -> list[list[str]]:
    return [
        [
            *comparison_keys(c),
            _f(c.a),
            _f(c.b),
            _f(c.difference),
            _f(c.ci[0]),
            _f(c.ci[1]),
            f"{c.p_value:.4g}",
            c.test,
            "" if c.a_only is None else str(c.a_only),
            "" if c.b_only is None else str(c.b_only),
        ]
        for c in results
    ]


def comparison_csv(results: Sequence[PairedComparison]) -> str:
    return _csv(COMPARE_FIELDS, comparison_rows(results))


def comparison_latex(results: Sequence[PairedComparison], label_a: str = "A", label_b: str = "B") -> str:
    lines = [
        "\\begin{tabular}{llrrrrl}",
        "\\toprule",
        f"Scope & Metric & {latex_escape(label_a)} & {latex_escape(label_b)} & $\\Delta$ & 95\\% CI & $p$ \\\\",
        "\\midrule",
    ]
    for c in results:
        lines.append(
            f"{latex_escape(c.scope)} & {latex_escape(c.metric)} & {_f(c.a)} & {_f(c.b)} & {_f(c.difference)} & "
            f"[{_f(c.ci[0])}, {_f(c.ci[1])}] & {c.p_value:.3g} ({latex_escape(c.test)}) \\\\"
        )
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)
