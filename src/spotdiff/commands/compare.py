"""``spotdiff compare RUN_A RUN_B``: the paired comparison of two runs, in the terminal."""

from __future__ import annotations

import argparse
from pathlib import Path

from spotdiff.diagnose.store import RunStore
from spotdiff.report.compare import compare_runs, format_comparison
from spotdiff.report.export import comparison_csv, comparison_latex


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare",
        help="paired comparison of two runs on the same cases",
        description="Compare RUN_A with RUN_B (same benchmark and protocol) on the same units: A - B per metric, "
        "overall and per subset, with a paired bootstrap CI and a p-value (exact McNemar on per-unit 0/1 "
        "outcomes, paired permutation otherwise).",
    )
    p.add_argument("run_a", metavar="RUN_A", help="run id or unique prefix")
    p.add_argument("run_b", metavar="RUN_B", help="run id or unique prefix")
    p.add_argument("--store", type=Path, help="run store path (default $SPOTDIFF_STORE or ~/.local/share/spotdiff)")
    p.add_argument("--metric", action="append", help="only this metric (repeatable; default: all)")
    p.add_argument("--subset", action="append", help="only this scope: 'all' or a subset (repeatable)")
    p.add_argument("--n-boot", type=int, help="bootstrap resamples (default: run A's)")
    p.add_argument("--n-perm", type=int, default=10_000, help="permutations for non-binary metrics")
    p.add_argument("--seed", type=int, help="seed of the bootstrap and permutations (default: run A's)")
    p.add_argument("--csv", type=Path, help="also write the comparison as CSV")
    p.add_argument("--latex", type=Path, help="also write the comparison as a LaTeX tabular")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with RunStore(args.store) as store:
        cmp = compare_runs(
            store,
            args.run_a,
            args.run_b,
            metrics=args.metric,
            subsets=args.subset,
            n_boot=args.n_boot,
            n_perm=args.n_perm,
            seed=args.seed,
        )
    print(format_comparison(cmp))
    if args.csv:
        args.csv.write_text(comparison_csv(cmp.results), encoding="utf-8")
        print(f"wrote {args.csv}")
    if args.latex:
        args.latex.write_text(comparison_latex(cmp.results, cmp.run_a.id, cmp.run_b.id), encoding="utf-8")
        print(f"wrote {args.latex}")
    return 0
