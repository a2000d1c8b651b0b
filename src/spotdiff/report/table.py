"""Plain-text metric tables with confidence intervals, for the terminal."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from spotdiff.protocols.diagnostics import BOW_SCOPE, diagnostic_notes

#: What each tie rule means, for table footers.
TIE_NOTES = {
    "strict": "ties: strict (a tie counts as a failure)",
    "argmax": "ties: argmax (a tie goes to the candidate listed first, as the peers' argmax)",
}


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):6.2f}"


def aggregate_notes(aggregates: Mapping[str, Any] | None) -> list[str]:
    """One line per scope that is not a subset: ``all`` (pooled), the bag-of-words scope and the means
    over subsets."""
    lines = ["all = pooled over every unit (micro average)"]
    if BOW_SCOPE in (aggregates or {}):
        lines.append(f"{BOW_SCOPE} = {aggregates[BOW_SCOPE]}")  # type: ignore[index]
    for name, spec in (aggregates or {}).items():
        if isinstance(spec, dict) and "mean_of" in spec:
            lines.append(f"{name} = unweighted mean of {', '.join(spec['mean_of'])} (stratified bootstrap)")
    for name, spec in ((aggregates or {}).get("not_computed") or {}).items():
        lines.append(f"{name}: not computed, subsets missing: {', '.join(spec.get('missing_subsets', []))}")
    return lines


def format_metrics_table(
    metrics: dict,
    title: str = "",
    *,
    ties: str = "strict",
    aggregates: Mapping[str, Any] | None = None,
    diagnostics: dict[str, Any] | None = None,
) -> str:
    """Rows = scopes (``all``, the means over subsets, then subsets), columns = metrics, each cell
    ``value [lo, hi]``; the footer says what each aggregate is, which tie rule was used, and the
    run's ``diagnostics`` (tie rate, unparseable answers) when given."""
    means = [s for s in metrics if s != "all" and isinstance((aggregates or {}).get(s), dict)]
    means += [BOW_SCOPE] if BOW_SCOPE in metrics else []
    subsets = ["all", *means, *sorted(s for s in metrics if s != "all" and s not in means)]
    names: list[str] = []
    for s in subsets:
        for k in metrics.get(s, {}):
            if not k.endswith("_ci95") and k not in names:
                names.append(k)
    cells = [["subset", *names]]
    for s in subsets:
        row = [s]
        for k in names:
            v = metrics.get(s, {}).get(k)
            ci = metrics.get(s, {}).get(f"{k}_ci95")
            text = _fmt(v)
            if ci and ci[0] is not None:
                text += f" [{_fmt(ci[0]).strip()}, {_fmt(ci[1]).strip()}]"
            row.append(text)
        cells.append(row)
    notes = [TIE_NOTES.get(ties, f"ties: {ties}"), *diagnostic_notes(diagnostics), *aggregate_notes(aggregates)]
    return format_table(cells[0], cells[1:], title=title, notes=notes)


def format_table(
    header: list[str], rows: list[list[str]], *, title: str = "", notes: list[str] | None = None
) -> str:
    """A text table (first column left-aligned, the others right-aligned) with the note on intervals
    and ``notes`` (the tie rule, what each aggregate is) below it."""
    cells = [header, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title] if title else []
    for n, row in enumerate(cells):
        padded = (c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        lines.append("  ".join(padded))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(
        "values in %, 95% bootstrap confidence intervals in brackets (a case with several units resampled whole)"
    )
    lines += notes or []
    return "\n".join(lines)
