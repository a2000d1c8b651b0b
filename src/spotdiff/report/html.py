"""The self-contained HTML page of a report (Jinja2 template ``templates/report.html.j2``).

Everything is inline: figures and thumbnails are base64 data URIs, the CSS and the small filter
script live in the page, and nothing is fetched from the network, so the file can be mailed,
attached to a pull request or opened offline.
"""

from __future__ import annotations

import base64
import json
import math
from functools import lru_cache
from typing import Any

from markupsafe import Markup, escape

from spotdiff.naming import slugify
from spotdiff.report.collect import Cell
from spotdiff.report.export import identity_text
from spotdiff.report.gallery import GalleryCase
from spotdiff.report.model import Report
from spotdiff.report.runkey import diagnostics_notes


@lru_cache(maxsize=1)
def _env():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("spotdiff.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["slug"] = slugify
    env.filters["b64"] = lambda data: base64.b64encode(data).decode("ascii")
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=1, sort_keys=True, default=str)
    return env


def fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def ci_text(cell: Cell | None) -> str:
    if cell is None or not cell.ci or cell.ci[0] is None or cell.ci[1] is None:
        return ""
    return f"[{cell.ci[0]:.1f}, {cell.ci[1]:.1f}]"


def scores_table(gc: GalleryCase) -> Markup:
    """The failing models' scores and outcomes of one gallery case, as an HTML table.

    Built here rather than in the template: a 50-model report has thousands of these rows, and
    plain string formatting is many times faster than the template loop. Every value in it comes from a run
    store or the data someone else may have written (run ids, labels, scores), so each is escaped, in
    attributes as in text, as the template's autoescaping does.
    """
    classes = [escape(c) for c in gc.score_classes]
    head = "".join(f'<th class="{c}">{escape(lab)}</th>' for lab, c in zip(gc.score_labels, classes, strict=True))
    parts = [
        f'<div class="case-body"><table class="scores"><thead><tr><th>failed by</th>{head}<th>wrong on</th>'
        "</tr></thead><tbody>"
    ]
    n_cols = len(gc.score_labels)
    for m in gc.models:
        if not m.failed:
            continue
        cells = "".join(
            f'<td class="{classes[k]}">{escape(fmt(v, 3))}</td>' for k, v in enumerate(m.values[:n_cols])
        ) + "<td></td>" * (n_cols - min(n_cols, len(m.values)))
        failed_metrics: dict[str, int] = {}
        details = []
        for o in m.outcomes:
            for k, v in o.items():
                if k != "unit" and isinstance(v, (int, float)) and v < 1:
                    failed_metrics[k] = failed_metrics.get(k, 0) + 1
            details.append(f"{o['unit']}: " + " ".join(f"{k}={fmt(v, 1)}" for k, v in o.items() if k != "unit"))
        summary = ", ".join(k if n == 1 else f"{k} ×{n}" for k, n in failed_metrics.items())
        label, run = escape(m.label), escape(m.run_id)
        parts.append(
            f'<tr data-model="{escape(m.label.replace("|", "/"))}" data-run="{run}">'
            f'<th class="mname" title="{label} (run {run})">'
            f'{label} <a class="mono" href="#run-{run}">#{escape(m.run_id[:6])}</a></th>{cells}'
            f'<td class="outcomes" title="{escape("; ".join(details))}">{escape(summary)}</td></tr>'
        )
    parts.append("</tbody></table></div>")
    return Markup("".join(parts))


def render_html(report: Report) -> str:
    runs = {rd.id: rd.run for rd in report.runs}

    def cell_title(cell: Cell | None) -> str:
        if cell is None:
            return ""
        r = runs[cell.run_id]
        parts = [
            f"{cell.metric} on {cell.subset}",
            f"run {r.id}",
            f"model {r.model}",
            f"identity {identity_text(r.model_identity)}",
            f"data {r.data_digest[:12]}",
            f"seed {r.seed}",
            f"spotdiff {r.version}",
        ]
        if cell.p_value is not None:
            verdict = "best, significant" if cell.best else "best, not significant"
            parts.append(f"{verdict}: max p = {cell.p_value:.3g} ({cell.test}) against the others")
        return " · ".join(parts)

    template = _env().get_template("report.html.j2")
    return template.render(
        report=report,
        ci_text=ci_text,
        cell_title=cell_title,
        identity_text=identity_text,
        scores_table=scores_table,
        n_runs=len(report.runs),
        diagnostics_notes=diagnostics_notes,
    )
