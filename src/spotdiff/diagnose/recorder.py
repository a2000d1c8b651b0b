"""Recording one evaluation run, and the output folder it claims: the run's configuration and result.

:class:`RunRecorder` is the one code path that records a run (the run store's run row and per-unit records,
``scores.jsonl`` with the case lines of :func:`_case_line`, ``metrics.json`` by :func:`write_metrics_json`); an
output folder belongs to one run configuration (:func:`run_config`), claimed by :func:`claim_out_dir` and
:func:`take_out_dir`. Moved out of :mod:`spotdiff.diagnose.runner` (issue 43), which orchestrates the run
(benchmark -> cases -> engine -> protocol) and feeds this recorder. Details: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.base import CaseSelection
from spotdiff.cases import Case
from spotdiff.data import data_provenance
from spotdiff.diagnose.sqlfile import is_disk_full
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError, ModelOutputError, disk_full
from spotdiff.jsonio import (
    JsonText,
    dumps,
    json_object,
    remove_stale_temporaries,
    temporary_path,
    to_jsonable,
    write_json,
)
from spotdiff.protocols import Protocol, UnitTable
from spotdiff.protocols.diagnostics import BOW_TAG, RunDiagnostics, bag_of_words_identical
from spotdiff.protocols.stats import evaluate_table
from spotdiff.provenance import environment
from spotdiff.urls import redact_text
from spotdiff.version import __version__

log = logging.getLogger(__name__)

#: Score matrices larger than this are not written to scores.jsonl (gallery retrieval); their
#: per-query outcomes still are.
MAX_SAVED_SCORES = 4096
#: The file in an output folder recording which run configuration owns it.
RUN_MARKER = ".spotdiff-run.json"


@dataclass
class EvalConfig(CaseSelection):
    """Everything that defines a run (recorded with it): the cases (:class:`CaseSelection`), the model and how."""

    model: str
    out: Path | None = None
    #: Items per model batch, or ``"auto"``: the largest that fits on the GPU (:mod:`.autobatch`).
    batch_size: int | str | None = None  # None: auto on CUDA, DEFAULT_BATCH_SIZE elsewhere (runner.auto_batch)
    device: str = "auto"
    dtype: str = "auto"
    cache: Path | None = None
    seed: int = 0
    store: Path | None = None
    use_store: bool = True
    n_boot: int = 1000
    progress: bool = True
    #: Processes decoding and preprocessing images ahead of the model (0: none), and torch's intra-op threads
    #: while it computes; None: chosen so that threads times workers stay within the cores
    #: (:func:`~spotdiff.processes.thread_budget`, recorded with the run).
    workers: int | None = None
    threads: int | None = None
    #: Decode JPEG files on the model's CUDA device instead of in the workers.
    gpu_decode: bool = False
    ties: str = "strict"
    overwrite: bool = False
    #: Score the cases whose scores hold NaN as failures (recorded as ``n_nan_cases``) instead of failing the run.
    nan_as_failure: bool = False
    options: dict = field(default_factory=dict)
    #: Recorded in the run store's ``info`` with the run (a sharded run records its shards here).
    extra_info: dict = field(default_factory=dict)
    #: Keep every case's score matrix and per-unit outcomes in the result (the Python API's ``.cases``).
    keep_cases: bool = False
    #: The training run and optimizer step of an evaluation made during training (``spotdiff train --eval``).
    training: str | None = None
    step: int | None = None
    #: A judge model's spec (``--judge``): grades the generated answers of an ``answer-prob`` protocol.
    judge: str | None = None

    @property
    def label(self) -> str:
        """The model as every record names it: ``model`` without the password a URL in it may hold."""
        return redact_text(self.model)


@dataclass
class EvalResult:
    run_id: str | None
    metrics: dict
    n_cases: int
    units: UnitTable
    load_report: dict
    engine_stats: dict
    model_identity: dict
    #: Per case ``{"id", "subset", "tags", "scores", "units": [{"unit", <metric>: outcome}]}`` when
    #: the config asked to keep them.
    cases: list[dict] | None = None
    protocol: str = ""
    aggregates: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    run_config: dict = field(default_factory=dict)
    #: What a served model's requests cost and what could not be read (:meth:`Scorer.run_usage`), or None.
    usage: dict | None = None
    #: The run's tie rate and, for answer-based runs, its unparseable share
    #: (:meth:`spotdiff.protocols.diagnostics.RunDiagnostics.as_json`).
    diagnostics: dict = field(default_factory=dict)
    #: The judge of generated answers (``--judge``): its identity, verdict counts and usage
    #: (:meth:`spotdiff.diagnose.judge.Judge.record`), or None.
    judge: dict | None = None


class RunRecorder:
    """Records one evaluation run: the store's run row and unit records, ``scores.jsonl``, ``metrics.json``.

    The one code path that records a run (``spotdiff eval``, each ``--debias`` variant, sharded
    runs through rank 0). Use as a context manager around feeding it cases::

        with RunRecorder(config, protocol, identity, data_digest, store=store) as rec:
            for case, matrix in ...:
                rec.add_case(case, matrix)
            result = rec.finish(load_report, engine_stats)

    ``scores.jsonl`` is written beside the output as a temporary file and renamed by :meth:`finish`,
    so it always holds a complete run; an exception inside the block (SIGTERM included, see
    :func:`sigterm_as_interrupt`) marks the run failed in the store and removes the temporary file
    (what the engine cached is kept); a run that finishes removes those of killed runs. The output folder is
    checked before anything is recorded (:func:`claim_out_dir`: another run's folder is refused), checked
    again by :meth:`finish` before it writes, and claimed once the files are written, so a run that fails
    leaves the folder to whichever run comes next; the files of a run it replaces (``overwrite``) stay
    until then.
    Every run records its tie rule, the aggregates computed (the benchmark's paper groupings from
    :attr:`~spotdiff.benchmarks.BenchmarkMetadata.groups`) and its ``environment``.

    Args:
        config: the run's configuration (``out`` None: no files).
        protocol: the protocol turning matrices into per-unit outcomes.
        identity: the scorer identity recorded with the run.
        data_digest: the benchmark data's digest.
        store: an open run store, or None not to record in one.
        model: the model label recorded (default ``config.label``; debias variants add ``[variant]``).
        scores_name: the per-case file under ``config.out``.
        write_metrics: write ``metrics.json`` on :meth:`finish`.
        info: extra run info recorded at the start and kept at the end.
        claim: claim the output folder and take it in :meth:`finish`; False when the caller does so
            around several recorders (the debiased variants, one claim for all their files).
    """

    def __init__(
        self,
        config: EvalConfig,
        protocol: Protocol,
        identity: dict,
        data_digest: str,
        *,
        store: RunStore | None,
        model: str | None = None,
        scores_name: str = "scores.jsonl",
        write_metrics: bool = True,
        info: dict | None = None,
        claim: bool = True,
    ) -> None:
        self.config = config
        self.claim = claim
        self.protocol = protocol
        self.identity = identity
        self.data_digest = data_digest
        self.store = store
        self.model = model or config.label
        self.scores_name = scores_name
        self.write_metrics = write_metrics
        self.groups = get_benchmark(config.benchmark).metadata.subset_groups
        declaration = get_benchmark(config.benchmark).declaration_record()  # a declared benchmark's file and digest
        data_source = data_provenance(config.data)  # the fetched source and revision; None if hand-made
        self.environment = environment(
            device=identity.get("device"), model_identity=identity, data_path=Path(config.data), data_source=data_source
        )
        self.info = {
            "batch_size": config.batch_size,
            "limit": config.limit,
            "options": config.options,
            "data_source": data_source,
            "ties": protocol.ties,
            "environment": self.environment,
            **({"declaration": declaration} if declaration else {}),
            **(info or {}),
            **config.extra_info,
        }
        debias = (info or {}).get("debias") or {}
        self.run_config = run_config(config, protocol, data_digest, debias.get("config"))
        self.table = UnitTable()
        self.diagnostics = RunDiagnostics()
        self.cases: list[dict] | None = [] if config.keep_cases else None
        self.n_cases = 0
        self.run_id: str | None = None
        self._pending: list[dict] = []
        self._scores = None
        self._scores_tmp: Path | None = None
        #: The files of the run this one replaces (``--overwrite``): kept until :meth:`finish` succeeds.
        self._replaced: list[Path] = []
        self._restore_sigterm: Callable[[], None] | None = None

    def __enter__(self) -> RunRecorder:
        config = self.config
        if config.out is not None and self.claim:
            self._replaced = claim_out_dir(config.out, self.run_config, overwrite=config.overwrite, replace_now=False)
        self._restore_sigterm = sigterm_as_interrupt()
        try:
            self._start()
        except BaseException as exc:
            self.__exit__(type(exc), exc, None)
            raise
        return self

    def _start(self) -> None:
        """Record the run as running in the store and open the temporary ``scores.jsonl``."""
        config = self.config
        if self.store is not None:
            self.run_id = self.store.start_run(
                benchmark=config.benchmark,
                subset=config.subset,
                protocol=self.protocol.name,
                model=self.model,
                model_identity=self.identity,
                data_path=str(Path(config.data).resolve()),
                data_digest=self.data_digest,
                seed=config.seed,
                version=__version__,
                info=self.info,
                training=config.training,
                step=config.step,
            )
        if config.out is not None:
            self._scores_tmp = temporary_path(config.out / self.scores_name)
            self._scores = open(self._scores_tmp, "w", encoding="utf-8")  # noqa: SIM115 (closed by finish or __exit__)

    def add_case(self, case: Case, matrix: np.ndarray, bounded: list[list[int]] | None = None) -> None:
        """Turn one case's score matrix into per-unit outcomes and record them.

        Args:
            case: the case.
            matrix: its score matrix.
            bounded: the ``[image, text]`` cells whose score is only a bound, written to ``scores.jsonl``.
        """
        self.n_cases += 1
        outcomes = self.protocol.outcomes(case, matrix)
        unit_ids = self.protocol.unit_ids(case, len(outcomes))
        self.diagnostics.add(
            self.protocol.tied_units(case, matrix, outcomes),
            self.protocol.answer_counts(case, matrix),
            self.protocol.yes_counts(case, matrix),
            case.id if self.protocol.nan_scores(case, matrix) else None,
            self.protocol.judge_counts(case, matrix),
        )
        tags = case.tags
        if bag_of_words_identical(case):
            tags = {**tags, BOW_TAG: "identical"}  # the unit's scope bag_of_words_identical
        saved = matrix if matrix.size <= MAX_SAVED_SCORES else None
        texts = _CaseJson(saved, tags, outcomes)  # each serialised once, for the store and scores.jsonl
        for uid, values, outcome in zip(unit_ids, outcomes, texts.outcomes, strict=True):
            self.table.add(uid, case.id, tags, values)
            self._pending.append(
                {
                    "unit_id": uid,
                    "case_id": case.id,
                    "subset": case.subset,
                    "scores": texts.scores,
                    "outcomes": outcome,
                    "tags": texts.tags,
                }
            )
        if self._scores is not None:
            line = _case_line(case, matrix, unit_ids, texts, tags is case.tags, bounded)
            with self._writing_scores():
                self._scores.write(line + "\n")
        if self.cases is not None:
            units = [{"unit": u, **o} for u, o in zip(unit_ids, outcomes, strict=True)]
            record = {"id": case.id, "subset": case.subset, "tags": case.tags, "scores": saved, "units": units}
            self.cases.append(record)
        if len(self._pending) >= 1024:
            self._flush()

    def _flush(self) -> None:
        if self.store is not None and self._pending:
            self.store.add_units(self.run_id, self._pending)
        self._pending = []

    def finish(self, load_report: dict, engine_stats: dict) -> EvalResult:
        """Aggregate with bootstrap intervals, finish the run in the store, and write the files; a run
        whose model gave NaN scores fails here (:meth:`_check_nan`)."""
        self._flush()
        if self.n_cases == 0:
            raise DataError("no cases to evaluate", file=self.config.data)
        self._check_nan()
        evaluation = evaluate_table(self.protocol, self.table, n_boot=self.config.n_boot, seed=self.config.seed,
                                    n_cases=self.n_cases, groups=self.groups)  # fmt: skip
        metrics, aggregates = evaluation.metrics, evaluation.aggregates()
        self.info.update(
            {
                "load_report": load_report,
                "engine": dict(engine_stats),
                "n_boot": self.config.n_boot,
                "aggregates": aggregates,
                "diagnostics": self.diagnostics.as_json(),
            }
        )
        if self._scores is not None:
            with self._writing_scores():
                self._scores.close()  # before the run is done: a full disk fails here
            if self.claim:  # the folder is still free for this run: no other has claimed it since the start
                self._replaced = claim_out_dir(
                    self.config.out, self.run_config, overwrite=self.config.overwrite, replace_now=False
                )
        if self.store is not None:
            self.store.finish_run(self.run_id, metrics, self.n_cases, info=self.info)
        result = EvalResult(
            self.run_id,
            metrics,
            self.n_cases,
            self.table,
            load_report,
            dict(engine_stats),
            self.identity,
            self.cases,
            self.protocol.name,
            aggregates=aggregates,
            environment=self.environment,
            run_config=self.run_config,
            usage=self.info.get("usage"),
            diagnostics=self.diagnostics.as_json(),
            judge=self.info.get("judge"),
        )
        if self._scores is not None:
            self._scores_tmp.replace(self.config.out / self.scores_name)
            self._scores = None
            remove_stale_temporaries(self.config.out / self.scores_name)
            if self.write_metrics:
                write_metrics_json(self.config, self.protocol.name, result, self.data_digest)
            if self.claim:
                take_out_dir(self.config.out, self.run_config, self._replaced, (self.scores_name, "metrics.json"))
        return result

    def _check_nan(self) -> None:
        """Cases whose scores hold NaN: a :class:`ModelOutputError` (the run fails, no files), or with
        ``nan_as_failure`` a warning, the cases scored as failures and counted in ``metrics.json``."""
        d = self.diagnostics
        if not d.nan_cases:
            return
        what = (
            f"model {self.model} gave NaN scores in {d.nan_cases} of {d.cases} cases "
            f"(first: {', '.join(d.nan_examples)})"
        )
        if not self.config.nan_as_failure:
            raise ModelOutputError(
                f"{what}: a diverged model (or float16 overflow) whose accuracy would read as a real 0; check its "
                "weights or run it in float32 (--dtype float32), or pass --nan-as-failure to score those cases as "
                "failures and record how many (metrics.json: n_nan_cases)"
            )
        log.warning("%s: scored as failures (--nan-as-failure; metrics.json: n_nan_cases)", what)

    @contextlib.contextmanager
    def _writing_scores(self) -> Iterator[None]:
        """A full disk while writing the temporary ``scores.jsonl`` raised as one error naming it."""
        try:
            yield
        except OSError as exc:
            if is_disk_full(exc):
                raise disk_full(self._scores_tmp, exc) from exc
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        try:
            if self._scores is not None:
                with contextlib.suppress(OSError):  # a full disk fails the close again: the file goes anyway
                    self._scores.close()
                self._scores_tmp.unlink(missing_ok=True)
                self._scores = None
            if exc is not None and self.store is not None and self.run_id is not None:
                try:
                    self.store.fail_run(self.run_id, f"{type(exc).__name__}: {exc}")
                except (DataError, sqlite3.Error) as err:  # the store's disk is full too: the cause still shows
                    log.warning("run %s could not be marked failed in %s: %s", self.run_id, self.store.path, err)
        finally:
            if self._restore_sigterm is not None:
                self._restore_sigterm()
                self._restore_sigterm = None


def sigterm_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM (``kill``, Slurm, ``docker stop``) raise :class:`KeyboardInterrupt` in this process,
    as SIGINT does, so a run stopped either way is marked failed and leaves no temporary file; returns
    the function that restores the previous handler.

    Nothing changes off the main thread or where a handler is already set; a forked child (an image
    worker) that inherits the handler still dies of SIGTERM.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return lambda: None
    pid = os.getpid()

    def interrupt(signum: int, frame: object) -> None:
        if os.getpid() != pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _CaseJson:
    """A case's saved scores (``null`` when too large), unit tags and per-unit outcomes as JSON texts."""

    def __init__(self, saved: np.ndarray | None, tags: dict, outcomes: list[dict]) -> None:
        self.scores, self.tags = JsonText(dumps(saved)), JsonText(dumps(tags))
        self.outcomes = [JsonText(dumps(o)) for o in outcomes]


def _case_line(
    case: Case,
    matrix: np.ndarray,
    unit_ids: list[str],
    texts: _CaseJson,
    same_tags: bool,
    bounded: list[list[int]] | None,
) -> str:
    """The case's line of ``scores.jsonl``, made of its JSON texts (``same_tags``: the unit tags are the case's);
    a unit of several is its id and then its outcomes."""
    line = {"id": dumps(case.id), "subset": dumps(case.subset), "tags": texts.tags if same_tags else dumps(case.tags)}
    if matrix.size <= MAX_SAVED_SCORES:
        line["scores"] = texts.scores
    else:
        line["scores_shape"] = dumps(list(matrix.shape))
    if bounded:
        line["bounded"] = dumps(bounded)
    if len(unit_ids) == 1:
        line["unit"] = dumps(unit_ids[0])
        line["correct"] = texts.outcomes[0]
    else:
        units = (
            "{" + f'"unit": {dumps(u)}' + (", " + o[1:] if o != "{}" else "}")
            for u, o in zip(unit_ids, texts.outcomes, strict=True)
        )
        line["units"] = "[" + ", ".join(units) + "]"
    return json_object(line)


def write_metrics_json(
    config: EvalConfig, protocol: str, result: EvalResult, data_digest: str, extra: dict | None = None
) -> Path:
    """``metrics.json`` in the format of docs/outputs.md (metrics at full precision), with the tie
    rule, what each aggregate is, provenance fields and ``extra`` blocks.

    Args:
        config: the run's configuration.
        protocol: the protocol's name.
        result: the run's metrics and counts.
        data_digest: the digest of the data folder.
        extra: further top-level blocks to write, or None.
    """
    payload = {
        "benchmark": config.benchmark,
        "model": config.label,
        "protocol": protocol,
        "n_cases": result.n_cases,
        "metrics": result.metrics,
        "aggregates": result.aggregates,
        "ties": config.ties,
        "subset": config.subset,
        "seed": config.seed,
        "n_boot": config.n_boot,
        "run_id": result.run_id,
        "run_config": result.run_config,
        "data": {
            "path": str(Path(config.data).resolve()),
            "digest": data_digest,
            "source": data_provenance(config.data),  # the fetched source and revision; None if hand-made
        },
        "model_identity": result.model_identity,
        "environment": result.environment,
        "load_report": result.load_report,
        **result.diagnostics,
        "version": __version__,
        **({"usage": result.usage} if result.usage is not None else {}),
        **({"judge": result.judge} if result.judge is not None else {}),
        **_declaration(config),
        **(extra or {}),
    }
    return write_json(config.out / "metrics.json", payload)


def _declaration(config: EvalConfig) -> dict:
    """``{"declaration": its name, file and content digest}`` of a declared benchmark's run; empty for a built-in."""
    record = get_benchmark(config.benchmark).declaration_record()
    return {"declaration": record} if record else {}


def run_config(config: EvalConfig, protocol: Protocol, data_digest: str, debias: dict | None = None) -> dict:
    """What makes two runs the same run (and may share an output folder): model, benchmark, data
    digest, subset, protocol, tie rule, limit, seed, bootstrap size, dtype, loader options, the
    debiasing configuration, the judge and a declared benchmark's declaration (its content digest);
    batch size, device, cache and progress bars do not change results.

    Args:
        config: the run's configuration.
        protocol: the protocol the run uses (with its tie rule).
        data_digest: the digest of the data folder.
        debias: the debiasing configuration, or None.
    """
    return to_jsonable(
        {
            "model": config.label,
            "benchmark": config.benchmark,
            "data_digest": data_digest,
            "subset": config.subset,
            "protocol": protocol.name,
            "ties": protocol.ties,
            "limit": config.limit,
            "seed": config.seed,
            "n_boot": config.n_boot,
            "dtype": config.dtype,
            "options": {k: str(v) for k, v in sorted(config.options.items())},
            "debias": debias,
            **({"judge": redact_text(config.judge)} if config.judge else {}),  # absent without one, as before
            **{k: v["sha256"] for k, v in _declaration(config).items()},  # a declared benchmark's content
        }
    )


def _run_outputs(out: Path) -> list[Path]:
    """The files a run writes in its output folder (``metrics.json``, ``scores*.jsonl``,
    ``alpha_curve.json``) that exist."""
    files = [out / "metrics.json", out / "alpha_curve.json", *sorted(out.glob("scores*.jsonl"))]
    return [p for p in files if p.is_file()]


def claim_out_dir(out: Path, config: dict, *, overwrite: bool = False, replace_now: bool = True) -> list[Path]:
    """Make ``out`` the output folder of the run configuration ``config`` (:func:`run_config`).

    A folder already claimed by the same configuration is resumed (the run's files are written
    again); one claimed by another configuration, or holding run files without a claim, is refused
    with a :class:`ConfigError` naming what differs, unless ``overwrite``, which replaces the previous
    run's files: at once, or with ``replace_now`` False only once the new run has succeeded (they stay
    until the caller's :func:`take_out_dir`; :class:`RunRecorder` does so). With ``replace_now`` False
    nothing is claimed either: a run that fails before its :func:`take_out_dir` leaves the folder free.

    Args:
        out: the output folder.
        config: the run configuration (:func:`run_config`).
        overwrite: replace another configuration's files instead of refusing.
        replace_now: remove those files (and claim the folder) now rather than leave them to the caller.

    Returns:
        The previous run's files still to be replaced (empty unless ``replace_now`` is False).
    """
    out.mkdir(parents=True, exist_ok=True)
    marker = out / RUN_MARKER
    recorded, unreadable = None, None
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            unreadable = str(exc)
        if not isinstance(recorded, dict):
            recorded, unreadable = {}, unreadable or f"a JSON {type(recorded).__name__}, not an object"
    if recorded == config:
        return []
    previous = _run_outputs(out)
    if (recorded is not None or previous) and not overwrite:
        if unreadable is not None:
            what = f"holds a run's claim {marker} that is unreadable ({unreadable}), so whose folder it is is unknown"
        elif recorded is None:
            what = f"holds run files ({', '.join(p.name for p in previous)}) not written by this configuration"
        else:
            differ = sorted(k for k in set(config) | set(recorded) if config.get(k) != recorded.get(k))
            shown = "; ".join(f"{k}: {recorded.get(k)!r} there, {config.get(k)!r} now" for k in differ[:4])
            what = f"belongs to another run ({shown})"
        raise ConfigError(
            f"output folder {out} {what}; choose another --out, or pass --overwrite to replace that run's files"
        )
    if not replace_now:
        return previous
    take_out_dir(out, config, previous)
    return []


def take_out_dir(out: Path, config: dict, previous: list[Path], written: tuple[str, ...] = ()) -> None:
    """Claim ``out`` for ``config`` and remove the previous run's files but those named ``written``
    (this run's files, already in their place).

    Args:
        out: the output folder.
        config: the run configuration (:func:`run_config`).
        previous: the previous run's files (:func:`claim_out_dir`).
        written: names of files this run has written over the previous ones.
    """
    write_json(out / RUN_MARKER, config)
    for path in previous:
        if path.name not in written:
            path.unlink(missing_ok=True)
