"""The SQLite files of spotdiff (the cache, the run store): opened with an integrity check, written in
transactions whose failures name the file.

A damaged file fails at open (``PRAGMA quick_check``), before any work is done, with one error naming
the file and what to do, and so does a file holding a trigger or a view (spotdiff creates none: SQL put
there by someone else would run on spotdiff's writes); a full disk fails the write with one error naming
the file and "disk full" (SQLite has already rolled the transaction back, so no ``ROLLBACK`` hides it).
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from spotdiff.errors import DataError, disk_full, no_room

#: SQLite's result codes for "database or disk is full" and for an I/O error (the primary code of
#: ``SQLITE_IOERR_*``).
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
#: SQLite's result code for "database is locked" (another connection holds the lock).
_SQLITE_BUSY = 5
#: Seconds a connection waits for another process's lock (the busy timeout, and the budget of
#: :func:`set_journal_mode`).
BUSY_SECONDS = 60.0


def connect(
    path: Path, remedy: str, setup: Sequence[str] = (), *, journal: str | None = None, page_size: int | None = None
) -> sqlite3.Connection:
    """A connection to ``path`` (autocommit, 60 s busy timeout) whose file passed ``PRAGMA quick_check``.

    Args:
        path: the SQLite file (created when missing).
        remedy: what the user should do when the file is damaged (one sentence, in the error).
        setup: SQL scripts run once the file is checked (pragmas, the schema).
        journal: the journal mode the file must be in (``"wal"``, ``"delete"``), set by
            :func:`set_journal_mode` before ``setup``; None leaves the file's mode alone.
        page_size: the page size of a file created here (set before the journal mode, which fixes it in
            WAL); an existing file keeps its own.
    """
    try:
        db = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    except sqlite3.OperationalError as exc:  # a folder in its place, no permission
        raise _cannot_open(path, exc) from exc
    try:
        db.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(problems[:3]))
        foreign = db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')").fetchone()
        if foreign is not None:  # SQL someone put in the file would run on spotdiff's writes
            db.close()
            raise DataError(f"it holds a {foreign[0]} ({foreign[1]!r}); spotdiff's files hold none, so nothing in "
                            f"this one is run; {remedy}", file=path)  # fmt: skip
        if page_size is not None:
            db.execute(f"PRAGMA page_size={int(page_size)}")
        if journal is not None:
            set_journal_mode(db, journal)
        for script in setup:
            db.executescript(script)
    except sqlite3.OperationalError as exc:  # locked, busy, full, unwritable: not damage
        db.close()
        if is_disk_full(exc, path):
            raise disk_full(path, exc) from exc
        raise _cannot_open(path, exc) from exc
    except sqlite3.DatabaseError as exc:
        db.close()
        raise DataError(f"damaged SQLite file ({exc}); {remedy}", file=path) from exc
    return db


def set_journal_mode(db: sqlite3.Connection, mode: str, wait: float = BUSY_SECONDS) -> None:
    """Put ``db``'s file in journal ``mode``, waiting up to ``wait`` seconds for other processes.

    The mode is a property of the file, so a file already in it takes no lock. Converting needs
    the file to itself, and SQLite answers "database is locked" at once there instead of running
    the busy handler: two processes opening a new file together would fail one of them. The
    conversion is retried with backoff until it succeeds, another process has done it, or ``wait``
    has passed (then the last "database is locked" is raised).

    Example:
        >>> import sqlite3
        >>> db = sqlite3.connect(":memory:")
        >>> set_journal_mode(db, "memory")
        >>> db.execute("PRAGMA journal_mode").fetchone()[0]
        'memory'
    """
    mode = mode.lower()
    deadline = time.monotonic() + wait
    pause = 0.005
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != mode:
                db.execute(f"PRAGMA journal_mode={mode}")
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_BUSY
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def _cannot_open(path: Path, exc: sqlite3.OperationalError) -> DataError:
    hint = "" if "locked" in str(exc) else "; it must be a file (not a folder) in a folder you can write to"
    return DataError(f"cannot open the SQLite file ({exc}){hint}", file=path)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, path: Path) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; on an exception, ``ROLLBACK`` where SQLite has not already
    rolled back, and a full disk raised as :func:`disk_full` naming ``path``."""
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    except sqlite3.OperationalError as exc:
        if is_disk_full(exc, path):
            raise disk_full(path, exc) from exc
        raise


def is_disk_full(exc: BaseException, path: Path | None = None) -> bool:
    """True for SQLite's "database or disk is full", the OS's ENOSPC/EDQUOT, and an SQLite I/O error on a
    file (``path``) whose file system has no room left: growing the write-ahead log's shared-memory
    file on a full disk fails as ``SQLITE_IOERR_SHMSIZE``, "disk I/O error"."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code == _SQLITE_FULL or "disk is full" in str(exc):
            return True
        return code is not None and code & 0xFF == _SQLITE_IOERR and path is not None and no_room(path.parent)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
