"""``spotdiff report``: an HTML page, Markdown, figures, CSV and LaTeX from the run store."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from spotdiff.commands._types import add_store_option, folder
from spotdiff.diagnose.store import RunStore
from spotdiff.report.build import build_report, write_report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="render an HTML + Markdown report (tables, plots, failure galleries) from the run store",
        description="Render a self-contained HTML page and the same content as Markdown from the runs in the "
        "run store: one table per benchmark and protocol (models x subsets x metrics with 95%% CIs, the best cell "
        "marked only when a paired test beats every other model), per-subset bars, EqSim equivariance "
        "distributions, alpha curves, VISLA lexical-overlap histograms, failure galleries and the provenance of "
        "every number. Every table is also exported as CSV and LaTeX under OUT/tables.",
    )
    p.add_argument(
        "run_ids",
        nargs="*",
        metavar="RUN_ID",
        help="runs to include (ids or unique prefixes; "
        "default: the latest finished run of each benchmark, protocol, model and subset)",
    )
    p.add_argument(
        "--out", required=True, type=folder, help="output directory (report.html, report.md, figures/, tables/)"
    )
    add_store_option(p)
    p.add_argument("--benchmark", action="append", help="only this benchmark (repeatable)")
    p.add_argument("--all-runs", action="store_true", help="without RUN_IDs: every finished run, not only the latest")
    p.add_argument("--title", default="spotdiff report")
    p.add_argument("--gallery-limit", type=int, default=40, help="failure cases per table (0: no gallery)")
    p.add_argument("--thumb-size", type=int, default=128, help="thumbnail size in pixels")
    p.add_argument("--no-cases", action="store_true", help="do not re-read the benchmark data for texts and images")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the best-cell mark")
    p.add_argument("--format", choices=["html", "md", "both"], default="both")
    p.add_argument("--jobs", type=int, help="processes drawing the figures (default: CPUs, at most 4)")
    p.add_argument(
        "--findings",
        type=Path,
        help="a demo's findings.json: the report opens with its findings (default: with the table of main scores, "
        "or the paired differences of two runs)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    with RunStore(args.store, create=False) as store:
        report = build_report(
            store,
            args.run_ids or None,
            benchmarks=args.benchmark,
            latest_only=not args.all_runs,
            title=args.title,
            gallery_limit=args.gallery_limit,
            thumb_size=args.thumb_size,
            load_cases=not args.no_cases,
            alpha=args.alpha,
            jobs=args.jobs,
            findings=args.findings,
        )
    formats = ("html", "md") if args.format == "both" else (args.format,)
    written = write_report(report, args.out, formats=formats)
    n_tables = len(report.tables)
    print(f"{len(report.runs)} runs, {n_tables} tables, {time.perf_counter() - t0:.1f} s")
    for name in ("html", "md", "tables", "figures"):
        if name in written:
            print(f"wrote {written[name]}")
    return 0
