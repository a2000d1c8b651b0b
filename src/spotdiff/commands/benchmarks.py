"""``spotdiff benchmarks``: the registered benchmarks, their papers, protocols and data layouts."""

from __future__ import annotations

import argparse
import textwrap

from spotdiff.benchmarks import BENCHMARKS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("benchmarks", help="list benchmarks, their protocols and data layout")
    p.add_argument("name", nargs="?", help="show one benchmark only")
    p.add_argument("--citation", action="store_true", help="print the BibTeX of each benchmark's paper")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    items = [(args.name, BENCHMARKS.get(args.name))] if args.name else BENCHMARKS.items()
    for name, bench in items:
        print(f"{name}")
        if bench.description:
            print(textwrap.indent(textwrap.fill(bench.description, 96), "    "))
        meta = bench.metadata
        print(textwrap.indent(textwrap.fill(f"paper: {meta.paper}", 96), "    "))
        print(f"    reference: {meta.reference}")
        print(f"    main score: {meta.main_score[1]} ({meta.main_score[0]}); reproduces {meta.reproduces or '-'}")
        print(f"    protocols: {', '.join(bench.protocols)} (default {bench.protocols[0]})")
        if bench.subsets:
            print(textwrap.indent(textwrap.fill("subsets: " + ", ".join(bench.subsets), 96), "    "))
        for name, subsets in meta.groups:
            print(textwrap.indent(textwrap.fill(f"group {name} = mean of {', '.join(subsets)}", 96), "    "))
        if meta.groups_source:
            print(textwrap.indent(textwrap.fill(f"aggregates: {meta.groups_source}", 96), "    "))
        if meta.ties:
            print(textwrap.indent(textwrap.fill(f"ties (--ties): {meta.ties}", 96), "    "))
        if bench.layout:
            print("    data layout:")
            print(textwrap.indent(textwrap.dedent(bench.layout).strip(), "      "))
        if args.citation:
            print(textwrap.indent(meta.citation.strip(), "    "))
        print()
    return 0
