"""The persistent cache and the one cached door to a model (:class:`CachedRequests`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from spotdiff.diagnose.cache import CACHE_FILE, Cache, CachedRequests, batch_positions
from spotdiff.errors import ConfigError, DataError


def _row(key: str) -> np.ndarray:
    return np.array([len(key), ord(key[-1])], dtype=np.float32)


class Model:
    """Rows from keys; records every batch it was asked for."""

    def __init__(self, keys: list[str]) -> None:
        self.keys, self.batches = keys, []

    def __call__(self, batches: list[list[int]]):
        for idx in batches:
            self.batches.append([self.keys[i] for i in idx])
            yield [_row(self.keys[i]) for i in idx]


def test_put_get_count_keys_and_reopen(tmp_path: Path) -> None:
    with Cache(tmp_path, "m") as cache:
        cache.put("text", [("a", np.ones(3, np.float32)), ("b", np.zeros(3, np.float64))])
        cache.put("image", [("a", np.full(2, 7, np.float32))])
        assert cache.count() == 3 and cache.count("text") == 2 and cache.keys("text") == {"a", "b"}
    assert (tmp_path / CACHE_FILE).is_file()
    with Cache(tmp_path, "m") as again, Cache(tmp_path, "other") as other:
        got = again.get("text", ["a", "b", "missing"])
        assert sorted(got) == ["a", "b"] and got["b"].dtype == np.float32
        np.testing.assert_array_equal(again.get("image", ["a"])["a"], [7, 7])
        assert other.get("text", ["a"]) == {}  # rows are kept per model digest


@pytest.mark.parametrize("chunk", [2, 30_000])
def test_get_reads_keys_in_queries_of_any_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Keys are looked up ``_CHUNK`` at a time (within SQLite's bound variables): every found value once."""
    monkeypatch.setattr("spotdiff.diagnose.cache._CHUNK", chunk)
    keys = [f"k{i}" for i in range(7)]
    with Cache(tmp_path, "m") as cache:
        cache.put("text", [(k, _row(k)) for k in keys])
        got = cache.get("text", [*keys, "missing"])
    assert sorted(got) == sorted(keys)
    for k in keys:
        np.testing.assert_array_equal(got[k], _row(k))


def test_merge_from_adds_rows_once(tmp_path: Path) -> None:
    with Cache(tmp_path / "a", "m") as a, Cache(tmp_path / "b", "m") as b:
        a.put("text", [("x", np.ones(2, np.float32))])
        b.put("text", [("x", np.ones(2, np.float32)), ("y", np.zeros(2, np.float32))])
        b.commit()  # another file holds what it has committed
        assert a.merge_from(b.path) == 1
        assert a.merge_from(b.path) == 0
        assert a.keys("text") == {"x", "y"}


def _damage(path: Path, kind: str, key: str) -> None:
    """Change a stored value's bytes behind SQLite's back (its checks see a well-formed file)."""
    with sqlite3.connect(path) as db:
        (blob,) = db.execute("SELECT value FROM items WHERE kind=? AND key=?", [kind, key]).fetchone()
        damaged = bytes([blob[0] ^ 0x40]) + blob[1:]
        db.execute("UPDATE items SET value=? WHERE kind=? AND key=?", [damaged, kind, key])


def test_a_value_damaged_on_disk_is_recomputed_with_a_warning(tmp_path: Path, caplog) -> None:
    keys = ["a", "b", "c"]
    with Cache(tmp_path, "m") as cache:
        CachedRequests(cache, progress=False)("text", keys, Model(keys), 2, desc="d", unit="u")
    _damage(tmp_path / CACHE_FILE, "text", "b")
    with Cache(tmp_path, "m") as cache:
        assert sorted(cache.get("text", keys)) == ["a", "c"] and cache.damaged == 1  # never the damaged bytes
        assert "do not match their checksum" in caplog.text and str(cache.path) in caplog.text
        model = Model(keys)
        rows = CachedRequests(cache, progress=False)("text", keys, model, 2, desc="d", unit="u")
        assert model.batches == [["b"]] and np.array_equal(rows["b"], _row("b"))
    with Cache(tmp_path, "m") as cache:  # replaced by the recomputed value
        assert np.array_equal(cache.get("text", ["b"])["b"], _row("b")) and cache.damaged == 0


