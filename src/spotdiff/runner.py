"""One evaluation run: benchmark -> cases -> engine -> protocol -> metrics -> store and files.

Cases stream through the engine chunk by chunk; each case's score matrix is turned into per-unit
outcomes at once and written to ``scores.jsonl`` and the run store, so only the small outcome
arrays stay in memory. Metrics and their bootstrap confidence intervals are computed at the end.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from spotdiff import __version__
from spotdiff.benchmarks import Benchmark, get_benchmark
from spotdiff.cache import merge_shards
from spotdiff.cases import Case
from spotdiff.engine import Engine, check_capability
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import Protocol, get_protocol
from spotdiff.protocols.stats import UnitTable, evaluate_units
from spotdiff.scorers import Scorer, ScorerOptions, load_scorer
from spotdiff.store import RunStore, dumps

log = logging.getLogger(__name__)

#: Score matrices larger than this are not written to scores.jsonl (gallery retrieval); their
#: per-query outcomes still are.
MAX_SAVED_SCORES = 4096


@dataclass
class EvalConfig:
    """Everything that defines a run (recorded with it)."""

    model: str
    benchmark: str
    data: Path
    subset: str | None = None
    protocol: str | None = None
    out: Path | None = None
    batch_size: int = 32
    device: str = "auto"
    dtype: str = "auto"
    limit: int | None = None
    cache: Path | None = None
    seed: int = 0
    store: Path | None = None
    use_store: bool = True
    n_boot: int = 1000
    progress: bool = True
    options: dict = field(default_factory=dict)
    #: Recorded in the run store's ``info`` with the run (a sharded run records its shards here).
    extra_info: dict = field(default_factory=dict)


@dataclass
class EvalResult:
    run_id: str | None
    metrics: dict
    n_cases: int
    units: UnitTable
    load_report: dict
    engine_stats: dict
    model_identity: dict


def resolve(config: EvalConfig) -> tuple[Benchmark, Protocol]:
    """Check the benchmark, subset and protocol before any model is loaded."""
    bench_cls = get_benchmark(config.benchmark)
    name = config.protocol or bench_cls.protocols[0]
    short = [p for p in bench_cls.protocols if p.endswith("-" + name)]
    if name not in bench_cls.protocols and len(short) == 1:
        name = short[0]  # a short name such as "t2t" for "visla-t2t"
    if name not in bench_cls.protocols:
        raise ConfigError(
            f"benchmark {config.benchmark!r} does not support protocol {name!r}; "
            f"supported: {', '.join(bench_cls.protocols)}"
        )
    bench = bench_cls(config.data, **config.options)
    bench.check_subset(config.subset)
    return bench, get_protocol(name)


def seed_everything(seed: int) -> None:
    """Fix Python, NumPy and torch seeds (recorded with the run)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    import torch

    torch.manual_seed(seed)


def _stream_cases(bench: Benchmark, subset: str | None, limit: int | None) -> Iterator[Case]:
    seen: set[str] = set()
    for n, case in enumerate(bench.cases(subset)):
        if limit is not None and n >= limit:
            return
        if case.id in seen:
            raise DataError("duplicate case id", file=bench.root, record=case.id)
        seen.add(case.id)
        yield case


