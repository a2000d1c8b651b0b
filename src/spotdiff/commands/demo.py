"""``spotdiff demo``: the whole synthesize -> diagnose -> optimize loop offline (see :mod:`spotdiff.demo`).

::

    spotdiff demo [--out spotdiff-demo] [--quick] [--seed 0] [--workers N]
    spotdiff demo --plan [--quick] [--seed 0] > plan.yaml     # the demo as a plan file, for `spotdiff run`

and the demo's own steps, each runnable alone (``OUT/demo_commands.sh`` lists them with the rest)::

    spotdiff demo tokenizer --captions CORPUS/captions.jsonl --out DIR
    spotdiff demo spec-pairs --data SPEC_DIR --out DIR
    spotdiff demo cls-prompts --data SPEC_DIR --out DIR
    spotdiff demo aro-set --corpus CORPUS_DIR --out DIR
    spotdiff demo train-captioner --captions CORPUS/captions.jsonl --tokenizer DIR --out DIR [--steps N]
    spotdiff demo findings [DEMO_DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spotdiff.commands._types import folder, seed
from spotdiff.errors import ConfigError


def _default_workers() -> int:
    from spotdiff.synth.output import default_workers

    return default_workers()


def register(subparsers: argparse._SubParsersAction) -> None:
    from spotdiff.demo import DEFAULT_OUT

    p = subparsers.add_parser(
        "demo",
        help="run the whole loop offline on embedded defaults (synthesize, train, diagnose, fine-tune, report)",
        description="Synthesize a training corpus and held-out SPEC / EqBen / ARO-style sets, train a small CLIP "
        "from scratch, diagnose it (SPEC subsets and cls), fine-tune it three ways (plain, + SPEC hard negatives, "
        "+ EqSim; and a same-data control) with the same budget, train a small BLIP captioner and compare raw and "
        "alpha-debiased VisualGPTScore, then write a report and findings.json. About 12 minutes on 2 CPU cores "
        "(--quick: about a minute). Resumable: stages whose outputs and recorded configuration match are skipped.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    p.add_argument("--out", type=folder, default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    p.add_argument("--quick", action="store_true", help="a shortened run (a few minutes) that exercises every stage")
    p.add_argument("--seed", type=seed, default=0, help="base seed: data sets use seed+0..4, training uses seed")
    p.add_argument(
        "--workers", type=int, default=None, help="stages run at once (default: min(4, CPU cores)); also synth workers"
    )
    p.add_argument(
        "--plan",
        action="store_true",
        help="print the demo's plan file (YAML, with this profile's vars) to copy, edit and run with `spotdiff run`",
    )
    p.set_defaults(func=run, demo_step=None)
    steps = p.add_subparsers(dest="demo_step", metavar="STEP", title="steps (run alone)")

    t = steps.add_parser("tokenizer", help="a WordPiece tokenizer of the captions' words")
    t.add_argument("--captions", type=Path, action="append", required=True, help="captions.jsonl (repeatable)")
    t.add_argument("--out", dest="step_out", type=Path, required=True)
    t.set_defaults(func=run_tokenizer)

    derived = (  # steps that derive a data set from one folder: name, help, its option, that option's help, run
        ("spec-pairs", "a SPEC folder's matched (image, caption) pairs as captions.jsonl", "--data",
         "a SPEC-format folder (spotdiff synth spec)", run_spec_pairs),
        ("cls-prompts", "a diagnostic SPEC cls folder whose prompts name colour and texture", "--data",
         "a SPEC-format folder with a cls/ task", run_cls_prompts),
        ("aro-set", "an ARO COCO-Order-style set (Karpathy JSON) from a corpus", "--corpus",
         "a folder written by `spotdiff synth corpus`", run_aro_set),
    )  # fmt: skip
    for name, step_help, option, option_help, func in derived:
        s = steps.add_parser(name, help=step_help)
        s.add_argument(option, type=Path, required=True, help=option_help)
        s.add_argument("--out", dest="step_out", type=Path, required=True)
        s.set_defaults(func=func)

    c = steps.add_parser("train-captioner", help="train a small BLIP captioner (vgpt:OUT) on image-caption pairs")
    c.add_argument("--captions", type=Path, required=True, help="captions.jsonl")
    c.add_argument("--tokenizer", type=Path, required=True, help="tokenizer folder (spotdiff demo tokenizer)")
    c.add_argument("--out", dest="step_out", type=Path, required=True)
    c.add_argument("--steps", type=int, default=800)
    c.add_argument("--batch-size", type=int, default=64)
    c.add_argument("--lr", type=float, default=1e-3)
    c.add_argument("--image-size", type=int, default=64)
    c.add_argument("--seed", dest="step_seed", type=int, default=0)
    c.set_defaults(func=run_train_captioner)

    f = steps.add_parser("findings", help="findings.json and summary.md of a demo folder")
    f.add_argument("dir", type=Path, nargs="?", default=Path("."), help="the demo folder (default: .)")
    f.set_defaults(func=run_findings)


def run(args: argparse.Namespace) -> int:
    from spotdiff.commands import main
    from spotdiff.demo import DemoConfig, run_demo

    workers = args.workers if args.workers is not None else _default_workers()
    config = DemoConfig(out=args.out, quick=args.quick, seed=args.seed, workers=workers)
    if args.plan:
        from spotdiff.demo.plan import plan_file

        print(plan_file(config), end="")
        return 0
    run_demo(config, run_command=main)
    return 0


def run_tokenizer(args: argparse.Namespace) -> int:
    from spotdiff.optimize.tokenizer import build_tokenizer

    info = build_tokenizer(args.captions, args.step_out)
    print(
        f"tokenizer: {info['vocab_size']} entries ({info['words']} words, {info['captions']} captions) "
        f"in {args.step_out}"
    )
    return 0


def run_spec_pairs(args: argparse.Namespace) -> int:
    from spotdiff.synth.canvas.derived import write_spec_pairs

    info = write_spec_pairs(args.data, args.step_out)
    print(f"wrote {info['pairs']} pairs to {args.step_out / 'captions.jsonl'}")
    return 0


def run_cls_prompts(args: argparse.Namespace) -> int:
    from spotdiff.synth.canvas.derived import write_cls_attribute_prompts

    info = write_cls_attribute_prompts(args.data, args.step_out)
    print(f"wrote {info['images']} cls images x {info['classes']} colour/texture prompts to {args.step_out / 'cls'}")
    print(
        f"  evaluate with: spotdiff eval --benchmark spec --data {args.step_out} --image-root {args.data} "
        "--subset cls --model ...  (its images stay in the SPEC folder)"
    )
    return 0


def run_aro_set(args: argparse.Namespace) -> int:
    from spotdiff.synth.canvas.derived import write_aro_set

    info = write_aro_set(args.corpus, args.step_out)
    print(f"wrote {info['images']} images and {args.step_out / 'coco_karpathy_test.json'}")
    print(f"  load it with: spotdiff eval --benchmark aro-coco-order --data {args.step_out} --model ...")
    return 0


def run_train_captioner(args: argparse.Namespace) -> int:
    from spotdiff.optimize.captioner import train_captioner

    if args.steps < 1:
        raise ConfigError("--steps must be at least 1")
    info = train_captioner(
        args.captions,
        args.tokenizer,
        args.step_out,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        image_size=args.image_size,
        seed=args.step_seed,
    )
    print(
        f"trained {info['steps']} steps, loss {info['first_loss']:.3f} -> {info['final_loss']:.3f}; "
        f"evaluate with: spotdiff eval --model vgpt:{args.step_out} ..."
    )
    return 0


def run_findings(args: argparse.Namespace) -> int:
    from spotdiff.demo.findings import compute_findings, write_findings
    from spotdiff.demo.summary import summary_text

    root = args.dir.resolve()
    findings = compute_findings(root)
    old = root / "findings.json"
    if old.is_file():  # keep the timing of the run that produced the stages
        timing = json.loads(old.read_text(encoding="utf-8")).get("timing")
        if timing:
            findings["timing"] = timing
    write_findings(root, findings)
    print(summary_text(findings))
    print(f"wrote {root / 'findings.json'} and {root / 'summary.md'}")
    return 0
