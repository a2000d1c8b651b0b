"""``spotdiff compare A B``: the paired comparison of two runs (run ids or result folders)."""

from __future__ import annotations

import argparse
from pathlib import Path

from spotdiff.commands._types import add_store_option, n_boot, seed
from spotdiff.jsonio import dumps
from spotdiff.report.compare import compare_runs, format_comparison
from spotdiff.report.export import comparison_csv, comparison_latex


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare",
        help="paired comparison of two runs on the same cases",
        description="Compare A with B (same benchmark, protocol and tie rule) on the same units: A - B per metric, "
        "pooled ('all'), as the mean over subsets ('subset_mean') and the paper groupings, and per subset, with a "
        "paired bootstrap CI and a p-value. A and B are run ids (or unique prefixes) in the run store, or folders "
        "written by `spotdiff eval --out`. The test is cluster-aware: exact McNemar when every case is one unit and "
        "the outcome 0/1; otherwise a paired sign-flip test swapping whole cases (SPEC's K x K sets) or single units.",
    )
    p.add_argument("run_a", metavar="A", help="run id or unique prefix, or a result folder of `eval --out`")
    p.add_argument("run_b", metavar="B", help="run id or unique prefix, or a result folder of `eval --out`")
    add_store_option(p)
    p.add_argument("--metric", action="append", help="only this metric (repeatable; default: all)")
    p.add_argument(
        "--subset", action="append", help="only this scope: 'all', 'subset_mean', a grouping or a subset (repeatable)"
    )
    p.add_argument("--n-boot", type=n_boot, help="bootstrap resamples (default: run A's)")
    p.add_argument("--n-perm", type=int, default=10_000, help="random swaps of the sign-flip test")
    p.add_argument("--seed", type=seed, help="seed of the bootstrap and the swaps (default: run A's)")
    p.add_argument("--json", action="store_true", help="print the comparisons as JSON (full precision) instead")
    p.add_argument("--csv", type=Path, help="also write the comparison as CSV")
    p.add_argument("--latex", type=Path, help="also write the comparison as a LaTeX tabular")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cmp = compare_runs(
        args.run_a,
        args.run_b,
        store=args.store,
        metrics=args.metric,
        subsets=args.subset,
        n_boot=args.n_boot,
        n_perm=args.n_perm,
        seed=args.seed,
    )
    print(dumps(cmp.as_json(), indent=2) if args.json else format_comparison(cmp))
    if args.csv:
        args.csv.write_text(comparison_csv(cmp.results), encoding="utf-8")
    if args.latex:
        args.latex.write_text(comparison_latex(cmp.results, cmp.run_a.id, cmp.run_b.id), encoding="utf-8")
    if not args.json:
        for path in (args.csv, args.latex):
            if path:
                print(f"wrote {path}")
    return 0
