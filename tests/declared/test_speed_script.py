"""The data of ``measurements/declared_speed.py`` (item 8 of issue 46): VL-CheckList's records as the built-in
loader's folder and as one table with its declaration give the same cases, parquet and CSV; and the script runs,
timing both loaders side by side (its figure at VL-CheckList's size: docs/declared.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spotdiff.api import load_benchmark
from spotdiff.benchmarks import get_benchmark
from spotdiff.testing.declarations import CORPUS, write_checklist

SCRIPT = Path(__file__).resolve().parents[2] / "measurements" / "declared_speed.py"


@pytest.mark.parametrize("table", ["parquet", "csv"])
def test_the_table_and_the_corpus_give_the_same_cases(tmp_path: Path, table: str) -> None:
    declaration = write_checklist(tmp_path, 50, table=table, images=7)
    declared = load_benchmark(str(declaration))
    builtin = get_benchmark("vl-checklist")(tmp_path / "vl-checklist", missing_images="keep").load()
    assert len(declared) == len(builtin) == 50
    assert {c.subset for c in declared} == {f.split("/")[0] + "/" + f.split("/")[1] for f, _, _ in CORPUS}
    for d, b in zip(declared, builtin, strict=True):
        assert (d.id, d.texts, d.tags, d.roles, d.truth.tolist()) == (b.id, b.texts, b.tags, b.roles, b.truth.tolist())
        assert d.images[0].path.relative_to(tmp_path / "images") == b.images[0].path.relative_to(
            tmp_path / "vl-checklist" / "images")  # fmt: skip
    assert declared[0].tags is declared[1].tags  # cases with equal tags share one dict, as the built-in's do


def test_the_script_times_both_loaders_side_by_side() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--records", "900", "--repeats", "1"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    lines = out.splitlines()
    assert lines[0].startswith("900 records, median of 1 runs each")
    rows = {ln[:27].strip(): ln[27:].split() for ln in lines[2:]}
    assert list(rows) == ["vl-checklist (built-in)", "declared, parquet table", "declared, csv table"]
    assert all(r[1] == "900" and len(r) == 7 for r in rows.values()) and rows["vl-checklist (built-in)"][5] == "1.00"
