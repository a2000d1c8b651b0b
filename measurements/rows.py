"""The rows the speed scripts hand to ``gpu_run.py``, and what bounds a figure, read off the profiler.

Every script that ``gpu_run.py`` runs takes ``--json FILE`` and writes ``{"script": ..., "rows": [...]}`` there,
one :func:`row` per figure: the figure's value, its limit (the same work done the fastest way the script knows:
the forward pass alone, the same model calls in a plain loop), the ratio of the two and, where the ratio is below
the goal, what bounds it as :func:`profile_bound` measured it (never guessed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: A figure below this share of its limit says what bounds it.
GOAL = 0.9
#: The GPU's kernels busy at least this share of the wall time: the device's own arithmetic bounds the side.
BUSY = 0.85
#: Kernels shorter than this on average, and the GPU idle: their launches (Python, the driver) bound the side.
SHORT_KERNEL_US = 20.0


def row(figure: str, model: str, side: str, value: float, unit: str, *, limit: float | None = None,
        limit_side: str = "", goal: float | None = GOAL, bound: str = "", **extra: Any) -> dict:  # fmt: skip
    """One figure: ``value`` (in ``unit``) of ``side`` on ``model``, against ``limit`` (the same unit, measured
    side by side as ``limit_side``); ``ratio`` is value / limit for rates (higher is better).

    >>> r = row("eval images/s", "vit-b-32", "harness, JPEG files", 900.0, "images/s", limit=1000.0,
    ...         limit_side="forward")
    >>> r["ratio"], r["goal"]
    (0.9, 0.9)
    """
    ratio = None if limit in (None, 0) else value / limit
    return {"figure": figure, "model": model, "side": side, "value": value, "unit": unit, "limit": limit,
            "limit_side": limit_side, "ratio": ratio, "goal": goal if limit is not None else None, "bound": bound,
            **extra}  # fmt: skip


def write_rows(path: Path | None, script: str, rows: list[dict], **about: Any) -> None:
    """Write ``rows`` as ``{"script", "rows", ...about}`` to ``path`` (nothing without a path), full precision."""
    if path is not None:
        Path(path).write_text(json.dumps({"script": script, **about, "rows": rows}, indent=1), encoding="utf-8")


def _union_us(intervals: list[tuple[float, float]]) -> float:
    """The time covered by ``intervals`` (start, end), overlaps counted once.

    >>> _union_us([(0, 10), (5, 20), (30, 40)])
    30
    """
    total, end = 0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def profile_bound(fn: Callable[[], Any], device: str) -> dict:
    """Run ``fn`` once under ``torch.profiler`` and say what bounds it on ``device``.

    On CUDA, from the kernels and copies the profiler saw over the wall time of the call: ``gpu_busy`` (the share
    of the wall time in which some kernel ran), ``h2d`` (host-to-device copies' share), the number of kernels and
    their mean length; ``bound`` reads them: the GPU's arithmetic (busy >= 85%), host-to-device copies (their share
    above the kernels'), kernel launches (short kernels, the GPU mostly idle), else the host side (Python, decoding,
    data preparation in this process or its workers: the GPU waits on them). Elsewhere nothing is profiled and the
    bound is the CPU's.
    """
    import torch

    if not str(device).startswith("cuda"):
        start = time.perf_counter()
        fn()
        return {"wall_s": time.perf_counter() - start, "bound": "the CPU (no GPU profile on this device)"}
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    kernels, copies = [], []
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        span = (event.time_range.start, event.time_range.end)
        (copies if "Memcpy HtoD" in event.name else kernels).append(span)
    busy = _union_us(kernels) / 1e6 / wall
    h2d = _union_us(copies) / 1e6 / wall
    mean_us = sum(b - a for a, b in kernels) / max(1, len(kernels))
    if busy >= BUSY:
        bound = f"the GPU's arithmetic (kernels busy {busy:.0%} of the wall time)"
    elif h2d > busy:
        bound = f"host-to-device copies ({h2d:.0%} of the wall time, kernels {busy:.0%})"
    elif mean_us < SHORT_KERNEL_US:
        bound = f"kernel launches ({len(kernels):,} kernels of {mean_us:.1f} us on average, GPU busy {busy:.0%})"
    else:
        bound = (f"the host side (decoding, data preparation, Python): the GPU idle {1 - busy:.0%} of the wall time "
                 f"(kernels {busy:.0%}, copies {h2d:.0%})")  # fmt: skip
    return {"wall_s": wall, "gpu_busy": busy, "h2d": h2d, "kernels": len(kernels), "mean_kernel_us": mean_us,
            "bound": bound}  # fmt: skip