def _legacy_cache(folder: Path, rows: dict[str, np.ndarray]) -> Path:
    """A cache file in the schema of spotdiff before value digests, holding ``rows`` of kind text."""
    folder.mkdir(parents=True)
    with sqlite3.connect(folder / CACHE_FILE) as db:
        db.execute(
            "CREATE TABLE items (model TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
            " PRIMARY KEY (model, kind, key)) WITHOUT ROWID"
        )
        db.executemany("INSERT INTO items VALUES ('m', 'text', ?, ?)", [(k, v.tobytes()) for k, v in rows.items()])
    return folder / CACHE_FILE


def test_rows_written_before_digests_are_recomputed_once_and_stored_with_one(tmp_path: Path, caplog) -> None:
    """Issue 32: a row without a digest was trusted even when damaged; now it is never used unchecked: the
    model recomputes it, the value is stored with its digest, and an old value that differs is counted."""
    keys = ["a", "b", "c"]
    path = _legacy_cache(tmp_path / "old", {"a": _row("a"), "b": -_row("b")})  # b damaged before digests
    with Cache(tmp_path / "old", "m") as cache:
        assert cache.get("text", keys) == {} and cache.unchecked == 2  # never the unchecked bytes
        model = Model(keys)
        rows = CachedRequests(cache, progress=False)("text", keys, model, 8, desc="d", unit="u")
        assert model.batches == [keys] and all(np.array_equal(rows[k], _row(k)) for k in keys)
        assert (
            cache.differed == 1 and "1 cached text value(s)" in caplog.text and "differ from the model" in caplog.text
        )
    with Cache(tmp_path / "old", "m") as cache:  # recomputed once: now checked rows, read as they are
        model = Model(keys)
        CachedRequests(cache, progress=False)("text", keys, model, 8, desc="d", unit="u")
        assert model.batches == [] and cache.unchecked == 0
    _damage(path, "text", "a")
    with Cache(tmp_path / "old", "m") as cache:
        assert sorted(cache.get("text", keys)) == ["b", "c"] and cache.damaged == 1  # a checked row's damage shows


def test_merges_replace_rows_written_before_digests_by_checked_ones(tmp_path: Path) -> None:
    legacy = _legacy_cache(tmp_path / "legacy", {"a": -_row("a"), "z": _row("z")})
    with Cache(tmp_path / "main", "m") as main:
        assert main.merge_from(legacy) == 2  # an old shard folds in, its rows still unchecked
        assert main.get("text", ["a", "z"]) == {} and main.unchecked == 2
    with Cache(tmp_path / "shard", "m") as shard:
        shard.put("text", [("a", _row("a"))])
    with Cache(tmp_path / "main", "m") as main:
        assert main.merge_from(tmp_path / "shard" / CACHE_FILE) == 1  # the checked row replaces the unchecked one
        assert main.merge_from(tmp_path / "shard" / CACHE_FILE) == 0
        got = main.get("text", ["a", "z"])
        assert list(got) == ["a"] and np.array_equal(got["a"], _row("a"))


def test_a_new_file_keeps_rows_of_kilobytes_in_a_rowid_table_of_large_pages(tmp_path: Path) -> None:
    """Issue 34: new files are rowid tables in PAGE_SIZE pages (a WITHOUT ROWID table overflowed every embedding
    row); a file of the layout before is read, written and merged as it is, both ways."""
    from spotdiff.diagnose.cache import PAGE_SIZE

    with Cache(tmp_path / "new", "m") as new:
        new.put("text", [("a", _row("a"))])
    with sqlite3.connect(tmp_path / "new" / CACHE_FILE) as db:
        assert db.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 16384
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'items'").fetchone()
        assert "WITHOUT ROWID" not in sql and db.execute("SELECT rowid FROM items").fetchall() == [(1,)]
    (tmp_path / "old").mkdir()
    with sqlite3.connect(tmp_path / "old" / CACHE_FILE) as db:  # the layout before, with digests
        db.execute(
            "CREATE TABLE items (model TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
            " digest INTEGER, PRIMARY KEY (model, kind, key)) WITHOUT ROWID"
        )
    with Cache(tmp_path / "old", "m") as old:
        old.put("text", [("b", _row("b"))])
        old.commit()
        assert old.merge_from(tmp_path / "new" / CACHE_FILE) == 1
        assert sorted(old.get("text", ["a", "b"])) == ["a", "b"]
    with sqlite3.connect(tmp_path / "old" / CACHE_FILE) as db:  # kept as it was
        assert db.execute("PRAGMA page_size").fetchone()[0] == 4096
    with Cache(tmp_path / "new", "m") as new:
        assert new.merge_from(tmp_path / "old" / CACHE_FILE) == 1
        got = new.get("text", ["a", "b"])
        assert all(np.array_equal(got[k], _row(k)) for k in "ab")


