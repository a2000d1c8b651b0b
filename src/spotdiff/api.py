"""The Python API: load a model, load a benchmark, evaluate, from a notebook or a script.

Examples: docs/api.md.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotdiff.benchmarks import Benchmark, LoadReport, get_benchmark
from spotdiff.benchmarks.base import BenchmarkMetadata
from spotdiff.cases import Case
from spotdiff.data import resolve_data
from spotdiff.data.declared import resolve_benchmark
from spotdiff.diagnose.cache import default_cache_dir
from spotdiff.diagnose.runner import EvalConfig, EvalResult, run_eval, served_protocols, set_batch_size
from spotdiff.errors import SpotdiffError
from spotdiff.naming import safe_name
from spotdiff.protocols import get_protocol
from spotdiff.scorers import Scorer, ScorerOptions, load_scorer
from spotdiff.urls import redact_text

__all__ = [
    "Grid",
    "GridCell",
    "LoadedBenchmark",
    "Result",
    "evaluate",
    "evaluate_grid",
    "load_benchmark",
    "load_model",
]

log = logging.getLogger(__name__)

#: ``load_model`` keyword arguments that are :class:`~spotdiff.scorers.ScorerOptions` fields; any
#: other keyword is a family-specific option (for example ``vgpt``'s ``prompt``).
_SCORER_FIELDS = ("device", "dtype", "batch_size", "seed")


def load_model(spec: str, **options: Any) -> Scorer:
    """The model a spec string names (``hf-clip:NAME_OR_PATH``, ``open-clip:ARCH@TAG``, ``minilm``, ...).

    The scorer is callable: ``model(images, texts)`` returns the ``[n_images, n_texts]`` score matrix
    (similarity for embedding models, the pair score for BLIP-ITM and VisualGPTScore); embedding
    models also have ``model.embed_images(images)`` and ``model.embed_texts(texts)``.

    Args:
        spec: the model spec (``spotdiff models`` lists the families).
        options: ``device`` (default ``auto``), ``dtype``, ``batch_size`` (a number or ``"auto"``),
            ``seed``, and any family-specific option.
    """
    known = {k: options.pop(k) for k in _SCORER_FIELDS if k in options}
    known.setdefault("device", "auto")
    batch_size = known.pop("batch_size", None)
    scorer = load_scorer(spec, ScorerOptions(**known, extra=options))
    set_batch_size(scorer, batch_size, default_cache_dir())  # "auto": remembered in the default cache
    return scorer


@dataclass
class LoadedBenchmark(Sequence[Case]):
    """A benchmark's cases in memory, with what the load read and skipped.

    Attributes:
        name: the registered benchmark name.
        loader: the :class:`~spotdiff.benchmarks.Benchmark` that read the data.
        cases: the validated cases.
        report: records read and records skipped, by rule.
    """

    name: str
    loader: Benchmark
    cases: list[Case]
    report: LoadReport

    @property
    def metadata(self) -> BenchmarkMetadata:
        """Paper, reference, BibTeX and main score of the benchmark."""
        return self.loader.metadata

    def __getitem__(self, index: Any) -> Any:
        return self.cases[index]

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)


def _data_root(benchmark: str, data: str | Path | None) -> Path:
    """``data``, or the benchmark's copy in the data home (``spotdiff data fetch``)."""
    return resolve_data(get_benchmark(benchmark).name, data)


def load_benchmark(
    name: str, data: str | Path | None = None, *, subset: str | None = None, limit: int | None = None, **options: Any
) -> LoadedBenchmark:
    """Read a benchmark's cases (``spotdiff benchmarks`` lists the names and their data layouts).

    Args:
        name: the benchmark name, a declaration's YAML file, or a published set ``hf:ORG/NAME[@REVISION]``
            (docs/declared.md).
        data: its data folder (default: its ``spotdiff data fetch`` copy in the data home).
        subset: one subset only; limit: the first ``limit`` cases only.
        options: loader options (the ``-o KEY=VALUE`` of ``spotdiff eval``, e.g. ``images=PATH``).
    """
    name = resolve_benchmark(name)
    bench_cls = get_benchmark(name)
    loader = bench_cls(_data_root(name, data), **options)
    loader.check_subset(subset)
    cases = loader.load(subset, limit)
    return LoadedBenchmark(bench_cls.name, loader, cases, loader.report)


