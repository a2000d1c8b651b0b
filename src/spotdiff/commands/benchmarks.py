"""``spotdiff benchmarks``: the registered benchmarks, their papers, protocols and data layouts.

A benchmark of your own is declared in a YAML file (docs/declared.md); ``spotdiff benchmarks FILE`` shows it
as it shows a built-in, and every command takes the file (or ``--include-path DIR``, ``$SPOTDIFF_INCLUDE_PATH``,
then its name; or ``hf:ORG/NAME[@REVISION]`` for a set spotdiff published) where it takes a name.

How a declared benchmark is identified: a run records the declared name as its benchmark, the declaration's
file and the SHA-256 of its content (``declaration`` in the run store's info and in metrics.json, and in the
run configuration that owns an --out folder, so an edited declaration is another run), the data's digest
(its data files' names and contents) and, for fetched data, the source and revision from the data home's
manifest (a hub set: its repository and commit). The cache keys scores by the model and the content of each
image (its bytes' SHA-256) and text, never by benchmark: a declared benchmark and a built-in reading the same
images and texts share their cached scores.
"""

from __future__ import annotations

import argparse
import textwrap

from spotdiff.benchmarks import ALIASES, BENCHMARKS, canonical_benchmark
from spotdiff.benchmarks.suites import SUITES
from spotdiff.commands._types import add_documented_parser, add_include_option
from spotdiff.protocols import get_protocol


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_documented_parser(subparsers, "benchmarks", __doc__, "list benchmarks, their protocols and data layout")
    p.add_argument("name", nargs="?", help="show one benchmark only (a name, a declaration's file, or hf:ORG/NAME)")
    add_include_option(p)
    p.add_argument("--citation", action="store_true", help="print the BibTeX of each benchmark's paper")
    p.add_argument("--suites", action="store_true", help="list the named suites (spotdiff eval --suite NAME)")
    p.add_argument(
        "--markdown", action="store_true", help="print the benchmark reference as Markdown (docs/benchmarks.md)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown(), end="")
        return 0
    if args.suites:
        for name, (description, members) in sorted(SUITES.items()):
            print(name)
            print(textwrap.indent(textwrap.fill(description, 96), "    "))
            print(textwrap.indent(textwrap.fill("benchmarks: " + ", ".join(members), 96), "    "))
            print()
        return 0
    from spotdiff.data.declared import include_folders, resolve_benchmark

    if args.name:
        names = [canonical_benchmark(resolve_benchmark(args.name))[0]]
    else:
        include_folders()
        names = BENCHMARKS.names()
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
        print(f"    licence: {meta.license}")
        print(f"    main score: {meta.main_score[1]} ({meta.main_score[0]}); reproduces {meta.reproduces or '-'}")
        print(f"    protocols: {', '.join(bench.protocols)} (default {bench.protocols[0]})")
        if bench.subsets:
            print(textwrap.indent(textwrap.fill("subsets: " + ", ".join(bench.subsets), 96), "    "))
        for group, subsets in meta.groups:
            print(textwrap.indent(textwrap.fill(f"group {group} = mean of {', '.join(subsets)}", 96), "    "))
        if meta.groups_source:
            print(textwrap.indent(textwrap.fill(f"aggregates: {meta.groups_source}", 96), "    "))
        if meta.ties:
            print(textwrap.indent(textwrap.fill(f"ties (--ties): {meta.ties}", 96), "    "))
        if args.name:
            print("    metrics (what each reproduces):")
            for protocol, metric, source in metric_rows(bench):
                line = f"{protocol}: {metric}: {source or '-'}"
                print(textwrap.indent(textwrap.fill(line, 96, subsequent_indent="    "), "      "))
            if meta.readings:
                print("    readings of generated answers (the default, the alternatives, a peer's where it differs):")
                for reading in meta.readings:
                    print(textwrap.indent(textwrap.fill(reading.line(), 96, subsequent_indent="    "), "      "))
        if bench.layout:
            print("    data layout:")
            print(textwrap.indent(textwrap.dedent(bench.layout).strip(), "      "))
        if args.citation:
            print(textwrap.indent(meta.citation.strip(), "    "))
        print()
    return 0


def metric_rows(bench: type) -> list[tuple[str, str, str | None]]:
    """``(protocol, metric, what it reproduces or None)`` for every metric of every protocol of ``bench``.

    Args:
        bench: a registered benchmark class.
    """
    meta = bench.metadata
    return [(p, m, meta.metric_source(p, m)) for p in bench.protocols for m in get_protocol(p).metrics]


def builtin_names() -> list[str]:
    """The names of the benchmarks spotdiff and its plugins register in code (declared ones excluded)."""
    return [name for name in BENCHMARKS.names() if BENCHMARKS.get(name).declaration_record() is None]


def markdown() -> str:
    """Every benchmark and suite as the Markdown page docs/benchmarks.md (a test keeps them equal)."""
    lines = [
        "# Benchmarks",
        "",
        "Generated by `spotdiff benchmarks --markdown`. Every benchmark reduces to cases (a few images, a few",
        "texts, which goes with which) scored by a protocol; ties count as failures unless a run asks",
        "otherwise (`--ties argmax`; what each aggregate, test and tie rule is: [Statistics](statistics.md)).",
        "Where its data comes from, and how to fetch it: [Data](data.md).",
        "",
        "## Suites",
        "",
        "| suite | benchmarks | what it is |",
        "| --- | --- | --- |",
    ]
    for name, (description, members) in sorted(SUITES.items()):
        lines.append(f"| `{name}` | {', '.join(f'`{m}`' for m in members)} | {description} |")
    for name in builtin_names():
        bench = BENCHMARKS.get(name)
        meta = bench.metadata
        aliases = [a for a, n in ALIASES.items() if n == name]
        lines += ["", f"## {name}", "", bench.description, ""]
        rows = [
            ("paper", meta.paper),
            ("reference", meta.reference),
            ("main score", f"`{meta.main_score[1]}` of protocol `{meta.main_score[0]}`"),
            ("reproduces", meta.reproduces or "-"),
            ("protocols", ", ".join(f"`{p}`" for p in bench.protocols) + f" (default `{bench.protocols[0]}`)"),
            ("subsets", ", ".join(f"`{x}`" for x in bench.subsets) or "-"),
            ("also named", ", ".join(f"`{a}`" for a in aliases) or "-"),
            ("groupings", "; ".join(f"`{g}` = mean of {', '.join(f'`{x}`' for x in subs)}" for g, subs in meta.groups)
             or "-"),
            ("aggregates", meta.groups_source or "-"),
            ("ties", meta.ties or "-"),
            ("licence", meta.license or "-"),
        ]
        lines += ["| | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows), ""]
        if meta.metric_sources:
            lines += ["Metrics:", "", "| protocol | metric | reproduces |", "| --- | --- | --- |"]
            lines += [f"| `{p}` | `{m}` | {s or '-'} |" for p, m, s in metric_rows(bench)]
            lines.append("")
        if meta.readings:
            lines += ["Readings of generated answers:", "", "| chosen by | whose | rule |", "| --- | --- | --- |"]
            lines += [f"| {'**default**: ' if r.default else ''}{f'`{r.choice}`' if r.choice else 'not offered'} "
                      f"| {r.whose} | {r.rule} |" for r in meta.readings]  # fmt: skip
            lines.append("")
        lines += ["Data layout:", "", "```text", textwrap.dedent(bench.layout).strip(), "```", ""]
        lines += ["Citation:", "", "```bibtex", meta.citation.strip(), "```"]
    return "\n".join(lines) + "\n"
