"""A persistent cache of model outputs, keyed by model identity and item content.

One SQLite file per cache directory (WAL mode, so several runs may share it). A row holds one
embedding (float32 bytes) or one pair score, under ``(model digest, kind, item key)``, with the CRC-32
of its bytes: a value damaged on disk (which SQLite's own checks cannot see) is recomputed, with a
warning, instead of changing a result. A row written before checksums existed has none to check, so it
is never used as it is: the model recomputes it once, the new value is stored with its checksum, and a
warning counts the old values that differed from it (damaged ones, used by the runs that read them). Rows are
held in memory as they are computed and committed in one transaction per chunk of cases (the engine's
:meth:`Cache.commit`; sooner when :data:`PENDING_BYTES` wait or the oldest has waited :data:`COMMIT_SECONDS`),
and on close, an error or an interrupt included, so an interrupted run keeps everything it computed and a re-run,
or another benchmark sharing images or texts, recomputes nothing (a killed process loses at most its last
chunk, or the last :data:`COMMIT_SECONDS` of work).

Sharded (multi-process) evaluation writes one *shard* file per process under ``<dir>/shards/``
(rollback-journal mode, one writer each, so they also work on network file systems); the shard
reads the main file as a fallback, and :meth:`Cache.merge_from` folds a finished shard into the
main file (see :mod:`spotdiff.diagnose.distributed`). :class:`CachedRequests` is the one door
from the engine to a model: every computation passes through its lookup and store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from spotdiff.diagnose.sqlfile import connect, transaction
from spotdiff.errors import ConfigError

#: A rowid table (its primary key an index beside it): rows of embeddings are kilobytes, and SQLite's own advice
#: is that "the average size of a single row in a WITHOUT ROWID table should be less than about 1/20th the size of
#: a database page" (https://www.sqlite.org/withoutrowid.html, Sec. 4). Files written with WITHOUT ROWID before
#: are read and written as they are (the same statements serve both).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    digest INTEGER,
    PRIMARY KEY (model, kind, key)
);
"""
#: The page size of a cache file created here: a page holds several rows of a few kilobytes, without overflow
#: pages (30,000 rows of 512 float32 written 3.4x as fast as in a WITHOUT ROWID table of 4 KiB pages, the file
#: half the size: ``python measurements/cache_write_speed.py``).
PAGE_SIZE = 16384
#: Columns of a row; ``digest`` (the CRC-32 of ``value``) is NULL in rows written before it existed.
_COLUMNS = "model, kind, key, value, digest"
#: How far a recomputed value may lie from the unchecked one it replaces and still count as the same
#: (batching and hardware change the last digits; a damaged value is far off, or NaN).
_SAME = {"rtol": 1e-3, "atol": 1e-4}
#: Keys per ``SELECT ... IN (...)``: fewer, larger queries read a warm cache faster (6,000 MiniLM rows: 30 ms in
#: one query, 53 ms in chunks of 500), within the bound variables SQLite allows (32,766 by default since 3.32).
_CHUNK = 30_000
#: Bytes of computed values held before they are committed without waiting for the end of the chunk.
PENDING_BYTES = 64 << 20
#: Seconds the oldest value held waits at most before it is committed (``SPOTDIFF_COMMIT_SECONDS`` sets another).
COMMIT_SECONDS = 10.0
#: The main cache file of a cache directory.
CACHE_FILE = "cache.sqlite"

log = logging.getLogger(__name__)


