"""``spotdiff synth``: write minimal-change datasets (SPEC, EqBen, VISLA formats; training corpora;
zero-shot classification sets).

::

    spotdiff synth spec   --out DIR [--n 10] [--seed 0] [--image-size 224] [--subsets a,b] [--objects DIR]
    spotdiff synth eqben  --out DIR [--n 10] ...
    spotdiff synth eqsd   --out DIR [--n 10] [--t2i MODEL] [--check MODEL]
    spotdiff synth visla  --out DIR [--n 20] [--relations FILE] ...
    spotdiff synth visla  --out DIR --pairs SUGARCREPE.json [--llm SPEC] [--images DIR] [--n 20]
    spotdiff synth visla  --out DIR --from-review REVIEW.csv [REVIEW.NAME.csv ...] [--review-rule all|majority]
    spotdiff synth visla-vsr --out DIR --vsr VSR.jsonl [--images DIR] [--n 1000]
    spotdiff synth eqben-video --source ag|gebc|youcook2 --annotations PATH [PATH ...] --videos DIR --out DIR
    spotdiff synth corpus --out DIR [--n 100] [--image-size 64] ...
    spotdiff synth zeroshot --out DIR [--n 10] ...
    spotdiff synth contact-sheet DIR --out sheet.png
    spotdiff synth publish DIR --push-to-hub ORG/NAME [--license LICENCE] [--out LAYOUT]
    spotdiff synth list

``--n`` counts cases per subset (spec), pairs per subset (eqben), pairs (eqsd, eqben-video), scenes or
triplets (visla), image-caption pairs (corpus) or images (zeroshot). The same options always give
byte-identical files, whatever ``--workers``. ``spotdiff synth ENGINE --help`` lists exactly the options
the engine reads. A run stopped part way resumes when the same command is given again (finished
items are kept); ``--overwrite`` replaces an earlier output; ``-q`` hides the progress bars.
``spotdiff review DIR`` reviews what an engine wrote, in the browser; ``--from-review`` (spec, eqben,
eqben-video, eqsd, visla) then writes the items people accepted. ``--push-to-hub ORG/NAME`` (or ``spotdiff synth
publish DIR`` for a folder written before) publishes the set as a Hub dataset: parquet shards with Image and Video
features, one config per subset, a card with its provenance and review, and the declaration that ``spotdiff eval
--benchmark hf:ORG/NAME`` reads it back with (docs/declared.md); the push is checked before anything runs.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from spotdiff.commands._types import (
    add_documented_parser,
    folder,
    nonnegative_int,
    positive_float,
    positive_int,
    seed,
)
from spotdiff.synth import ENGINES, SynthConfig, SynthEngine
from spotdiff.synth.run import synthesize


def _names(value: str) -> tuple[str, ...]:
    """``a,b`` as ``("a", "b")``."""
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _fraction(value: str) -> float:
    """A number within [0, 1]."""
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within [0, 1], got {value}")
    return x


#: the argparse type of each kind of option (spotdiff.synth.KINDS)
_TYPES: dict[str, Any] = {
    "int": int,
    "count": nonnegative_int,
    "positive": positive_int,
    "seed": seed,
    "float": positive_float,
    "fraction": _fraction,
    "str": str,
    "path": Path,
    "paths": Path,
    "names": _names,
}


def _add_options(parser: argparse.ArgumentParser, config_class: type[SynthConfig]) -> None:
    """One command-line option per declared field of the engine's config, grouped as declared."""
    groups: dict[str | None, Any] = {None: parser}
    for f in fields(config_class):
        meta = f.metadata
        if "help" not in meta:
            continue
        group = meta["group"]
        if group not in groups:
            groups[group] = parser.add_argument_group(group)
        target = groups[group]
        flag = "--" + f.name.replace("_", "-")
        flags = (flag, *meta["aliases"])
        if meta["kind"] == "flag":
            if f.default:
                target.add_argument(f"--no-{flag[2:]}", dest=f.name, action="store_false", help=meta["help"])
            else:
                target.add_argument(flag, dest=f.name, action="store_true", help=meta["help"])
            continue
        shown = "" if f.default is None else f" (default: {_shown(f.default)})"
        many = {"nargs": "+"} if meta["kind"] == "paths" else {}
        target.add_argument(
            *flags,
            dest=f.name,
            type=_TYPES[meta["kind"]],
            choices=meta["choices"],
            default=f.default,
            metavar=meta["metavar"],
            help=meta["help"].replace("%", "%%") + shown,
            **many,
        )


def _shown(value: Any) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def engine_config(cls: type[SynthEngine], args: argparse.Namespace) -> SynthConfig:
    """The configuration of engine ``cls`` from its parsed ``spotdiff synth`` options."""
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()}  # nargs: a list
    return cls.config_class(**{f.name: given[f.name] for f in fields(cls.config_class) if f.name in given})


