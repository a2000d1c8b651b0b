"""The run store (:mod:`spotdiff.diagnose.store`): runs, units and metrics round-trip, lookups by id
prefix, filters and their errors; evaluations made during training link to the training run and step,
and a store written before those columns existed gains them on open, its runs intact."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from spotdiff.diagnose.store import Run, RunStore, default_store_path
from spotdiff.errors import ConfigError, DataError

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


def test_default_store_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPOTDIFF_STORE", str(tmp_path / "mine.sqlite"))
    assert default_store_path() == tmp_path / "mine.sqlite"
    monkeypatch.delenv("SPOTDIFF_STORE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_path() == tmp_path / ".local" / "share" / "spotdiff" / "runs.sqlite"


def test_a_run_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "runs.sqlite"  # the folder is created
    with RunStore(path) as store:
        rid = store.start_run(benchmark="winoground", subset="Object", protocol="group", model="m",
                              model_identity={"spec": "m", "weights": "ab"}, data_path="/d", data_digest="dd",
                              seed=3, version="1.2", info={"batch_size": 8})  # fmt: skip
        running = store.get(rid)
        assert running == Run(rid, running.created, "running", "winoground", "Object", "group", "m",
                              {"spec": "m", "weights": "ab"}, "/d", "dd", 3, "1.2", None, None,
                              {"batch_size": 8})  # fmt: skip
        assert len(rid) == 12 and running.created.endswith("+00:00")
        assert not store.finished([rid]) and store.finished([])
        units = [
            {"unit_id": "c1", "case_id": "c1", "subset": "Object", "scores": np.array([[1.0, 0.5]]),
             "outcomes": {"group": 1.0}, "tags": {"tag": "a"}},
            {"unit_id": "c0", "case_id": "c0", "subset": "Object", "scores": None, "outcomes": {"group": 0.0}},
        ]  # fmt: skip
        store.add_units(rid, units)
        store.add_units(rid, [])  # nothing to add: no statement
        metrics = {"all": {"group": 50.0, "group_ci95": [0.0, 100.0]}, "Object": {"group": 50.0}}
        store.finish_run(rid, metrics, 2, info={"batch_size": 8, "n_boot": 10})
        done = store.get(rid[:5])  # a unique prefix
        assert (done.status, done.metrics, done.n_cases) == ("done", metrics, 2)
        assert done.info == {"batch_size": 8, "n_boot": 10} and done.training is None
        assert store.finished([rid, rid])
        got = list(store.units(rid))  # unit id order
        assert [u["unit_id"] for u in got] == ["c0", "c1"]
        assert got[1] == {"unit_id": "c1", "case_id": "c1", "subset": "Object", "scores": [[1.0, 0.5]],
                          "outcomes": {"group": 1.0}, "tags": {"tag": "a"}}  # fmt: skip
        assert got[0]["scores"] is None and got[0]["tags"] == {}
        assert next(store.unit_rows(rid))[:3] == ("c0", "c0", "Object")
        store.add_units(rid, [{**units[1], "outcomes": {"group": 1.0}}])  # the same unit again replaces it
        assert [u["outcomes"] for u in store.units(rid)] == [{"group": 1.0}, {"group": 1.0}]
    with sqlite3.connect(path) as db:
        rows = sorted(db.execute("SELECT subset, metric, value, ci_low, ci_high FROM metrics WHERE run_id=?", [rid]))
    assert rows == [("Object", "group", 50.0, None, None), ("all", "group", 50.0, 0.0, 100.0)]


def test_finish_run_keeps_info_unless_given_and_replaces_metrics(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        rid = _start(store, info={"kept": True})
        store.finish_run(rid, {"all": {"i2t": 10.0}}, 1)
        store.finish_run(rid, {"all": {"t2i": 20.0}}, 1)
        assert store.get(rid).info == {"kept": True} and store.get(rid).metrics == {"all": {"t2i": 20.0}}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT metric, value FROM metrics WHERE run_id=?", [rid]).fetchall() == [("t2i", 20.0)]


def test_runs_newest_first_filtered_and_failed(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite") as store:
        first, second = _start(store), _start(store)
        third = store.start_run(benchmark="aro", subset=None, protocol="p", model="m", model_identity={},
                                data_path="/d", data_digest="x", seed=0, version="t")  # fmt: skip
        store.fail_run(second, "x" * 600)
        assert [r.id for r in store.runs()] == [third, second, first]  # same second: insertion order decides
        assert [r.id for r in store.runs(benchmark="spec")] == [second, first]
        assert [r.id for r in store.runs(benchmark="spec", status="running")] == [first]
        failed = store.get(second).status
        assert failed.startswith("failed: xxx") and len(failed) == 500
        assert not store.finished([first, "nosuchrun000"])


def test_get_refuses_unknown_and_ambiguous_ids(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite") as store:
        _start(store), _start(store)
        with pytest.raises(ConfigError, match=r"no run 'zz' in .*runs.sqlite"):
            store.get("zz")
        with pytest.raises(ConfigError, match="run id prefix '' is ambiguous"):
            store.get("")


def test_an_id_prefix_is_a_prefix_not_a_pattern(tmp_path: Path) -> None:
    """Issue 44: ``_`` and ``%`` in a run id were LIKE wildcards (and LIKE ignores case), so ``a_c`` or ``%``
    named another run."""
    with RunStore(tmp_path / "runs.sqlite") as store:
        rid = _start(store)
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE runs SET id='abc123def456' WHERE id=?", [rid])
        assert store.get("abc").id == store.get("abc123def456").id == "abc123def456"
        for pattern in ("a_c", "%", "a%6", "ABC", "abc123def456_"):
            with pytest.raises(ConfigError, match=f"no run '{pattern}' in"):
                store.get(pattern)
        second = _start(store)
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE runs SET id='abc' WHERE id=?", [second])
        assert store.get("abc").id == "abc"  # a whole id is that run, though it prefixes another


def test_a_damaged_run_row_is_one_line_naming_the_store_the_run_and_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 44: a ``model_identity`` of ``{`` in someone else's store was a traceback in ``runs`` and
    ``report``."""
    from spotdiff.cli import main
    from spotdiff.testing.synthetic_runs import fill_store

    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        (rid,) = fill_store(store, models=1, benchmarks=("winoground",), n_cases=4, n_boot=0)
    report = ["report", "--out", str(tmp_path / "r"), "--no-cases"]
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT model_identity, info, metrics FROM runs").fetchone()
    for column, value in (("model_identity", "{"), ("model_identity", "[]"), ("info", "7"), ("metrics", "[1]")):
        with sqlite3.connect(path) as db:
            db.execute("UPDATE runs SET model_identity=?, info=?, metrics=?", row)
            db.execute(f"UPDATE runs SET {column}=?", [value])
        for argv in (["runs"], ["runs", rid], report):
            assert main([*argv, "--store", str(path)]) == 2, (column, argv)
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and f"file {path}, record run {rid}, field '{column}': " in err[0], err
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET model_identity=?, info=?, metrics=?", row)
        unit, scores, outcomes = db.execute("SELECT unit_id, scores, outcomes FROM units ORDER BY unit_id").fetchone()
    for column in ("outcomes", "scores"):
        with sqlite3.connect(path) as db:
            db.execute("UPDATE units SET scores=?, outcomes=? WHERE unit_id=?", [scores, outcomes, unit])
            db.execute(f"UPDATE units SET {column}='{{' WHERE unit_id=?", [unit])
        assert main([*report, "--store", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"file {path}, record run {rid}, unit {unit}, field '{column}': " in err[0], err
        with RunStore(path) as store, pytest.raises(DataError, match=f"run {rid}, unit {unit}, field '{column}'"):
            list(store.units(rid))


def _units(n: int, prefix: str = "u") -> list[dict]:
    return [{"unit_id": f"{prefix}{i}", "case_id": f"c{i}", "subset": "s", "scores": [[0.5] * 20], "outcomes": {},
             "tags": {}} for i in range(n)]  # fmt: skip


def test_disk_full_is_one_error_naming_the_store_and_the_run_is_marked_failed(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        rid = _start(store)
        store.add_units(rid, _units(50))
        (pages,) = store._db.execute("PRAGMA page_count").fetchone()
        store._db.execute(f"PRAGMA max_page_count={pages}")  # the disk is "full": no new page can be written
        with pytest.raises(DataError, match="disk full") as caught:
            store.add_units(rid, _units(500, "v"))
        assert str(path) in str(caught.value) and "rollback" not in str(caught.value)
        store.fail_run(rid, f"DataError: {caught.value}")  # fits in the run's page: the reason is recorded
        assert store.get(rid).status.startswith(f"failed: DataError: file {path}: disk full")
        assert len(list(store.units(rid))) == 50


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/proc/filesystems").is_file(), reason="mounting a tmpfs needs root")
def test_a_store_opened_on_a_full_disk_says_disk_full(tmp_path: Path) -> None:
    """On a full file system SQLite cannot grow the write-ahead log's shared memory: "disk I/O error"
    (SQLITE_IOERR_SHMSIZE), which is the disk being full, said as such and naming the store."""
    mount = tmp_path / "full"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20480", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        with pytest.raises(DataError, match="disk full") as caught:
            RunStore(mount / "runs.sqlite")
        assert str(mount / "runs.sqlite") in str(caught.value)
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_an_unwritable_store_folder_is_one_error_naming_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "runs.sqlite").mkdir()  # a folder where the file should be: SQLite cannot open it
    with pytest.raises(DataError, match="cannot open the SQLite file") as caught:
        RunStore(folder / "runs.sqlite")
    assert str(folder / "runs.sqlite") in str(caught.value)


def test_damaged_store_fails_at_open_naming_the_file_and_is_never_deleted(tmp_path: Path) -> None:
    real = tmp_path / "real" / "runs.sqlite"
    with RunStore(real) as store:
        store.add_units(_start(store), _units(2000))
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = real.read_bytes()
    half = len(data) // 2
    damaged = {
        "garbage": np.random.default_rng(0).bytes(8192),
        "truncated": data[:half],
        "mid-file": data[:half] + np.random.default_rng(1).bytes(4096) + data[half + 4096 :],
    }
    for name, content in damaged.items():
        path = tmp_path / f"{name}.sqlite"
        path.write_bytes(content)
        with pytest.raises(DataError, match="damaged") as caught:
            RunStore(path)
        message = str(caught.value)
        assert str(path) in message and "cannot be rebuilt" in message and ".recover" in message, (name, message)
        assert path.read_bytes() == content  # left as it was
