"""One evaluation run: benchmark -> cases -> engine -> protocol -> metrics -> store and files.

Cases stream through the engine and only per-unit outcomes stay in memory. This module orchestrates the run
(the benchmark and protocol resolved, the scorer and engine made, the cases streamed); recording it and the output
folder's claim are :mod:`spotdiff.diagnose.recorder`'s (:class:`~spotdiff.diagnose.recorder.RunRecorder`, moved
there, issue 43). Details: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from spotdiff.benchmarks import Benchmark, get_benchmark
from spotdiff.cases import Case
from spotdiff.diagnose.autobatch import DEFAULT_BATCH_SIZE, resolve_batch_size
from spotdiff.diagnose.cache import Cache, merge_shards
from spotdiff.diagnose.engine import Engine, check_capability
from spotdiff.diagnose.judge import Judge
from spotdiff.diagnose.recorder import EvalConfig, EvalResult, RunRecorder
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import Protocol, get_protocol
from spotdiff.protocols.columns import IdSet
from spotdiff.protocols.stats import check_n_boot
from spotdiff.scorers import Scorer, ScorerOptions, load_scorer, quiet_progress
from spotdiff.scorers.deferred import recall, remember
from spotdiff.seeding import seed_everything, seed_torch

log = logging.getLogger(__name__)

def served_protocols(bench_cls: type[Benchmark], capabilities: frozenset[str]) -> list[str]:
    """The benchmark's protocols, in its order, whose need a scorer with ``capabilities`` serves.

    Args:
        bench_cls: the benchmark class.
        capabilities: what the scorer serves (its needs).
    """
    return [p for p in bench_cls.protocols if get_protocol(p).needs in capabilities]


def resolve_protocol(
    bench_cls: type[Benchmark],
    requested: str | None,
    capabilities: frozenset[str] | None = None,
    ties: str = "strict",
) -> Protocol:
    """The protocol a run uses, deciding ties by ``ties``: ``requested`` (short names such as ``t2t``
    allowed); else the benchmark's first protocol a scorer with ``capabilities`` can serve (logged),
    or its first.

    Args:
        bench_cls: the benchmark class, whose ``protocols`` lists the protocols it supports.
        requested: a protocol name (or its short form), or None to choose one.
        capabilities: what the scorer serves (its needs), or None when unknown.
        ties: the tie rule, ``strict`` or ``argmax``.
    """
    if requested is None:
        name = bench_cls.protocols[0]
        if capabilities is not None:
            served = served_protocols(bench_cls, capabilities)
            if served and served[0] != name:
                log.info(
                    "--protocol not given: using %s, the first protocol of %s (%s) that the model serves",
                    served[0],
                    bench_cls.name,
                    ", ".join(bench_cls.protocols),
                )
            name = served[0] if served else name
        return get_protocol(name, ties)
    short = [p for p in bench_cls.protocols if p.endswith("-" + requested)]
    name = short[0] if requested not in bench_cls.protocols and len(short) == 1 else requested
    if name not in bench_cls.protocols:
        raise ConfigError(
            f"benchmark {bench_cls.name!r} does not support protocol {name!r}; "
            f"supported: {', '.join(bench_cls.protocols)}"
        )
    return get_protocol(name, ties)


def resolve(config: EvalConfig, capabilities: frozenset[str] | None = None) -> tuple[Benchmark, Protocol]:
    """Check the benchmark, subset, protocol and bootstrap size (before any model is loaded when
    ``capabilities`` is None; see :func:`resolve_protocol`)."""
    check_n_boot(config.n_boot)
    bench_cls = get_benchmark(config.benchmark)
    protocol = resolve_protocol(bench_cls, config.protocol, capabilities, config.ties)
    bench = bench_cls(config.data, ties=config.ties, **config.options)
    bench.check_subset(config.subset)
    return bench, protocol


def stream_cases(bench: Benchmark, subset: str | None, limit: int | None) -> Iterator[Case]:
    """The benchmark's cases (the first ``limit``), their images confined to the data
    (:meth:`~spotdiff.benchmarks.Benchmark.confined_cases`); a repeated case id is an error where it appears.

    Args:
        bench: the loaded benchmark.
        subset: the subset to read, or None for all.
        limit: the number of cases to read at most, or None for all.
    """
    seen = IdSet()  # 16 bytes a case: memory stays flat over millions of cases
    for n, case in enumerate(bench.confined_cases(subset)):
        if limit is not None and n >= limit:
            return
        if not seen.add(case.id):
            raise DataError("duplicate case id", file=bench.root, record=case.id)
        yield case


def set_batch_size(scorer: Scorer, batch_size: int | str | None, cache_dir: str | Path | None) -> None:
    """Give ``scorer`` a batch size: a positive number, or ``"auto"``, resolved (and remembered in
    ``cache_dir``) by :func:`~spotdiff.diagnose.autobatch.resolve_batch_size`; None, the default, is ``"auto"`` for
    a model on CUDA and :data:`~spotdiff.diagnose.autobatch.DEFAULT_BATCH_SIZE` elsewhere (:func:`auto_batch`).

    Args:
        scorer: the model.
        batch_size: a positive number, ``"auto"`` or None.
        cache_dir: where an ``auto`` batch size is remembered, or None.
    """
    if auto_batch(batch_size, str(getattr(scorer, "device", scorer.options.device))):
        scorer.options.batch_size = resolve_batch_size(scorer, cache_dir)
    elif batch_size is None:
        scorer.options.batch_size = DEFAULT_BATCH_SIZE
    elif isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size >= 1:
        scorer.options.batch_size = batch_size
    else:
        raise ConfigError(f"--batch-size must be a positive integer or 'auto', got {batch_size!r}")


def auto_batch(batch_size: int | str | None, device: str) -> bool:
    """Whether the batch size is searched (:mod:`~spotdiff.diagnose.autobatch`): asked for (``"auto"``), or not
    given (None) for a model on CUDA, where the largest batch that fits is the fastest (issue 47; a number given
    turns it off).

    >>> auto_batch(None, "cuda:0"), auto_batch(None, "cpu"), auto_batch(64, "cuda"), auto_batch("auto", "cpu")
    (True, False, False, True)
    """
    return batch_size == "auto" or (batch_size is None and device.startswith("cuda"))


def load_eval_scorer(config: EvalConfig, device: str | None = None) -> Scorer:
    """The model of ``config`` (on ``device``, default ``config.device``) with its batch size set
    (:func:`set_batch_size`); the model libraries' own progress bars silenced unless ``config.progress``.

    With a cache folder, a model loaded before from files unchanged since is built on the first cache miss
    (:class:`~spotdiff.scorers.deferred.DeferredScorer`; an ``auto`` batch size is the one found then): a run
    whose values are all cached never loads it, nor imports the libraries that compute.
    """
    options = ScorerOptions(
        device=device or config.device, dtype=config.dtype, batch_size=DEFAULT_BATCH_SIZE, seed=config.seed
    )
    if config.cache is not None:
        deferred = recall(config.cache, config.model, options, lambda: _build_scorer(config, options))
        if deferred is not None:
            if not auto_batch(config.batch_size, deferred.device):  # auto: the one found when last loaded
                set_batch_size(deferred, config.batch_size, config.cache)
            return deferred
    return _build_scorer(config, options)


def _build_scorer(config: EvalConfig, options: ScorerOptions) -> Scorer:
    """The model of ``config`` loaded (torch seeded first, progress bars as ``config.progress`` says), its batch
    size set and, with a cache folder, remembered there (:func:`~spotdiff.scorers.deferred.remember`)."""
    if not config.progress:
        quiet_progress()
    seed_torch(config.seed)
    scorer = load_scorer(config.model, options)
    set_batch_size(scorer, config.batch_size, config.cache)
    if config.cache is not None:
        remember(config.cache, config.model, options, scorer)
    return scorer


def make_engine(
    config: EvalConfig,
    scorer: Scorer,
    *,
    cache: Cache | None = None,
    progress: bool | None = None,
    judge: Judge | None = None,
) -> Engine:
    """The engine of a run: ``config``'s cache (or an open shard ``cache``), thread budget and decoding.

    Args:
        config: the run's configuration (cache folder, workers and threads, decoding device, progress bars).
        scorer: the model.
        cache: an open cache to use instead of ``config.cache`` (a shard's), or None.
        progress: show progress bars; None: as ``config.progress``.
        judge: the judge of generated answers (``config.judge`` loaded), or None.
    """
    decode_device = None
    if config.gpu_decode:
        decode_device = str(getattr(scorer, "device", ""))
        if not decode_device.startswith("cuda"):
            raise ConfigError(f"--gpu-decode needs the model on a CUDA device; it runs on {decode_device or 'cpu'}")
    return Engine(
        scorer,
        None if cache is not None else config.cache,
        progress=config.progress if progress is None else progress,
        workers=config.workers,
        threads=config.threads,
        decode_device=decode_device,
        cache=cache,
        judge=judge,
    )


def run_eval(config: EvalConfig, scorer: Scorer | None = None) -> EvalResult:
    """Evaluate ``config.model`` on ``config.benchmark``; write outputs; return the metrics."""
    bench, protocol = resolve(config)
    seed_everything(config.seed, with_torch=scorer is not None)  # else when the model loads (load_eval_scorer)
    if scorer is None:
        scorer = load_eval_scorer(config)
    protocol = resolve_protocol(type(bench), config.protocol, scorer.capabilities, config.ties)
    check_capability(scorer, protocol.needs)
    judge = load_judge(config, protocol)
    identity = scorer.identity()
    if config.cache is not None:
        merge_shards(config.cache)  # work left in shards by a killed sharded run is not lost
    data_digest = bench.data_digest()
    device = str(getattr(scorer, "device", scorer.options.device))
    info = {"batch_size": scorer.options.batch_size, "batch_size_auto": auto_batch(config.batch_size, device),
            "gpu_decode": config.gpu_decode}  # fmt: skip
    if judge is not None:
        info["judge"] = {"identity": judge.identity()}
    with (
        make_engine(config, scorer, judge=judge) as engine,
        RunStore(config.store) if config.use_store else contextlib.nullcontext() as store,
        RunRecorder(
            config, protocol, identity, data_digest, store=store, info={**info, "threads": engine.budget.as_dict()}
        ) as recorder,
    ):
        cases = stream_cases(bench, config.subset, config.limit)
        for case, matrix in _zip_cases(cases, engine, protocol.needs):
            recorder.add_case(case, matrix, engine.bounded_cells(case))
        bench.report.cases = recorder.n_cases
        if recorder.n_cases == 0:
            raise DataError(f"no cases to evaluate ({bench.report.summary()})", file=config.data)
        usage = scorer.run_usage()
        if usage is not None:
            recorder.info["usage"] = usage
        if judge is not None:
            recorder.info["judge"] = judge.record()
        return recorder.finish(bench.report.as_dict(), engine.stats)


def load_judge(config: EvalConfig, protocol: Protocol) -> Judge | None:
    """The judge of ``config.judge`` (None without one), for a protocol that reads generated answers.

    Args:
        config: the run's configuration.
        protocol: the run's protocol.
    """
    if config.judge is None:
        return None
    if not config.progress:
        quiet_progress()
    if protocol.needs != "answer-prob":
        raise ConfigError(
            f"--judge grades the generated answers of a benchmark's own questions (protocols answer, naturalbench); "
            f"protocol {protocol.name!r} has none"
        )
    options = ScorerOptions(device=config.device, dtype=config.dtype, batch_size=DEFAULT_BATCH_SIZE, seed=config.seed)
    return Judge(config.judge, options, config.cache)


def _zip_cases(cases: Iterator[Case], engine: Engine, need: str) -> Iterator[tuple[Case, np.ndarray]]:
    """Pair each case with its matrix while the engine consumes the same stream in chunks."""
    buffer: deque[Case] = deque()

    def tee() -> Iterator[Case]:
        for c in cases:
            buffer.append(c)
            yield c

    for matrix in engine.case_matrices(tee(), need):
        yield buffer.popleft(), matrix