def run_eval(config: EvalConfig, scorer: Scorer | None = None) -> EvalResult:
    """Evaluate ``config.model`` on ``config.benchmark``; write outputs; return the metrics."""
    bench, protocol = resolve(config)
    seed_everything(config.seed)
    if scorer is None:
        options = ScorerOptions(
            device=config.device, dtype=config.dtype, batch_size=config.batch_size, seed=config.seed
        )
        scorer = load_scorer(config.model, options)
    check_capability(scorer, protocol.needs)
    identity = scorer.identity()
    if config.cache is not None:
        merge_shards(config.cache)  # work left in shards by a killed sharded run is not lost
    engine = Engine(scorer, config.cache, progress=config.progress)
    store = RunStore(config.store) if config.use_store else None
    data_digest = bench.data_digest()
    run_id = None
    if store is not None:
        run_id = store.start_run(
            benchmark=config.benchmark,
            subset=config.subset,
            protocol=protocol.name,
            model=config.model,
            model_identity=identity,
            data_path=str(Path(config.data).resolve()),
            data_digest=data_digest,
            seed=config.seed,
            version=__version__,
            info={
                "batch_size": config.batch_size,
                "limit": config.limit,
                "options": config.options,
                **config.extra_info,
            },
        )
    scores_file = scores_tmp = None
    if config.out is not None:
        config.out.mkdir(parents=True, exist_ok=True)
        # written beside and renamed at the end, so scores.jsonl is always a complete run's
        scores_tmp = config.out / f".scores.jsonl.{os.getpid()}.tmp"
        scores_file = open(scores_tmp, "w", encoding="utf-8")  # noqa: SIM115
    table = UnitTable()
    n_cases = 0
    try:
        cases = _stream_cases(bench, config.subset, config.limit)
        pending: list[dict] = []
        for case, matrix in _zip_cases(cases, engine, protocol.needs):
            n_cases += 1
            outcomes = protocol.outcomes(case, matrix)
            unit_ids = protocol.unit_ids(case, len(outcomes))
            records = [
                {
                    "unit_id": uid,
                    "case_id": case.id,
                    "subset": case.subset,
                    "scores": matrix if matrix.size <= MAX_SAVED_SCORES else None,
                    "outcomes": values,
                    "tags": case.tags,
                }
                for uid, values in zip(unit_ids, outcomes, strict=True)
            ]
            for r in records:
                table.add(r["unit_id"], case.id, case.tags, r["outcomes"])
            if scores_file is not None:
                scores_file.write(_case_line(case, matrix, unit_ids, outcomes) + "\n")
            pending.extend(records)
            if store is not None and len(pending) >= 1024:
                store.add_units(run_id, pending)
                pending = []
        if store is not None:
            store.add_units(run_id, pending)
        bench.report.cases = n_cases
        if n_cases == 0:
            raise DataError(f"no cases to evaluate ({bench.report.summary()})", file=config.data)
        metrics = evaluate_units(protocol, table, n_boot=config.n_boot, seed=config.seed)
    except BaseException as exc:
        if scores_file is not None:
            scores_file.close()
            scores_tmp.unlink(missing_ok=True)
        if store is not None and run_id is not None:
            store.fail_run(run_id, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if scores_file is not None:
            scores_file.close()
        engine.close()
    info = {
        "batch_size": config.batch_size,
        "limit": config.limit,
        "options": config.options,
        "load_report": bench.report.as_dict(),
        "engine": dict(engine.stats),
        "n_boot": config.n_boot,
        **config.extra_info,
    }
    if store is not None:
        store.finish_run(run_id, metrics, n_cases, info=info)
        store.close()
    result = EvalResult(run_id, metrics, n_cases, table, bench.report.as_dict(), dict(engine.stats), identity)
    if config.out is not None:
        scores_tmp.replace(config.out / "scores.jsonl")
        write_metrics_json(config, protocol.name, result, data_digest)
    return result


def _zip_cases(cases: Iterator[Case], engine: Engine, need: str) -> Iterator[tuple[Case, np.ndarray]]:
    """Pair each case with its matrix while the engine consumes the same stream in chunks."""
    buffer: deque[Case] = deque()

    def tee() -> Iterator[Case]:
        for c in cases:
            buffer.append(c)
            yield c

    for matrix in engine.case_matrices(tee(), need):
        yield buffer.popleft(), matrix


def _case_line(case: Case, matrix: np.ndarray, unit_ids: list[str], outcomes: list[dict]) -> str:
    line: dict = {"id": case.id, "subset": case.subset, "tags": case.tags}
    if matrix.size <= MAX_SAVED_SCORES:
        line["scores"] = matrix
    else:
        line["scores_shape"] = list(matrix.shape)
    if len(outcomes) == 1:
        line["correct"] = outcomes[0]
    else:
        line["units"] = [{"unit": u, **o} for u, o in zip(unit_ids, outcomes, strict=True)]
    return dumps(line)


def write_metrics_json(config: EvalConfig, protocol: str, result: EvalResult, data_digest: str) -> Path:
    """``metrics.json`` in the DESIGN.md format, plus provenance fields."""
    payload = {
        "benchmark": config.benchmark,
        "model": config.model,
        "protocol": protocol,
        "n_cases": result.n_cases,
        "metrics": _rounded(result.metrics),
        "subset": config.subset,
        "seed": config.seed,
        "run_id": result.run_id,
        "data": {"path": str(Path(config.data).resolve()), "digest": data_digest},
        "model_identity": result.model_identity,
        "load_report": result.load_report,
        "version": __version__,
    }
    path = config.out / "metrics.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(json.loads(dumps(payload)), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _rounded(metrics: dict) -> dict:
    def r(v):
        if isinstance(v, float):
            return round(v, 2)
        if isinstance(v, (list, tuple)):
            return [r(x) for x in v]
        return v

    return {s: {k: r(v) for k, v in m.items()} for s, m in metrics.items()}
