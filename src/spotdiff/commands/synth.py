"""``spotdiff synth``: write minimal-change datasets (SPEC, EqBen, VISLA formats; training corpora;
zero-shot classification sets).

::

    spotdiff synth spec   --out DIR [--n 10] [--seed 0] [--image-size 224] [--subsets a,b] [--objects DIR]
    spotdiff synth eqben  --out DIR [--n 10] ...
    spotdiff synth visla  --out DIR [--n 20] [--relations FILE] ...
    spotdiff synth visla  --out DIR --pairs SUGARCREPE.json [--llm SPEC] [--images DIR] [--n 20]
    spotdiff synth visla  --out DIR --from-review REVIEW.csv
    spotdiff synth visla-vsr --out DIR --vsr VSR.jsonl [--images DIR] [--n 1000]
    spotdiff synth eqben-video --source ag|gebc|youcook2 --annotations PATH --videos DIR --out DIR
    spotdiff synth corpus --out DIR [--n 100] [--image-size 64] ...
    spotdiff synth zeroshot --out DIR [--n 10] ...
    spotdiff synth contact-sheet DIR --out sheet.png
    spotdiff synth list

``--n`` counts cases per subset (spec), pairs per subset (eqben), scenes (visla), image-caption
pairs (corpus) or images (zeroshot). The same options always give byte-identical files, whatever ``--workers``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import PIL

from spotdiff.commands._types import folder, positive_int, seed
from spotdiff.errors import ConfigError
from spotdiff.synth import ENGINES, SynthConfig, SynthEngine
from spotdiff.synth.eqben import SUBSETS as EQBEN_SUBSETS
from spotdiff.synth.output import default_workers, write_json
from spotdiff.synth.pipeline import BACKENDS
from spotdiff.synth.spec import SUBSETS as SPEC_SUBSETS
from spotdiff.version import __version__


def _subsets_argument(parser: argparse.ArgumentParser, subsets: tuple[str, ...]) -> None:
    parser.add_argument("--subsets", help=f"comma-separated subsets (default: all of {', '.join(subsets)})")


def _spec_arguments(parser: argparse.ArgumentParser) -> None:
    _subsets_argument(parser, SPEC_SUBSETS)
    parser.add_argument("--no-cls", action="store_true", help="skip the cls/ classification images")


def _eqben_arguments(parser: argparse.ArgumentParser) -> None:
    _subsets_argument(parser, EQBEN_SUBSETS)
    parser.add_argument("--sd-pairs", type=int, help="EQ-SD caption pairs to write (default: --n)")


def _visla_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--relations",
        metavar="FILE",
        help="your relation annotations (.jsonl or .csv: image, subject, relation, object[, caption]); "
        "default: render canvas scenes",
    )
    parser.add_argument("--negations", action="store_true", help="also rank 'is not ...' negatives")
    parser.add_argument(
        "--pairs", metavar="FILE", help="Generic mode: a SugarCrepe JSON file of (caption, negative) pairs"
    )
    parser.add_argument("--llm", metavar="SPEC", help="Generic mode: the chat LM (an lm: spec; default smollm2)")
    parser.add_argument("--images", metavar="DIR", help="Generic mode: the pairs' images, copied into --out")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="Generic mode: the most tokens per answer")
    parser.add_argument(
        "--from-review", metavar="FILE", help="write the Generic TSV from an edited review sheet (review.csv)"
    )


def _vsr_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vsr", metavar="FILE", help="VSR's JSON lines (e.g. data/splits/random/test.jsonl)")
    parser.add_argument("--images", metavar="DIR", help="the COCO images, copied into --out")


def _eqben_video_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", choices=("ag", "gebc", "youcook2"), default="ag", help="the annotations' dataset")
    parser.add_argument(
        "--annotations",
        metavar="PATH",
        help="ag: the folder of object_bbox_and_relationship.pkl and person_bbox.pkl; gebc: a GEBC JSON file; "
        "youcook2: youcookii_annotations_trainval.json",
    )
    parser.add_argument("--videos", metavar="DIR", help="the videos the annotations name (by file name or id)")
    parser.add_argument("--ag-skip", type=int, default=1, help="frames skipped after a chosen one (App. B.1: 1)")
    parser.add_argument(
        "--ag-relation", choices=("attention", "contacting"), default="attention", help="the caption's relationship"
    )
    parser.add_argument("--gebc-frame", choices=("middle", "edge"), default="middle", help="which frame of a segment")
    parser.add_argument("--gebc-step", type=int, choices=(1, 2), default=2, help="boundary pairs: 2 sparse, 1 all")


def _eqsd_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cross-replace",
        type=float,
        default=0.8,
        help="fraction of the steps whose cross-attention maps come from the source caption (prompt-to-prompt)",
    )
    parser.add_argument(
        "--check",
        metavar="MODEL",
        help="the scorer (an eval --model spec) each image must match its own caption better under; "
        "failing pairs go to set_aside.json (default: no check)",
    )
    parser.add_argument(
        "--from-review", metavar="FILE", help="write the pairs accepted in an edited review sheet (review.csv)"
    )


#: the options of an engine beyond those every engine takes
_ENGINE_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "spec": _spec_arguments,
    "eqben": _eqben_arguments,
    "visla": _visla_arguments,
    "visla-vsr": _vsr_arguments,
    "eqben-video": _eqben_video_arguments,
    "eqsd": _eqsd_arguments,
}


def _pipeline_arguments(parser: argparse.ArgumentParser, cls: type[SynthEngine]) -> None:
    if not cls.generative:
        parser.add_argument("--objects", metavar="DIR", help="a folder of your own RGBA cut-outs (DIR/<class>/*.png)")
        parser.add_argument(
            "--backend",
            choices=BACKENDS,
            default="procedural",
            help="procedural (default, offline, CPU) or generative (needs the 'generate' extra)",
        )
        parser.add_argument("--scenes", help="comma-separated background scenes (default: all)")
    parser.add_argument(
        "--workers", type=positive_int, default=default_workers(), help="worker processes (at most the cores usable)"
    )
    title = "diffusion models" if cls.generative else "generative backend (--backend generative)"
    group = parser.add_argument_group(title)
    _generative_arguments(group, cls.config_class())
    if not cls.generative:
        _library_arguments(group, cls.config_class())


#: the options that only the generative backend reads (recorded in synth.json only with it)
GENERATIVE_OPTIONS = (
    "t2i",
    "inpaint",
    "detector",
    "segmenter",
    "steps",
    "object_size",
    "instance_cache",
    "library_size",
    "batch_size",
    "device",
)


def _generative_arguments(group: argparse._ArgumentGroup, d: SynthConfig) -> None:
    """Each stage's model, a hub name or a local folder (SPEC Sec. 3.2; defaults: docs/synthesis.md)."""
    group.add_argument("--t2i", metavar="MODEL", default=d.t2i, help=f"text-to-image model (default {d.t2i})")
    group.add_argument("--inpaint", metavar="MODEL", default=d.inpaint, help=f"inpainting model (default {d.inpaint})")
    group.add_argument(
        "--detector", metavar="MODEL", default=d.detector, help=f"Grounding DINO model (default {d.detector})"
    )
    group.add_argument("--segmenter", metavar="MODEL", default=d.segmenter, help=f"SAM model (default {d.segmenter})")
    group.add_argument("--steps", type=int, default=d.steps, help="diffusion steps per image")
    group.add_argument("--object-size", type=int, default=d.object_size, help="side of a generated object photo")
    group.add_argument(
        "--instance-cache", metavar="DIR", help="cache generated object photos here; a second set reuses them"
    )
    group.add_argument("--device", default=d.device, help="auto (CUDA in fp16 when available), cpu or cuda[:N]")


