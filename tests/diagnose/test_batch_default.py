"""The batch size when none is given (issue 47, item 3): searched for a model on CUDA (the largest that fits is the
fastest), 32 elsewhere; a number or ``auto`` given is what runs. No GPU needed: the search is stood in for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spotdiff.diagnose import runner
from spotdiff.diagnose.autobatch import DEFAULT_BATCH_SIZE


def _scorer(device: str) -> SimpleNamespace:
    return SimpleNamespace(device=device, options=SimpleNamespace(device=device, batch_size=7))


@pytest.mark.parametrize(
    ("device", "given", "expected"),
    [("cuda:0", None, 448), ("cpu", None, DEFAULT_BATCH_SIZE), ("cuda", 64, 64), ("cpu", "auto", 448),
     ("mps", None, DEFAULT_BATCH_SIZE)],
)  # fmt: skip
def test_no_batch_size_is_auto_on_cuda_and_32_elsewhere(monkeypatch, tmp_path, device, given, expected) -> None:
    searched: list = []

    def search(scorer, cache_dir):
        searched.append(cache_dir)
        return 448

    monkeypatch.setattr(runner, "resolve_batch_size", search)
    scorer = _scorer(device)
    runner.set_batch_size(scorer, given, tmp_path)
    assert scorer.options.batch_size == expected
    assert searched == ([tmp_path] if expected == 448 else [])


def test_a_bad_batch_size_is_refused() -> None:
    with pytest.raises(runner.ConfigError, match="positive integer or 'auto'"):
        runner.set_batch_size(_scorer("cpu"), 0, None)
