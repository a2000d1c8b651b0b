"""Deterministic writers: the same data always gives byte-identical files.

JSON is written with a fixed key order (insertion order), two-space indentation, UTF-8 and a final
newline; PNGs with fixed zlib settings and no timestamps or other varying metadata.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from spotdiff.jsonio import atomic_path, atomic_write_text, json_default
from spotdiff.processes import can_fork, fork_map, usable_cores

T = TypeVar("T")
R = TypeVar("R")

PNG_COMPRESS_LEVEL = 1

_PROGRESS: contextvars.ContextVar[bool] = contextvars.ContextVar("spotdiff_synth_progress", default=True)


@contextlib.contextmanager
def progress(enabled: bool) -> Iterator[None]:
    """Show (or hide: ``-q``) the engines' progress bars inside this block."""
    token = _PROGRESS.set(enabled)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def progress_enabled() -> bool:
    """Whether progress bars are shown (``-q`` hides them, the libraries' own loading bars too)."""
    return _PROGRESS.get()


def written(path: Path):
    """:func:`spotdiff.jsonio.atomic_path` for the engines' many files: the folder made, no sweep per file
    (a run sweeps the temporaries a killed attempt left once, at its end)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return atomic_path(path, sweep=False)


def save_png(image: Image.Image, path: Path) -> None:
    with written(path) as partial:
        image.save(partial, format="PNG", compress_level=PNG_COMPRESS_LEVEL, optimize=False)


def save_npy(array: np.ndarray, path: Path) -> None:
    """An array as ``.npy`` (format 1.0, no pickled objects), written atomically."""
    with written(path) as partial, open(partial, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array), allow_pickle=False)


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=json_default) + "\n"


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, dumps(data))


def case_rng(seed: int, *keys: int) -> np.random.Generator:
    """The generator of one case: independent of every other case and of the worker that draws it."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, *[int(k) for k in keys]])


_WORKER_FN: Callable | None = None


def _call(task):  # runs in a forked worker
    assert _WORKER_FN is not None
    return _WORKER_FN(task)


def parallel_map(
    fn: Callable[[T], R], tasks: Sequence[T], workers: int = 1, on_result: Callable[[R], None] | None = None
) -> list[R]:
    """``[fn(t) for t in tasks]``, in order, on ``workers`` forked processes when > 1.

    Results do not depend on the number of workers: every task seeds itself (:func:`case_rng`).

    Args:
        fn: the function of one task.
        tasks: the tasks.
        workers: forked processes; 1 runs in this process.
        on_result: called with each result as it arrives (a progress bar), in order.
    """
    global _WORKER_FN
    workers = max(1, int(workers))
    if workers == 1 or len(tasks) < 2 or not can_fork():
        results = []
        for t in tasks:
            results.append(fn(t))
            if on_result is not None:
                on_result(results[-1])
        return results
    _WORKER_FN = fn
    try:
        return fork_map(_call, tasks, workers, chunksize=len(tasks) // (workers * 8), on_result=on_result)
    finally:
        _WORKER_FN = None


def default_workers() -> int:
    """Synthesis worker processes by default: the usable cores, at most 4."""
    return min(4, usable_cores())