def register(subparsers: argparse._SubParsersAction) -> None:
    summary = "synthesize minimal-change data (SPEC, EqBen, VISLA formats, training corpora, zero-shot sets)"
    p = add_documented_parser(subparsers, "synth", __doc__, summary)
    engines = p.add_subparsers(dest="engine", metavar="ENGINE")
    for name, cls in ENGINES.items():
        e = add_documented_parser(engines, name, sys.modules[cls.__module__].__doc__, cls.description)
        e.add_argument(
            "--out",
            required=True,
            type=folder,
            help="output folder: new or empty; the same command again resumes an unfinished run there",
        )
        e.add_argument("--overwrite", action="store_true", help="replace an earlier synth output in --out")
        e.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
        _add_publish_options(e)
        _add_options(e, cls.config_class)
        e.set_defaults(func=run, synth_engine=name)
    c = engines.add_parser("contact-sheet", help="a PNG of example cases per subset of a synthesized dataset")
    c.add_argument("dir", type=Path, help="a folder written by `spotdiff synth`")
    c.add_argument("--out", type=Path, required=True, help="the PNG to write")
    c.add_argument("--per-subset", type=int, default=2, help="cases per subset")
    c.add_argument("--thumb", type=int, default=128, help="thumbnail side in pixels")
    c.set_defaults(func=run_contact_sheet)
    pub = engines.add_parser("publish", help="publish a synthesized folder as a Hub dataset (docs/declared.md)")
    pub.add_argument("dir", type=Path, help="a folder written by `spotdiff synth`")
    pub.add_argument("--out", type=folder, help="also write the dataset's layout (shards, card, declaration) here")
    _add_publish_options(pub)
    pub.set_defaults(func=run_publish)
    lst = engines.add_parser("list", help="the registered synthesis engines")
    lst.set_defaults(func=run_list)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _add_publish_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--push-to-hub", metavar="ORG/NAME", help="publish the set as this Hub dataset (checked before "
                   "anything runs: id, offline mode, token, write role, namespace)")
    p.add_argument("--license", default="unknown", help="the set's licence, as the hub names them (cc-by-4.0, mit, "
                   "...; default: unknown)")
    p.add_argument("--private", action="store_true", help="create the Hub dataset private")


def run(args: argparse.Namespace) -> int:
    name = args.synth_engine
    cls = ENGINES.get(name)
    engine = cls(engine_config(cls, args))
    if args.push_to_hub:
        from spotdiff.report.hub import check_push

        check_push(args.push_to_hub)  # before the synthesis, not after it
    record = synthesize(engine, args.out, overwrite=args.overwrite, quiet=args.quiet)
    if record is None:  # a rank other than 0 of a torchrun launch: rank 0 reports
        return 0
    state = record.pop("state")
    if state == "complete":
        print(f"spotdiff synth {name}: {args.out} already holds this run, complete; nothing to do")
    else:
        print(f"spotdiff synth {name}: wrote {args.out}" + (" (resumed)" if state == "resume" else ""))
    for key, value in record["summary"].items():
        if key not in ("pipeline", "classes", "edit_distance"):
            print(f"  {key}: {value}")
    benchmark = record["summary"].get("benchmark", cls.benchmark)
    if benchmark:
        print(f"  load it with: spotdiff eval --benchmark {benchmark} --data {args.out} --model ...")
    if args.push_to_hub:
        args.dir, args.out = args.out, None
        return run_publish(args)
    return 0


def run_publish(args: argparse.Namespace) -> int:
    from spotdiff.publish import publish

    done = publish(args.dir, repo=args.push_to_hub, out=args.out, license=args.license, private=args.private)
    names, cases = ", ".join(c.name for c in done.configs), sum(c.cases for c in done.configs)
    print(f"spotdiff synth publish: {cases} cases in {len(done.configs)} configs ({names})")
    if done.out is not None:
        print(f"  layout in {done.out}")
    if done.commit_url is not None:
        print(f"  pushed: {done.commit_url}")
        print(f"  evaluate it with: spotdiff eval --benchmark hf:{args.push_to_hub} --model ...")
    return 0


def run_contact_sheet(args: argparse.Namespace) -> int:
    from spotdiff.synth.contact import contact_sheet

    path = contact_sheet(args.dir, args.out, per_subset=args.per_subset, thumb=args.thumb)
    print(f"spotdiff synth contact-sheet: wrote {path}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    for name, cls in ENGINES.items():
        reader = f" (read by --benchmark {cls.benchmark})" if cls.benchmark else ""
        print(f"{name:12s} {cls.description}{reader}")
    return 0