def _library_arguments(group: argparse._ArgumentGroup, d: SynthConfig) -> None:
    """The library of object photos the canvas engines pick from (SPEC Sec. 3.2.1-3.2.2)."""
    group.add_argument(
        "--library-size",
        type=positive_int,
        default=d.library_size,
        help=f"object photos generated per class, from which cases pick their instances (default {d.library_size})",
    )
    group.add_argument(
        "--batch-size",
        type=positive_int,
        default=d.batch_size,
        help="object prompts per text-to-image call (default 8 on CUDA, 1 on the CPU); the photos do not depend on it",
    )


def _names(value: str | None) -> tuple[str, ...] | None:
    """``a,b`` as ``("a", "b")``; None when not given."""
    return tuple(v.strip() for v in value.split(",")) if value else None


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


#: how an option's text becomes a configuration field
_PARSE: dict[str, Callable[[Any], Any]] = {
    "objects": _path,
    "relations": _path,
    "pairs": _path,
    "vsr": _path,
    "annotations": _path,
    "videos": _path,
    "images": _path,
    "from_review": _path,
    "scenes": _names,
    "subsets": _names,
    "instance_cache": _path,
}


def engine_config(cls: type[SynthEngine], args: argparse.Namespace) -> SynthConfig:
    """The configuration of engine ``cls`` from its parsed ``spotdiff synth`` options."""
    given = vars(args)
    values = {"cls": not given["no_cls"]} if "no_cls" in given else {}
    for f in fields(cls.config_class):
        if f.name in given:
            values[f.name] = _PARSE.get(f.name, lambda v: v)(given[f.name])
    return cls.config_class(**values)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "synth",
        help="synthesize minimal-change data (SPEC, EqBen, VISLA formats, training corpora, zero-shot sets)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    engines = p.add_subparsers(dest="engine", metavar="ENGINE")
    for name, cls in ENGINES.items():
        e = engines.add_parser(
            name, help=cls.description, description=(cls.__module__ and sys.modules[cls.__module__].__doc__)
        )
        e.formatter_class = argparse.RawDescriptionHelpFormatter
        defaults = cls.config_class()
        e.add_argument("--out", required=True, type=folder, help="output folder (created; must be empty)")
        e.add_argument("--n", type=int, default=defaults.n, help="how many (see `spotdiff synth -h`)")
        e.add_argument("--seed", type=seed, default=defaults.seed, help="random seed (same seed, same bytes)")
        e.add_argument("--image-size", type=int, default=defaults.image_size, help="square image side in pixels")
        e.add_argument("--overwrite", action="store_true", help="replace an earlier synth output in --out")
        _ENGINE_ARGUMENTS.get(name, lambda parser: None)(e)
        _pipeline_arguments(e, cls)
        e.set_defaults(func=run, synth_engine=name)
    c = engines.add_parser("contact-sheet", help="a PNG of example cases per subset of a synthesized dataset")
    c.add_argument("dir", type=Path, help="a folder written by `spotdiff synth`")
    c.add_argument("--out", type=Path, required=True, help="the PNG to write")
    c.add_argument("--per-subset", type=int, default=2, help="cases per subset")
    c.add_argument("--thumb", type=int, default=128, help="thumbnail side in pixels")
    c.set_defaults(func=run_contact_sheet)
    lst = engines.add_parser("list", help="the registered synthesis engines")
    lst.set_defaults(func=run_list)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _prepare_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(f"--out {out} is not empty; pass --overwrite to replace an earlier synth output")
        if not (out / "synth.json").is_file():
            raise ConfigError(f"--out {out} is not empty and holds no synth.json: refusing to delete it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def run(args: argparse.Namespace) -> int:
    name = args.synth_engine
    if args.n < 0:
        raise ConfigError("--n must be >= 0")
    cls = ENGINES.get(name)
    _prepare_out(args.out, args.overwrite)
    engine = cls(engine_config(cls, args))
    summary = engine.write(args.out)
    options = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in sorted(vars(args).items())
        if k not in ("func", "out", "overwrite", "command", "engine", "synth_engine", "verbose", "workers")
        and not (k in GENERATIVE_OPTIONS and not (cls.generative or args.backend == "generative"))
        and not k.startswith("_")  # the parser's own bookkeeping (a set, in no fixed order)
    }
    record = {
        "spotdiff": __version__,
        "pillow": PIL.__version__,
        "numpy": np.__version__,
        "engine": name,
        "options": options,
        "summary": summary,
    }
    write_json(args.out / "synth.json", record)
    print(f"spotdiff synth {name}: wrote {args.out}")
    for key, value in summary.items():
        if key not in ("pipeline", "classes", "edit_distance"):
            print(f"  {key}: {value}")
    benchmark = summary.get("benchmark", cls.benchmark)
    if benchmark:
        print(f"  load it with: spotdiff eval --benchmark {benchmark} --data {args.out} --model ...")
    return 0


def run_contact_sheet(args: argparse.Namespace) -> int:
    from spotdiff.synth.contact import contact_sheet

    path = contact_sheet(args.dir, args.out, per_subset=args.per_subset, thumb=args.thumb)
    print(f"spotdiff synth contact-sheet: wrote {path}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    for name, cls in ENGINES.items():
        reader = f" (read by --benchmark {cls.benchmark})" if cls.benchmark else ""
        print(f"{name:8s} {cls.description}{reader}")
    return 0
