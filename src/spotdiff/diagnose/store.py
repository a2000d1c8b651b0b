"""The run store: one SQLite file recording every evaluation and every per-case score.

Runs, their metrics with confidence intervals, and each unit's score matrix and outcomes, so every
reported number traces to cases. Default location ``$SPOTDIFF_STORE`` or
``~/.local/share/spotdiff/runs.sqlite``; what it records: docs/architecture.md.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spotdiff.diagnose.sqlfile import connect, transaction
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import dumps, json_text, to_jsonable

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    status TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    subset TEXT,
    protocol TEXT NOT NULL,
    model TEXT NOT NULL,
    model_identity TEXT NOT NULL,
    data_path TEXT NOT NULL,
    data_digest TEXT NOT NULL,
    seed INTEGER NOT NULL,
    version TEXT NOT NULL,
    n_cases INTEGER,
    metrics TEXT,
    info TEXT NOT NULL,
    training TEXT,
    step INTEGER
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    subset TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    ci_low REAL,
    ci_high REAL,
    PRIMARY KEY (run_id, subset, metric)
);
CREATE TABLE IF NOT EXISTS units (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    unit_id TEXT NOT NULL,
    case_id TEXT NOT NULL,
    subset TEXT NOT NULL,
    scores TEXT NOT NULL,
    outcomes TEXT NOT NULL,
    tags TEXT NOT NULL,
    PRIMARY KEY (run_id, unit_id)
);
CREATE INDEX IF NOT EXISTS runs_benchmark ON runs(benchmark, model);
"""
#: Columns added after the first release, with their types: an older store gains them on open.
_ADDED_COLUMNS = (("training", "TEXT"), ("step", "INTEGER"))
_RUN_COLUMNS = (
    "id, created, status, benchmark, subset, protocol, model, model_identity, data_path, data_digest, seed, "
    "version, n_cases, metrics, info, training, step"
)


def stored_json(text: Any, path: Path, record: str, field: str) -> Any:
    """A JSON column of a run store decoded; text that is not JSON (a damaged or hand-made store) is a
    DataError naming the store, the record and the field.

    Args:
        text: the column's text.
        path: the store's file.
        record: the row (``run ID`` or ``run ID, unit U``).
        field: the column.
    """
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise DataError(f"not JSON ({exc})", file=path, record=record, field=field) from None


def default_store_path() -> Path:
    """``$SPOTDIFF_STORE`` or ``~/.local/share/spotdiff/runs.sqlite``."""
    env = os.environ.get("SPOTDIFF_STORE")
    return Path(env) if env else Path.home() / ".local" / "share" / "spotdiff" / "runs.sqlite"


@dataclass
class Run:
    """One row of the ``runs`` table, with JSON fields decoded."""

    id: str
    created: str
    status: str
    benchmark: str
    subset: str | None
    protocol: str
    model: str
    model_identity: dict
    data_path: str
    data_digest: str
    seed: int
    version: str
    n_cases: int | None
    metrics: dict | None
    info: dict
    training: str | None = None
    step: int | None = None


