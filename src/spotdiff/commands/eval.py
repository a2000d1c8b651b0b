"""``spotdiff eval``: evaluate a model on a benchmark with one command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spotdiff.cases import TIES
from spotdiff.diagnose import distributed
from spotdiff.diagnose.cache import default_cache_dir
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.errors import ConfigError
from spotdiff.report.table import format_metrics_table


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="evaluate a model on a benchmark",
        description="Evaluate MODEL on BENCHMARK read from DATA; print metrics with 95%% CIs, "
        "record the run in the run store, and optionally write metrics.json and scores.jsonl. "
        "Launched by torchrun or accelerate launch (WORLD_SIZE > 1), the unique images and texts are "
        "sharded over the processes and rank 0 writes the results (docs/scaling.md).",
    )
    p.add_argument("--model", required=True, help="model spec, e.g. hf-clip:PATH, minilm (see `spotdiff models`)")
    p.add_argument("--benchmark", required=True, help="benchmark name (see `spotdiff benchmarks`)")
    p.add_argument("--data", required=True, type=Path, help="the benchmark's data directory")
    p.add_argument("--subset", help="evaluate one subset only")
    p.add_argument("--protocol", help="protocol (default: the benchmark's first)")
    p.add_argument("--out", type=Path, help="write metrics.json and scores.jsonl here")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, mps or auto (default)")
    p.add_argument("--dtype", default="auto", help="auto (float16 on GPU), float32, float16, bfloat16")
    p.add_argument("--limit", type=int, help="evaluate the first N cases only")
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help=f"persistent cache directory (default {default_cache_dir()}); see --no-cache",
    )
    p.add_argument("--no-cache", action="store_true", help="do not read or write the persistent cache")
    p.add_argument("--seed", type=int, default=0, help="seed for the model, sampling and the bootstrap")
    p.add_argument("--store", type=Path, help="run store path (default $SPOTDIFF_STORE or ~/.local/share/spotdiff)")
    p.add_argument("--no-store", action="store_true", help="do not record the run in the run store")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for confidence intervals")
    p.add_argument(
        "--ties",
        choices=TIES,
        default="strict",
        help="strict (default): a tie between the true and a false candidate is a failure; argmax: it goes to "
        "the candidate listed first, as the peers' argmax does (`spotdiff benchmarks` says which peer uses which)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the files of another run in --out (by default a folder holding another run's results is refused)",
    )
    p.add_argument("--images", type=Path, help="image folder, when not the benchmark's default location")
    p.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a loader option (repeatable), e.g. -o all_records=true for VALSE, -o pos_tagger=heuristic for ARO",
    )
    g = p.add_argument_group("VisualGPTScore debiasing (vgpt: models; VisualGPTScore Sec. 5-6)")
    g.add_argument(
        "--debias",
        choices=["none", "null", "images", "gallery"],
        help="estimate P(t) from null noise images, real images (--prior-images) or each case's own images, "
        "and report raw, alpha=1 (PMI), blind and tuned/fixed-alpha results",
    )
    g.add_argument("--alpha", default="tune", help="a fixed alpha in [0, 1], or 'tune' (cross-validated; default)")
    g.add_argument("--null-n", type=int, help="number of null images (default: the paper's per benchmark)")
    g.add_argument("--prior-images", type=Path, help="folder of real images for --debias images")
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars (spotdiff's, transformers' or huggingface_hub's)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options: dict[str, object] = {"images": args.images} if args.images else {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option expects KEY=VALUE, got {item!r}")
        options[key.strip()] = value
    config = EvalConfig(
        model=args.model,
        benchmark=args.benchmark,
        data=args.data,
        subset=args.subset,
        protocol=args.protocol,
        out=args.out,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        limit=args.limit,
        cache=None if args.no_cache else (args.cache or default_cache_dir()),
        seed=args.seed,
        store=args.store,
        use_store=not args.no_store,
        n_boot=args.n_boot,
        progress=not args.quiet,
        ties=args.ties,
        overwrite=args.overwrite,
        options=options,
    )
    if args.debias:
        return _run_debiased(args, config)
    env = distributed.detect()
    if env is not None:  # launched by torchrun / accelerate launch: shard the work over the ranks
        result = distributed.run_eval_distributed(config, env)
        if result is None:
            return 0  # a worker rank: rank 0 writes and prints the results
    else:
        result = run_eval(config)
    title = f"{args.benchmark} | {args.model} | {result.n_cases} cases"
    print(format_metrics_table(result.metrics, title=title, ties=args.ties, aggregates=result.aggregates))
    skipped = result.load_report.get("skipped") or {}
    for rule, n in skipped.items():
        print(f"skipped {n} records: {rule}")
    if result.run_id:
        print(f"run {result.run_id} recorded")
    if args.out:
        print(f"wrote {args.out / 'metrics.json'} and {args.out / 'scores.jsonl'}")
    return 0


def _run_debiased(args: argparse.Namespace, config: EvalConfig) -> int:
    from spotdiff.cases import FileImage
    from spotdiff.diagnose.debias import DebiasConfig
    from spotdiff.diagnose.debias.evaluate import run_debiased_eval

    images: tuple = ()
    if args.debias == "images":
        if not args.prior_images or not args.prior_images.is_dir():
            raise ConfigError("--debias images needs --prior-images DIR (a folder of real images)")
        suffixes = {".jpg", ".jpeg", ".png", ".webp", ".bmp"}
        images = tuple(FileImage(p) for p in sorted(args.prior_images.iterdir()) if p.suffix.lower() in suffixes)
    alpha: float | str = args.alpha if args.alpha == "tune" else float(args.alpha)
    dconfig = DebiasConfig(prior=args.debias, alpha=alpha, n_null=args.null_n, images=images)
    results = run_debiased_eval(config, dconfig)
    any_result = next(iter(results.values()))
    for name, result in results.items():
        title = f"{args.benchmark} | {args.model} [{name}] | {result.n_cases} cases"
        print(format_metrics_table(result.metrics, title=title, ties=args.ties, aggregates=result.aggregates) + "\n")
    if args.out:
        curve = json.loads((args.out / "alpha_curve.json").read_text(encoding="utf-8"))
        cv = curve.get("cross_validation")
        if cv:
            print(
                f"alpha* over {len(cv.get('alpha_star', []) or [])} half splits: {cv['alpha_star_mean']:.3f} "
                f"+- {cv['alpha_star_std']:.3f}; test {curve['metric']} {cv['test_score_mean']:.2f} "
                f"+- {cv['test_score_std']:.2f} (VisualGPTScore Table 4a protocol)"
            )
        print(f"wrote {args.out / 'metrics.json'}, scores*.jsonl and {args.out / 'alpha_curve.json'}")
    print(f"{len(results)} variants recorded; {any_result.n_cases} cases")
    return 0
