"""A declared benchmark has what a built-in has (item 5 of issue 46): `spotdiff benchmarks FILE` in the same form,
`spotdiff eval --benchmark FILE` with the declaration's content digest and the data's identity recorded (run store,
metrics.json, the run configuration owning --out), a folder of declarations by --include-path and
$SPOTDIFF_INCLUDE_PATH, grids with --models, reports, the Python API, the cache (shared with the built-in reading
the same images and texts), and sharded runs under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotdiff.api import evaluate, load_model
from spotdiff.cli import main
from spotdiff.diagnose.store import RunStore
from spotdiff.testing.formats import write_sugarcrepe

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "benchmarks"
QUIET = ["--no-cache", "--n-boot", "20", "--workers", "0", "--quiet"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    from spotdiff.testing.tiny_models import make_tiny_clip

    return f"hf-clip:{make_tiny_clip(tmp_path_factory.mktemp('clip') / 'clip')}"


def test_benchmarks_shows_a_declaration_as_it_shows_a_builtin(declare, capsys) -> None:
    path = declare(reproduces="Table 1", ties="strict: the caption must beat its change")
    assert main(["benchmarks", "sugarcrepe"]) == 0
    builtin = capsys.readouterr().out.splitlines()
    assert main(["benchmarks", str(path), "--citation"]) == 0
    declared = capsys.readouterr().out.splitlines()
    assert (declared[0], builtin[0]) == ("my-pairs", "sugarcrepe")
    for label in ("paper: ", "reference: ", "licence: ", "main score: ", "protocols: ", "ties (--ties): ",
                  "metrics (what each reproduces):", "data layout:"):  # fmt: skip
        assert [ln for ln in declared if ln.startswith("    " + label)], label
        assert [ln for ln in builtin if ln.startswith("    " + label)], label
    assert "    main score: accuracy (i2t-top1); reproduces Table 1" in declared
    assert any(ln.startswith(f"      declared in {path} (sha256 ") for ln in declared)
    assert declared[-2] == "    @misc{mine, title={My pairs}}"


def test_a_run_records_the_declaration_and_the_data(declare, pairs, clip, tmp_path, capsys) -> None:
    """The declaration's file and content digest (store, metrics.json), the data's digest; an edited declaration
    is another run, refused in the same --out unless --overwrite."""
    path, out, store = declare(), tmp_path / "out", tmp_path / "runs.sqlite"
    args = ["eval", "--model", clip, "--benchmark", str(path), "--out", str(out), "--store", str(store), *QUIET]
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    from spotdiff.benchmarks.declaration import read_declaration

    digest = read_declaration(path).sha256
    assert metrics["benchmark"] == "my-pairs" and metrics["declaration"] == {
        "name": "my-pairs", "path": str(path), "sha256": digest}  # fmt: skip
    assert metrics["run_config"]["declaration"] == digest and len(metrics["data"]["digest"]) == 64
    assert metrics["data"]["path"] == str(pairs) and set(metrics["metrics"]) >= {"all", "swap", "count", "colour"}
    with RunStore(store) as runs:
        (run,) = runs.runs()
        assert run.info["declaration"]["sha256"] == digest and run.data_digest == metrics["data"]["digest"]
    declare(title="My pairs, second edition")
    assert main(args) == 2
    assert "belongs to another run (declaration: " in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0


def test_a_folder_of_declarations_by_option_and_environment(declare, pairs, tmp_path, monkeypatch, capsys) -> None:
    import shutil

    folder = tmp_path / "mine"
    shutil.copytree(pairs, folder)
    (folder / "pairs.yaml").write_text(declare().read_text())
    assert main(["benchmarks", "my-pairs"]) == 2
    assert "unknown benchmark 'my-pairs'" in capsys.readouterr().err
    assert main(["benchmarks", "--include-path", str(folder), "my-pairs"]) == 0
    assert f"declared in {folder / 'pairs.yaml'}" in capsys.readouterr().out
    monkeypatch.setenv("SPOTDIFF_INCLUDE_PATH", str(folder))
    assert main(["benchmarks"]) == 0
    assert "\nmy-pairs\n" in capsys.readouterr().out
    from spotdiff.api import load_benchmark

    assert load_benchmark("my-pairs").loader.root == folder  # its data where its declaration is


def test_a_grid_a_report_and_the_cache_shared_with_the_builtin(clip, tmp_path, capsys) -> None:
    """One --models grid of the built-in SugarCrepe and its declaration on the same files: equal main metrics, one
    report of both, and the declaration's run computes nothing (every image and text cached by content)."""
    data = write_sugarcrepe(tmp_path / "sc", n=2)
    models = tmp_path / "models.txt"
    models.write_text(f"{clip}  # the tiny CLIP\n")
    decl, store, report = str(EXAMPLES / "sugarcrepe.yaml"), tmp_path / "runs.sqlite", tmp_path / "report"
    args = ["eval", "--models", str(models), "--benchmark", "sugarcrepe", "--benchmark", decl, "--data",
            f"sugarcrepe={data}", "--data", f"{decl}={data}", "--store", str(store), "--cache", str(tmp_path / "c"),
            "--n-boot", "20", "--workers", "0", "--quiet", "--report", str(report)]  # fmt: skip
    assert main(args) == 0
    table = capsys.readouterr().out
    row = next(ln for ln in table.splitlines() if ln.startswith("hf-clip:"))
    cells = [c.strip() for c in row.split("  ") if c.strip()][1:]
    assert len(cells) == 2 and cells[0] == cells[1]  # the same accuracy and interval
    with RunStore(store) as runs:
        by_name = {r.benchmark: r for r in runs.runs()}
    assert by_name["sugarcrepe"].metrics == by_name["sugarcrepe-declared"].metrics
    assert by_name["sugarcrepe"].info["engine"]["computed"] > 0
    assert by_name["sugarcrepe-declared"].info["engine"]["computed"] == 0
    html = (report / "report.html").read_text(encoding="utf-8")
    assert html.index('id="bench-sugarcrepe-declared"') < html.rindex("next to a")  # its cases' texts in its section


def test_the_python_api_takes_a_declaration(declare, clip) -> None:
    model = load_model(clip, device="cpu")
    result = evaluate(model, str(declare()), use_store=False, cache=None, n_boot=0, workers=0, progress=False)
    assert result.benchmark == "my-pairs" and result.n_cases == 6
    assert result.run.run_config["declaration"] == result.run.run_config["declaration"].lower()


@pytest.mark.slow
def test_torchrun_shards_a_declared_benchmark(clip, tmp_path) -> None:
    """``torchrun --nproc_per_node 2 -m spotdiff eval --benchmark FILE``: every rank reads the declaration, and the
    sharded run's metrics equal one process's."""
    data = write_sugarcrepe(tmp_path / "sc", n=2)
    common = ["eval", "--model", clip, "--benchmark", str(EXAMPLES / "sugarcrepe.yaml"), "--data", str(data),
              "--device", "cpu", "--n-boot", "50", "--no-store", "--quiet"]  # fmt: skip
    assert main([*common, "--cache", str(tmp_path / "c1"), "--out", str(tmp_path / "single")]) == 0
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "error",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
    sharded_args = [*common, "--cache", str(tmp_path / "c2"), "--out", str(tmp_path / "sharded")]
    proc = subprocess.run([*launch, "-m", "spotdiff", *sharded_args], capture_output=True, text=True, timeout=900,
                          env=env, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    single, sharded = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("single", "sharded"))
    assert single["metrics"] == sharded["metrics"] and sharded["declaration"] == single["declaration"]
