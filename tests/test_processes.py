"""``spotdiff.processes``: forked maps that end without a hang whatever signal handlers the parent has."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from spotdiff import processes
from spotdiff.processes import can_fork, cgroup_cpus, fork_map, thread_budget, torch_threads, usable_cores
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


CG = "/sys/fs/cgroup"
V2_NESTED = {"/proc/self/cgroup": "0::/jobs/job1\n", f"{CG}/jobs/job1/cpu.max": "max 100000",
             f"{CG}/jobs/cpu.max": "250000 100000\n"}  # fmt: skip
V1_HALF = {"/proc/self/cgroup": "4:cpu,cpuacct:/docker/x\n2:memory:/docker/x\n",
           f"{CG}/cpu,cpuacct/docker/x/cpu.cfs_quota_us": "50000\n",
           f"{CG}/cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n"}  # fmt: skip
UNLIMITED = {"/proc/self/cgroup": "1:cpu:/\n0::/\n", f"{CG}/cpu/cpu.cfs_quota_us": "-1",
             f"{CG}/cpu/cpu.cfs_period_us": "100000", f"{CG}/cpu.max": "max 100000"}  # fmt: skip


def test_a_cgroup_quota_caps_the_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert cgroup_cpus(V2_NESTED.get) == 2.5  # the parent's quota binds the child without one
    assert cgroup_cpus(V1_HALF.get) == 0.5 and cgroup_cpus(UNLIMITED.get) is None
    assert cgroup_cpus(lambda path: None) is None  # off Linux, or no cgroup file readable
    assert usable_cores(V2_NESTED.get) == 2  # rounded down: never more threads than the quota runs at once
    assert usable_cores(V1_HALF.get) == 1 and usable_cores(UNLIMITED.get) == 8
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert usable_cores(UNLIMITED.get) == 4


def test_the_thread_budget_under_a_simulated_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(processes, "_read_text", V2_NESTED.get)  # 8 CPUs, a quota of 2.5
    assert thread_budget(device="cpu").as_dict() == {"torch_threads": 2, "workers": 1, "cores": 2}
    assert thread_budget(device="cuda:0").as_dict() == {"torch_threads": 1, "workers": 2, "cores": 2}
    assert thread_budget(workers=2, device="cpu").threads == 1  # the workers take the cores the threads leave
    assert (thread_budget(threads=8, workers=8, device="cpu").threads, thread_budget(workers=8).workers) == (1, 2)
    monkeypatch.setattr(processes, "_read_text", V1_HALF.get)
    assert thread_budget(device="cpu").as_dict() == {"torch_threads": 1, "workers": 0, "cores": 1}


def test_the_default_threads_honour_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job script's (or a parent process's) OMP_NUM_THREADS caps the threads chosen, not those given."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert thread_budget(device="cpu", cores=8).as_dict() == {"torch_threads": 2, "workers": 1, "cores": 8}
    assert thread_budget(threads=4, device="cpu", cores=8).threads == 4
    for unset in ("", "0", "many"):
        monkeypatch.setenv("OMP_NUM_THREADS", unset)
        assert thread_budget(device="cpu", cores=8).threads == 8


@pytest.mark.parametrize("device", ["cpu", "cuda", "remote"])
def test_threads_times_workers_never_exceed_the_cores(device: str) -> None:
    for cores in range(1, 10):
        for threads in (None, *range(1, 11)):
            for workers in (None, *range(11)):
                b = thread_budget(threads, workers, device=device, cores=cores)
                assert b.threads >= 1 and b.workers >= 0 and b.threads * max(1, b.workers) <= b.cores == cores
                if workers is not None and workers <= cores:
                    assert b.workers == workers  # a number given is kept when it fits
                if threads is not None and threads * max(1, b.workers) <= cores:
                    assert b.threads == threads


def test_torch_threads_are_set_inside_the_block_and_restored() -> None:
    import torch

    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    with torch_threads(None):
        assert torch.get_num_threads() == before
    assert torch.get_num_threads() == before