class Cache:
    """Embeddings and pair scores of one model, stored under ``directory/cache.sqlite``; a context
    manager that closes the file."""

    def __init__(
        self,
        directory: str | Path,
        model_digest: str,
        *,
        filename: str = CACHE_FILE,
        journal: str = "wal",
        read_also: Sequence[str | Path] = (),
    ) -> None:
        """Open (creating if needed) ``directory/filename``.

        Args:
            journal: ``"wal"`` (the main cache: many readers and writers on one machine) or
                ``"delete"`` (a shard with a single writer; safe on network file systems).
            read_also: other cache files consulted, read-only, for keys this file lacks (a shard
                reads the main cache so that a resumed sharded run recomputes nothing).
        """
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / filename
        self.model = model_digest
        self._db = _connect(self.path, journal)
        if journal is not None:
            _add_digest_column(self._db)
        self._fallbacks = [_connect(Path(p), None) for p in read_also if Path(p).is_file()]
        #: Values read whose bytes did not match their digest (treated as missing, so recomputed).
        self.damaged = 0
        #: Values read that were written before digests existed (treated as missing, so recomputed).
        self.unchecked = 0
        #: Of those, the ones the recomputed value differed from (:meth:`put` compares them).
        self.differed = 0
        self._unchecked: dict[tuple[str, str], np.ndarray] = {}
        #: Values stored but not committed yet, ``(kind, key) -> (bytes, CRC-32)``, their size and since when.
        self._pending: dict[tuple[str, str], tuple[bytes, int]] = {}
        self._pending_bytes = 0
        self._pending_since = 0.0
        self._commit_seconds = commit_seconds()

    def _select(self, db: sqlite3.Connection, kind: str, keys: Sequence[str], found: dict[str, np.ndarray]) -> int:
        """Add the values of ``keys`` held in ``db`` to ``found``; return how many failed their digest. A
        value without a digest is kept aside for :meth:`put` to compare with its recomputation."""
        damaged = 0
        digest = "digest" if _has_digest(db) else "NULL"
        step = min(_CHUNK, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - 2)  # model and kind are bound too
        for start in range(0, len(keys), step):
            chunk = list(keys[start : start + step])
            marks = ",".join("?" * len(chunk))
            rows = db.execute(
                f"SELECT key, value, {digest} FROM items WHERE model=? AND kind=? AND key IN ({marks})",
                [self.model, kind, *chunk],
            )
            for key, blob, crc in rows:
                if crc is None:
                    self._unchecked[(kind, key)] = np.frombuffer(blob, dtype=np.float32)
                elif zlib.crc32(blob) != crc:
                    damaged += 1
                else:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return damaged

    def get(self, kind: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached values among ``keys`` whose checksum holds (missing keys, damaged values and values
        written before checksums existed are absent, so the caller computes them)."""
        found: dict[str, np.ndarray] = {}
        if self._pending:
            held = ((key, self._pending.get((kind, key))) for key in keys)
            found.update((key, np.frombuffer(row[0], dtype=np.float32)) for key, row in held if row is not None)
            keys = [k for k in keys if k not in found] if found else keys
        before = len(self._unchecked)
        damaged = self._select(self._db, kind, keys, found)
        for db in self._fallbacks:
            missing = [k for k in keys if k not in found]
            if not missing:
                break
            damaged += self._select(db, kind, missing, found)
        if damaged:
            self.damaged += damaged
            log.warning(
                "%d cached %s value(s) in %s do not match their checksum (damaged on disk): they are recomputed",
                damaged, kind, self.path,
            )  # fmt: skip
        unchecked = len(self._unchecked) - before
        if unchecked:
            self.unchecked += unchecked
            log.info(
                "%d cached %s value(s) in %s were written before values had checksums: they are recomputed once "
                "and stored with one", unchecked, kind, self.path,
            )  # fmt: skip
        return found

    def put(self, kind: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store values, each with its checksum: held until :meth:`commit` (readable by :meth:`get` meanwhile),
        committed at once when more than :data:`PENDING_BYTES` wait; a value replacing one written before
        checksums existed is compared with it (:attr:`differed`, with a warning)."""
        items = list(items)
        self._compare_unchecked(kind, items)
        if items and not self._pending:
            self._pending_since = time.monotonic()
        for key, value in items:
            blob = np.ascontiguousarray(value, dtype=np.float32).tobytes()
            self._pending[(kind, key)] = (blob, zlib.crc32(blob))
            self._pending_bytes += len(blob)
        waited = time.monotonic() - self._pending_since
        if self._pending and (self._pending_bytes > PENDING_BYTES or waited >= self._commit_seconds):
            self.commit()

    def commit(self) -> None:
        """Write the values held by :meth:`put` in one transaction (nothing to do when none wait). A transaction
        that fails (a full disk) writes none of them, and they are dropped: a later run computes them again."""
        if not self._pending:
            return
        rows = [(self.model, kind, key, blob, crc) for (kind, key), (blob, crc) in self._pending.items()]
        self._pending = {}
        self._pending_bytes = 0
        with transaction(self._db, self.path):
            self._db.executemany(f"INSERT OR REPLACE INTO items ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)", rows)

    def _compare_unchecked(self, kind: str, items: list[tuple[str, np.ndarray]]) -> None:
        """Count (and warn of) the unchecked values that ``items`` replace and differ from."""
        differed = 0
        for key, value in items:
            old = self._unchecked.pop((kind, key), None)
            if old is None:
                continue
            new = np.asarray(value, dtype=np.float32).reshape(-1)
            if old.shape != new.shape or not np.allclose(old, new, equal_nan=True, **_SAME):
                differed += 1
        if differed:
            self.differed += differed
            log.warning(
                "%d cached %s value(s) in %s, written before values had checksums, differ from the model's "
                "values (damaged on disk): replaced; runs that read them before may be affected",
                differed, kind, self.path,
            )  # fmt: skip

    def count(self, kind: str | None = None) -> int:
        self.commit()
        if kind is None:
            (n,) = self._db.execute("SELECT COUNT(*) FROM items WHERE model=?", [self.model]).fetchone()
        else:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM items WHERE model=? AND kind=?", [self.model, kind]
            ).fetchone()
        return int(n)

    def keys(self, kind: str) -> set[str]:
        """Every key of ``kind`` stored in this file for this model."""
        self.commit()
        rows = self._db.execute("SELECT key FROM items WHERE model=? AND kind=?", [self.model, kind])
        return {k for (k,) in rows}

    def merge_from(self, path: str | Path) -> int:
        """Copy every row of another cache file (any model) into this one; return the rows added (or
        given a checksum).

        Rows already present are kept (a key's value is a pure function of the model and the
        content), but for one written before checksums existed, which a checked row of the other file
        replaces. One transaction: a merge interrupted by a crash adds nothing.
        """
        self.commit()
        before = self._db.total_changes
        self._db.execute("ATTACH DATABASE ? AS other", [str(path)])
        try:
            with transaction(self._db, self.path):
                digest = "digest" if _has_digest(self._db, "other") else "NULL"
                select = f"SELECT model, kind, key, value, {digest} FROM other.items WHERE true"
                self._db.execute(
                    f"INSERT INTO main.items ({_COLUMNS}) {select} ON CONFLICT (model, kind, key) DO UPDATE SET "
                    "value = excluded.value, digest = excluded.digest "
                    "WHERE items.digest IS NULL AND excluded.digest IS NOT NULL"
                )
        finally:
            self._db.execute("DETACH DATABASE other")
        return self._db.total_changes - before

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the main file (readers on other hosts then see it all)."""
        self.commit()
        with contextlib.suppress(sqlite3.OperationalError):  # busy: another process holds the log
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Commit what waits (:meth:`commit`) and close the files."""
        try:
            self.commit()
        finally:
            for db in self._fallbacks:
                db.close()
            self._fallbacks = []
            self._db.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def commit_seconds() -> float:
    """:data:`COMMIT_SECONDS`, or the seconds ``SPOTDIFF_COMMIT_SECONDS`` gives (0: commit every store)."""
    value = os.environ.get("SPOTDIFF_COMMIT_SECONDS")
    if not value:
        return COMMIT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ConfigError(f"SPOTDIFF_COMMIT_SECONDS={value!r}: expected a number of seconds, 0 or more")
    return seconds