def test_batch_positions_by_item_and_by_group() -> None:
    assert batch_positions([0, 2, 3, 5, 6], 2) == [[0, 2], [3, 5], [6]]
    groups = ["a", "a", "b", "b", "b", "c", "d"]
    assert batch_positions([0, 1, 2, 4, 5, 6], 2, groups) == [[0, 1, 2, 4], [5, 6]]
    assert batch_positions([], 3) == []


def test_requests_compute_the_missing_in_batches_store_and_count(tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(7)]
    with Cache(tmp_path, "m") as cache:
        cache.put("text", [("k1", _row("k1")), ("k4", _row("k4"))])
        requests = CachedRequests(cache, progress=False)
        model = Model(keys)
        rows = requests("text", keys, model, 2, desc="encoding texts", unit="txt")
        assert model.batches == [["k0", "k2"], ["k3", "k5"], ["k6"]]  # only the missing, batch by batch
        assert requests.stats == {"computed": 5, "cached": 2}
        assert all(np.array_equal(rows[k], _row(k)) for k in keys)
        assert cache.keys("text") == set(keys)  # stored

        again = Model(keys)
        requests("text", keys, again, 2, desc="encoding texts", unit="txt")
        assert again.batches == [] and requests.stats == {"computed": 5, "cached": 9}  # a re-run computes nothing


def test_requests_keep_groups_together(tmp_path: Path) -> None:
    keys = ["i0|a", "i0|b", "i1|a", "i2|a", "i2|b"]
    model = Model(keys)
    with Cache(tmp_path, "m") as cache:
        CachedRequests(cache, progress=False)("pair", keys, model, 2, groups=[k[:2] for k in keys], desc="d", unit="u")
    assert model.batches == [["i0|a", "i0|b", "i1|a"], ["i2|a", "i2|b"]]


def test_requests_store_each_batch_before_a_failure(tmp_path: Path) -> None:
    keys = ["a", "b", "c"]

    def failing(batches):
        yield [_row("a")]
        raise RuntimeError("model crashed")

    with Cache(tmp_path, "m") as cache:
        requests = CachedRequests(cache, progress=False)
        with pytest.raises(RuntimeError, match="model crashed"):
            requests("text", keys, failing, 1, desc="d", unit="u")
        assert cache.keys("text") == {"a"} and requests.stats["computed"] == 1


def test_requests_refuse_a_wrong_number_of_rows(tmp_path: Path) -> None:
    def short(batches):
        for _ in batches:
            yield [_row("a")]

    with Cache(tmp_path, "m") as cache, pytest.raises(ConfigError, match="returned 1 rows for 2 items"):
        CachedRequests(cache, progress=False)("text", ["a", "b"], short, 2, desc="d", unit="u")


def _full(cache: Cache) -> None:
    """Make the cache file's disk "full": the next write that needs a new page fails with SQLITE_FULL."""
    (pages,) = cache._db.execute("PRAGMA page_count").fetchone()
    cache._db.execute(f"PRAGMA max_page_count={pages}")


def test_disk_full_is_one_error_naming_the_file_and_keeps_the_rows(tmp_path: Path) -> None:
    with Cache(tmp_path, "m") as cache:
        cache.put("text", [(f"k{i}", np.ones(64)) for i in range(500)])
        cache.commit()
        _full(cache)
        cache.put("text", [(f"j{i}", np.ones(64)) for i in range(500)])
        with pytest.raises(DataError, match="disk full") as caught:
            cache.commit()
        assert str(tmp_path / CACHE_FILE) in str(caught.value)
        assert "rollback" not in str(caught.value)
        assert cache.count() == 500  # the failed batch left nothing half-written
        cache._db.execute("PRAGMA max_page_count=1073741823")  # space freed: the cache works again
        cache.put("text", [("j0", np.ones(64))])
        assert cache.count() == 501


