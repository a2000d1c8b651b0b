"""Plain-text metric tables with confidence intervals, for the terminal."""

from __future__ import annotations

import math


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):6.2f}"


def format_metrics_table(metrics: dict, title: str = "") -> str:
    """Rows = subsets ("all" first), columns = metrics, each cell ``value [lo, hi]``."""
    subsets = ["all", *sorted(s for s in metrics if s != "all")]
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
    return format_table(cells[0], cells[1:], title=title)


def format_table(header: list[str], rows: list[list[str]], *, title: str = "") -> str:
    """A text table (first column left-aligned, the others right-aligned) with the note on units."""
    cells = [header, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title] if title else []
    for n, row in enumerate(cells):
        padded = (c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        lines.append("  ".join(padded))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("values in %, 95% bootstrap confidence intervals in brackets; ties count as failures")
    return "\n".join(lines)