#: Computes the rows of batches of missing items (positions into a request's keys), in order: for
#: each batch, one row per position.
Compute = Callable[[list[list[int]]], Iterator[Sequence[np.ndarray]]]


class CachedRequests:
    """Every model computation of an engine passes here (lm-evaluation-harness's ``CachingLM``): a
    request's items are looked up in the cache, the missing ones computed in batches and each batch
    stored before it is used, with one progress bar (:meth:`__call__`; requests answered out of order go
    through :meth:`lookup` and :meth:`store`); :attr:`stats` counts cached and computed items.

    Args:
        cache: where rows are kept, under ``(kind, key)``.
        progress: show a progress bar (items per second) while computing.
        verbose: the computation may say what happens on the way (a served model's retries); False
            under ``--quiet``.
    """

    def __init__(self, cache: Cache, *, progress: bool = True, verbose: bool = True) -> None:
        self.cache = cache
        self.progress = progress
        self.verbose = verbose
        self.stats = {"computed": 0, "cached": 0}

    def __call__(
        self,
        kind: str,
        keys: Sequence[str],
        compute: Compute,
        batch_size: int,
        *,
        groups: Sequence[str] | None = None,
        desc: str,
        unit: str,
    ) -> dict[str, np.ndarray]:
        """The row of every key in ``keys``: cached ones read, the others computed and stored.

        Args:
            kind: the cache's kind of the rows (``"text"``, ``"image"``, ``"pair"``, a need, ...).
            keys: the items' content keys (a repeated key is computed once per position).
            compute: the model, on the batches of missing positions (see :data:`Compute`).
            batch_size: items per batch, or groups per batch when ``groups`` is given.
            groups: a label per key; positions with the same label (consecutive ones) go to one batch
                together (a pair scorer's texts of one image).
            desc: the progress bar's title.
            unit: the progress bar's unit.
        """
        found, todo = self.lookup(kind, keys)
        if not todo:  # the model is not asked (a deferred one is not even built)
            return found
        batches = batch_positions(todo, batch_size, groups)
        bar = tqdm(total=len(todo), desc=desc, unit=unit, disable=not self.progress, leave=False)
        with bar, contextlib.closing(compute(batches)) as computed:
            for idx, rows in zip(batches, computed, strict=True):
                if len(rows) != len(idx):
                    raise ConfigError(f"model returned {len(rows)} rows for {len(idx)} items ({desc})")
                items = [(keys[i], row) for i, row in zip(idx, rows, strict=True)]
                self.store(kind, items)
                found.update(items)
                bar.update(len(items))
        return found

    def lookup(self, kind: str, keys: Sequence[str]) -> tuple[dict[str, np.ndarray], list[int]]:
        """The cached rows among ``keys`` (counted in :attr:`stats`) and the positions of the missing ones: the
        door for requests answered out of order (a served model's responses, which :meth:`store` keeps one by
        one as they arrive).

        Args:
            kind: the cache's kind of the rows.
            keys: the items' content keys.
        """
        found = self.cache.get(kind, keys) if keys else {}
        self.stats["cached"] += len(found)
        return found, [i for i, k in enumerate(keys) if k not in found]

    def store(self, kind: str, items: list[tuple[str, np.ndarray]]) -> None:
        """Store computed rows (:meth:`Cache.put`) and count them in :attr:`stats`.

        Args:
            kind: the cache's kind of the rows.
            items: ``(key, row)`` pairs.
        """
        self.cache.put(kind, items)
        self.stats["computed"] += len(items)


