"""Plan files (``spotdiff run PLAN.yaml``): parsing, errors naming file/stage/field, resumption, overrides."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spotdiff.cli import main
from spotdiff.errors import DataError
from spotdiff.plans.file import dump_plan, load_plan, parse_plan

PLAN = textwrap.dedent(
    """\
    name: tiny study
    vars: {n: 3, seed: 0}
    stages:
      - name: corpus
        title: a small corpus
        run: synth corpus --out data/corpus --n {n} --seed {seed} --image-size 32 --workers 1
        outputs: [data/corpus]
      - name: listing
        after: [corpus]
        run:
          - models
          - benchmarks --suites
    """
)


def test_parse_substitutes_vars_and_keeps_order() -> None:
    plan = parse_plan(PLAN, source="study.yaml", overrides={"n": "5"})
    assert plan.name == "tiny study" and [s.name for s in plan.stages] == ["corpus", "listing"]
    assert plan.stages[0].commands == [
        ["synth", "corpus", "--out", "data/corpus", "--n", "5", "--seed", "0", "--image-size", "32", "--workers", "1"]
    ]
    assert plan.stages[1].deps == ("corpus",) and plan.stages[1].commands == [["models"], ["benchmarks", "--suites"]]
    assert plan.vars == {"n": 5, "seed": 0}  # --set keeps the variable's type


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stages: [{name: a, run: models, colour: red}]", r"record stage 1.*unknown keys \['colour'\]"),
        ("stages: [{name: a, run: 'eval --n {missing}'}]", r"record a, field 'run': uses the undefined variable"),
        ("stages: [{name: b, run: models, after: [a]}]", r"record b, field 'after': runs after \['a'\]"),
        ("stages: [{name: a, run: models}, {name: a, run: models}]", r"record a, field 'name': two stages"),
        ("stages: [{name: a, run: []}]", r"record a, field 'run'"),
        ("stages: {a: 1}", r"field 'stages'"),
        ("stages: [ {name: a", r"not valid YAML"),
    ],
)
def test_errors_name_the_file_stage_and_field(text: str, message: str) -> None:
    with pytest.raises(DataError, match=message) as info:
        parse_plan(text, source="bad.yaml")
    assert "file bad.yaml" in str(info.value)


def test_an_unclosed_quote_names_the_file_line_and_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = PLAN.replace("- benchmarks --suites", "- benchmarks --suites 'x")
    with pytest.raises(DataError, match=r"file p.yaml, record listing, field 'run': line 12: No closing quotation "
                       r"in \"benchmarks --suites 'x\"$"):  # fmt: skip
        parse_plan(bad, source="p.yaml")
    single = PLAN.replace("--workers 1", '--workers "1')
    with pytest.raises(DataError, match=r"record corpus, field 'run': line 6: No closing quotation"):
        parse_plan(single, source="p.yaml")
    plan = tmp_path / "p.yaml"
    plan.write_text(bad)
    assert main(["run", str(plan)]) == 2
    err = capsys.readouterr().err
    assert f"file {plan}, record listing, field 'run': line 12: No closing quotation" in err and "Traceback" not in err


def test_a_plan_that_is_not_utf8_is_refused_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    plan = tmp_path / "latin1.yaml"
    plan.write_bytes(PLAN.replace("a small corpus", "a small corpus \u00e9").encode("latin-1"))
    assert main(["run", str(plan)]) == 2
    err = capsys.readouterr().err
    assert f"file {plan}: line 5: not UTF-8 text (byte 0xe9); save the plan as UTF-8" in err
    assert "Traceback" not in err


def test_unknown_override_is_refused() -> None:
    with pytest.raises(DataError, match="no variable 'steps'"):
        parse_plan(PLAN, overrides={"steps": "3"})


def test_dump_round_trips() -> None:
    plan = parse_plan(PLAN)
    again = parse_plan(dump_plan(plan.name, plan.stages))
    assert [(s.name, s.commands, s.outputs, s.deps) for s in again.stages] == [
        (s.name, s.commands, s.outputs, s.deps) for s in plan.stages
    ]


def test_run_resumes_and_reruns_what_a_changed_var_touches(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    plan = tmp_path / "study.yaml"
    plan.write_text(PLAN, encoding="utf-8")
    assert main(["run", str(plan), "--workers", "1"]) == 0
    assert (tmp_path / "data" / "corpus" / "captions.jsonl").is_file()
    assert "2 stages ran, 0 up to date" in capsys.readouterr().out
    assert main(["run", str(plan), "--workers", "1"]) == 0
    assert "0 stages ran, 2 up to date" in capsys.readouterr().out
    assert main(["run", str(plan), "--workers", "1", "--set", "n=4"]) == 0  # corpus changes, so does what follows
    assert "2 stages ran, 0 up to date" in capsys.readouterr().out
    lines = (tmp_path / "data" / "corpus" / "captions.jsonl").read_text().splitlines()
    assert len(lines) == 4
    assert main(["run", str(plan), "--dry-run"]) == 0
    assert "spotdiff synth corpus --out data/corpus --n 3" in capsys.readouterr().out
    assert load_plan(plan).stages[0].outputs == ["data/corpus"]


@pytest.mark.parametrize(("quick", "seed", "workers"), [(True, 0, 2), (False, 5, 1)])
def test_the_demo_plan_file_is_the_demo(quick: bool, seed: int, workers: int) -> None:
    """The bundled plan with a profile's vars gives exactly the demo's stages (commands, order, fingerprints)."""
    from spotdiff.demo import DemoConfig, plan
    from spotdiff.demo.plan import plan_file, plan_vars

    config = DemoConfig(quick=quick, seed=seed, workers=workers)
    printed = parse_plan(plan_file(config))
    assert printed.vars == plan_vars(config)
    demo = plan(config)
    assert [(s.name, s.commands, s.outputs, s.deps) for s in printed.stages] == [
        (s.name, s.commands, s.outputs, s.deps) for s in demo
    ]
    a: dict[str, str] = {}
    b: dict[str, str] = {}
    for x, y in zip(printed.stages, demo, strict=True):
        a[x.name], b[y.name] = x.fingerprint(a), y.fingerprint(b)
    assert a == b
    seeds = [c for s in demo for cmd in s.commands for c in cmd if c.startswith("--seed")]
    assert seeds  # the data sets' seeds follow the demo's seed
    assert f"--seed {seed + 1}" in " ".join(" ".join(c) for c in demo[1].commands)


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux ``/proc``)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.is_file() else []


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a process's children in /proc")
def test_sigterm_stops_the_running_stage(tmp_path: Path) -> None:
    """Issue 22: SIGTERM (kill, Slurm, docker stop) to `spotdiff run` left its running stage orphaned; it
    stops the stage's command, leaves the stage unfinished and exits non-zero with one clear line."""
    plan = tmp_path / "long.yaml"
    plan.write_text(
        "name: long\nstages:\n  - name: long\n    run: synth corpus --out big --n 1000000 --image-size 32 --workers 1\n"
        "    outputs: [big]\n",
        encoding="utf-8",
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"), env.get("PYTHONPATH", "")])
    log = tmp_path / "logs" / "long.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spotdiff", "run", str(plan), "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    children: list[int] = []
    try:
        # the stage's process exists once it has written its command line into the stage's log
        started = lambda: proc.poll() is not None or (log.is_file() and "$ spotdiff" in log.read_text())  # noqa: E731
        _wait_until(started, 120, "the stage")
        assert proc.poll() is None, proc.communicate()
        children = _children(proc.pid)
        assert children
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
        _wait_until(lambda: not any(_alive(c) for c in children), 30, "the stage's process to stop")
    finally:
        for pid in [p for p in children if _alive(p)] + ([proc.pid] if proc.poll() is None else []):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=30)
    assert proc.returncode == 143, (out, err)
    assert "spotdiff run: terminated (SIGTERM)" in err and "Traceback" not in err
    assert "long" in out and "stopped; unfinished" in out
    assert (tmp_path / "stages" / "long.started").is_file() and not (tmp_path / "stages" / "long.json").exists()