class RunStore:
    """Open (creating if needed) the run store at ``path``; a context manager that closes it.

    Every SQL statement spotdiff runs against a run store is a method of this class (the check at open
    and the transactions: :mod:`spotdiff.diagnose.sqlfile`). A damaged store fails at open, left as
    it is; a full disk fails the write, naming the file.

    Args:
        path: the store's file (default :func:`default_store_path`).
        create: create a missing store; a command that only reads runs passes False, so a mistyped
            ``--store`` is an error naming the path rather than a new, empty store.
    """

    def __init__(self, path: str | Path | None = None, *, create: bool = True) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        if not create and not self.path.is_file():
            raise ConfigError(
                f"no run store at {self.path}: no run has been recorded there; give the store's file with --store"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remedy = (
            "a run store cannot be rebuilt, so it is left as it is: keep a copy, try to recover its runs "
            f"(sqlite3 {self.path} .recover | sqlite3 recovered.sqlite), and pass --store NEW.sqlite meanwhile"
        )
        self._db = connect(self.path, remedy, ["PRAGMA foreign_keys=ON;", _SCHEMA], journal="wal")
        self._migrate()
        self._db.execute("CREATE INDEX IF NOT EXISTS runs_training ON runs(training, step)")

    def _migrate(self) -> None:
        """Add the columns an older store lacks (in one write transaction, so concurrent openers agree)."""
        if not self._missing_columns():
            return
        with transaction(self._db, self.path):
            for name, kind in self._missing_columns():
                self._db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")

    def _missing_columns(self) -> list[tuple[str, str]]:
        have = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
        return [(name, kind) for name, kind in _ADDED_COLUMNS if name not in have]

    def _tx(self, statements: Iterable[tuple[str, Any]]) -> None:
        with transaction(self._db, self.path):
            for sql, params in statements:
                if params and isinstance(params, list) and isinstance(params[0], (list, tuple)):
                    self._db.executemany(sql, params)
                else:
                    self._db.execute(sql, params or ())

    def start_run(
        self,
        *,
        benchmark: str,
        subset: str | None,
        protocol: str,
        model: str,
        model_identity: dict,
        data_path: str,
        data_digest: str,
        seed: int,
        version: str,
        info: dict | None = None,
        training: str | None = None,
        step: int | None = None,
    ) -> str:
        """Record a new run as ``running`` and return its id (``training``/``step``: the training run and
        optimizer step of an evaluation made during training).

        Args:
            benchmark: the benchmark's registered name.
            subset: the evaluated subset, None for all.
            protocol: the protocol's name.
            model: the model spec.
            model_identity: the scorer's identity (spec, config and weight digests).
            data_path: where the data was read from.
            data_digest: the digest of the data.
            seed: the run's seed.
            version: the spotdiff version.
            info: further JSON-able facts about the run.
            training: the id of the training run an evaluation was made during, else None.
            step: that training run's optimizer step, else None.
        """
        run_id = uuid.uuid4().hex[:12]
        created = datetime.now(UTC).isoformat(timespec="seconds")
        self._tx(
            [
                (
                    "INSERT INTO runs (id, created, status, benchmark, subset, protocol, model, "
                    "model_identity, data_path, data_digest, seed, version, info, training, step) "
                    "VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        run_id,
                        created,
                        benchmark,
                        subset,
                        protocol,
                        model,
                        dumps(model_identity),
                        data_path,
                        data_digest,
                        seed,
                        version,
                        dumps(info or {}),
                        training,
                        step,
                    ],
                )
            ]
        )
        return run_id

    def add_units(self, run_id: str, units: Iterable[dict]) -> None:
        """Store per-unit records: ``unit_id, case_id, subset, scores, outcomes, tags`` (values, or their JSON
        text as a :class:`~spotdiff.jsonio.JsonText`)."""
        rows = [
            (
                run_id,
                u["unit_id"],
                u["case_id"],
                u["subset"],
                json_text(u["scores"]),
                json_text(u["outcomes"]),
                json_text(u.get("tags", {})),
            )
            for u in units
        ]
        if rows:
            self._tx([("INSERT OR REPLACE INTO units VALUES (?, ?, ?, ?, ?, ?, ?)", rows)])

    def finish_run(self, run_id: str, metrics: dict, n_cases: int, info: dict | None = None) -> None:
        """Mark the run done and store its final metrics.

        Args:
            run_id: the id :meth:`start_run` returned.
            metrics: ``{subset: {metric: value, metric_ci95: [lo, hi]}}``.
            n_cases: the number of cases evaluated.
            info: when given, replaces the run's ``info``.
        """
        rows = []
        for subset, values in metrics.items():
            for metric, value in values.items():
                if metric.endswith("_ci95"):
                    continue
                lo, hi = values.get(f"{metric}_ci95", (None, None))
                rows.append((run_id, subset, metric, *to_jsonable([value, lo, hi])))
        statements: list[tuple[str, Any]] = [
            ("DELETE FROM metrics WHERE run_id=?", [run_id]),
            (
                "UPDATE runs SET status='done', metrics=?, n_cases=? WHERE id=?",
                [dumps(metrics), n_cases, run_id],
            ),
        ]
        if info is not None:
            statements.append(("UPDATE runs SET info=? WHERE id=?", [dumps(info), run_id]))
        if rows:
            statements.append(("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?)", rows))
        self._tx(statements)

    def fail_run(self, run_id: str, reason: str) -> None:
        self._tx([("UPDATE runs SET status=? WHERE id=?", [f"failed: {reason}"[:500], run_id])])

    def _row_to_run(self, row: tuple) -> Run:
        (rid, created, status, bench, subset, protocol, model, ident, dpath, ddig, seed, ver, n, met, info) = row[:15]
        return Run(
            rid,
            created,
            status,
            bench,
            subset,
            protocol,
            model,
            self._object(rid, "model_identity", ident),
            dpath,
            ddig,
            seed,
            ver,
            n,
            self._object(rid, "metrics", met) if met else None,
            self._object(rid, "info", info),
            *row[15:],
        )

    def _object(self, run_id: str, column: str, text: Any) -> dict:
        """A run's JSON column, which must hold an object: a damaged or hand-made one is a DataError naming
        the store, the run and the column."""
        value = stored_json(text, self.path, f"run {run_id}", column)
        if not isinstance(value, dict):
            raise DataError(f"holds a {type(value).__name__}, not a JSON object", file=self.path,
                            record=f"run {run_id}", field=column)  # fmt: skip
        return value

    def runs(
        self, *, benchmark: str | None = None, status: str | None = None, training: str | None = None
    ) -> list[Run]:
        """All runs, newest first, optionally filtered (``training``: the evaluations of one training run).

        Args:
            benchmark: only runs of this benchmark.
            status: only runs with this status (``running``, ``done``, ``failed: ...``).
            training: only the evaluations made during this training run.
        """
        sql, params = f"SELECT {_RUN_COLUMNS} FROM runs", []
        where = []
        if training:
            where.append("training=?")
            params.append(training)
        if benchmark:
            where.append("benchmark=?")
            params.append(benchmark)
        if status:
            where.append("status=?")
            params.append(status)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created DESC, rowid DESC"
        return [self._row_to_run(r) for r in self._db.execute(sql, params)]

    def get(self, run_id: str) -> Run:
        """A run by id, else by unique id prefix (compared as text: ``_`` and ``%`` are no wildcards)."""
        rows = self._db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id=?", [run_id]).fetchall() or (
            self._db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE substr(id, 1, ?)=?", [len(run_id), run_id])
        ).fetchall()
        if len(rows) != 1:
            raise ConfigError(
                f"no run {run_id!r} in {self.path}" if not rows else f"run id prefix {run_id!r} is ambiguous"
            )
        return self._row_to_run(rows[0])

    def units(self, run_id: str) -> Iterator[dict]:
        """The run's per-unit records, in unit id order."""
        for unit_id, case_id, subset, scores, outcomes, tags in self.unit_rows(run_id):
            record = f"run {run_id}, unit {unit_id}"
            yield {
                "unit_id": unit_id,
                "case_id": case_id,
                "subset": subset,
                "scores": stored_json(scores, self.path, record, "scores"),
                "outcomes": stored_json(outcomes, self.path, record, "outcomes"),
                "tags": stored_json(tags, self.path, record, "tags"),
            }

    def unit_rows(self, run_id: str) -> Iterator[tuple[str, str, str, str, str, str]]:
        """The run's raw unit rows ``(unit_id, case_id, subset, scores, outcomes, tags)`` with the JSON
        fields still as text, in unit id order (for readers that decode lazily, like the report)."""
        return iter(self._db.execute(  # a cursor, not a generator: nothing is left to finalize if a reader stops
            "SELECT unit_id, case_id, subset, scores, outcomes, tags FROM units WHERE run_id=? ORDER BY unit_id",
            [run_id],
        ))  # fmt: skip

    def finished(self, run_ids: Iterable[str]) -> bool:
        """True when every run in ``run_ids`` exists and is done."""
        ids = sorted(set(run_ids))
        if not ids:
            return True
        marks = ",".join("?" * len(ids))
        (n,) = self._db.execute(f"SELECT COUNT(*) FROM runs WHERE status='done' AND id IN ({marks})", ids).fetchone()
        return int(n) == len(ids)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