def _damaged_copies(tmp_path: Path, source: Path) -> dict[str, Path]:
    """Garbage, a truncated copy and a copy with a page of garbage in the middle of ``source``."""
    data = source.read_bytes()
    half = len(data) // 2
    damaged = {
        "garbage": np.random.default_rng(0).bytes(8192),
        "truncated": data[:half],
        "mid-file": data[:half] + np.random.default_rng(1).bytes(4096) + data[half + 4096 :],
    }
    paths = {}
    for name, content in damaged.items():
        (tmp_path / name).mkdir()
        paths[name] = tmp_path / name / source.name
        paths[name].write_bytes(content)
    return paths


def test_damaged_cache_fails_at_open_naming_the_file_and_the_rebuild(tmp_path: Path) -> None:
    with Cache(tmp_path / "real", "m") as cache:
        cache.put("text", [(f"k{i}", np.ones(64)) for i in range(2000)])
        cache.checkpoint()
    for name, path in _damaged_copies(tmp_path, tmp_path / "real" / CACHE_FILE).items():
        content = path.read_bytes()
        with pytest.raises(DataError, match="damaged") as caught:
            Cache(path.parent, "m")
        message = str(caught.value)
        assert str(path) in message and f"mv {path.parent} {path.parent}.corrupt" in message, (name, message)
        assert path.read_bytes() == content  # left as it was


@pytest.mark.parametrize("opener", ["cache", "store"])
def test_opening_waits_for_a_writer_holding_a_new_file_instead_of_failing(tmp_path: Path, opener: str) -> None:
    """Converting a file to WAL needs it to itself, and SQLite answers "database is locked" at once
    (no busy handler) while another connection holds its write lock: two runs starting together on a
    new cache failed one of them (CI, stop 29). The open now waits for the writer."""
    import threading
    import time

    from spotdiff.diagnose.store import RunStore

    path = tmp_path / (CACHE_FILE if opener == "cache" else "runs.sqlite")
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # what a process creating the file holds (rollback journal)
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # SQLite's own answer: no waiting
        sqlite3.connect(path, timeout=60, isolation_level=None).execute("PRAGMA journal_mode=WAL")
    threading.Timer(0.3, writer.execute, ["COMMIT"]).start()
    start = time.monotonic()
    db = Cache(tmp_path, "m") if opener == "cache" else RunStore(path)
    assert 0.2 < time.monotonic() - start < 30
    db.close()
    writer.close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_cache_or_store_holding_a_trigger_is_refused_before_anything_runs(
    tmp_path: Path, shared_data: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 44: a cache with a trigger SQLite refuses to run (``no such function``) was a traceback in
    ``eval``; a trigger that runs would change the file behind spotdiff's back. spotdiff's files hold none:
    one that does is refused at open, naming the file, and nothing in it runs."""
    from spotdiff.cli import main
    from spotdiff.diagnose.store import RunStore

    with Cache(tmp_path / "cache", "m"):
        pass
    with RunStore(tmp_path / "runs.sqlite"):
        pass
    triggers = {
        tmp_path / "cache" / CACHE_FILE: "CREATE TRIGGER t AFTER INSERT ON items BEGIN SELECT no_such_fn(); END",
        tmp_path / "runs.sqlite": "CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM metrics; END",
    }
    for path, sql in triggers.items():
        with sqlite3.connect(path) as db:
            db.execute(sql)
    with pytest.raises(DataError, match=r"cache.sqlite: it holds a trigger \('t'\)"):
        Cache(tmp_path / "cache", "m")
    argv = ["eval", "--model", "minilm", "--benchmark", "visla-generic", "--protocol", "t2t", "--limit", "2",
            "--data", str(shared_data / "visla"), "--n-boot", "0", "--no-store",
            "--cache", str(tmp_path / "cache")]  # fmt: skip
    for run in (argv, ["runs", "--store", str(tmp_path / "runs.sqlite")]):
        assert main(run) == 2
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and "holds a trigger ('t'); spotdiff's files hold none" in errors[0], err
        assert "Traceback" not in err
