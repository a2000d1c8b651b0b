"""A persistent cache of model outputs, keyed by model identity and item content.

One SQLite file per cache directory (WAL mode, so several runs may share it). A row holds one
embedding (float32 bytes) or one pair score, under ``(model digest, kind, item key)``. Rows are
committed batch by batch, so an interrupted run keeps everything it computed and a re-run, or
another benchmark sharing images or texts, recomputes nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (model, kind, key)
) WITHOUT ROWID;
"""
_CHUNK = 500


class Cache:
    """Embeddings and pair scores of one model, stored under ``directory/cache.sqlite``."""

    def __init__(self, directory: str | Path, model_digest: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "cache.sqlite"
        self.model = model_digest
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=60000")
        self._db.executescript(_SCHEMA)

    def get(self, kind: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached values among ``keys`` (missing keys are simply absent)."""
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, value FROM items WHERE model=? AND kind=? AND key IN ({marks})",
                [self.model, kind, *chunk],
            )
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, kind: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store values atomically (one transaction per call)."""
        rows = [
            (self.model, kind, key, np.ascontiguousarray(value, dtype=np.float32).tobytes())
            for key, value in items
        ]
        if not rows:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def count(self, kind: str | None = None) -> int:
        if kind is None:
            (n,) = self._db.execute("SELECT COUNT(*) FROM items WHERE model=?", [self.model]).fetchone()
        else:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM items WHERE model=? AND kind=?", [self.model, kind]
            ).fetchone()
        return int(n)

    def close(self) -> None:
        self._db.close()


def default_cache_dir() -> Path:
    """``$SPOTDIFF_CACHE`` or ``~/.cache/spotdiff``."""
    import os

    env = os.environ.get("SPOTDIFF_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "spotdiff"
