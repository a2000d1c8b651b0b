"""Errors spotdiff raises for bad input; each names what went wrong and where.

:func:`file_system_error` and :func:`writing` are the one place a file system's refusal (full,
read-only, no permission) becomes such an error: one line naming the file and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

#: Free bytes below which a file system counts as full (SQLite grows its files by pages, the
#: write-ahead log's shared-memory file by 32 KiB).
ROOM = 64 * 1024


class SpotdiffError(Exception):
    """Base class of every error spotdiff raises on purpose."""


class DataError(SpotdiffError, ValueError):
    """A data file or record is malformed.

    The message names the file, the record and the field when they are known, so a user can go
    straight to the offending line.
    """

    def __init__(
        self,
        message: str,
        *,
        file: object | None = None,
        record: object | None = None,
        field: str | None = None,
    ) -> None:
        self.file = None if file is None else str(file)
        self.record = None if record is None else str(record)
        self.field = field
        where = []
        if self.file is not None:
            where.append(f"file {self.file}")
        if self.record is not None:
            where.append(f"record {self.record}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class ConfigError(SpotdiffError, ValueError):
    """A command-line option, model spec or protocol choice cannot be served."""


class EndpointError(SpotdiffError):
    """A served model's endpoint refused or failed a request; the message names the endpoint and
    what to do (what it answered before is cached)."""


class ModelOutputError(SpotdiffError):
    """A model's scores cannot be used: NaN where a score is expected (a diverged model, float16
    overflow). The message names the model, how many cases and which, and what to do."""


class DistributedError(SpotdiffError):
    """Another rank of a sharded run failed (its message is included)."""


class SourceError(SpotdiffError):
    """A benchmark source cannot be fetched: offline, gated, unreachable, corrupt, or a manual step.

    The message names the source (hub repository and revision, or URL) and the manual route.
    """


#: The refusals of a file system (:func:`file_system_error`): no room, read-only, no permission, a file too large.
_REFUSALS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG)


def _reason(exc: BaseException) -> str:
    """``exc`` as its cause reads, without the file name the error already gives."""
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        return f"[Errno {exc.errno}] {exc.strerror}"
    return str(exc)


def _refusal(code: int | None, reason: str, path: object) -> DataError | None:
    """The one error of the file system's refusal ``code`` (an errno) of a write to ``path``."""
    if code in (errno.ENOSPC, errno.EDQUOT):
        remedy = "free space there (or choose another location) and run again"
        return DataError(f"disk full ({reason}); {remedy}", file=path)
    if code == errno.EROFS:
        return DataError(f"read-only file system ({reason}); write to a folder on a writable file system", file=path)
    if code in (errno.EACCES, errno.EPERM):
        remedy = "give this user access to it, or choose another location"
        return DataError(f"permission denied ({reason}); {remedy}", file=path)
    if code == errno.EFBIG:
        remedy = "the file system or a limit on file sizes (ulimit -f) caps it: raise the limit or write elsewhere"
        return DataError(f"file too large ({reason}); {remedy}", file=path)
    return None


def disk_full(path: object, exc: BaseException) -> DataError:
    """The one error of a write to ``path`` that found the disk full (or the user's quota used up)."""
    return _refusal(errno.ENOSPC, _reason(exc), path)


def file_system_error(exc: BaseException, where: object | None = None) -> DataError | None:
    """The one error of a file system's refusal: no room (ENOSPC, EDQUOT), a read-only file system
    (EROFS) or no permission (EACCES, EPERM), naming the file the system named, else ``where``; None for
    any other exception.

    Args:
        exc: the exception raised.
        where: the file or folder being written, named when the system named none.

    >>> error = file_system_error(OSError(errno.EROFS, "Read-only file system", "out/x.json"))
    >>> str(error).split(";")[0]
    'file out/x.json: read-only file system ([Errno 30] Read-only file system)'
    """
    if not isinstance(exc, OSError):
        return None
    return _refusal(exc.errno, _reason(exc), exc.filename if exc.filename is not None else where)


def no_room(path: str | os.PathLike) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing folder) has less than
    :data:`ROOM` bytes free."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        stat = os.statvfs(folder)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < ROOM


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Writes into ``path`` (a file or a folder) within: a file system's refusal is raised as one
    :class:`DataError` (:func:`file_system_error`), and so is a library's own error (torch's, safetensors')
    that reports one in its message (``No space left on device (os error 28)``) or leaves the file system
    without room.

    Args:
        path: what is being written, named when the system names no file.
    """
    try:
        yield
    except SpotdiffError:
        raise
    except OSError as exc:
        error = file_system_error(exc, path)
        if error is None:
            raise
        raise error from exc
    except Exception as exc:
        text = str(exc)
        code = next((c for c in _REFUSALS if os.strerror(c) in text), errno.ENOSPC if no_room(path) else None)
        error = _refusal(code, text, path)
        if error is None:
            raise
        raise error from exc
