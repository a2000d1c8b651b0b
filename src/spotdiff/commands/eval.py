"""``spotdiff eval``: evaluate a model on a benchmark with one command, or every model on every benchmark.

One ``--model`` and one ``--benchmark`` make one run. Repeating them (or ``--models FILE``,
``--suite NAME``) makes a grid: every model on every benchmark, each cell its own run with a shared
cache, one table (rows models, columns each benchmark's main metric with its CI), and with
``--report DIR`` one report of the grid's runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spotdiff.api import evaluate_grid
from spotdiff.benchmarks import IMAGE_ROOT, canonical_benchmark, get_benchmark
from spotdiff.benchmarks.suites import suite_benchmarks
from spotdiff.cases import TIES
from spotdiff.commands._types import add_include_option, add_store_option, folder, n_boot, positive_int, seed
from spotdiff.data import resolve_data
from spotdiff.data.declared import HUB_PREFIX, is_declaration, resolve_benchmark
from spotdiff.diagnose import distributed
from spotdiff.diagnose.cache import default_cache_dir
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.report.build import build_report, write_report
from spotdiff.report.hub import check_push, push_run
from spotdiff.report.table import TIE_NOTES, format_metrics_table, format_table


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="evaluate a model on a benchmark, or a grid of models x benchmarks",
        description="Evaluate MODEL on BENCHMARK read from DATA; print metrics with 95%% CIs, "
        "record the run in the run store, and optionally write metrics.json and scores.jsonl. "
        "Several --model / --benchmark (or --models FILE, --suite NAME) run the grid of every model on "
        "every benchmark and print one table. "
        "Launched by torchrun or accelerate launch (WORLD_SIZE > 1), the unique images and texts are "
        "sharded over the processes and rank 0 writes the results (docs/scaling.md).",
    )
    _what_args(p)
    _execution_args(p)
    _store_args(p)
    _debias_args(p.add_argument_group("VisualGPTScore debiasing (vgpt: models; VisualGPTScore Sec. 5-6)"))
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars (spotdiff's, transformers' or huggingface_hub's)"
    )
    p.set_defaults(func=run)


def _what_args(p: argparse.ArgumentParser) -> None:
    """What runs: models, benchmarks, data, and where the results go."""
    p.add_argument(
        "--model",
        action="append",
        default=[],
        help="model spec, e.g. hf-clip:PATH, minilm (see `spotdiff models`); repeat for a grid",
    )
    p.add_argument("--models", type=Path, help="a file of model specs, one per line (# starts a comment)")
    p.add_argument(
        "--benchmark",
        action="append",
        default=[],
        help="benchmark name (see `spotdiff benchmarks`), a declaration's YAML file, or a published set "
        "hf:ORG/NAME[@REVISION] (docs/declared.md); repeatable",
    )
    add_include_option(p)
    p.add_argument(
        "--suite", action="append", default=[], help="a named suite of benchmarks (`spotdiff benchmarks --suites`)"
    )
    p.add_argument(
        "--data",
        action="append",
        default=[],
        help="the benchmark's data directory (default: its `spotdiff data fetch` copy); with several "
        "benchmarks NAME=DIR, repeated",
    )
    p.add_argument("--report", type=Path, help="also render a report (HTML + Markdown) of the runs into this folder")
    p.add_argument("--subset", help="evaluate one subset only")
    p.add_argument("--protocol", help="protocol (default: the benchmark's first)")
    p.add_argument(
        "--judge",
        metavar="SPEC",
        help="grade each generated answer (protocols answer, naturalbench; the model's spec option generate=N) "
        "with this judge model and MMVP's GPT-4 grading prompt: api:MODEL@URL or an in-process chat model "
        "(lm:PATH, smollm2); its replies are cached, its identity recorded",
    )
    p.add_argument("--out", type=folder, help="write metrics.json and scores.jsonl here")
    p.add_argument(
        "--push-to-hub",
        metavar="REPO",
        help="also commit metrics.json, scores.jsonl and a dataset card to this hub dataset repository (needs --out)",
    )


def _execution_args(p: argparse.ArgumentParser) -> None:
    """How the model runs: batches, workers, device and precision, cases, cache."""
    p.add_argument(
        "--batch-size",
        type=_batch_size,
        default=None,
        help="items per model batch, or 'auto': on CUDA the largest that fits, found once per model and device and "
        "remembered in the cache directory (on a CPU: 32). Default: auto for a model on CUDA, else 32 (recorded "
        "with the run)",
    )
    p.add_argument(
        "--workers",
        type=_workers,
        default=None,
        help="processes decoding and preprocessing images ahead of the model (0: none; default: one when the model "
        "runs on the CPU, else every core, and as many as --threads leaves)",
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch's intra-op threads while the model computes (default: the cores --workers leaves, one per core, "
        "at most OMP_NUM_THREADS where set; threads times workers stay within the usable cores; recorded with the run)",
    )
    p.add_argument(
        "--gpu-decode",
        action="store_true",
        help="decode JPEG images on the model's CUDA device (nvJPEG) and preprocess them there",
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, mps or auto (default)")
    p.add_argument(
        "--dtype",
        default="auto",
        help="auto (on a GPU: bfloat16 for language models and chat VLMs where supported, else float16; float32 on "
        "the CPU), float32, float16, bfloat16 (recorded with the model's identity)",
    )
    p.add_argument("--limit", type=positive_int, help="evaluate the first N cases only")
    p.add_argument(
        "--cache",
        type=folder,
        default=None,
        help=f"persistent cache directory (default {default_cache_dir()}); see --no-cache",
    )
    p.add_argument("--no-cache", action="store_true", help="do not read or write the persistent cache")


def _store_args(p: argparse.ArgumentParser) -> None:
    """Seed, run store, bootstrap, tie rule, output folder and loader options."""
    p.add_argument("--seed", type=seed, default=0, help="seed for the model, sampling and the bootstrap")
    add_store_option(p)
    p.add_argument("--no-store", action="store_true", help="do not record the run in the run store")
    p.add_argument("--n-boot", type=n_boot, default=1000, help="bootstrap resamples for confidence intervals")
    p.add_argument(
        "--ties",
        choices=TIES,
        default="strict",
        help="strict (default): a tie between the true and a false candidate is a failure; argmax: it goes to "
        "the candidate listed first, as the peers' argmax does (`spotdiff benchmarks` says which peer uses which)",
    )
    p.add_argument(
        "--nan-as-failure",
        action="store_true",
        help="score cases whose model scores are NaN as failures and record how many (metrics.json: n_nan_cases); "
        "by default such a run fails, so that a diverged model never reads as a real 0%%",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the files of another run in --out (by default a folder holding another run's results is refused)",
    )
    p.add_argument("--images", type=Path, help="image folder, when not the benchmark's default location")
    p.add_argument(
        "--image-root",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="a folder outside --data that the benchmark's records may name images in (repeatable); any other "
        "image a record names outside the data is refused (docs/security.md)",
    )
    p.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a loader option (repeatable), e.g. -o all_records=true for VALSE, -o pos_tagger=heuristic for ARO",
    )


def _debias_args(g: argparse._ArgumentGroup) -> None:
    """VisualGPTScore's debiasing of vgpt: models."""
    g.add_argument(
        "--debias",
        choices=["none", "null", "images", "gallery"],
        help="estimate P(t) from null noise images, real images (--prior-images) or each case's own images, "
        "and report raw, alpha=1 (PMI), blind and tuned/fixed-alpha results",
    )
    g.add_argument("--alpha", default="tune", help="a fixed alpha in [0, 1], or 'tune' (cross-validated; default)")
    g.add_argument(
        "--tune-split",
        help="with --alpha tune: tune alpha on this split (e.g. val, VisualGPTScore Table 4b: COCO / Flickr30K) "
        "and report the evaluated split, instead of cross-validating on it",
    )
    g.add_argument("--null-n", type=int, help="number of null images (default: the paper's per benchmark)")
    g.add_argument(
        "--null-space",
        choices=["normalized", "pixel"],
        help="units of the null images' mean 1.0 / std 0.25 (App. 8): the model's normalised input (default) "
        "or [0, 1] pixels",
    )
    g.add_argument("--prior-images", type=Path, help="folder of real images for --debias images")