class Result:
    """One evaluation: what ``spotdiff eval`` prints, writes and records.

    A view of the runner's :class:`~spotdiff.diagnose.runner.EvalResult` (``.run``, which also
    holds the per-unit table, the aggregates, the engine's statistics and the environment).
    """

    def __init__(self, run: EvalResult) -> None:
        self.run = run

    def __repr__(self) -> str:
        what = f"model={self.model!r}, benchmark={self.benchmark!r}, protocol={self.protocol!r}"
        return f"Result({what}, n_cases={self.n_cases})"

    @property
    def run_id(self) -> str | None:
        """The run's id in the run store (None with ``use_store=False``)."""
        return self.run.run_id

    @property
    def metrics(self) -> dict[str, dict[str, Any]]:
        """``{"all": {metric: value, metric_ci95: [lo, hi]}, "<subset>": {...}}`` in percent."""
        return self.run.metrics

    @property
    def cases(self) -> list[dict]:
        """Per case ``{"id", "subset", "tags", "scores", "units": [{"unit", <metric>: outcome}]}``."""
        return self.run.cases or []

    @property
    def model(self) -> str:
        """The model spec evaluated."""
        return self.run.run_config["model"]

    @property
    def benchmark(self) -> str:
        """The benchmark evaluated."""
        return self.run.run_config["benchmark"]

    @property
    def protocol(self) -> str:
        """The protocol used."""
        return self.run.protocol

    @property
    def n_cases(self) -> int:
        """How many cases were evaluated."""
        return self.run.n_cases

    @property
    def model_identity(self) -> dict:
        """Spec, class, config and weight digests of the model."""
        return self.run.model_identity

    @property
    def load_report(self) -> dict:
        """Records read and records skipped, by rule."""
        return self.run.load_report

    def to_pandas(self) -> Any:
        """One row per unit (a case, or one query of a multi-query case): ``case``, ``unit``,
        ``subset``, each metric's outcome (1.0 correct, 0.0 wrong, NaN undefined) and the case's tags."""
        import pandas as pd

        rows = []
        for case in self.cases:
            for unit in case["units"]:
                row = {"case": case["id"], "subset": case["subset"], **unit}
                row.update({k: v for k, v in case["tags"].items() if k not in row})
                rows.append(row)
        return pd.DataFrame(rows)


