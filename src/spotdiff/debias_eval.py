"""``spotdiff eval --debias``: a VisualGPTScore run reported raw, with alpha = 1, and alpha-tuned.

VisualGPTScore (Sec. 5-6): log P(t|i) = log P(t) + PMI(t, i); the language prior P(t) is
estimated from null (Gaussian-noise) images, real images or the gallery, and the family
``log VGS - alpha * log P(t)`` is evaluated for the raw score (alpha = 0), PMI (alpha = 1), the
text-only prior ("blind", Table 2a) and a tuned or fixed alpha (Table 4a cross-validation).
Each variant is recorded as its own run (``MODEL [variant]``) so reports and ``spotdiff compare``
treat them like models; the tuned run carries the alpha curve in its info.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from spotdiff import __version__
from spotdiff.debias import DebiasConfig, config_dict, debias_variants
from spotdiff.engine import Engine, check_capability
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols.stats import UnitTable, evaluate_units
from spotdiff.runner import (
    MAX_SAVED_SCORES,
    EvalConfig,
    EvalResult,
    _case_line,
    _rounded,
    _stream_cases,
    resolve,
    seed_everything,
    write_metrics_json,
)
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.store import RunStore, dumps


def run_debiased_eval(config: EvalConfig, debias: DebiasConfig) -> dict[str, EvalResult]:
    """Evaluate every debiasing variant of a generative model; returns variant -> result."""
    bench, protocol = resolve(config)
    if protocol.needs != "image-text":
        raise ConfigError(f"--debias needs an image-text protocol; {protocol.name!r} needs {protocol.needs!r}")
    seed_everything(config.seed)
    options = ScorerOptions(device=config.device, dtype=config.dtype, batch_size=config.batch_size, seed=config.seed)
    scorer = load_scorer(config.model, options)
    check_capability(scorer, protocol.needs)
    identity = scorer.identity()
    engine = Engine(scorer, config.cache, progress=config.progress)
    try:
        cases = list(_stream_cases(bench, config.subset, config.limit))
        bench.report.cases = len(cases)
        if not cases:
            raise DataError(f"no cases to evaluate ({bench.report.summary()})", file=config.data)
        debias = replace(debias, benchmark=debias.benchmark or config.benchmark, seed=config.seed)
        result = debias_variants(engine, cases, protocol, debias)
    finally:
        engine.close()
    data_digest = bench.data_digest()
    curve = result.curve_data()
    store = RunStore(config.store) if config.use_store else None
    results: dict[str, EvalResult] = {}
    lines: dict[str, list[str]] = {}
    for name, matrices in result.variants.items():
        table = UnitTable()
        records = []
        lines[name] = []
        for case, matrix in zip(cases, matrices, strict=True):
            outcomes = protocol.outcomes(case, matrix)
            unit_ids = protocol.unit_ids(case, len(outcomes))
            for uid, values in zip(unit_ids, outcomes, strict=True):
                table.add(uid, case.id, case.tags, values)
                records.append(
                    {
                        "unit_id": uid,
                        "case_id": case.id,
                        "subset": case.subset,
                        "scores": matrix if matrix.size <= MAX_SAVED_SCORES else None,
                        "outcomes": values,
                        "tags": case.tags,
                    }
                )
            lines[name].append(_case_line(case, matrix, unit_ids, outcomes))
        metrics = evaluate_units(protocol, table, n_boot=config.n_boot, seed=config.seed)
        info = {
            "batch_size": config.batch_size,
            "limit": config.limit,
            "options": config.options,
            "load_report": bench.report.as_dict(),
            "n_boot": config.n_boot,
            "debias": {
                "variant": name,
                "config": config_dict(debias),
                "alpha": result.alpha,
                "prior": result.prior_info,
            },
            **config.extra_info,
        }
        if name not in ("raw", "blind"):
            info["alpha_curve"] = curve
        run_id = None
        if store is not None:
            run_id = store.start_run(
                benchmark=config.benchmark,
                subset=config.subset,
                protocol=protocol.name,
                model=f"{config.model} [{name}]",
                model_identity=identity,
                data_path=str(Path(config.data).resolve()),
                data_digest=data_digest,
                seed=config.seed,
                version=__version__,
                info=info,
            )
            store.add_units(run_id, records)
            store.finish_run(run_id, metrics, len(cases), info=info)
        results[name] = EvalResult(
            run_id, metrics, len(cases), table, bench.report.as_dict(), dict(engine.stats), identity
        )
    if store is not None:
        store.close()
    if config.out is not None:
        _write_outputs(config, protocol.name, results, lines, curve, data_digest)
    return results


def _write_outputs(
    config: EvalConfig, protocol: str, results: dict[str, EvalResult], lines: dict[str, list[str]],
    curve: dict, data_digest: str,
) -> None:  # fmt: skip
    """metrics.json (raw metrics + a ``debias`` block), per-variant scores, alpha_curve.json."""
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    for name, variant_lines in lines.items():
        target = "scores.jsonl" if name == "raw" else f"scores.{name.replace('=', '')}.jsonl"
        (out / target).write_text("\n".join(variant_lines) + "\n", encoding="utf-8")
    write_metrics_json(config, protocol, results["raw"], data_digest)
    payload = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    payload["debias"] = {
        "variants": {name: _rounded(r.metrics) for name, r in results.items()},
        "run_ids": {name: r.run_id for name, r in results.items()},
        "alpha": curve.get("alpha"),
        "metric": curve.get("metric"),
        "prior": curve.get("prior"),
        "cross_validation": curve.get("cross_validation"),
        "alpha_star_all": curve.get("alpha_star_all"),
    }
    (out / "metrics.json").write_text(json.dumps(json.loads(dumps(payload)), indent=2) + "\n", encoding="utf-8")
    (out / "alpha_curve.json").write_text(json.dumps(json.loads(dumps(curve)), indent=1) + "\n", encoding="utf-8")
