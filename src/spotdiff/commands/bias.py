"""``spotdiff bias``: how far a text-only prior P(t) alone gets on a benchmark (VisualGPTScore Table 2a).

The diagnosis is :mod:`spotdiff.diagnose.debias.blind`; this module parses the command line and
prints. ``--out DIR`` writes ``bias.json`` and ``scores.jsonl``.

    spotdiff bias --benchmark sugarcrepe --data ../shared/data/sugarcrepe --model lm:PATH
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spotdiff.commands._types import add_include_option, folder, n_boot, positive_int, seed
from spotdiff.diagnose.debias.blind import BiasConfig, run_bias, write_bias_outputs
from spotdiff.report.table import format_metrics_table


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bias",
        help="how far a text-only prior P(t) gets on a benchmark (language bias)",
        description="Rank each case's captions by a text-only log P(t), without the image "
        "(VisualGPTScore Sec. 5, Table 2a), and report the benchmark's metrics with 95%% bootstrap "
        "intervals beside chance. MODEL is an lm: language model or a vgpt: model (P(t|null) from "
        "Gaussian-noise images).",
    )
    p.add_argument("--benchmark", required=True, help="benchmark name (see `spotdiff benchmarks`) or a declaration's "
                   "YAML file (docs/declared.md)")
    add_include_option(p)
    p.add_argument("--data", type=Path, help="the benchmark's data directory (default: the `spotdiff data` copy)")
    p.add_argument("--model", required=True, help="lm:NAME_OR_PATH or vgpt:NAME_OR_PATH")
    p.add_argument("--subset", help="one subset only")
    p.add_argument("--protocol", help="protocol (default: the benchmark's first image-text protocol)")
    p.add_argument("--limit", type=positive_int, help="the first N cases only")
    p.add_argument("--sample", type=int, help="a uniform random sample of N cases (seeded by --seed; after --limit)")
    p.add_argument("--out", type=folder, help="write bias.json and scores.jsonl here")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, mps or auto (default)")
    p.add_argument(
        "--dtype",
        default="auto",
        help="auto (on a GPU: bfloat16 for language models and chat VLMs where supported, else float16; float32 on "
        "the CPU), float32, float16, bfloat16 (recorded with the model's identity)",
    )
    p.add_argument("--cache", type=folder, help="persistent cache directory (default: none)")
    p.add_argument("--seed", type=seed, default=0, help="seed for the model, null images and the bootstrap")
    p.add_argument("--n-boot", type=n_boot, default=1000, help="bootstrap resamples for confidence intervals")
    p.add_argument("--null-n", type=int, help="vgpt: null images (default 10; Winoground 100, EqBen 30)")
    p.add_argument("--null-mean", type=float, help="vgpt: null-image mean (default 1.0, see --null-space)")
    p.add_argument("--null-std", type=float, help="vgpt: null-image std (default 0.25)")
    p.add_argument(
        "--null-space",
        choices=["normalized", "pixel"],
        help="vgpt: units of the null-image mean/std: the model's normalised input (default) or [0, 1] pixels",
    )
    p.add_argument("--images", type=Path, help="image folder, when not the benchmark's default location")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spotdiff.data import resolve_data
    from spotdiff.data.declared import resolve_benchmark

    args.benchmark = resolve_benchmark(args.benchmark)

    config = BiasConfig(
        benchmark=args.benchmark,
        data=resolve_data(args.benchmark, args.data),
        model=args.model,
        subset=args.subset,
        protocol=args.protocol,
        limit=args.limit,
        sample=args.sample,
        images=args.images,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        cache=args.cache,
        seed=args.seed,
        n_boot=args.n_boot,
        null_n=args.null_n,
        null_mean=args.null_mean,
        null_std=args.null_std,
        null_space=args.null_space,
        progress=not args.quiet,
    )
    run = run_bias(config)
    report = run.report
    title = f"{args.benchmark} | blind text prior {args.model} | {report.protocol} | {report.n_cases} cases"
    aggregates = report.evaluation.aggregates() if report.evaluation is not None else None
    print(format_metrics_table(report.metrics, title=title, aggregates=aggregates))
    chance = report.chance.get("all", {})
    blind = report.metrics.get("all", {})
    for metric, value in chance.items():
        if metric in blind:
            ci = blind.get(f"{metric}_ci95")
            ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and ci[0] is not None else ""
            print(f"{metric}: blind {blind[metric]:.2f}{ci_text} vs chance {value:.2f}")
    if args.out:
        write_bias_outputs(args.out, config, run)
        print(f"wrote {args.out / 'bias.json'} and {args.out / 'scores.jsonl'}")
    return 0
