"""Seeding of Python's, NumPy's and torch's generators (one place; the seed is recorded with every run)."""

from __future__ import annotations

import random

import numpy as np


def seed_everything(seed: int) -> None:
    """Fix the seeds of ``random``, ``numpy.random`` and ``torch`` (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    import torch

    torch.manual_seed(seed)
