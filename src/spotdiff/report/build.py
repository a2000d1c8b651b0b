"""Build a report from the run store and write it: HTML, Markdown, figures, CSV and LaTeX.

``build_report(store, run_ids)`` collects the runs into result tables (:mod:`.collect`), draws the
figures (:mod:`.plots`), picks the failure galleries (:mod:`.gallery`) and returns a :class:`Report`;
``write_report(report, out)`` writes::

    out/report.html            self-contained: figures and thumbnails as data URIs, inline CSS and JS
    out/report.md              the same content for papers and pull requests (figures as files)
    out/figures/*.png          every figure; out/figures/thumbs/*.jpg the Markdown gallery thumbnails
    out/tables/<table>.csv     every result table, long form; .tex the same table for LaTeX
    out/tables/provenance.csv  the provenance of every run (and .tex)
    out/tables/significance-tests.csv   the paired tests behind the best-cell marks
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.jsonio import atomic_path
from spotdiff.report import export
from spotdiff.report.collect import (
    ALPHA,
    N_PERM,
    RunData,
    build_tables,
    load_run_data,
    run_key,
    select_runs,
)
from spotdiff.report.gallery import CaseSource, build_gallery
from spotdiff.report.html import render_html
from spotdiff.report.labels import run_labels
from spotdiff.report.markdown import render_markdown
from spotdiff.report.model import BenchmarkSection, Report, TableSection
from spotdiff.report.plots import (
    Plot,
    alpha_curve_figure,
    equivariance_figure,
    lexical_overlap_figure,
    render_many,
    subset_bars,
)
from spotdiff.report.retention import TITLE as RETENTION_TITLE
from spotdiff.report.retention import retention_figures, training_runs
from spotdiff.report.runkey import build_key
from spotdiff.report.summary import build_summary

log = logging.getLogger(__name__)


class _Clock:
    """Wall-clock and CPU seconds per stage (CPU of this process; figure workers not included)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        w, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c


_EQUIVARIANCE_CAPTION = (
    "Distribution of the per-case equivariance score (EqSim-v2 deviation of the 2 x 2 score matrix, EqBen "
    "Fig. 6); a tighter curve near 0 is more equivariant. Group score in the legend."
)
_ALPHA_CAPTION = (
    "VisualGPTScore alpha-debiasing curves (Table 3): score of P(t|i) / P(t)^alpha against alpha; dots mark the "
    "tuned alpha."
)


def build_report(
    store: RunStore,
    run_ids: Sequence[str] | None = None,
    *,
    benchmarks: Sequence[str] | None = None,
    latest_only: bool = True,
    title: str = "spotdiff report",
    gallery_limit: int = 40,
    thumb_size: int = 128,
    load_cases: bool = True,
    alpha: float = ALPHA,
    n_perm: int = N_PERM,
    jobs: int | None = None,
    findings: str | Path | None = None,
) -> Report:
    """Collect, test, plot and pick galleries for the selected runs (see :func:`select_runs`).

    ``jobs`` processes render the figures (default: the available CPUs, at most 4; 1 renders here).
    ``findings``: a demo's ``findings.json``, the summary the report opens with (otherwise the
    summary is the runs x ``benchmarks`` table of main scores, in the order given, or the paired
    differences of two runs); the sections follow in the summary's order (:mod:`.summary`).
    """
    clock = _Clock()
    with clock.stage("load"):
        by_training = training_runs(store, benchmarks) if not run_ids else {}
        try:
            selected = select_runs(store, run_ids, benchmarks=benchmarks, latest_only=latest_only)
        except ConfigError:
            if not by_training:
                raise
            selected = []  # a store holding only evaluations made during training
        runs = load_run_data(store, selected)
    with clock.stage("tables"):
        labels = run_labels([run_key(rd) for rd in runs])
        tables = build_tables(runs, alpha=alpha, n_perm=n_perm, labels=labels)
    with clock.stage("summary"):
        summary = build_summary(tables, labels, findings=findings, benchmarks=benchmarks, alpha=alpha)
        key = build_key(runs, labels)
    source = CaseSource() if load_cases else None
    sections: dict[str, BenchmarkSection] = {}
    pending: list[tuple[list[Plot], Any, str, str, str]] = []  # (destination, figure, key, title, caption)
    for table in tables:
        sec = sections.setdefault(table.benchmark, BenchmarkSection(table.benchmark))
        ts = TableSection(table)
        sec.tables.append(ts)
        with clock.stage("plots"):
            figs = [
                ("bars", subset_bars(table), "Per-subset results with 95% bootstrap error bars."),
                ("equivariance", equivariance_figure(table), _EQUIVARIANCE_CAPTION),
                ("alpha", alpha_curve_figure(table), _ALPHA_CAPTION),
            ]
            for kind, fig, caption in figs:
                if fig is not None:
                    pending.append((ts.plots, fig, f"{table.slug}-{kind}", f"{table.benchmark} {kind}", caption))
        with clock.stage("gallery"):
            if table.protocol == "retrieval":
                ts.gallery_note = "no failure gallery for gallery retrieval (units are queries against the gallery)"
            elif gallery_limit > 0:
                ts.gallery = build_gallery(table, source, limit=gallery_limit, thumb_size=thumb_size)
    with clock.stage("plots"):
        for sec in list(sections.values()):
            if sec.benchmark.startswith("visla"):
                lexical = _lexical_plot(sec, source)
                if lexical is not None:
                    pending.append((sec.plots, *lexical))
        retention = retention_figures(by_training)
        if retention:
            sec = sections.setdefault(RETENTION_TITLE, BenchmarkSection(RETENTION_TITLE))
            pending += [(sec.plots, *item) for item in retention]
            runs += [RunData(r, []) for group in by_training.values() for r in group]
        rendered = render_many([(fig, key, title, caption) for _, fig, key, title, caption in pending], jobs=jobs)
        for (dest, *_), plot in zip(pending, rendered, strict=True):
            dest.append(plot)
    rank = {b: k for k, b in enumerate(summary.order)}
    return Report(
        title=title,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        store_path=str(store.path),
        sections=sorted(sections.values(), key=lambda sec: rank.get(sec.benchmark, len(rank))),
        runs=runs,
        alpha=alpha,
        n_perm=n_perm,
        timings=clock.wall,
        cpu_timings=clock.cpu,
        summary=summary,
        key=key,
    )


