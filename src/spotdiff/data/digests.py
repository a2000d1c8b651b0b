"""File digests for verification: several algorithms over one read of the file."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path


def file_digests(path: str | Path, algorithms: Iterable[str], chunk: int = 1 << 20) -> dict[str, str]:
    """The digests of a file for each algorithm, reading the file once.

    Args:
        path: the file.
        algorithms: names from :data:`~spotdiff.benchmarks.sources.ALGORITHMS`.
        chunk: bytes read at a time.
    """
    hashers = {}
    for algorithm in set(algorithms):
        if algorithm == "git-blob-sha1":
            h = hashlib.sha1(usedforsecurity=False)
            h.update(b"blob %d\0" % os.path.getsize(path))
        elif algorithm == "md5":
            h = hashlib.md5(usedforsecurity=False)
        else:
            h = hashlib.new(algorithm)
        hashers[algorithm] = h
    with open(path, "rb") as f:
        while block := f.read(chunk):
            for h in hashers.values():
                h.update(block)
    return {algorithm: h.hexdigest() for algorithm, h in hashers.items()}