def batch_positions(todo: Sequence[int], size: int, groups: Sequence[str] | None = None) -> list[list[int]]:
    """``todo`` in batches of ``size`` positions, or of ``size`` groups (runs of positions with the
    same label in ``groups``)."""
    units: list[list[int]] = []
    for i in todo:
        if groups is not None and units and groups[units[-1][0]] == groups[i]:
            units[-1].append(i)
        else:
            units.append([i])
    size = max(1, int(size))
    return [[i for unit in units[start : start + size] for i in unit] for start in range(0, len(units), size)]


def _has_digest(db: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether a cache file's rows carry digests (files written before they existed do not)."""
    return any(row[1] == "digest" for row in db.execute(f"PRAGMA {schema}.table_info(items)"))


def _add_digest_column(db: sqlite3.Connection) -> None:
    """Give a cache file written before digests existed their column; its old rows keep NULL (unchecked)."""
    if not _has_digest(db):
        with contextlib.suppress(sqlite3.OperationalError):  # another process added it meanwhile
            db.execute("ALTER TABLE items ADD COLUMN digest INTEGER")


def _connect(path: Path, journal: str | None) -> sqlite3.Connection:
    """A connection to a checked cache file (:func:`~spotdiff.diagnose.sqlfile.connect`); ``journal``
    None leaves the file's mode alone."""
    remedy = (
        f"a cache can be rebuilt: move its folder aside (mv {path.parent} {path.parent}.corrupt) and run again, "
        "which recomputes what it held"
    )
    setup = []
    if journal is not None:
        sync = "NORMAL" if journal.lower() == "wal" else "FULL"
        setup = [f"PRAGMA synchronous={sync};", _SCHEMA]
    return connect(path, remedy, setup, journal=journal, page_size=PAGE_SIZE)


# --- shards of a sharded run ---------------------------------------------------------------------

#: Folder of a cache directory that holds the shard files of sharded runs.
SHARD_DIR = "shards"


class Shard:
    """One process's shard of a cache directory: ``<dir>/shards/<name>.sqlite``, written by that
    process only, reading the main cache for keys it lacks.

    An OS file lock (``<shard>.lock``) is held from before the file exists until :meth:`close`, so
    :func:`merge_shards` never folds in a shard that is still being written, and folds in the shard
    of a killed process (whose lock the OS released) on the next run.
    """

    def __init__(self, directory: str | Path, model_digest: str, name: str) -> None:
        from filelock import FileLock

        directory = Path(directory)
        folder = directory / SHARD_DIR
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{name}.sqlite"
        self._lock = FileLock(str(self.path) + ".lock")
        self._lock.acquire(timeout=60)
        try:
            self.cache = Cache(
                folder, model_digest, filename=self.path.name, journal="delete", read_also=[directory / CACHE_FILE]
            )
        except BaseException:
            self._lock.release()
            raise

    def rows(self) -> int:
        """Rows written to this shard (all kinds)."""
        return self.cache.count()

    def close(self) -> None:
        """Close the file and release the lock (the shard may be merged from then on)."""
        try:
            self.cache.close()
        finally:
            self._lock.release()

    def __enter__(self) -> Shard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shard_files(directory: str | Path) -> list[Path]:
    """The shard files of a cache directory, in name order."""
    folder = Path(directory) / SHARD_DIR
    return sorted(folder.glob("*.sqlite")) if folder.is_dir() else []


def merge_shards(directory: str | Path) -> int:
    """Fold every shard of ``directory`` that no process is writing into the main cache.

    Merged shards are deleted; a shard that is locked (being written) is left alone; an unreadable
    one is renamed ``*.corrupt`` with a warning. Safe to call from several processes at once (a
    merge is idempotent). Returns the number of rows added to the main cache.
    """
    from filelock import FileLock, Timeout

    shards = shard_files(directory)
    if not shards:
        return 0
    added = 0
    with Cache(directory, "") as main:
        for shard in shards:
            lock = FileLock(str(shard) + ".lock")
            try:
                lock.acquire(timeout=0)
            except Timeout:
                log.debug("cache shard %s is in use; not merged", shard)
                continue
            try:
                if not shard.exists():  # merged meanwhile by another process
                    continue
                try:
                    n = main.merge_from(shard)
                except sqlite3.DatabaseError as exc:
                    log.warning("cache shard %s is unreadable (%s); moved aside, its rows are recomputed", shard, exc)
                    shard.replace(shard.with_suffix(".corrupt"))
                    continue
                added += n
                log.debug("merged %d rows from cache shard %s", n, shard)
                for path in (shard, Path(str(shard) + "-journal")):
                    path.unlink(missing_ok=True)
            finally:
                lock.release()
                Path(str(shard) + ".lock").unlink(missing_ok=True)
        main.checkpoint()
    return added


def default_cache_dir() -> Path:
    """``$SPOTDIFF_CACHE`` or ``~/.cache/spotdiff``."""
    import os

    env = os.environ.get("SPOTDIFF_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "spotdiff"