def _lexical_plot(sec: BenchmarkSection, source: CaseSource | None) -> tuple[Any, str, str, str] | None:
    """VISLA Fig. 8 from the tags ``d_p1_n`` / ``d_p2_n`` and, when the data is readable, P1-P2."""
    runs = [rd for ts in sec.tables for rd in ts.table.runs]
    if not runs:
        return None
    d1: dict[str, float] = {}
    d2: dict[str, float] = {}
    ids: set[str] = set()
    for rd in runs:
        for u in rd.units:
            ids.add(u["case_id"])
            tags = u.get("tags") or {}
            try:
                if "d_p1_n" in tags:
                    d1[u["case_id"]] = float(tags["d_p1_n"])
                if "d_p2_n" in tags:
                    d2[u["case_id"]] = float(tags["d_p2_n"])
            except (TypeError, ValueError):
                continue
    d12: list[float] = []
    if source is not None:
        cases, _ = source.cases(runs, set())
        if cases:
            from rapidfuzz.distance import Levenshtein

            for cid in sorted(ids & set(cases)):  # the evaluated cases only (a run may use --limit)
                case = cases[cid]
                roles = [r.lower() for r in case.roles]
                if {"p1", "p2", "n"} <= set(roles):
                    p1, p2, n = (case.texts[roles.index(r)] for r in ("p1", "p2", "n"))
                    d12.append(Levenshtein.distance(p1, p2))
                    d1[cid], d2[cid] = Levenshtein.distance(p1, n), Levenshtein.distance(p2, n)
    series = {"P1-P2": d12, "P1-N": list(d1.values()), "P2-N": list(d2.values())}
    fig = lexical_overlap_figure(sec.benchmark, series)
    if fig is None:
        return None
    caption = (
        "Edit distances between the semantically equal positives (P1-P2) and between each positive and the "
        "lexically close negative (P1-N, P2-N), as in VISLA Fig. 8. P1 is the positive closer to N."
    )
    if not d12:
        caption += " P1-P2 is missing: the data could not be read."
    return fig, f"{sec.slug}-lexical-overlap", f"{sec.benchmark} lexical overlap", caption


def _folder(path: Path) -> Path:
    """``path`` as a folder of the report's own: a symbolic link there is removed (never followed) first."""
    if path.is_symlink():
        path.unlink()
    path.mkdir(exist_ok=True)
    return path


def _put(path: Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole: into a temporary file created afresh (never through
    a link left at its name), then renamed onto ``path``, which replaces a link there rather than follow it."""
    with atomic_path(path) as tmp:
        tmp.unlink(missing_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with open(os.open(tmp, flags, 0o644), "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def write_report(report: Report, out: str | Path, *, formats: Sequence[str] = ("html", "md")) -> dict[str, Path]:
    """Write the report's files under ``out``; returns name -> path of the main files.

    Each file is written whole (:func:`_put`: a failed or killed write leaves the file that was there), and
    a symbolic link where the report puts a file or a folder is replaced, never written through.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures, tables_dir = _folder(out / "figures"), _folder(out / "tables")
    written: dict[str, Path] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    for sec in report.sections:
        for plot in [*sec.plots, *(p for ts in sec.tables for p in ts.plots)]:
            _put(figures / f"{plot.key}.png", plot.png)
        for ts in sec.tables:
            slug = ts.table.slug
            _put(tables_dir / f"{slug}.csv", export.table_csv(ts.table))
            _put(tables_dir / f"{slug}.tex", export.table_latex(ts.table))
    _put(tables_dir / "provenance.csv", export.provenance_csv(report.runs))
    _put(tables_dir / "provenance.tex", export.provenance_latex(report.runs))
    _put(tables_dir / "significance-tests.csv", export.tests_csv(report.tables))
    if "html" in formats:
        written["html"] = _put(out / "report.html", render_html(report))
    if "md" in formats:
        thumbs = figures / "thumbs"
        markdown = render_markdown(report, lambda name, jpeg: _put(_folder(thumbs) / name, jpeg))
        written["md"] = _put(out / "report.md", markdown)
    written["figures"], written["tables"] = figures, tables_dir
    report.timings["write"] = time.perf_counter() - t0
    report.cpu_timings["write"] = time.process_time() - c0
    return written
