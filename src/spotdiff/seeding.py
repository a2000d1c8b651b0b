"""Seeding of Python's, NumPy's and torch's generators (one place; the seed is recorded with every run)."""

from __future__ import annotations

import random

import numpy as np


def seed_everything(seed: int, *, with_torch: bool = True) -> None:
    """Fix the seeds of ``random``, ``numpy.random`` and ``torch`` (CPU and every CUDA device).

    Args:
        seed: the seed.
        with_torch: seed torch too; False for a run that may never import it (an evaluation whose values are
            all cached), which seeds it with :func:`seed_torch` when its model loads.
    """
    random.seed(seed)
    np.random.seed(seed % (2**32))
    if with_torch:
        seed_torch(seed)


def seed_torch(seed: int) -> None:
    """Fix the seed of ``torch`` (CPU and every CUDA device)."""
    import torch

    torch.manual_seed(seed)
