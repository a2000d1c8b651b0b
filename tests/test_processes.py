"""``spotdiff.processes``: forked maps that end without a hang whatever signal handlers the parent has."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from spotdiff.processes import can_fork, fork_map, usable_cores
from spotdiff.synth.output import parallel_map

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs fork")


def _dispositions(_: int) -> tuple[bool, bool]:
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def _square(x: int) -> int:
    return x * x


def _inverse(x: int) -> float:
    return 1 / x


def test_fork_map_keeps_order_and_raises_a_workers_failure() -> None:
    assert fork_map(_square, list(range(50)), workers=2, chunksize=3) == [x * x for x in range(50)]
    with pytest.raises(ZeroDivisionError):
        fork_map(_inverse, [1, 0], workers=2)


def test_workers_restore_sigterm_and_leave_sigint_to_the_parent() -> None:
    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # as the plan runner's commands do
    try:
        assert fork_map(_dispositions, [0, 1, 2, 3], workers=2) == [(True, True)] * 4
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_workers_exit_on_their_own_without_a_sigterm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``with Pool()`` alone SIGTERMs its idle workers, which hangs where they inherited a Python handler."""
    sent: list[int] = []
    kill = os.kill
    monkeypatch.setattr(os, "kill", lambda pid, sig: (sent.append(sig), kill(pid, sig)))
    assert parallel_map(abs, [-1, -2, -3, -4], workers=2) == [1, 2, 3, 4]
    assert fork_map(_square, [1, 2, 3], workers=2) == [1, 4, 9]
    assert signal.SIGTERM not in sent


def test_many_maps_under_the_plan_runners_handler_never_hang() -> None:
    """The quick demo hung in CI: the runner's command installs a SIGTERM handler, ``with Pool()`` ended
    idle workers with SIGTERM, and one that took it just before blocking on the task queue waited
    forever. Unfixed, this loop hangs within about a hundred maps; fixed, it takes a few seconds."""
    script = textwrap.dedent(
        """
        import signal
        from spotdiff.plans.runner import _stop_once
        from spotdiff.synth.output import parallel_map
        signal.signal(signal.SIGTERM, _stop_once)
        for _ in range(300):
            assert parallel_map(abs, [-1, -2, -3, -4], workers=2) == [1, 2, 3, 4]
        print("done")
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("parallel_map hung: a pool worker missed its SIGTERM")
    assert proc.returncode == 0 and out.strip() == "done", err[-2000:]


def test_parallel_map_equals_the_serial_map() -> None:
    tasks = list(range(-20, 20))
    assert parallel_map(abs, tasks, workers=2) == parallel_map(abs, tasks, workers=1) == [abs(t) for t in tasks]


def test_usable_cores_are_the_affinity_shared_by_a_launchs_local_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert usable_cores() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(4 * len(os.sched_getaffinity(0))))
    assert usable_cores() == 1
