"""Shared fixtures: where ../shared is, and whether its absence skips or fails a test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout; skip without it, fail when SPOTDIFF_REQUIRE_SHARED=1."""
    if not (SHARED / "data").is_dir():
        message = f"../shared not found at {SHARED}"
        if os.environ.get("SPOTDIFF_REQUIRE_SHARED") == "1":
            pytest.fail(message + " (SPOTDIFF_REQUIRE_SHARED=1)")
        pytest.skip(message)
    return SHARED


@pytest.fixture(scope="session")
def shared_data(shared_dir: Path) -> Path:
    return shared_dir / "data"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker gets one torch thread, so two workers share two cores fairly (and the
    evaluations' thread budget, which honours ``OMP_NUM_THREADS``, keeps it: a process that ran torch on two
    threads and then forks a plan's stage would hang in GNU OpenMP)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        import torch

        torch.set_num_threads(1)
