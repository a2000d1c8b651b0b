"""``spotdiff data``: list, fetch, verify and locate benchmark data in the data home."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spotdiff.errors import SpotdiffError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "data",
        help="fetch benchmarks from their official sources into the data home; list, verify, locate them",
        description="The data home is $SPOTDIFF_DATA (default ~/.cache/spotdiff/data), or --root. Hub sources go "
        "through huggingface_hub (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE); other URLs can be redirected with "
        "SPOTDIFF_URL_MIRROR=http://HOST:PORT. eval, bias, train --cases and report read fetched data when "
        "--data is omitted.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--root",
        type=Path,
        help="data home (default $SPOTDIFF_DATA or ~/.cache/spotdiff/data; eval and the other commands look in "
        "$SPOTDIFF_DATA, so set it to the same folder)",
    )
    from spotdiff.commands._types import add_include_option

    add_include_option(common)
    sub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    ls = sub.add_parser(
        "list", parents=[common], help="every benchmark: sources, size, licence, manual steps, local status"
    )
    ls.add_argument("names", nargs="*", metavar="NAME", help="only these benchmarks")
    ls.set_defaults(func=run_list)

    fetch = sub.add_parser("fetch", parents=[common], help="download benchmarks from their official sources")
    fetch.add_argument("names", nargs="+", metavar="NAME", help="benchmark names (or peers' aliases), declarations' "
                       "YAML files (their hub and URL sources, and the image and video URLs their rows name), or "
                       "published sets hf:ORG/NAME[@REVISION]")
    only = fetch.add_mutually_exclusive_group()
    only.add_argument("--images-only", action="store_true", help="only the parts holding images")
    only.add_argument("--annotations-only", action="store_true", help="only the parts holding annotations")
    fetch.add_argument(
        "--part", action="append", metavar="PART", help="only this part (repeatable); names optional parts such "
        "as mieb (see `spotdiff data list`)",
    )
    fetch.add_argument("--force", action="store_true", help="fetch again parts that are already there")
    fetch.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    fetch.set_defaults(func=run_fetch)

    verify = sub.add_parser(
        "verify", parents=[common], help="re-hash a benchmark's files against the manifest and pinned checksums"
    )
    verify.add_argument("names", nargs="+", metavar="NAME")
    verify.set_defaults(func=run_verify)

    path = sub.add_parser("path", parents=[common], help="print the folder a benchmark is (or would be) fetched into")
    path.add_argument("name", metavar="NAME")
    path.set_defaults(func=run_path)


def _size(n: int | None) -> str:
    if n is None:
        return "size ?"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return ""


def run_list(args: argparse.Namespace) -> int:
    from spotdiff.benchmarks.sources import ImagesSource, ManualSource
    from spotdiff.data import CATALOG, COLLECTIONS, benchmark_sources, benchmark_state
    from spotdiff.data.declared import resolve_benchmark
    from spotdiff.data.home import collection_state

    decls = [benchmark_sources(resolve_benchmark(n)) for n in args.names] if args.names else list(CATALOG.values())
    for decl in decls:
        state = benchmark_state(decl, args.root)
        print(f"{decl.name}  [{state.status}]  {decl.title}")
        print(f"    licence: {decl.license}")
        for part in decl.parts:
            ps = state.parts[part.name]
            source = part.source
            flags = []
            if part.optional:
                flags.append("optional")
            if getattr(source, "gated", False):
                flags.append("gated")
            if isinstance(source, ManualSource):
                flags.append("manual step")
            size = source.size
            if isinstance(source, ImagesSource):
                sizes = [COLLECTIONS[c].source.size for c in dict(source.folders)]
                size = None if None in sizes else sum(sizes)  # type: ignore[arg-type]
            print(f"    {part.name:<12} {ps.status:<9} {part.role:<11} {_size(size):<10} {source.describe()}"
                  + (f"  [{', '.join(flags)}]" if flags else ""))
            if isinstance(source, ImagesSource):
                for name in dict(source.folders):
                    coll = COLLECTIONS[name]
                    cs = collection_state(coll, args.root)
                    manual = "  [manual step]" if isinstance(coll.source, ManualSource) else ""
                    print(f"      {name:<22} {cs.status:<9} {_size(coll.source.size):<10} "
                          f"{coll.source.describe()}{manual}")
            if ps.status not in ("ready", "verified", "absent") and ps.detail:
                print(f"      -> {ps.detail}")
        if decl.data_notes:
            print(f"    note: {decl.data_notes}")
        print(f"    folder: {state.folder}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    from spotdiff.data import FetchIncomplete, fetch_benchmark
    from spotdiff.data.declared import fetch_media, resolve_benchmark

    role = "images" if args.images_only else "annotations" if args.annotations_only else None
    failed: list[str] = []
    for given in args.names:
        name = given
        try:
            name = resolve_benchmark(given)
            outcomes = fetch_benchmark(name, root=args.root, parts=args.part, role=role, progress=not args.quiet)
            media = None if args.part or role == "annotations" else fetch_media(name, progress=not args.quiet)
            outcomes += [media] if media is not None else []
        except FetchIncomplete as exc:
            outcomes = exc.outcomes
            failed.append(str(exc))
        except SpotdiffError as exc:
            failed.append(f"{name}: {exc}")
            continue
        for o in outcomes:
            print(f"{name}/{o.part}: {o.status}" + (f" ({o.message})" if o.status != "missing" else ""))
    if failed:
        print("\n".join(failed), file=sys.stderr)
        return 2
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from spotdiff.data import verify_benchmark
    from spotdiff.data.declared import resolve_benchmark

    bad = 0
    for name in map(resolve_benchmark, args.names):
        for check in verify_benchmark(name, root=args.root):
            label = {True: "verified", False: "CORRUPT", None: "absent"}[check.ok]
            print(f"{name}/{check.part}: {label} ({check.message})")
            bad += check.ok is False
    return 2 if bad else 0


def run_path(args: argparse.Namespace) -> int:
    from spotdiff.data import benchmark_sources, benchmark_state
    from spotdiff.data.declared import resolve_benchmark

    state = benchmark_state(benchmark_sources(resolve_benchmark(args.name)), args.root)
    print(state.folder)
    if state.status == "absent":
        print(f"{state.name} is not fetched yet: spotdiff data fetch {state.name}", file=sys.stderr)
        return 1
    return 0
