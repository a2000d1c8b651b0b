"""A benchmark's language bias: how far a text-only prior P(t) alone gets (VisualGPTScore Table 2a).

The blind score of a case is its texts' ``log P(t)`` repeated for every image (:func:`blind_matrices`),
scored by the benchmark's own protocol. Details: docs/debiasing.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.base import CaseSelection
from spotdiff.cases import Case
from spotdiff.diagnose.engine import Engine, check_capability
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import dumps, write_json, write_jsonl
from spotdiff.protocols import evaluate, get_protocol
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.null_prior import NULL_DEFAULTS, NULL_N_BY_BENCHMARK

__all__ = [
    "BiasConfig",
    "BiasReport",
    "BiasRun",
    "bias_protocol",
    "blind_matrices",
    "chance_metrics",
    "diagnose_bias",
    "run_bias",
    "write_bias_outputs",
]


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
    """Expected metrics of a random scorer (i.i.d. normal scores), averaged over ``draws``.

    Args:
        protocol: the protocol (instance or name) the cases are scored under.
        cases: the benchmark's cases.
        draws: the number of random scorers averaged over.
        seed: the seed of the random scores.
    """
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
        engine: a :class:`spotdiff.diagnose.engine.Engine` whose scorer has the ``text-prior`` capability.
        cases: the benchmark's cases (images are never loaded).
        protocol: an image-text (or text-prior) protocol instance or name.
    """
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


def bias_protocol(bench_cls: Any, requested: str | None) -> str:
    """The protocol a blind prior is scored with: ``requested`` (short names allowed), else the
    benchmark's first image-text protocol."""
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


@dataclass
class BiasConfig(CaseSelection):
    """What ``spotdiff bias`` runs (the flags of the same names): the cases (:class:`CaseSelection`), the model
    and how."""

    model: str
    sample: int | None = None
    images: Path | None = None
    batch_size: int = 32
    device: str = "auto"
    dtype: str = "auto"
    cache: Path | None = None
    seed: int = 0
    n_boot: int = 1000
    null_n: int | None = None
    null_mean: float | None = None
    null_std: float | None = None
    null_space: str | None = None
    progress: bool = True


@dataclass
class BiasRun:
    """A :class:`BiasReport` with the scorer identity and the load report behind it."""

    report: BiasReport
    identity: dict
    load_report: dict


def run_bias(config: BiasConfig) -> BiasRun:
    """Load the benchmark and the text-prior model, then :func:`diagnose_bias`."""
    bench_cls = get_benchmark(config.benchmark)
    protocol = bias_protocol(bench_cls, config.protocol)
    bench = bench_cls(config.data, **({"images": config.images} if config.images else {}))
    bench.check_subset(config.subset)
    cases = bench.load(config.subset, config.limit)
    if config.sample is not None and config.sample < len(cases):
        # a uniform random sample without replacement (seeded), kept in the benchmark's order
        keep = np.random.default_rng(config.seed).choice(len(cases), size=config.sample, replace=False)
        cases = [cases[k] for k in np.sort(keep)]
    if not cases:
        raise DataError(f"no cases to evaluate ({bench.report.summary()})", file=config.data)
    extra: dict[str, Any] = {"null_seed": config.seed}
    if config.model.startswith("vgpt:"):
        extra["null_n"] = config.null_n or NULL_N_BY_BENCHMARK.get(config.benchmark, NULL_DEFAULTS["n"])
        if config.null_mean is not None:
            extra["null_mean"] = config.null_mean
        if config.null_std is not None:
            extra["null_std"] = config.null_std
        if config.null_space is not None:
            extra["null_space"] = config.null_space
    options = ScorerOptions(
        device=config.device, dtype=config.dtype, batch_size=config.batch_size, seed=config.seed, extra=extra
    )
    scorer = load_scorer(config.model, options)
    check_capability(scorer, "text-prior")
    with Engine(scorer, config.cache, progress=config.progress) as engine:
        report = diagnose_bias(engine, cases, protocol, n_boot=config.n_boot, seed=config.seed)
    return BiasRun(report, scorer.identity(), bench.report.as_dict())


def write_bias_outputs(out: Path, config: BiasConfig, run: BiasRun) -> None:
    """``out/bias.json`` (metrics with CIs, chance, provenance) and ``out/scores.jsonl`` (per case).

    Args:
        out: the output folder.
        config: the ``spotdiff bias`` configuration.
        run: the scored run (its report, model identity and load report).
    """
    report = run.report
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": config.benchmark,
        "model": config.model,
        "mode": "blind text prior (VisualGPTScore Table 2a)",
        "protocol": report.protocol,
        "n_cases": report.n_cases,
        "metrics": report.evaluation.metrics if report.evaluation is not None else report.metrics,
        "chance": report.chance,
        "subset": config.subset,
        "limit": config.limit,
        "sample": config.sample,
        "seed": config.seed,
        "model_identity": run.identity,
        "load_report": run.load_report,
    }
    write_json(out / "bias.json", payload)
    by_case = report.evaluation.by_case() if report.evaluation is not None else {}
    lines = []
    for case_id, prior in zip(by_case, report.priors, strict=True):
        recs = by_case[case_id]
        line = {"id": case_id, "subset": recs[0]["subset"], "log_prior": [float(x) for x in prior]}
        line["correct"] = {k: v for k, v in recs[0].items() if k not in ("unit", "case", "subset")}
        lines.append(line)
    write_jsonl(out / "scores.jsonl", lines, dump=dumps)
