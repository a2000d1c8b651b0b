"""The run store links evaluations made during training to the training run and step, and a store
written before those columns existed gains them on open, its runs intact."""

from __future__ import annotations

import sqlite3
import threading

from spotdiff.diagnose.store import RunStore

OLD_SCHEMA = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY, created TEXT NOT NULL, status TEXT NOT NULL, benchmark TEXT NOT NULL, subset TEXT,
    protocol TEXT NOT NULL, model TEXT NOT NULL, model_identity TEXT NOT NULL, data_path TEXT NOT NULL,
    data_digest TEXT NOT NULL, seed INTEGER NOT NULL, version TEXT NOT NULL, n_cases INTEGER, metrics TEXT,
    info TEXT NOT NULL
);
CREATE TABLE metrics (run_id TEXT NOT NULL, subset TEXT NOT NULL, metric TEXT NOT NULL, value REAL,
    ci_low REAL, ci_high REAL, PRIMARY KEY (run_id, subset, metric));
CREATE TABLE units (run_id TEXT NOT NULL, unit_id TEXT NOT NULL, case_id TEXT NOT NULL, subset TEXT NOT NULL,
    scores TEXT NOT NULL, outcomes TEXT NOT NULL, tags TEXT NOT NULL, PRIMARY KEY (run_id, unit_id));
INSERT INTO runs VALUES ('old000000001', '2025-01-01T00:00:00+00:00', 'done', 'spec', NULL, 'spec', 'm', '{}',
    '/d', 'abc', 0, '0.1.0', 3, '{"all": {"i2t": 50.0}}', '{"batch_size": 32}');
"""


def _start(store: RunStore, **kw) -> str:
    return store.start_run(benchmark="spec", subset=None, protocol="spec", model="hf-clip:out@step10",
                           model_identity={}, data_path="/d", data_digest="x", seed=0, version="t", **kw)  # fmt: skip


def test_old_store_gains_the_columns_and_keeps_its_runs(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
    opened: list[bool] = []

    def open_store() -> None:
        with RunStore(path):
            opened.append(True)

    threads = [threading.Thread(target=open_store) for _ in range(3)]  # concurrent openers agree
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 3
    with RunStore(path) as store:
        old = store.get("old0")
        assert old.metrics == {"all": {"i2t": 50.0}} and old.training is None and old.step is None
        rid = _start(store, training="t123", step=10)
        other = _start(store)
        linked = store.runs(training="t123")
        assert [r.id for r in linked] == [rid] and linked[0].step == 10
        assert store.get(other).training is None
        assert {r.id for r in store.runs()} == {"old000000001", rid, other}
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(runs)")]
    assert columns[-2:] == ["training", "step"] and columns.count("training") == 1
