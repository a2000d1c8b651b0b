"""A run whose every value is cached builds no scorer (:mod:`spotdiff.scorers.deferred`): the model is built on
the first cache miss, and only when its files are those it was last loaded from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spotdiff.diagnose import runner
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.scorers import ScorerOptions
from spotdiff.scorers.base import SERVES, TextEmbedding
from spotdiff.scorers.deferred import REMEMBERED, DeferredScorer, recall
from spotdiff.testing.tiny_models import make_tiny_sentence_transformer

ROOT = Path(__file__).resolve().parents[2]


def _visla(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rows = ["filename\tcaption\tsecond positive\tnegative_caption"]
    rows += [
        f"{i:012d}.jpg\ta red cup on table {i}\tthe table {i} has a red cup\ta red cup under table {i}"
        for i in range(n)
    ]
    (root / "Generic_VISLA.tsv").write_text("\r\n".join(rows) + "\r\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_sentence_transformer(tmp_path_factory.mktemp("st") / "st")


def _config(model: Path, tmp_path: Path, data: Path, **kw) -> EvalConfig:
    return EvalConfig(model=f"sentence-transformers:{model}", benchmark="visla-generic", data=data, protocol="t2t",
                      cache=tmp_path / "cache", store=tmp_path / "runs.sqlite", n_boot=20, progress=False,
                      device="cpu", **kw)  # fmt: skip


def test_a_fully_cached_run_builds_no_scorer(model: Path, tmp_path: Path, builds: list[str]) -> None:
    config = _config(model, tmp_path, _visla(tmp_path / "visla", 6))
    first = run_eval(config)
    assert len(builds) == 1 and first.engine_stats["computed"] == 18
    again = run_eval(config)
    assert len(builds) == 1  # nothing missing: the model was never built
    assert again.engine_stats == {"computed": 0, "cached": 18} and again.metrics == first.metrics
    assert again.model_identity == first.model_identity
    with RunStore(config.store) as store:
        info = store.get(again.run_id).info
    assert info["threads"]["torch_threads"] * max(1, info["threads"]["workers"]) <= info["threads"]["cores"]
    # the defaults chosen for this run, recorded with it (issue 47): on the CPU, 32 and not searched, CPU decoding
    assert (info["batch_size"], info["batch_size_auto"], info["gpu_decode"]) == (32, False, False)
    more = run_eval(_config(model, tmp_path, _visla(tmp_path / "visla8", 8)))  # two new cases: built once
    assert len(builds) == 2 and more.engine_stats == {"computed": 6, "cached": 18}


def test_changed_model_files_are_loaded_at_once(model: Path, tmp_path: Path, builds: list[str]) -> None:
    config = _config(model, tmp_path, _visla(tmp_path / "visla", 4))
    run_eval(config)
    config_file = model / "config.json"
    config_file.write_bytes(config_file.read_bytes())  # same bytes, written again: the stamp sees the write
    run_eval(config)
    assert len(builds) == 2


def test_a_model_whose_identity_changed_is_refused_on_a_miss(model: Path, tmp_path: Path, builds: list[str]) -> None:
    run_eval(_config(model, tmp_path, _visla(tmp_path / "visla", 4)))
    remembered = tmp_path / "cache" / REMEMBERED
    records = json.loads(remembered.read_text())
    for record in records.values():
        record["digest"] = "0" * 64  # as if another model had been recorded for these files
    remembered.write_text(json.dumps(records))
    with pytest.raises(ConfigError, match=f"identity differs from the one recorded in {remembered}"):
        run_eval(_config(model, tmp_path, _visla(tmp_path / "visla5", 5)))
    assert len(builds) == 2


def test_a_deferred_scorer_answers_without_building(model: Path, tmp_path: Path) -> None:
    config = _config(model, tmp_path, _visla(tmp_path / "visla", 2))
    real = runner.load_eval_scorer(config)  # loads and remembers
    options = ScorerOptions(device="cpu", dtype="auto", batch_size=7)
    deferred = recall(config.cache, config.model, options, lambda: pytest.fail("built"))
    assert isinstance(deferred, DeferredScorer) and not deferred.built
    assert deferred.identity() == real.identity() and deferred.identity_digest() == real.identity_digest()
    assert deferred.capabilities == real.capabilities and options.batch_size == real.options.batch_size
    assert all(isinstance(deferred, p) for p in SERVES["text-text"]) and isinstance(deferred, TextEmbedding)
    a = np.eye(3, 4, dtype=np.float32)
    np.testing.assert_array_equal(deferred.similarity(a, a), real.similarity(a, a))  # no model needed
    assert recall(tmp_path / "elsewhere", config.model, options, real.__class__) is None
    other = ScorerOptions(device="cpu", dtype="float16")
    assert recall(config.cache, config.model, other, lambda: pytest.fail("built")) is None  # another request


def test_a_warm_cli_run_imports_no_model_library(model: Path, tmp_path: Path) -> None:
    data = _visla(tmp_path / "visla", 5)
    argv = ["eval", "--model", f"sentence-transformers:{model}", "--benchmark", "visla-generic", "--data", str(data),
            "--protocol", "t2t", "--cache", str(tmp_path / "cache"), "--store", str(tmp_path / "runs.sqlite"),
            "--out", str(tmp_path / "out"), "--device", "cpu", "--quiet", "--n-boot", "20"]  # fmt: skip
    code = (
        "import sys\nfrom spotdiff.commands import main\nstatus = main(sys.argv[1:])\n"
        "print('IMPORTED', [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules], status)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    runs = [subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True)
            for _ in range(2)]  # fmt: skip
    imported = [r.stdout.split("IMPORTED", 1)[1].strip() for r in runs]
    assert imported == ["['torch', 'transformers', 'sentence_transformers'] 0", "[] 0"], [r.stderr for r in runs]
