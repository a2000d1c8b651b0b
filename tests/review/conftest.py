"""Small synthesis outputs to review (EqBen canvas pairs and SPEC sets), made once and copied per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spotdiff.synth.canvas.eqben import write_eqben
from spotdiff.synth.canvas.spec import write_spec
from spotdiff.synth.output import progress


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("made")
    with progress(False):
        write_eqben(root / "eqben", n=2, size=64)  # 6 pairs: 2 per EQ-Kubric subset
        write_spec(root / "spec", n=1, size=96, subsets=["count", "relative_spatial"], cls=False)
    return {"eqben": root / "eqben", "spec": root / "spec"}


@pytest.fixture
def eqben_out(made: dict[str, Path], tmp_path: Path) -> Path:
    """A fresh copy of six EqBen pairs (``all_select.json``, ``metadata.json``, ``images/``), no sheet yet."""
    return Path(shutil.copytree(made["eqben"], tmp_path / "eqben"))


@pytest.fixture
def spec_out(made: dict[str, Path], tmp_path: Path) -> Path:
    """A fresh copy of two SPEC sets (count, relative_spatial), no sheet yet."""
    return Path(shutil.copytree(made["spec"], tmp_path / "spec"))
