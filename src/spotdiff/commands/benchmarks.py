"""``spotdiff benchmarks``: the registered benchmarks, their papers, protocols and data layouts."""

from __future__ import annotations

import argparse
import textwrap

from spotdiff.benchmarks import ALIASES, BENCHMARKS, canonical_benchmark
from spotdiff.benchmarks.suites import SUITES


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("benchmarks", help="list benchmarks, their protocols and data layout")
    p.add_argument("name", nargs="?", help="show one benchmark only")
    p.add_argument("--citation", action="store_true", help="print the BibTeX of each benchmark's paper")
    p.add_argument("--suites", action="store_true", help="list the named suites (spotdiff eval --suite NAME)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.suites:
        for name, (description, members) in sorted(SUITES.items()):
            print(name)
            print(textwrap.indent(textwrap.fill(description, 96), "    "))
            print(textwrap.indent(textwrap.fill("benchmarks: " + ", ".join(members), 96), "    "))
            print()
        return 0
    names = [canonical_benchmark(args.name)[0]] if args.name else BENCHMARKS.names()
    for name in names:
        bench = BENCHMARKS.get(name)
        aliases = [a for a, n in ALIASES.items() if n == name]
        print(name)
        if aliases:
            print(f"    also named: {', '.join(aliases)}")
        if bench.description:
            print(textwrap.indent(textwrap.fill(bench.description, 96), "    "))
        meta = bench.metadata
        print(textwrap.indent(textwrap.fill(f"paper: {meta.paper}", 96), "    "))
        print(f"    reference: {meta.reference}")
        print(f"    main score: {meta.main_score[1]} ({meta.main_score[0]}); reproduces {meta.reproduces or '-'}")
        print(f"    protocols: {', '.join(bench.protocols)} (default {bench.protocols[0]})")
        if bench.subsets:
            print(textwrap.indent(textwrap.fill("subsets: " + ", ".join(bench.subsets), 96), "    "))
        if bench.layout:
            print("    data layout:")
            print(textwrap.indent(textwrap.dedent(bench.layout).strip(), "      "))
        if args.citation:
            print(textwrap.indent(meta.citation.strip(), "    "))
        print()
    return 0
