"""The generated reference pages of the documentation site stay equal to what the code declares."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.commands import benchmarks, models

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(("page", "render"), [("benchmarks.md", benchmarks.markdown), ("models.md", models.markdown)])
def test_generated_page_is_current(page: str, render) -> None:
    """Regenerate with `spotdiff benchmarks --markdown > docs/benchmarks.md` (and models)."""
    assert (DOCS / page).read_text(encoding="utf-8") == render()


def test_data_page_lists_every_benchmark_with_its_declared_licence() -> None:
    """docs/data.md's benchmark table: one row per registered benchmark, licence as its declaration says."""
    rows = {}
    for line in (DOCS / "data.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and cells[0] in BENCHMARKS:
            rows[cells[0]] = cells[2]
    assert rows == {name: BENCHMARKS.get(name).metadata.license for name in BENCHMARKS.names()}


def test_every_test_security_md_names_exists() -> None:
    """docs/security.md names the test holding each guarantee: each is a test function of that file."""
    root = DOCS.parent
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", (DOCS / "security.md").read_text(encoding="utf-8"))
    assert named
    for path, name in named:
        tree = ast.parse((root / path).read_text(encoding="utf-8"))
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in functions, f"docs/security.md names {path}::{name}, which does not exist"
