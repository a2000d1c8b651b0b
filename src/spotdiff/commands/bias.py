"""``spotdiff bias``: how far a text-only prior P(t) alone gets on a benchmark.

VisualGPTScore Sec. 5 and Table 2(a): many image-to-text benchmarks build their negatives by
editing the positive caption, and the edits are often implausible (ARO's shuffled word orders,
Crepe's negations), so a "blind" model that ranks the candidate captions by their marginal
probability P(t), never looking at the image, beats chance and even strong VLMs. Benchmarks whose
captions are balanced (Winoground, EqBen: each caption is positive for one image and negative for
the other) give a blind model 0 on the text score, since it ranks the same caption first for both
images.

The blind score of a case is its texts' ``log P(t)`` from a model with the ``text-prior``
capability (``lm:`` language models, or ``vgpt:`` with P(t|null) from Gaussian-noise images, Eq. 6),
repeated for every image of the case, and scored by the benchmark's own image-text protocol (ties
fail, so a caption ranked first for two images cannot pass a text score). The report gives each
metric with its 95% bootstrap interval, overall and per subset, beside the chance level of a
random scorer. ``--out DIR`` writes ``bias.json`` and ``scores.jsonl``.

    spotdiff bias --benchmark sugarcrepe --data ../shared/data/sugarcrepe --model lm:PATH
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import ConfigError, DataError

__all__ = ["BiasReport", "blind_matrices", "chance_metrics", "diagnose_bias", "register", "run"]


@dataclass
class BiasReport:
    """A benchmark's language bias under one text prior.

    Attributes:
        protocol: the benchmark protocol applied to the blind scores.
        metrics: ``evaluate()``'s metrics (percent, with ``<metric>_ci95``), "all" and per subset.
        chance: the same metrics for random scores (mean of ``chance_draws`` seeded draws).
        n_cases: cases evaluated; evaluation: the full :class:`~spotdiff.protocols.stats.Evaluation`.
        priors: per case, ``[n_texts]`` log P(t).
    """

    protocol: str
    metrics: dict[str, dict[str, Any]]
    chance: dict[str, dict[str, float]]
    n_cases: int
    evaluation: Any = None
    priors: list[np.ndarray] = field(default_factory=list)


def blind_matrices(cases: list[Case], priors: list[np.ndarray]) -> list[np.ndarray]:
    """Each case's ``[1, n_texts]`` prior repeated over its image rows (its truth's shape)."""
    out = []
    for case, q in zip(cases, priors, strict=True):
        q = np.asarray(q, dtype=np.float64).reshape(1, -1)
        out.append(np.repeat(q, case.truth.shape[0], axis=0))
    return out


def chance_metrics(protocol: Any, cases: list[Case], *, draws: int = 10, seed: int = 0) -> dict[str, dict[str, float]]:
    """Expected metrics of a random scorer (i.i.d. normal scores), averaged over ``draws``."""
    from spotdiff.protocols import evaluate

    rng = np.random.default_rng(seed)
    sums: dict[str, dict[str, float]] = {}
    for _ in range(draws):
        mats = [rng.normal(size=c.truth.shape) for c in cases]
        metrics = evaluate(protocol, cases, mats, n_boot=0).metrics
        for scope, m in metrics.items():
            for k, v in m.items():
                sums.setdefault(scope, {}).setdefault(k, 0.0)
                sums[scope][k] += float(v) / draws
    return sums


def diagnose_bias(
    engine: Any, cases: list[Case], protocol: Any, *, n_boot: int = 1000, seed: int = 0, chance_draws: int = 10
) -> BiasReport:
    """Score ``cases`` with the engine's text prior only and evaluate them under ``protocol``.

    Args:
        engine: a :class:`spotdiff.engine.Engine` whose scorer has the ``text-prior`` capability.
        cases: the benchmark's cases (images are never loaded).
        protocol: an image-text (or text-prior) protocol instance or name.
    """
    from spotdiff.protocols import evaluate, get_protocol

    if isinstance(protocol, str):
        protocol = get_protocol(protocol)
    if protocol.needs not in ("image-text", "text-prior"):
        raise ConfigError(
            f"protocol {protocol.name!r} needs {protocol.needs!r}; a text prior can only stand in for image-text scores"
        )
    priors = [np.asarray(m, dtype=np.float64).reshape(-1) for m in engine.case_matrices(cases, "text-prior")]
    mats = blind_matrices(cases, priors) if protocol.needs == "image-text" else [p[None, :] for p in priors]
    evaluation = evaluate(protocol, cases, mats, n_boot=n_boot, seed=seed)
    chance = chance_metrics(protocol, cases, draws=chance_draws, seed=seed) if chance_draws > 0 else {}
    return BiasReport(protocol.name, evaluation.metrics, chance, len(cases), evaluation, priors)


def _default_protocol(bench_cls: Any, requested: str | None) -> str:
    from spotdiff.protocols import get_protocol

    if requested:
        names = [p for p in bench_cls.protocols if p == requested or p.endswith("-" + requested)]
        if len(names) != 1:
            raise ConfigError(
                f"benchmark {bench_cls.name!r} has no protocol {requested!r}; known: {', '.join(bench_cls.protocols)}"
            )
        return names[0]
    for name in bench_cls.protocols:
        if get_protocol(name).needs == "image-text":
            return name
    raise ConfigError(f"benchmark {bench_cls.name!r} has no image-text protocol a text prior could stand in for")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bias",
        help="how far a text-only prior P(t) gets on a benchmark (language bias)",
        description="Rank each case's captions by a text-only log P(t), without the image "
        "(VisualGPTScore Sec. 5, Table 2a), and report the benchmark's metrics with 95%% bootstrap "
        "intervals beside chance. MODEL is an lm: language model or a vgpt: model (P(t|null) from "
        "Gaussian-noise images).",
    )
    p.add_argument("--benchmark", required=True, help="benchmark name (see `spotdiff benchmarks`)")
    p.add_argument("--data", required=True, type=Path, help="the benchmark's data directory")
    p.add_argument("--model", required=True, help="lm:NAME_OR_PATH or vgpt:NAME_OR_PATH")
    p.add_argument("--subset", help="one subset only")
    p.add_argument("--protocol", help="protocol (default: the benchmark's first image-text protocol)")
    p.add_argument("--limit", type=int, help="the first N cases only")
    p.add_argument("--out", type=Path, help="write bias.json and scores.jsonl here")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, mps or auto (default)")
    p.add_argument("--dtype", default="auto", help="auto (float16 on GPU), float32, float16, bfloat16")
    p.add_argument("--cache", type=Path, help="persistent cache directory (default: none)")
    p.add_argument("--seed", type=int, default=0, help="seed for the model, null images and the bootstrap")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for confidence intervals")
    p.add_argument("--null-n", type=int, help="vgpt: null images (default 10; Winoground 100, EqBen 30)")
    p.add_argument("--null-mean", type=float, help="vgpt: null-image pixel mean in [0, 1] (default 1.0)")
    p.add_argument("--null-std", type=float, help="vgpt: null-image pixel std (default 0.25)")
    p.add_argument("--images", type=Path, help="image folder, when not the benchmark's default location")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spotdiff.benchmarks import get_benchmark
    from spotdiff.debias import NULL_N_BY_BENCHMARK
    from spotdiff.engine import Engine, check_capability
    from spotdiff.report.table import format_metrics_table
    from spotdiff.scorers import ScorerOptions, load_scorer

    bench_cls = get_benchmark(args.benchmark)
    protocol = _default_protocol(bench_cls, args.protocol)
    bench = bench_cls(args.data, **({"images": args.images} if args.images else {}))
    bench.check_subset(args.subset)
    cases = bench.load(args.subset, args.limit)
    if not cases:
        raise DataError(f"no cases to evaluate ({bench.report.summary()})", file=args.data)
    extra: dict[str, Any] = {"null_seed": args.seed}
    if args.model.startswith("vgpt:"):
        extra["null_n"] = args.null_n or NULL_N_BY_BENCHMARK.get(args.benchmark, 10)
        if args.null_mean is not None:
            extra["null_mean"] = args.null_mean
        if args.null_std is not None:
            extra["null_std"] = args.null_std
    options = ScorerOptions(
        device=args.device, dtype=args.dtype, batch_size=args.batch_size, seed=args.seed, extra=extra
    )
    scorer = load_scorer(args.model, options)
    check_capability(scorer, "text-prior")
    engine = Engine(scorer, args.cache, progress=not args.quiet)
    try:
        report = diagnose_bias(engine, cases, protocol, n_boot=args.n_boot, seed=args.seed)
    finally:
        engine.close()
    title = f"{args.benchmark} | blind text prior {args.model} | {protocol} | {report.n_cases} cases"
    print(format_metrics_table(report.metrics, title=title))
    chance = report.chance.get("all", {})
    blind = report.metrics.get("all", {})
    for metric, value in chance.items():
        if metric in blind:
            ci = blind.get(f"{metric}_ci95")
            ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and ci[0] is not None else ""
            print(f"{metric}: blind {blind[metric]:.2f}{ci_text} vs chance {value:.2f}")
    if args.out:
        write_outputs(args, report, scorer.identity(), bench.report.as_dict())
        print(f"wrote {args.out / 'bias.json'} and {args.out / 'scores.jsonl'}")
    return 0


def write_outputs(args: argparse.Namespace, report: BiasReport, identity: dict, load_report: dict) -> None:
    from spotdiff.protocols.stats import _round  # shared rounding of metrics (NaN -> None)

    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": args.benchmark,
        "model": args.model,
        "mode": "blind text prior (VisualGPTScore Table 2a)",
        "protocol": report.protocol,
        "n_cases": report.n_cases,
        "metrics": report.evaluation.metrics_json() if report.evaluation is not None else report.metrics,
        "chance": {s: {k: _round(v) for k, v in m.items()} for s, m in report.chance.items()},
        "subset": args.subset,
        "seed": args.seed,
        "model_identity": identity,
        "load_report": load_report,
    }
    (args.out / "bias.json").write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    by_case = report.evaluation.by_case() if report.evaluation is not None else {}
    with open(args.out / "scores.jsonl", "w", encoding="utf-8") as f:
        for case_id, prior in zip(by_case, report.priors, strict=True):
            recs = by_case[case_id]
            line = {"id": case_id, "subset": recs[0]["subset"], "log_prior": [round(float(x), 6) for x in prior]}
            line["correct"] = {k: v for k, v in recs[0].items() if k not in ("unit", "case", "subset")}
            f.write(json.dumps(line) + "\n")
