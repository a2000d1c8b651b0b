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
    """Under pytest-xdist each worker gets one torch thread, so two workers share two cores fairly."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
