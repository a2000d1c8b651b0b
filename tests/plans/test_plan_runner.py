"""The plan runner: stages of ordinary spotdiff commands in forked workers, resumable by fingerprint."""

from __future__ import annotations

import json
import os
import subprocess
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


def _run_script(script: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run a written plan script with a ``spotdiff`` on the PATH that does nothing (so only what the script
    itself says runs)."""
    stub = tmp_path / "bin" / "spotdiff"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)


def test_a_title_with_a_line_break_never_becomes_a_line_of_the_script(tmp_path: Path) -> None:
    """Issue 44: a stage title ``"list runs\ntouch PWNED"`` was a line of plan_commands.sh, run with it. Every
    comment of the script is one line, its control characters written as escapes."""
    stages = [Stage("list", "list runs\ntouch PWNED\r\u2028`x`", [["runs", "--store", "a b.sqlite"]], [])]
    script = write_commands(stages, tmp_path / "plan_commands.sh", title="plan 'x'\ntouch PWNED2")
    done = _run_script(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()
    text = script.read_text()
    assert "# list: list runs\\ntouch PWNED\\r\\u2028`x`\n" in text and "# plan 'x'\\ntouch PWNED2\n" in text


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


def test_a_password_in_a_command_is_not_logged_nor_recorded(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A plan's command naming a served model with a password in its URL: the stage's log line and its
    record name the model without it (the command itself gets it). Issue 44: given with ``--set``, it was
    written into plan_commands.sh (``--dry-run`` too) and printed in the stage's console line."""
    spec = "api:m@http://alice:s3cret@gpu1:8000/v1"
    stage = Stage("served", "a served model", [["eval", "--model", spec]], [])
    records = Runner(tmp_path, [stage], run_command=lambda argv: 0, workers=1, echo=print).run()
    assert records["served"]["commands"] == [["eval", "--model", "api:m@http://gpu1:8000/v1"]]
    written = (tmp_path / "logs" / "served.log").read_text() + (tmp_path / "stages" / "served.json").read_text()
    assert "spotdiff eval --model api:m@http://gpu1:8000/v1" in written and "s3cret" not in written
    plan = tmp_path / "study" / "plan.yaml"
    plan.parent.mkdir()
    plan.write_text("vars: {url: 'http://gpu1:8000/v1'}\nstages: [{name: s, run: 'eval --model api:m@{url} --help'}]\n")
    password = ["--set", "url=http://alice:s3cret@gpu1:8000/v1"]
    assert main(["run", str(plan), *password, "--dry-run"]) == 0
    assert main(["run", str(plan), *password, "--workers", "1"]) == 0  # the stage prints eval's --help
    said = capsys.readouterr()
    assert said.out.count("spotdiff eval --model api:m@http://gpu1:8000/v1 --help") == 2  # the script, the run
    assert "usage: spotdiff eval" in (plan.parent / "logs" / "s.log").read_text()
    for text in [*(p.read_text() for p in plan.parent.rglob("*") if p.is_file()), said.out, said.err]:
        assert "s3cret" not in text and "alice" not in text


def _captions(root: Path) -> Path:
    """Four coloured squares with their captions (captions.jsonl) and the tiny test tokenizer."""
    from PIL import Image

    from spotdiff.testing.tiny_models import make_tiny_tokenizer

    (root / "img").mkdir(parents=True)
    lines = []
    colours = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220), "yellow": (230, 220, 20)}
    for name, rgb in colours.items():
        Image.new("RGB", (32, 32), rgb).save(root / "img" / f"{name}.png")
        lines.append(json.dumps({"image": f"img/{name}.png", "caption": f"a {name} square"}))
    (root / "captions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    make_tiny_tokenizer(root / "tokenizer", max_length=32)
    return root


def _step(line: str) -> int:
    return json.loads(line)["step"]


def test_an_interrupted_train_stage_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """Issue 22: re-running an interrupted plan kept nothing of a train stage (checkpoints included).

    The first run's train stops after a checkpoint at step 2 and the stage fails, as an interrupted
    one does; the second run keeps the checkpoint and continues from it (``--resume``)."""
    from spotdiff.errors import SpotdiffError

    data = _captions(tmp_path / "data")
    argv = ["train", "--from-config", "tiny", "--tokenizer", str(data / "tokenizer"), "--captions",
            str(data / "captions.jsonl"), "--steps", "4", "--batch-size", "4", "--device", "cpu",
            "--out", "model"]  # fmt: skip
    stage = Stage("train", "a tiny training", [argv], ["model"])
    out = tmp_path / "study"

    def interrupted(cmd: list[str]) -> int:
        main([*cmd, "--stop-after", "2"])  # writes checkpoint-0000002, then the stage fails
        return 130

    with pytest.raises(SpotdiffError, match="stage train failed"):
        Runner(out, [stage], run_command=interrupted, workers=1, echo=print).run()
    marker = out / "model" / "checkpoint-0000002" / "COMPLETE"
    assert marker.is_file()
    first_log = (out / "model" / "train_log.jsonl").read_text().splitlines()
    assert [_step(line) for line in first_log] == [1, 2]
    written = marker.stat().st_mtime_ns

    Runner(out, [stage], run_command=main, workers=1, echo=print).run()
    assert marker.is_file() and marker.stat().st_mtime_ns == written  # the checkpoint survived
    log = (out / "model" / "train_log.jsonl").read_text().splitlines()
    assert log[:2] == first_log and [_step(line) for line in log] == [1, 2, 3, 4]
    text = (out / "logs" / "train.log").read_text()
    assert "--out model --resume" in text and "resumed from" in text and "at step 2" in text
    assert (out / "model" / "model.safetensors").is_file() and (out / "stages" / "train.json").is_file()
    assert not (out / "stages" / "train.started").exists()


def test_a_stage_that_cannot_resume_starts_afresh(tmp_path: Path) -> None:
    """A stage whose commands cannot resume (synth) still has its outputs removed before it reruns."""
    stage = Stage("corpus", "a corpus", [["synth", "corpus", "--out", "c", "--n", "2", "--image-size", "32"]], ["c"])
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "stale.txt").write_text("x")
    (tmp_path / "stages").mkdir()
    runner = Runner(tmp_path, [stage], run_command=main, workers=1, echo=print)
    runner.prints["corpus"] = stage.fingerprint({})
    (tmp_path / "stages" / "corpus.started").write_text(runner.prints["corpus"])
    assert not runner.resumes(stage)
    runner.run()
    assert not (tmp_path / "c" / "stale.txt").exists() and (tmp_path / "c" / "captions.jsonl").is_file()


