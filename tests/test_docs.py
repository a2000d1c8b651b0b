"""The generated reference pages of the documentation site stay equal to what the code declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotdiff.commands import benchmarks, models

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(("page", "render"), [("benchmarks.md", benchmarks.markdown), ("models.md", models.markdown)])
def test_generated_page_is_current(page: str, render) -> None:
    """Regenerate with `spotdiff benchmarks --markdown > docs/benchmarks.md` (and models)."""
    assert (DOCS / page).read_text(encoding="utf-8") == render()
