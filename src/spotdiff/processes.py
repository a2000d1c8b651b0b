"""Worker processes and threads: the cores this process may use, the one thread budget of an evaluation, and a
map over forked workers.

:func:`usable_cores` (CPU affinity and the cgroup's CPU quota) and :func:`cap_workers` size every pool of worker
processes; :func:`thread_budget` splits the cores between a model's torch threads and the input pipeline's
workers (docs/scaling.md), applied while the model computes by :func:`torch_threads`. Every forked pool
(synthesis, report figures) goes through :func:`fork_map`, which lets its workers exit on their own:
``with Pool()`` alone ends them with SIGTERM, and a worker that inherited a Python SIGTERM handler
(the plan runner's commands install one) can miss that signal and block ``Pool.__exit__`` forever
(the quick demo hung so in CI).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from spotdiff.errors import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _ancestors(path: str, mount: str) -> list[str]:
    """``mount/path`` and each folder above it up to ``mount`` (a cgroup's limits are its ancestors' too)."""
    parts = [p for p in path.split("/") if p]
    return [os.path.join(mount, *parts[:n]) for n in range(len(parts), -1, -1)]


def _quota(quota: str | None, period: str | None) -> float | None:
    """CPUs of a CFS quota (microseconds of CPU time per period), None when unlimited or unreadable."""
    try:
        q, p = int(quota or ""), int(period or "")
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_cpus(read: Callable[[str], str | None] | None = None) -> float | None:
    """The CPUs this process's cgroup quota allows (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``; the smallest along the cgroup and its ancestors), as Docker's ``--cpus`` and
    Kubernetes' CPU limits set it; None without a quota, or off Linux.

    Args:
        read: reads a file's text, or returns None when it cannot (default: from the file system; tests give a
            simulated ``/sys``).

    >>> files = {"/proc/self/cgroup": "0::/job", "/sys/fs/cgroup/job/cpu.max": "150000 100000"}
    >>> cgroup_cpus(files.get)
    1.5
    """
    read = read or _read_text
    found = []
    for line in (read("/proc/self/cgroup") or "").splitlines():
        controllers, _, path = line.partition(":")[2].partition(":")
        if line.startswith("0::"):  # cgroup v2: "QUOTA PERIOD" or "max PERIOD"
            for folder in _ancestors(path, "/sys/fs/cgroup"):
                quota, _, period = (read(folder + "/cpu.max") or "").strip().partition(" ")
                found.append(_quota(quota, period))
        elif "cpu" in controllers.split(","):  # cgroup v1, mounted under its controllers' name
            for mount in {f"/sys/fs/cgroup/{controllers}", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}:
                for folder in _ancestors(path, mount):
                    found.append(_quota(read(folder + "/cpu.cfs_quota_us"), read(folder + "/cpu.cfs_period_us")))
    limits = [x for x in found if x is not None]
    return min(limits) if limits else None


def usable_cores(read: Callable[[str], str | None] | None = None) -> int:
    """The cores this process may run on: its CPU affinity (as Slurm and ``taskset`` set it), at most its
    cgroup's CPU quota rounded down (:func:`cgroup_cpus`; at least one), shared between the processes of a
    launch on this machine (``LOCAL_WORLD_SIZE``, set by torchrun and accelerate).

    Args:
        read: reads a file's text (injectable, see :func:`cgroup_cpus`).

    >>> usable_cores() >= 1
    True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpus(read)
    if quota is not None:
        cores = max(1, min(cores, int(quota)))
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE") or 1))
    except ValueError:
        local = 1
    return max(1, cores // local)


def cap_workers(workers: int, cores: int | None = None) -> int:
    """``workers`` processes, at most ``cores`` (more only oversubscribe the cores), with a warning when
    capped: the one place a ``--workers`` is capped.

    Args:
        workers: the number asked for (``--workers``).
        cores: the cores they share (default: :func:`usable_cores`).

    >>> cap_workers(1)
    1
    """
    cores = usable_cores() if cores is None else cores
    if workers > cores:
        log.warning("--workers %d is more than the %d cores this process may use: %d workers", workers, cores, cores)
    return min(workers, cores)


@dataclass(frozen=True)
class ThreadBudget:
    """How an evaluation uses the cores: ``threads`` torch intra-op threads for the model and ``workers``
    input-pipeline processes (one torch thread each; 0: images load in the calling process), with
    ``threads * max(1, workers) <= cores`` (:func:`thread_budget`)."""

    threads: int
    workers: int
    cores: int

    def as_dict(self) -> dict[str, int]:
        """The budget as a run records it."""
        return {"torch_threads": self.threads, "workers": self.workers, "cores": self.cores}


def thread_budget(
    threads: int | None = None, workers: int | None = None, *, device: str = "cpu", cores: int | None = None
) -> ThreadBudget:
    """The one thread budget of an evaluation (``--threads``, ``--workers``): torch's intra-op threads times the
    input pipeline's workers never exceed the usable cores.

    Unset, a model on the CPU gets every core and one worker decodes ahead of it (none on a single core); a model
    elsewhere (a GPU, a served model) gets one thread and every core decodes. One number given, the other takes
    the cores it leaves; both given, the workers are capped to the cores and the threads to what the workers
    leave, with a warning. Unset, the threads are also at most ``OMP_NUM_THREADS`` where the environment sets it
    (as a cluster's job script or a parent process does: torch itself starts with that many).

    Args:
        threads: torch intra-op threads (``--threads``), or None to choose.
        workers: input-pipeline processes (``--workers``), or None to choose.
        device: where the model runs.
        cores: the cores to share (default: :func:`usable_cores`).

    >>> thread_budget(device="cpu", cores=8), thread_budget(device="cuda:0", cores=8)
    (ThreadBudget(threads=8, workers=1, cores=8), ThreadBudget(threads=1, workers=8, cores=8))
    >>> thread_budget(threads=2, device="cpu", cores=8)
    ThreadBudget(threads=2, workers=4, cores=8)
    """
    cores = usable_cores() if cores is None else max(1, int(cores))
    if threads is not None and threads < 1:
        raise ConfigError(f"--threads must be 1 or more, got {threads}")
    if workers is not None and workers < 0:
        raise ConfigError(f"--workers must be 0 or more, got {workers}")
    if workers is not None:
        workers = cap_workers(workers, cores)
    if threads is not None and threads > cores:
        log.warning("--threads %d is more than the %d cores this process may use: %d threads", threads, cores, cores)
        threads = cores
    on_cpu = device.split(":")[0] in ("cpu", "auto")
    if workers is None:
        if threads is not None:
            workers = cores // threads if cores > 1 else 0
        else:
            workers = (1 if cores > 1 else 0) if on_cpu else cores
    fits = max(1, cores // max(1, workers))
    if threads is None:
        threads = min(fits, _omp_threads() or fits)
    elif threads > fits:
        log.warning("--threads %d times --workers %d is more than the %d usable cores: %d threads", threads, workers,
                    cores, fits)  # fmt: skip
        threads = fits
    return ThreadBudget(threads, workers, cores)


def _omp_threads() -> int | None:
    """``OMP_NUM_THREADS`` when the environment sets it to a positive whole number."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", ""))) or None
    except ValueError:
        return None


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` inside the block and restored after it (None: left alone)."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def pin_threads(threads: int | None = None) -> int:
    """Pin torch's intra-op threads for a speed script, so that its ratios repeat: ``threads`` (default: the
    budget's choice for a model on the CPU, :func:`thread_budget`) set in this process and, through
    ``OMP_NUM_THREADS``, in its child processes and the evaluations' budget. Returns the number pinned.

    Args:
        threads: the torch threads of every side the script measures.
    """
    import torch

    n = thread_budget(threads, device="cpu").threads
    os.environ["OMP_NUM_THREADS"] = str(n)
    torch.set_num_threads(n)
    return n


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