def test_an_interrupted_train_without_a_checkpoint_starts_afresh(tmp_path: Path) -> None:
    """Nothing to resume from (no complete checkpoint in the train's --out): the stage's outputs are removed."""
    stage = Stage("t", "a training", [["train", "--steps", "4", "--out", "m"], ["eval", "--out", "e"]], ["m", "e"])
    runner = Runner(tmp_path, [stage], run_command=main, workers=1, echo=print)
    runner.prints["t"] = stage.fingerprint({})
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "t.started").write_text(runner.prints["t"])
    (tmp_path / "m" / "checkpoint-0000002").mkdir(parents=True)  # incomplete: no COMPLETE marker
    assert not runner.resumes(stage)
    (tmp_path / "m" / "checkpoint-0000002" / "COMPLETE").write_text("2\n")
    assert runner.resumes(stage)
    runner.resuming.add("t")
    assert runner._command(stage, 0) == ["train", "--steps", "4", "--out", "m", "--resume"]
    assert runner._command(stage, 1) == ["eval", "--out", "e"]


def _write(argv: list[str]) -> int:
    """A stage "command" ``["write", FILE, ...]`` (run in the forked worker, in the plan's folder): writes
    each FILE, holding its name."""
    for name in argv[1:]:
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(name)
    return 0


