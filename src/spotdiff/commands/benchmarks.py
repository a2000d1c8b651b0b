"""``spotdiff benchmarks``: the registered benchmarks, their protocols and data layouts."""

from __future__ import annotations

import argparse
import textwrap

from spotdiff.benchmarks import BENCHMARKS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("benchmarks", help="list benchmarks, their protocols and data layout")
    p.add_argument("name", nargs="?", help="show one benchmark only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    items = [(args.name, BENCHMARKS.get(args.name))] if args.name else BENCHMARKS.items()
    for name, bench in items:
        print(f"{name}")
        if bench.description:
            print(textwrap.indent(textwrap.fill(bench.description, 96), "    "))
        print(f"    protocols: {', '.join(bench.protocols)} (default {bench.protocols[0]})")
        if bench.subsets:
            print(textwrap.indent(textwrap.fill("subsets: " + ", ".join(bench.subsets), 96), "    "))
        if bench.layout:
            print("    data layout:")
            print(textwrap.indent(textwrap.dedent(bench.layout).strip(), "      "))
        print()
    return 0
