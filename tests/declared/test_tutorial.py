"""docs/declared.md's ten-minute tutorial as written: its CSV and declaration are examples/my-pairs/'s files, and
its commands (with a tiny CLIP for the real one) show the benchmark, evaluate it and give what a citation needs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from spotdiff.cli import main
from spotdiff.testing.tiny_models import make_tiny_clip, tiny_images

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "my-pairs"


def _blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page, flags=re.S)


def test_the_pages_files_are_the_examples() -> None:
    page = (ROOT / "docs" / "declared.md").read_text(encoding="utf-8")
    assert _blocks(page, "csv")[0] == (EXAMPLE / "pairs.csv").read_text(encoding="utf-8")
    assert _blocks(page, "yaml")[0] == (EXAMPLE / "my-pairs.yaml").read_text(encoding="utf-8")


def test_from_a_csv_to_a_cited_number(tmp_path: Path, monkeypatch, capsys) -> None:
    folder = Path(shutil.copytree(EXAMPLE, tmp_path / "my-pairs"))
    names = [line.split(",")[0] for line in (folder / "pairs.csv").read_text().splitlines()[1:]]
    (folder / "photos").mkdir()
    for name, image in zip(names, tiny_images(len(names), size=32), strict=True):
        image.save(folder / "photos" / name)
    monkeypatch.chdir(folder)
    assert main(["benchmarks", "my-pairs.yaml", "--citation"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("kitchen-pairs\n") and "@inproceedings{doe2026kitchen," in shown
    clip = make_tiny_clip(tmp_path / "clip")
    args = ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "my-pairs.yaml", "--out", "results/", "--no-store",
            "--no-cache", "--workers", "0", "--n-boot", "100"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "kitchen-pairs" in printed and all(s in printed for s in ("swap", "count", "colour"))
    metrics = json.loads((folder / "results" / "metrics.json").read_text())
    cited = metrics["metrics"]["all"]
    assert set(cited) >= {"accuracy", "accuracy_ci95"} and metrics["n_cases"] == 6
    assert metrics["declaration"]["path"] == str(folder / "my-pairs.yaml") and metrics["model_identity"]
    assert metrics["data"]["digest"] and metrics["version"]