def test_outputs_holding_files_no_stage_wrote_are_refused_and_kept(tmp_path: Path) -> None:
    """Issue 32: a plan's first run deleted the files a user had in a folder it names as an output
    (``outputs: [mydata]`` removed ``mydata/keep.txt``); it is refused, naming them, and nothing runs."""
    keep = tmp_path / "mydata" / "keep.txt"
    keep.parent.mkdir()
    keep.write_text("mine")
    first = Stage("first", "runs before", [["write", "first.txt"]], ["first.txt"])
    stage = Stage("data", "writes mydata", [["write", "mydata/a.txt", "mydata/sub/b.txt"]], ["mydata"], deps=("first",))
    with pytest.raises(ConfigError, match=r"stage data: its outputs in .* hold files no stage of this plan wrote "
                       r"\(mydata/keep\.txt\), which running it would delete"):  # fmt: skip
        Runner(tmp_path, [first, stage], run_command=_write, workers=1, echo=print).run()
    assert keep.read_text() == "mine" and not (tmp_path / "first.txt").exists()  # refused before anything ran

    keep.unlink()
    Runner(tmp_path, [first, stage], run_command=_write, workers=1, echo=print).run()
    record = json.loads((tmp_path / "stages" / "data.json").read_text())
    assert record["files"] == ["mydata/a.txt", "mydata/sub/b.txt"]

    changed = Stage("data", "writes mydata", [["write", "mydata/c.txt"]], ["mydata"], deps=("first",))
    Runner(tmp_path, [first, changed], run_command=_write, workers=1, echo=print).run()
    assert sorted(p.name for p in (tmp_path / "mydata").rglob("*.txt")) == ["c.txt"]  # its own files went

    notes = tmp_path / "mydata" / "notes.txt"
    notes.write_text("added by hand")  # after the stage ran: no stage wrote it
    with pytest.raises(ConfigError, match=r"\(mydata/notes\.txt\)"):
        Runner(tmp_path, [first, stage], run_command=_write, workers=1, echo=print).run()
    assert notes.read_text() == "added by hand" and (tmp_path / "mydata" / "c.txt").is_file()


def test_a_record_without_its_file_list_vouches_for_its_outputs(tmp_path: Path) -> None:
    """A stage record written before records listed their files (an earlier spotdiff) still lets the stage
    rerun into its outputs."""
    stage = Stage("data", "writes mydata", [["write", "mydata/b.txt"]], ["mydata"])
    (tmp_path / "mydata").mkdir()
    (tmp_path / "mydata" / "a.txt").write_text("old")
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "data.json").write_text(json.dumps({"name": "data", "fingerprint": "older"}))
    Runner(tmp_path, [stage], run_command=_write, workers=1, echo=print).run()
    assert sorted(p.name for p in (tmp_path / "mydata").iterdir()) == ["b.txt"]


def test_the_cli_refuses_a_users_output_folder_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "mydata").mkdir()
    (tmp_path / "mydata" / "keep.txt").write_text("mine")
    plan = tmp_path / "plan.yaml"
    plan.write_text("stages:\n  - name: data\n    run: synth corpus --out mydata --n 2\n    outputs: [mydata]\n")
    assert main(["run", str(plan)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mydata/keep.txt" in err[0] and err[0].startswith("spotdiff run: error: stage data"), err
    assert (tmp_path / "mydata" / "keep.txt").read_text() == "mine"


def test_a_stage_whose_declaration_changed_runs_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46: a plan's stage naming a declared benchmark (its file, or a folder of declarations) was skipped as
    up to date after the declaration changed. The files a stage's commands name are in its fingerprint."""
    from spotdiff.plans.runner import input_digests

    decl = tmp_path / "mine.yaml"
    decl.write_text((Path(__file__).parents[2] / "examples/my-pairs/my-pairs.yaml").read_text())
    folder = tmp_path / "decls"
    folder.mkdir()
    (folder / "other.yaml").write_text(decl.read_text().replace("name: kitchen-pairs", "name: kitchen-other-pairs"))
    stages = [Stage("show", "show it", [["benchmarks", str(decl)]], []),
              Stage("listed", "list them", [["benchmarks", "--include-path", str(folder)]], [])]  # fmt: skip
    Runner(tmp_path / "plan", stages, run_command=main, workers=1, echo=print).run()
    again = Runner(tmp_path / "plan", stages, run_command=main, workers=1, echo=print)
    again.run()
    assert again.skipped == ["show", "listed"]
    for path in (decl, folder / "other.yaml"):
        path.write_text(path.read_text().replace("title: Kitchen", "title: Changed kitchen", 1))
    changed = Runner(tmp_path / "plan", stages, run_command=main, workers=1, echo=print)
    changed.run()
    assert changed.skipped == []
    # a file another stage writes is that stage's (its fingerprint covers it); a file not there is named as such
    digests = input_digests([["eval", "--benchmark=made/x.yaml"], ["benchmarks", "gone.yaml"]], tmp_path,
                            [tmp_path / "made"])  # fmt: skip
    assert digests == {"gone.yaml": "missing"}
