"""Worker processes: the cores this process may use, and a map over forked workers.

:func:`usable_cores` and :func:`cap_workers` size every pool of worker processes. Every forked pool
(synthesis, report figures) goes through :func:`fork_map`, which lets its workers exit on their own:
``with Pool()`` alone ends them with SIGTERM, and a worker that inherited a Python SIGTERM handler
(the plan runner's commands install one) can miss that signal and block ``Pool.__exit__`` forever
(the quick demo hung so in CI).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as Slurm and ``taskset`` set it), shared between
    the processes of a launch on this machine (``LOCAL_WORLD_SIZE``, set by torchrun and accelerate).

    >>> usable_cores() >= 1
    True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE") or 1))
    except ValueError:
        local = 1
    return max(1, cores // local)


def cap_workers(workers: int) -> int:
    """``workers`` processes, at most :func:`usable_cores` (more only oversubscribe the cores), with a
    warning when capped: the one place a ``--workers`` is capped.

    Args:
        workers: the number asked for (``--workers``).

    >>> cap_workers(1)
    1
    """
    cores = usable_cores()
    if workers > cores:
        log.warning("--workers %d is more than the %d cores this process may use: %d workers", workers, cores, cores)
    return min(workers, cores)


def can_fork() -> bool:
    """Whether worker processes can be forked here (Linux and other POSIX systems)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _worker_signals() -> None:
    """A pool worker's signals: SIGTERM ends it (the pool's ``terminate``), SIGINT is the parent's.

    A Python-level handler inherited from the parent would make ``terminate`` race: a SIGTERM that
    arrives just before the idle worker blocks on the task queue's lock is noted by the interpreter's
    C handler, but the Python handler runs only once that wait returns, which it never does.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def fork_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    chunksize: int = 1,
    on_result: Callable[[R], None] | None = None,
) -> list[R]:
    """``[fn(x) for x in items]``, in order, computed by ``workers`` forked processes.

    The workers inherit the caller's memory (``fn`` and what it reads need not pickle; the items
    and results do). A failure in ``fn`` is raised here.

    Args:
        fn: a module-level function of one item.
        items: the items.
        workers: processes to fork (at least 1).
        chunksize: items sent to a worker at a time.
        on_result: called in this process with each result as it arrives, in order (a progress bar).

    >>> fork_map(abs, [-1, 2, -3], workers=2)
    [1, 2, 3]
    """
    context = multiprocessing.get_context("fork")
    with context.Pool(max(1, workers), initializer=_worker_signals) as pool:
        results = []
        for result in pool.imap(fn, items, chunksize=max(1, chunksize)):
            results.append(result)
            if on_result is not None:
                on_result(result)
        pool.close()  # the workers finish and exit: no SIGTERM is needed (``terminate`` is for failures)
        pool.join()
    return results
