"""The plan runner: stages of ordinary spotdiff commands in forked workers, resumable by fingerprint."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotdiff.commands import main
from spotdiff.errors import ConfigError
from spotdiff.plans.runner import Runner, Stage, _remove, _without_workers, write_commands


def test_without_workers_and_remove(tmp_path: Path) -> None:
    assert _without_workers(["synth", "spec", "--workers", "4", "--n", "2"]) == ["synth", "spec", "--n", "2"]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_text("1")
    _remove(tmp_path, tmp_path / "a")
    assert not (tmp_path / "a").exists()
    with pytest.raises(ConfigError):
        _remove(tmp_path / "a", tmp_path)


def test_write_commands(tmp_path: Path) -> None:
    stages = [Stage("one", "first", [["synth", "spec", "--out", "data/x y"]], ["data/x y"])]
    path = write_commands(stages, tmp_path / "demo_commands.sh", title="the demo's commands")
    text = path.read_text()
    assert "spotdiff synth spec --out 'data/x y'" in text and 'cd "$(dirname "$0")"' in text
    assert os.access(path, os.X_OK)


def test_runner_runs_skips_and_stops_on_failure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Commands run in forked workers; a finished stage is skipped next time; a failure stops the run."""
    from spotdiff.errors import SpotdiffError

    ok = Stage("list", "list benchmarks", [["benchmarks"]], [], collect=lambda out: {"n": 1})
    ok2 = Stage("list2", "list models", [["models"]], [], deps=("list",))
    records = Runner(tmp_path, [ok, ok2], run_command=main, workers=2, echo=print).run()
    assert records["list"]["result"] == {"n": 1} and "list2" in records
    assert "spec" in (tmp_path / "logs" / "list.log").read_text()  # the command's output went to its log
    runner = Runner(tmp_path, [ok, ok2], run_command=main, workers=2, echo=print)
    runner.run()
    assert runner.skipped == ["list", "list2"]
    bad = Stage("bad", "a failing command", [["eval", "--no-such-flag"]], [], deps=("list",))
    after = Stage("after", "never starts", [["models"]], [], deps=("bad",))
    with pytest.raises(SpotdiffError, match="stage bad failed"):
        Runner(tmp_path, [ok, bad, after], run_command=main, workers=2, echo=print).run()
    assert not (tmp_path / "stages" / "bad.json").exists() and not (tmp_path / "stages" / "after.json").exists()
    assert "FAILED" in capsys.readouterr().out
