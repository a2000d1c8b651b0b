"""Exclusive locks a process holds while it writes somewhere, naming their holder: a second process is refused at
once with the holder's pid, host and start (from the file beside the lock), and the operating system releases the
lock of a process that dies (``flock`` through filelock). A training folder (``spotdiff train --out``) and a
reviewer's file (``spotdiff review --reviewer``) are held so.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock, Timeout

from spotdiff.errors import ConfigError, writing
from spotdiff.jsonio import write_json


class HeldLock:
    """An exclusive lock on ``lock``, taken at once or refused (a ConfigError with ``busy``'s message), its holder
    named in ``info`` until it is released; a context manager.

    Args:
        lock: the lock file (left in place: removing it would race another process taking it).
        info: the JSON file naming the holder (pid, host, since), removed on release.
        busy: the refusal's message, given the holder as ``pid N on HOST since TIME``.
    """

    def __init__(self, lock: Path, info: Path, busy: Callable[[str], str]) -> None:
        self.info = Path(info)
        self.lock = FileLock(lock, thread_local=False)  # the process's: a server's thread may end it
        with writing(lock):  # a folder that cannot be written: one line naming it
            try:
                self.lock.acquire(timeout=0)
            except Timeout:
                raise ConfigError(busy(self.holder())) from None
            write_json(self.info, {"pid": os.getpid(), "host": socket.gethostname(),
                                   "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")})  # fmt: skip

    def holder(self) -> str:
        """The holder of the lock as ``pid N on HOST since TIME``, as far as its info file tells."""
        try:
            info = json.loads(self.info.read_text(encoding="utf-8"))
            return f"pid {info['pid']} on {info['host']} since {info['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            return f"holder unknown: {self.info} unreadable"

    def release(self) -> None:
        """Let the lock go (again: nothing to do)."""
        if self.lock.is_locked:
            self.info.unlink(missing_ok=True)
            self.lock.release()

    def __enter__(self) -> HeldLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["HeldLock"]
