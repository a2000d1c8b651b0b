"""The report as Markdown (GitHub-flavoured tables), for papers and pull requests.

Figures are linked as files under ``figures/`` (written by :func:`spotdiff.report.build.write_report`);
the gallery's thumbnails are written to ``figures/thumbs/``. The Markdown gallery shows the first
``MD_GALLERY`` cases of each table; the HTML page has them all, with filters.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable
from typing import Any

from spotdiff.naming import safe_name
from spotdiff.report.export import identity_text
from spotdiff.report.model import Report
from spotdiff.report.runkey import diagnostics_notes

#: Gallery cases per table in the Markdown report.
MD_GALLERY = 8


#: The characters that make Markdown out of text: emphasis, code, links, strikethrough, table cells.
_ACTIVE = re.compile(r"([\\`*_\[\]~|])")


def _esc(text: Any) -> str:
    """``text`` shown as it is, on one line: its HTML escaped (``<script>`` reads ``&lt;script&gt;``, as
    report.html's autoescaping shows it) and Markdown's active characters backslash-escaped, so a caption,
    case id or label from the data can add neither markup nor links to the report."""
    return _ACTIVE.sub(r"\\\1", html.escape(" ".join(str(text).splitlines()), quote=False))


def _code(text: Any, *, cell: bool = True) -> str:
    """``text`` as a code span (shown verbatim: HTML inside is not rendered) that no backtick in it can
    close early, on one line; ``cell``: inside a table, where ``|`` must be escaped even in code."""
    body = " ".join(str(text).splitlines())
    if cell:
        body = body.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def _f(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{float(x):.{digits}f}"


def render_markdown(report: Report, save_thumb: Callable[[str, bytes], object] | None = None) -> str:
    """The Markdown text; with ``save_thumb``, each gallery thumbnail is given to it (its file name under
    ``figures/thumbs/`` and its JPEG bytes) and linked from the gallery."""
    lines = [
        f"# {_esc(report.title)}",
        "",
        f"Generated {report.created} by spotdiff {report.version} from {_code(report.store_path, cell=False)}: "
        f"{len(report.runs)} runs.",
        "",
        *_summary(report),
        *_key(report),
        "Values are percentages with 95% percentile-bootstrap intervals (a case holding "
        "several units resampled whole); each table says what its aggregates are and its tie rule. **Bold ▲** marks "
        "the best cell of a column only when a paired test on the same units rejects “no difference” at "
        f"p < {report.alpha} against every other model (intersection–union test): exact McNemar when every case is "
        "one unit and the outcome 0/1, otherwise a paired sign-flip test swapping whole cases (or single units). "
        "Run ids (`#abc123`) point to the provenance table at the end.",
        "",
    ]
    for sec in report.sections:
        lines += [f"## {_esc(sec.benchmark)}", ""]
        for ts in sec.tables:
            t = ts.table
            ties = "" if t.ties == "strict" else f" (ties: {_esc(t.ties)})"
            lines += [f"### {_esc(t.benchmark)} — {_esc(t.protocol)}{ties}", ""]
            header = ["model", *[f"{c.subset} {c.metric}" for c in t.columns]]
            lines.append("| " + " | ".join(_esc(h) for h in header) + " |")
            lines.append("|" + "---|" + "---:|" * len(t.columns))
            for row in t.rows:
                cells = [f"{_esc(row.label)} " + " ".join(f"`#{rid[:6]}`" for rid in row.run_ids)]
                for c in t.columns:
                    cell = row.cells.get((c.subset, c.metric))
                    if cell is None or cell.value is None:
                        cells.append("–")
                        continue
                    text = f"**{_f(cell.value)}** ▲" if cell.best else _f(cell.value)
                    if cell.ci and cell.ci[0] is not None:
                        text += f" [{_f(cell.ci[0], 1)}, {_f(cell.ci[1], 1)}]"
                    cells.append(text)
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
            lines += [" · ".join(_esc(n) for n in t.notes) + ".", ""]
            notes = [f"{c.subset}/{c.metric} ({c.note})" for c in t.columns if c.note]
            if notes:
                lines += [f"No mark: {_esc('; '.join(notes))}.", ""]
            lines += [f"CSV: `tables/{t.slug}.csv` · LaTeX: `tables/{t.slug}.tex`", ""]
            lines += [line for plot in ts.plots for line in _figure(plot)]
            lines += _gallery(ts, save_thumb)
        lines += [line for plot in sec.plots for line in _figure(plot)]
    lines += ["## Provenance", ""]
    fields = [
        "run",
        "created",
        "benchmark",
        "protocol",
        "subset",
        "model",
        "model identity",
        "data",
        "data digest",
        "seed",
        "version",
        "cases",
    ]
    lines.append("| " + " | ".join(fields) + " |")
    lines.append("|" + "---|" * len(fields))
    for rd in report.runs:
        r = rd.run
        vals = [
            _code(r.id),
            _esc(r.created),
            _esc(r.benchmark),
            _esc(r.protocol),
            _esc(r.subset or "all"),
            _code(r.model),
            _esc(identity_text(r.model_identity)),
            _code(r.data_path),
            _code(r.data_digest[:12]),
            _esc(r.seed),
            _esc(r.version),
            "–" if r.n_cases is None else _esc(r.n_cases),
        ]
        lines.append("| " + " | ".join(vals) + " |")
    lines += [
        "",
        "CSV: `tables/provenance.csv` · LaTeX: `tables/provenance.tex` · paired tests: `tables/significance-tests.csv`",
        "",
    ]
    return "\n".join(lines)


def _figure(plot: Any) -> list[str]:
    """A figure's lines: its image (``figures/<key>.png``) and its caption in italics."""
    return [f"![{_esc(plot.title)}](figures/{plot.key}.png)", "", f"*{_esc(plot.caption)}*", ""]


def _table(header: list[str], rows: list[list[str]], *, numbers: bool = True) -> list[str]:
    """A Markdown table of ``header`` (escaped here) and ``rows`` of cells already in Markdown (:func:`_esc`,
    :func:`_code`); ``numbers``: the columns after the first are right-aligned."""
    align = "---:|" if numbers else "---|"
    lines = ["| " + " | ".join(_esc(h) for h in header) + " |", "|---|" + align * (len(header) - 1)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def _summary(report: Report) -> list[str]:
    """The summary the report opens with: findings, main scores or paired differences (:mod:`.summary`)."""
    sm = report.summary
    if sm is None:
        return []
    lines = [f"## {_esc(sm.heading)}", ""] + ([f"*{_esc(sm.note)}*", ""] if sm.note else [])
    for f in sm.findings:
        verdict = "REPRODUCED" if f.holds else "NOT reproduced"
        lines += [f"- **{verdict}** {_code(f.name, cell=False)}: {_esc(f.claim)}"]
        lines += [f"  - {_esc(n)}" for n in f.numbers]
        lines += [f"  - and {f.more} more in findings.json"] if f.more else []
        lines += [f"  - test: {_esc('; '.join(f.tests))}"] if f.tests else []
    lines += [""] if sm.findings else []
    for st in sm.tables:
        rows = [[_esc(c.text) + (" ▲" if c.best else "") for c in row] for row in st.rows]
        lines += [f"### {_esc(st.title)}", "", *_table(st.header, rows)]
        lines += [" · ".join(_esc(n) for n in st.notes) + ".", ""]
    if sm.order:
        lines += ["Sections below, in this order: " + _esc(", ".join(sm.order)) + ".", ""]
    return lines


def _key(report: Report) -> list[str]:
    """Label -> model spec -> run ids, with each run's diagnostics."""
    if not report.key:
        return []
    rows = []
    for k in report.key:
        diag = "; ".join(
            f"#{rid[:6]} " + ", ".join(f"{n} {_f(v)}" for n, v in d.items()) for rid, d in k.diagnostics.items()
        )
        runs = " ".join(_code(r) for r in k.run_ids)
        rows.append([_esc(k.label), _code(k.model), runs, _esc(", ".join(k.benchmarks)), _esc(diag)])
    notes = diagnostics_notes(report.key)
    lines = [
        "## Run labels",
        "",
        *_table(["label", "model spec", "runs", "benchmarks", "diagnostics"], rows, numbers=False),
    ]
    return lines + ([f"Diagnostics: {_esc('; '.join(notes))}.", ""] if notes else [])


def _gallery(ts: Any, save_thumb: Callable[[str, bytes], object] | None) -> list[str]:
    g = ts.gallery
    if g is None:
        return [f"*{_esc(ts.gallery_note)}*", ""] if ts.gallery_note else []
    lines = [f"#### Failure gallery ({min(len(g.cases), MD_GALLERY)} of {len(g.cases)} cases; all in report.html)", ""]
    counts = ", ".join(f"{_esc(m)}: {g.n_failures.get(m, 0)}" for m in g.models)
    lines += [f"Failed cases per model: {counts}.", ""]
    lines += [f"*{_esc(n)}.*" for n in g.notes] + ([""] if g.notes else [])
    for gc in g.cases[:MD_GALLERY]:
        tags = ", ".join(gc.tag_pairs)
        lines.append(
            f"- **case {_esc(gc.case_id)}** ({_esc(gc.subset)}{'; ' + _esc(tags) if tags else ''}) — "
            f"failed by {', '.join(_esc(m) for m in gc.failed_by)}"
        )
        if gc.thumbs and save_thumb is not None:
            links = []
            for k, th in enumerate(gc.thumbs):
                name = safe_name(f"{g.table_slug}-{gc.case_id}-{k + 1}")[:80] + ".jpg"
                save_thumb(name, th.jpeg)
                links.append(f"![I{k + 1}](figures/thumbs/{name})")
            lines.append("  " + " ".join(links))
        if gc.texts is not None:
            for k, text in enumerate(gc.texts):
                role = f" ({_esc(gc.roles[k])})" if k < len(gc.roles) else ""
                mark = " ✓" if gc.positives[k] else ""
                lines.append(f"  - T{k + 1}{role}{mark}: {_esc(text)}")
        for m in gc.models:
            if not m.failed:
                continue
            entries = [f"{_esc(lab)}={_f(v, 3)}" for lab, v in zip(gc.score_labels, m.values, strict=False)]
            lines.append(f"  - ✗ {_esc(m.label)}: " + (" ".join(entries) if entries else "(no scores stored)"))
    lines.append("")
    return lines
