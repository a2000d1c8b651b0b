"""Small synthesis outputs to review (EqBen canvas pairs and SPEC sets), made once and copied per test; a review
started in another process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
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


@pytest.fixture
def review_elsewhere() -> Callable[[Path, str], tuple[str, int, str]]:
    """``spotdiff review OUT --reviewer NAME`` run in another process (another terminal): the function giving its
    first line of output ("" when it served nothing), its exit status and its stderr; a server that starts is
    stopped at once."""

    def run(out: Path, reviewer: str) -> tuple[str, int, str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        argv = [sys.executable, "-m", "spotdiff", "review", str(out), "--reviewer", reviewer]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            first = proc.stdout.readline()
            if first:
                proc.terminate()
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        return first, proc.returncode, err

    return run
