"""Compact append-only columns: per-unit outcomes of millions of cases in a few bytes each.

Costs and layout: docs/protocols.md.

>>> col = StringColumn()
>>> for s in ("b", "a", "b"):
...     col.append(s)
>>> col.array().tolist()
['b', 'a', 'b']
>>> seen = IdSet()
>>> [seen.add(s) for s in ("x", "y", "x")]
[True, True, False]
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

#: Rows buffered in Python before they are packed into a numpy chunk.
CHUNK = 65536


class _Column:
    """Rows appended one by one, stored as numpy chunks of ``dtype``."""

    dtype: Any = np.float64

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._buffer: list[Any] = []
        self._packed = 0

    def __len__(self) -> int:
        return self._packed + len(self._buffer)

    def append(self, value: Any) -> None:
        self._buffer.append(value)
        if len(self._buffer) >= CHUNK:
            self._pack()

    def extend(self, values: Any) -> None:
        """Append many values at once (a list or an array)."""
        self._pack()
        block = np.asarray(values, dtype=self.dtype)
        if len(block):
            self._chunks.append(block)
            self._packed += len(block)

    def extend_constant(self, value: Any, n: int) -> None:
        """Append ``n`` copies of ``value`` (a column that appears after ``n`` rows)."""
        self.extend(np.full(n, value, dtype=self.dtype))

    def _pack(self) -> None:
        if self._buffer:
            self._chunks.append(np.array(self._buffer, dtype=self.dtype))
            self._packed += len(self._buffer)
            self._buffer = []

    def array(self) -> np.ndarray:
        """Every row, as one numpy array."""
        self._pack()
        if len(self._chunks) > 1:
            self._chunks = [np.concatenate(self._chunks)]
        return self._chunks[0] if self._chunks else np.zeros(0, dtype=self.dtype)


class FloatColumn(_Column):
    """float64 values (NaN where a unit has none)."""

    dtype = np.float64


class StringColumn(_Column):
    """Strings in numpy's variable-width ``StringDType``."""

    dtype = np.dtypes.StringDType()

    def objects(self) -> np.ndarray:
        """The strings as an object array of ``str``."""
        return self.array().astype(object)


class CodeColumn(_Column):
    """Strings with few distinct values (tags): int32 codes into the list of distinct values."""

    dtype = np.int32

    def __init__(self) -> None:
        super().__init__()
        self.values: list[str] = []
        self._codes: dict[str, int] = {}

    def code(self, value: str) -> int:
        """The code of ``value``, assigned on first sight."""
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self.values)
            self.values.append(value)
        return code

    def objects(self) -> np.ndarray:
        """The strings as an object array (each distinct value one shared ``str``)."""
        table = np.empty(len(self.values), dtype=object)
        table[:] = self.values
        return table[self.array()]


class IdSet:
    """A set of strings kept as 128-bit BLAKE2b digests: recent ones in a Python set, the rest in
    two sorted uint64 arrays (high and low halves), merged every :data:`CHUNK` additions.

    Two different ids collide with probability about ``n**2 / 2**129`` (1e-25 for ten million).
    """

    def __init__(self) -> None:
        self._recent: set[bytes] = set()
        self._high = np.zeros(0, dtype=np.uint64)
        self._low = np.zeros(0, dtype=np.uint64)

    def __len__(self) -> int:
        return len(self._recent) + len(self._high)

    def add(self, item: str) -> bool:
        """Add ``item``; False when it was already there."""
        digest = hashlib.blake2b(item.encode("utf-8"), digest_size=16).digest()
        if digest in self._recent or self._stored(digest):
            return False
        self._recent.add(digest)
        if len(self._recent) >= CHUNK:
            self._merge()
        return True

    def _stored(self, digest: bytes) -> bool:
        if not len(self._high):
            return False
        high = np.uint64(int.from_bytes(digest[:8], "little"))
        low = np.uint64(int.from_bytes(digest[8:], "little"))
        pos = int(np.searchsorted(self._high, high))
        while pos < len(self._high) and self._high[pos] == high:
            if self._low[pos] == low:
                return True
            pos += 1
        return False

    def _merge(self) -> None:
        block = np.frombuffer(b"".join(self._recent), dtype="<u8").reshape(-1, 2)
        order = np.argsort(block[:, 0], kind="stable")
        high, low = block[order, 0], block[order, 1]
        at = np.searchsorted(self._high, high)
        self._high = np.insert(self._high, at, high)
        self._low = np.insert(self._low, at, low)
        self._recent = set()
