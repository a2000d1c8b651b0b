"""``spotdiff eval --debias``: a VisualGPTScore run reported raw, with alpha = 1, and alpha-tuned.

Each variant (raw, PMI, blind prior, tuned or fixed alpha) is recorded as its own run ``MODEL [variant]``
by the one :class:`~spotdiff.diagnose.recorder.RunRecorder`. The output folder is claimed once for all
of them and taken (a replaced run's files removed) only once every variant and ``metrics.json`` are
written. The variants, and why the tuned run is named in-sample: docs/debiasing.md.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

from spotdiff.diagnose.debias.variants import DebiasConfig, config_dict, debias_variants
from spotdiff.diagnose.engine import check_capability
from spotdiff.diagnose.recorder import (
    EvalConfig,
    EvalResult,
    RunRecorder,
    claim_out_dir,
    run_config,
    take_out_dir,
    write_metrics_json,
)
from spotdiff.diagnose.runner import load_eval_scorer, make_engine, resolve, stream_cases
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import write_json
from spotdiff.seeding import seed_everything


def variant_scores_name(variant: str) -> str:
    """``scores.jsonl`` for the raw variant, ``scores.<variant without '='>.jsonl`` for the others."""
    return "scores.jsonl" if variant == "raw" else f"scores.{variant.replace('=', '')}.jsonl"


def variant_label(name: str, tuned_label: str) -> str:
    """How a variant is named in run names and tables (the tuned one says how it was tuned)."""
    return tuned_label if name == "tuned" else name


@dataclass
class DebiasedRuns:
    """What :func:`run_debiased_eval` returns: variant -> result, the alpha curve record, the tuned
    variant's label and the out-of-sample headline (:func:`headline`)."""

    results: dict[str, EvalResult]
    curve: dict
    tuned_label: str

    @property
    def headline(self) -> dict | None:
        return headline(self.curve, self.tuned_label)


def run_debiased_eval(config: EvalConfig, debias: DebiasConfig) -> DebiasedRuns:
    """Evaluate every debiasing variant of a generative model."""
    bench, protocol = resolve(config, frozenset({"image-text"}))
    tune_bench = None
    if debias.tune_split:
        if "split" in type(bench).known_options():
            tune_bench = type(bench)(config.data, **{**config.options, "split": debias.tune_split})
        if tune_bench is None or tune_bench.data_files() == bench.data_files():
            raise ConfigError(
                f"benchmark {config.benchmark!r} has no separate split {debias.tune_split!r} to tune alpha on "
                f"(--tune-split reads the retrieval benchmarks' split=val files; others: cross-validation)"
            )
    if protocol.needs != "image-text":
        raise ConfigError(f"--debias needs an image-text protocol; {protocol.name!r} needs {protocol.needs!r}")
    seed_everything(config.seed)
    scorer = load_eval_scorer(config)
    check_capability(scorer, protocol.needs)
    identity = scorer.identity()
    with make_engine(config, scorer) as engine:
        cases = list(stream_cases(bench, config.subset, config.limit))
        bench.report.cases = len(cases)
        if not cases:
            raise DataError(f"no cases to evaluate ({bench.report.summary()})", file=config.data)
        debias = replace(debias, benchmark=debias.benchmark or config.benchmark, seed=config.seed)
        tune_cases = None if tune_bench is None else list(stream_cases(tune_bench, None, config.limit))
        result = debias_variants(engine, cases, protocol, debias, tune_cases=tune_cases)
    data_digest = bench.data_digest()
    curve = result.curve_data()
    load_report = bench.report.as_dict()
    results: dict[str, EvalResult] = {}
    claim = run_config(config, protocol, data_digest, config_dict(debias))
    replaced = [] if config.out is None else claim_out_dir(config.out, claim, overwrite=config.overwrite,
                                                           replace_now=False)  # fmt: skip
    with RunStore(config.store) if config.use_store else contextlib.nullcontext() as store:
        for name, matrices in result.variants.items():
            info = {
                "debias": {
                    "variant": name,
                    "config": config_dict(debias),
                    "alpha": result.alpha,
                    "prior": result.prior_info,
                }
            }
            if name not in ("raw", "blind"):
                info["alpha_curve"] = curve
            recorder = RunRecorder(
                config,
                protocol,
                identity,
                data_digest,
                store=store,
                model=f"{config.label} [{variant_label(name, result.tuned_label)}]",
                scores_name=variant_scores_name(name),
                write_metrics=False,
                info=info,
                claim=False,
            )
            with recorder:
                for case, matrix in zip(cases, matrices, strict=True):
                    recorder.add_case(case, matrix)
                results[name] = recorder.finish(load_report, engine.stats)
    if config.out is not None:
        _write_outputs(config, protocol.name, results, curve, data_digest, result.tuned_label)
        written = (*(variant_scores_name(name) for name in results), "metrics.json", "alpha_curve.json")
        take_out_dir(config.out, claim, replaced, written)
    return DebiasedRuns(results, curve, result.tuned_label)


def headline(curve: dict, tuned_label: str) -> dict | None:
    """The out-of-sample score of the tuned alpha: Table 4a's cross-validated test score, or the
    test split's score under alpha tuned on another split (Table 4b); None for a fixed alpha."""
    cv, tuned_on = curve.get("cross_validation"), curve.get("tuned_on")
    if cv:
        return {
            "metric": curve.get("metric"),
            "cross_validated_test_score_mean": cv["test_score_mean"],
            "cross_validated_test_score_std": cv["test_score_std"],
            "n_splits": cv["n_splits"],
            "alpha_star_mean": cv["alpha_star_mean"],
            "note": f"the [{tuned_label}] run applies alpha = {curve.get('alpha')} to every case: in-sample",
        }
    if tuned_on:
        return {"metric": curve.get("metric"), "tuned_on": tuned_on, "alpha": curve.get("alpha")}
    return None


def _write_outputs(
    config: EvalConfig, protocol: str, results: dict[str, EvalResult], curve: dict, data_digest: str,
    tuned_label: str,
) -> None:  # fmt: skip
    """metrics.json (raw metrics + a ``debias`` block led by the out-of-sample score) and alpha_curve.json."""
    block = {
        "headline": headline(curve, tuned_label),
        "tuned_label": tuned_label,
        "variants": {name: r.metrics for name, r in results.items()},
        "run_ids": {name: r.run_id for name, r in results.items()},
        "alpha": curve.get("alpha"),
        "metric": curve.get("metric"),
        "prior": curve.get("prior"),
        "cross_validation": curve.get("cross_validation"),
        "alpha_star_all": curve.get("alpha_star_all"),
        "tuned_on": curve.get("tuned_on"),
    }
    write_metrics_json(config, protocol, results["raw"], data_digest, extra={"debias": block})
    write_json(config.out / "alpha_curve.json", curve, indent=1)
