"""Deterministic writers: the same data always gives byte-identical files.

JSON is written with a fixed key order (insertion order), two-space indentation, UTF-8 and a final
newline; PNGs with fixed zlib settings and no timestamps or other varying metadata.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from spotdiff.jsonio import json_default
from spotdiff.provenance import usable_cores

T = TypeVar("T")
R = TypeVar("R")

PNG_COMPRESS_LEVEL = 1


def save_png(image: Image.Image, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG", compress_level=PNG_COMPRESS_LEVEL, optimize=False)


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=json_default) + "\n"


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(data), encoding="utf-8", newline="\n")


def case_rng(seed: int, *keys: int) -> np.random.Generator:
    """The generator of one case: independent of every other case and of the worker that draws it."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, *[int(k) for k in keys]])


_WORKER_FN: Callable | None = None


def _call(task):  # runs in a forked worker
    assert _WORKER_FN is not None
    return _WORKER_FN(task)


def parallel_map(fn: Callable[[T], R], tasks: Sequence[T], workers: int = 1) -> list[R]:
    """``[fn(t) for t in tasks]``, in order, on ``workers`` forked processes when > 1.

    Results do not depend on the number of workers: every task seeds itself (:func:`case_rng`).

    Args:
        fn: the function of one task.
        tasks: the tasks.
        workers: forked processes; 1 runs in this process.
    """
    global _WORKER_FN
    workers = max(1, int(workers))
    if workers == 1 or len(tasks) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(t) for t in tasks]
    _WORKER_FN = fn
    try:
        ctx = multiprocessing.get_context("fork")
        chunk = max(1, len(tasks) // (workers * 8))
        with ctx.Pool(workers) as pool:
            return pool.map(_call, tasks, chunksize=chunk)
    finally:
        _WORKER_FN = None


def default_workers() -> int:
    """The default ``--workers``: the usable cores (:func:`spotdiff.provenance.usable_cores`), at most 4."""
    return min(4, usable_cores())
