"""Fixtures shared by the run's tests."""

from __future__ import annotations

import pytest

from spotdiff.diagnose import runner
from spotdiff.scorers import ScorerOptions


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every scorer the runner builds, by spec (the real loader still runs)."""
    built: list[str] = []
    load = runner.load_scorer

    def counting(spec: str, options: ScorerOptions):
        built.append(spec)
        return load(spec, options)

    monkeypatch.setattr(runner, "load_scorer", counting)
    return built