def evaluate(
    model: str | Scorer,
    benchmark: str,
    data: str | Path | None = None,
    *,
    subset: str | None = None,
    protocol: str | None = None,
    out: str | Path | None = None,
    batch_size: int | str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    limit: int | None = None,
    cache: str | Path | bool | None = True,
    seed: int = 0,
    store: str | Path | None = None,
    use_store: bool = True,
    n_boot: int = 1000,
    progress: bool = True,
    workers: int | None = None,
    threads: int | None = None,
    gpu_decode: bool = False,
    ties: str = "strict",
    overwrite: bool = False,
    nan_as_failure: bool = False,
    options: dict[str, Any] | None = None,
) -> Result:
    """Evaluate ``model`` on ``benchmark``: the run ``spotdiff eval`` would make, returned as a :class:`Result`.

    Each setting is the ``spotdiff eval`` option of the same name (an
    :class:`~spotdiff.diagnose.runner.EvalConfig` field); an unknown keyword is a ``TypeError``, a
    bad value a :class:`~spotdiff.errors.ConfigError` (an unknown protocol or subset before the
    model loads).

    Example (the first 100 cases, no run store, on the CPU)::

        result = spotdiff.evaluate("minilm", "visla-generic", "data/visla", limit=100, use_store=False, device="cpu")
        result.protocol, result.n_cases             # ("visla-t2t", 100): minilm serves text-text only
        result.metrics["all"]["accuracy"], result.metrics["all"]["accuracy_ci95"]

    Args:
        model: a model spec, or a scorer from :func:`load_model` (not reloaded).
        benchmark: a benchmark name, a declaration's YAML file, or ``hf:ORG/NAME[@REVISION]`` (docs/declared.md).
        data: its data folder (default: its ``spotdiff data fetch`` copy in the data home).
        subset: one subset only.
        protocol: the protocol (short names such as ``t2t`` allowed; default: the benchmark's first
            protocol the model serves).
        out: a folder for ``metrics.json`` and ``scores.jsonl`` (default: no files).
        batch_size: items per model batch, or ``"auto"`` (default: a given scorer's own, else ``"auto"`` for a
            model on CUDA and 32 elsewhere).
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:1``, ...
        dtype: ``auto``, ``float32``, ``float16``, ``bfloat16``.
        limit: the first ``limit`` cases only.
        cache: the embedding and score cache: True for the persistent cache (``$SPOTDIFF_CACHE``
            or ``~/.cache/spotdiff``), a folder, or None / False for none.
        seed: the seed of the model and of the bootstrap.
        store: the run store (default: ``$SPOTDIFF_STORE`` or ``~/.local/share/spotdiff/runs.sqlite``).
        use_store: record the run in the store.
        n_boot: bootstrap resamples of the confidence intervals (0: none).
        progress: show progress bars.
        workers: processes decoding images ahead of the model (0: none), and
        threads: torch's intra-op threads while it computes; None: chosen so that threads times workers stay
            within the usable cores (:func:`~spotdiff.processes.thread_budget`).
        gpu_decode: decode JPEG files on the model's CUDA device.
        ties: ``strict`` (a tie between the true and a false candidate is a failure) or ``argmax``
            (it goes to the candidate listed first).
        overwrite: replace another run's files in ``out``.
        nan_as_failure: score cases whose scores are NaN as failures (counted in ``n_nan_cases``) instead of
            raising :class:`~spotdiff.errors.ModelOutputError`.
        options: benchmark loader options (``-o KEY=VALUE``, e.g. ``{"images": "path"}``).
    """
    if cache is True:
        cache = default_cache_dir()
    benchmark = resolve_benchmark(benchmark)
    scorer = model if isinstance(model, Scorer) else None
    spec = scorer.spec if scorer is not None else str(model)
    cfg = EvalConfig(
        model=spec,
        benchmark=benchmark,
        data=_data_root(benchmark, data),
        subset=subset,
        protocol=protocol,
        out=_path(out),
        batch_size=batch_size,
        device=device,
        dtype=dtype,
        limit=limit,
        cache=_path(cache or None),
        seed=seed,
        store=_path(store),
        use_store=use_store,
        n_boot=n_boot,
        progress=progress,
        workers=workers,
        threads=threads,
        gpu_decode=gpu_decode,
        ties=ties,
        overwrite=overwrite,
        nan_as_failure=nan_as_failure,
        options=dict(options or {}),
        keep_cases=True,
    )
    if scorer is not None and batch_size is not None:
        set_batch_size(scorer, cfg.batch_size, cfg.cache)
    return Result(run_eval(cfg, scorer=scorer))


#: The settings :func:`evaluate` takes by keyword (every cell of :func:`evaluate_grid` gets them).
EVALUATE_SETTINGS = frozenset(
    name for name, p in inspect.signature(evaluate).parameters.items() if p.kind is p.KEYWORD_ONLY
)


def _path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


@dataclass
class GridCell:
    """One (model, benchmark) cell of a grid: its result, why it could not run (``error``), or why it
    does not apply (``skipped``: the model serves none of the benchmark's protocols)."""

    model: str
    benchmark: str
    result: Result | None = None
    error: str | None = None
    skipped: str | None = None