def _batch_size(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'auto', got {value!r}")
    return n


def _workers(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {value!r}")
    return n


def _models(args: argparse.Namespace) -> list[str]:
    models = list(args.model)
    if args.models:
        try:
            lines = args.models.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"--models {args.models}: {exc}") from exc
        models += [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]
    if not models:
        raise ConfigError("give a model: --model SPEC (repeatable) or --models FILE")
    return list(dict.fromkeys(models))


def _benchmarks(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """``(spotdiff name, subset an alias names)`` of every benchmark asked for, in order."""
    names = list(args.benchmark)
    for suite in args.suite:
        names += suite_benchmarks(suite)
    if not names:
        raise ConfigError("give a benchmark: --benchmark NAME (repeatable) or --suite NAME")
    names = [resolve_benchmark(n) for n in names]  # a declaration's file or an hf: set: its registered name
    for name in names:
        get_benchmark(name)  # an unknown name fails here, listing the known ones
    return list(dict.fromkeys(canonical_benchmark(n) for n in names))


def _data(args: argparse.Namespace, benchmarks: list[str]) -> dict[str, Path]:
    """``--data DIR`` for one benchmark, ``--data NAME=DIR`` (repeated) for several."""
    out: dict[str, Path] = {}
    for item in args.data:
        name, sep, path = item.partition("=")
        if sep and (is_declaration(name) or name.startswith(HUB_PREFIX)):
            name = resolve_benchmark(name)
        if sep and name in benchmarks:
            out[name] = Path(path)
        elif len(benchmarks) == 1:
            out[benchmarks[0]] = Path(item)
        else:
            raise ConfigError(
                f"--data {item!r}: with several benchmarks, give --data NAME=DIR for each (benchmarks: "
                f"{', '.join(benchmarks)})"
            )
    return out


def _run_options(args: argparse.Namespace) -> dict:
    """The options of every run of this command, a single run's :class:`EvalConfig` or a grid's cells."""
    return {
        "batch_size": args.batch_size,
        "device": args.device,
        "dtype": args.dtype,
        "limit": args.limit,
        "cache": None if args.no_cache else (args.cache or default_cache_dir()),
        "seed": args.seed,
        "store": args.store,
        "use_store": not args.no_store,
        "n_boot": args.n_boot,
        "progress": not args.quiet,
        "workers": args.workers,
        "threads": args.threads,
        "gpu_decode": args.gpu_decode,
        "ties": args.ties,
        "overwrite": args.overwrite,
        "nan_as_failure": args.nan_as_failure,
        "options": _loader_options(args),
    }


def run(args: argparse.Namespace) -> int:
    models, benchmarks = _models(args), _benchmarks(args)
    if args.push_to_hub and (not args.out or args.debias or len(models) * len(benchmarks) > 1):
        raise ConfigError("--push-to-hub pushes one run's --out folder (one model, one benchmark, no --debias)")
    if args.push_to_hub:
        check_push(args.push_to_hub)  # token, hub, offline mode: before the evaluation, not after it
    data = _data(args, [name for name, _ in benchmarks])
    if len(models) * len(benchmarks) > 1:
        return _run_grid(args, models, benchmarks, data)
    (benchmark, alias_subset), model = benchmarks[0], models[0]
    config = EvalConfig(
        model=model,
        benchmark=benchmark,
        data=resolve_data(benchmark, data.get(benchmark)),
        subset=args.subset or alias_subset,
        protocol=args.protocol,
        out=args.out,
        judge=args.judge,
        **_run_options(args),
    )
    if args.debias and args.judge:
        raise ConfigError("--judge grades generated answers; --debias rescores a vgpt: model: give one of them")
    if args.debias:
        return _run_debiased(args, config)
    env = distributed.detect()
    if env is not None:  # launched by torchrun / accelerate launch: shard the work over the ranks
        result = distributed.run_eval_distributed(config, env)
        if result is None:
            return 0  # a worker rank: rank 0 writes and prints the results
    else:
        result = run_eval(config)
    title = f"{config.benchmark} | {config.label} | {result.n_cases} cases"
    print(
        format_metrics_table(
            result.metrics, title=title, ties=args.ties, aggregates=result.aggregates, diagnostics=result.diagnostics
        )
    )
    skipped = result.load_report.get("skipped") or {}
    for rule, n in skipped.items():
        print(f"skipped {n} records: {rule}")
    if result.run_id:
        print(f"run {result.run_id} recorded")
    if args.out:
        print(f"wrote {args.out / 'metrics.json'} and {args.out / 'scores.jsonl'}")
    if args.push_to_hub:
        try:
            print(f"pushed to {push_run(args.out, args.push_to_hub)}")
        except ConfigError as exc:
            later = (f"`spotdiff runs {result.run_id} --push-to-hub {args.push_to_hub}` pushes it" if result.run_id
                     else "run the same command again to push it")  # fmt: skip
            raise ConfigError(f"{exc}; the run's files stay in {args.out}: {later}") from None
    return 0


def _run_grid(
    args: argparse.Namespace, models: list[str], benchmarks: list[tuple[str, str | None]], data: dict[str, Path]
) -> int:
    with_subset = [b for b, subset in benchmarks if subset]
    if with_subset:
        raise ConfigError(f"a grid takes one --subset for all benchmarks; name {with_subset} without a subset")
    names = [b for b, _ in benchmarks]
    if args.debias:
        raise ConfigError("--debias evaluates one vgpt: model on one benchmark; give one --model and one --benchmark")
    if args.judge:
        raise ConfigError("--judge grades one model's answers on one benchmark; give one --model and one --benchmark")
    if distributed.detect() is not None:
        raise ConfigError("a grid runs in one process; launch one model and one benchmark per torchrun")
    grid = evaluate_grid(
        models,
        names,
        data,
        out=args.out,
        subset=args.subset,
        protocol=args.protocol,
        **_run_options(args),
    )
    header, rows = grid.table()
    notes = [TIE_NOTES[args.ties], "each benchmark's main metric on all (pooled over every unit)"]
    print(format_table(header, rows, title=f"{len(models)} models x {len(names)} benchmarks", notes=notes))
    for cell in grid.skipped:
        print(f"n/a (does not apply): {cell.model} on {cell.benchmark}: {cell.skipped}")
    for cell in grid.failed:
        print(f"n/a: {cell.model} on {cell.benchmark}: {cell.error}")
    if args.report and grid.run_ids:
        with RunStore(args.store) as store:
            report = build_report(store, grid.run_ids, benchmarks=names, title=f"spotdiff grid: {len(models)} models")
        written = write_report(report, args.report)
        print(f"wrote {written['html']} and {written['md']}")
    return 1 if grid.failed or all(c.result is None for c in grid.cells) else 0


def _loader_options(args: argparse.Namespace) -> dict[str, object]:
    options: dict[str, object] = {"images": args.images} if args.images else {}
    if args.image_root:
        options[IMAGE_ROOT] = [str(p.expanduser().resolve()) for p in args.image_root]  # as the run records it
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option expects KEY=VALUE, got {item!r}")
        options[key.strip()] = value
    return options


def _run_debiased(args: argparse.Namespace, config: EvalConfig) -> int:
    from spotdiff.cases import FileImage
    from spotdiff.diagnose.debias import DebiasConfig
    from spotdiff.diagnose.debias.evaluate import run_debiased_eval, variant_label

    images: tuple = ()
    if args.debias == "images":
        if not args.prior_images or not args.prior_images.is_dir():
            raise ConfigError("--debias images needs --prior-images DIR (a folder of real images)")
        suffixes = {".jpg", ".jpeg", ".png", ".webp", ".bmp"}
        images = tuple(FileImage(p) for p in sorted(args.prior_images.iterdir()) if p.suffix.lower() in suffixes)
    alpha: float | str = args.alpha if args.alpha == "tune" else float(args.alpha)
    dconfig = DebiasConfig(
        prior=args.debias, alpha=alpha, n_null=args.null_n, null_space=args.null_space, images=images,
        tune_split=args.tune_split,
    )  # fmt: skip
    if args.tune_split and alpha != "tune":
        raise ConfigError("--tune-split tunes alpha: use it with --alpha tune")
    runs = run_debiased_eval(config, dconfig)
    results = runs.results
    any_result = next(iter(results.values()))
    lead = runs.headline
    if lead and "cross_validated_test_score_mean" in lead:  # lead with the tuned alpha's out-of-sample score
        cv = runs.curve["cross_validation"]
        print(
            f"cross-validated test {lead['metric']}: {lead['cross_validated_test_score_mean']:.2f} "
            f"+- {lead['cross_validated_test_score_std']:.2f} over {lead['n_splits']} half splits, alpha* "
            f"{cv['alpha_star_mean']:.3f} +- {cv['alpha_star_std']:.3f} (VisualGPTScore Table 4a protocol); "
            f"the [{runs.tuned_label}] run below applies alpha = {runs.curve['alpha']} to every case\n"
        )
    elif lead:
        on = lead["tuned_on"]
        print(
            f"alpha* = {on['alpha_star']:.3f} tuned on split {on['split']} ({on['n_cases']} cases, "
            f"{lead['metric']} {on['score']:.2f} there; VisualGPTScore Table 4b): the [{runs.tuned_label}] "
            f"run below is a test score\n"
        )
    for name, result in results.items():
        label = variant_label(name, runs.tuned_label)
        title = f"{config.benchmark} | {config.label} [{label}] | {result.n_cases} cases"
        table = format_metrics_table(
            result.metrics, title=title, ties=args.ties, aggregates=result.aggregates, diagnostics=result.diagnostics
        )
        print(table + "\n")
    if args.out:
        print(f"wrote {args.out / 'metrics.json'}, scores*.jsonl and {args.out / 'alpha_curve.json'}")
    print(f"{len(results)} variants recorded; {any_result.n_cases} cases")
    return 0
