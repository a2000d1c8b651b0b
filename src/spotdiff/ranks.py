"""Where a process sits in a ``torchrun`` / ``accelerate launch`` launch, and the few exchanges its ranks
make (sharded evaluation and sharded synthesis share them).

A launcher starts one process per rank and sets ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK`` (and
``MASTER_ADDR`` / ``MASTER_PORT``); :func:`detect` reads them, :func:`owner` says which rank makes an
item (by its content key, stable across runs and machines), :class:`Group` is the process group
(``gloo`` whatever the device: only small Python objects cross; ``$SPOTDIFF_DIST_BACKEND`` overrides
it), and :func:`step` runs one piece of work on every rank and fails every rank when one fails.
``$SPOTDIFF_DIST_TIMEOUT`` (seconds, default 6 hours) bounds how long ranks wait for each other.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from spotdiff.errors import ConfigError, DistributedError

DEFAULT_TIMEOUT_S = 6 * 3600


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in a launch: ``world_size`` processes, this one ``rank``."""

    world_size: int
    rank: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def detect(environ: Mapping[str, str] | None = None) -> DistEnv | None:
    """The launch this process belongs to, from ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``; None when
    the process runs alone (no launcher, or a world of one)."""
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" not in env or "RANK" not in env:
        return None
    try:
        world = int(env["WORLD_SIZE"])
        rank = int(env["RANK"])
        local = int(env.get("LOCAL_RANK", rank))
    except ValueError:
        raise ConfigError(
            f"bad distributed launch environment: WORLD_SIZE={env.get('WORLD_SIZE')!r}, "
            f"RANK={env.get('RANK')!r}, LOCAL_RANK={env.get('LOCAL_RANK')!r} (integers expected)"
        ) from None
    if world <= 1:
        return None
    if not 0 <= rank < world or local < 0:
        raise ConfigError(f"bad distributed launch environment: RANK={rank}, LOCAL_RANK={local}, WORLD_SIZE={world}")
    return DistEnv(world, rank, local)


def owner(key: str, world_size: int) -> int:
    """The rank that computes the item with content key ``key`` (stable across runs and machines)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % world_size


def rank_device(device: str, local_rank: int) -> str:
    """``cuda:<local rank>`` for ``auto``/``cuda`` when CUDA is available; any other device as given."""
    name = (device or "auto").strip().lower()
    if name in ("auto", "cuda"):
        import torch

        if torch.cuda.is_available():
            return f"cuda:{local_rank % torch.cuda.device_count()}"
    return device


class Group:
    """The torch.distributed process group: created here unless the caller already made one."""

    def __init__(self, env: DistEnv) -> None:
        import torch.distributed as dist

        if not dist.is_available():
            raise ConfigError("this torch build has no torch.distributed; run spotdiff without a launcher")
        self.dist = dist
        self.env = env
        self.created = False
        if not dist.is_initialized():
            backend = os.environ.get("SPOTDIFF_DIST_BACKEND", "gloo")
            timeout = float(os.environ.get("SPOTDIFF_DIST_TIMEOUT", DEFAULT_TIMEOUT_S))
            if backend == "nccl":
                import torch

                torch.cuda.set_device(env.local_rank % max(torch.cuda.device_count(), 1))
            # torch.distributed.fsdp imported after the group exists holds ten references to it (torch 2.14;
            # diffusers imports it): destroy_process_group can then not free the group, gloo's threads outlive it
            # into interpreter teardown and a rank sometimes aborts at exit, its work done ("terminate called
            # without an active exception"). Imported before the group, it holds none (0.4 s, distributed runs only).
            import torch.distributed.fsdp

            dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout))
            self.created = True
        if dist.get_world_size() != env.world_size or dist.get_rank() != env.rank:
            raise ConfigError(
                f"process group (rank {dist.get_rank()} of {dist.get_world_size()}) does not match "
                f"the environment (RANK={env.rank}, WORLD_SIZE={env.world_size})"
            )

    def all_gather(self, value: Any) -> list[Any]:
        out: list[Any] = [None] * self.env.world_size
        self.dist.all_gather_object(out, value)
        return out

    def finish(self) -> None:
        """After the last collective of a run that succeeded: every rank waits for the others, then the group is
        closed, so that no rank tears gloo down while another still talks to it (a rank then sometimes aborted
        at exit: "terminate called without an active exception", its work done; see also :meth:`__init__`)."""
        if self.created and self.dist.is_initialized():
            self.dist.barrier()
        self.close()

    def close(self) -> None:
        if self.created and self.dist.is_initialized():
            self.dist.destroy_process_group()


def step(group: Group, fn: Callable[[], Any]) -> list[Any]:
    """Run ``fn`` on every rank, then exchange results; if any rank failed, fail on every rank.

    The failing rank re-raises its own exception; the others raise :class:`DistributedError`
    naming the failed ranks and their messages. Returns every rank's result, by rank.
    """
    error: BaseException | None = None
    try:
        result = ("ok", fn())
    except Exception as exc:
        error = exc
        result = ("error", f"{type(exc).__name__}: {exc}")
    results = group.all_gather(result)
    failed = [(r, msg) for r, (status, msg) in enumerate(results) if status == "error"]
    if error is not None:
        raise error
    if failed:
        details = "; ".join(f"rank {r}: {msg}" for r, msg in failed)
        raise DistributedError(f"the sharded run stopped because another rank failed ({details})")
    return [value for _, value in results]
