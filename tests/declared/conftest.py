"""Each test of a declared benchmark registers it in a copy of the benchmark registry, dropped after the test, so
that the other tests (the generated reference pages, the data page) see the built-in benchmarks only."""

from __future__ import annotations

import pytest

from spotdiff.benchmarks import BENCHMARKS


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    BENCHMARKS.names()  # the built-ins and plugins are discovered first, and kept
    monkeypatch.setattr(BENCHMARKS, "_items", dict(BENCHMARKS._items))
    monkeypatch.delenv("SPOTDIFF_INCLUDE_PATH", raising=False)