@dataclass
class Grid:
    """Every model on every benchmark (:func:`evaluate_grid`), one run per cell."""

    models: list[str]
    benchmarks: list[str]
    cells: list[GridCell]

    def cell(self, model: str, benchmark: str) -> GridCell:
        return next(c for c in self.cells if c.model == model and c.benchmark == benchmark)

    @property
    def run_ids(self) -> list[str]:
        return [c.result.run_id for c in self.cells if c.result is not None and c.result.run_id]

    @property
    def failed(self) -> list[GridCell]:
        return [c for c in self.cells if c.error is not None]

    @property
    def skipped(self) -> list[GridCell]:
        """The cells that do not apply: the model serves none of the benchmark's protocols."""
        return [c for c in self.cells if c.skipped is not None]

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows: one row per model, one column per benchmark with its main metric over
        ``all`` (the benchmark's declared main score when the protocol used is the one it names, else
        the protocol's first metric) as ``value [lo, hi]``; a cell that did not run shows ``n/a``."""
        header = ["model"]
        metric_of: dict[str, str] = {}
        for b in self.benchmarks:
            done = [c.result for c in self.cells if c.benchmark == b and c.result is not None]
            main_protocol, main_metric = get_benchmark(b).metadata.main_score
            metric = main_metric
            if done and done[0].protocol != main_protocol:
                metric = next(iter(done[0].metrics["all"]))
            metric_of[b] = metric
            header.append(f"{b} {metric}")
        rows = []
        for m in self.models:
            row = [m]
            for b in self.benchmarks:
                c = self.cell(m, b)
                if c.result is None:
                    row.append("n/a")
                    continue
                entry = c.result.metrics["all"]
                value, ci = entry.get(metric_of[b]), entry.get(f"{metric_of[b]}_ci95")
                text = "-" if value is None else f"{value:.2f}"
                if ci and ci[0] is not None:
                    text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
                row.append(text)
            rows.append(row)
        return header, rows


def _not_served(scorer: Scorer, benchmark: str) -> str | None:
    """Why ``scorer`` can run none of ``benchmark``'s protocols, or None when it can run one."""
    bench_cls = get_benchmark(benchmark)
    if served_protocols(bench_cls, scorer.capabilities):
        return None
    wanted = ", ".join(f"{p} ({get_protocol(p).needs})" for p in bench_cls.protocols)
    return f"{scorer.spec} serves none of its protocols: {wanted}"


def evaluate_grid(
    models: Sequence[str | Scorer],
    benchmarks: Sequence[str],
    data: dict[str, str | Path],
    *,
    out: str | Path | None = None,
    **config: Any,
) -> Grid:
    """Evaluate every model on every benchmark, each cell its own run (shared cache, each model
    loaded once). A cell that cannot run (its data is missing, the model cannot serve the protocol
    asked for) records its error and the others go on; with no protocol asked for, a cell whose
    benchmark has no protocol the model serves (a question benchmark for a CLIP model) is skipped,
    with the reason.

    Args:
        models: model specs or loaded scorers; benchmarks: benchmark names (or declarations, as :func:`evaluate`).
        data: benchmark name -> its data folder (a missing one: the data home's copy).
        out: when given, cell outputs go to ``out/<model>/<benchmark>/``.
        config: settings for every cell, the keywords of :func:`evaluate` (an unknown one is a
            ``TypeError`` before any model loads).
    """
    unknown = sorted(set(config) - EVALUATE_SETTINGS)
    if unknown:
        raise TypeError(f"evaluate_grid() got unexpected keyword arguments {unknown}")
    resolved = {b: resolve_benchmark(b) for b in benchmarks}  # a declaration's file or hf: set: its registered name
    benchmarks = list(resolved.values())
    data = {resolved.get(b, b): d for b, d in data.items()}
    cells: list[GridCell] = []
    names: list[str] = []
    for model in models:
        spec = model.spec if isinstance(model, Scorer) else str(model)
        label = redact_text(spec)  # as the runs record it: no password from a URL
        names.append(label)
        scorer: Scorer | None = model if isinstance(model, Scorer) else None
        load_error: str | None = None
        for bench in benchmarks:
            cell = GridCell(label, bench, error=load_error)
            cells.append(cell)
            if load_error:
                continue
            try:
                if scorer is None:
                    try:
                        scorer = load_model(spec, **{k: config[k] for k in _SCORER_FIELDS if k in config})
                    except SpotdiffError as exc:
                        load_error = cell.error = f"{type(exc).__name__}: {redact_text(str(exc))}"
                        log.warning("%s cannot be loaded: %s", label, load_error)
                        continue
                cell.skipped = None if config.get("protocol") else _not_served(scorer, bench)
                if cell.skipped:
                    continue
                cell_out = None if out is None else Path(out) / safe_name(label, "model") / bench
                cell.result = evaluate(scorer, bench, data.get(bench), out=cell_out, **config)
            except SpotdiffError as exc:
                cell.error = f"{type(exc).__name__}: {redact_text(str(exc))}"
                log.warning("%s on %s did not run: %s", label, bench, cell.error)
    return Grid(names, list(benchmarks), cells)
