"""Plan files (``spotdiff run PLAN.yaml``): parsing, errors naming file/stage/field, resumption, overrides."""

from __future__ import annotations

import os
import re
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


def test_a_title_with_a_line_break_is_refused_naming_the_stage(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 44: a title is one line of text (it becomes a comment line of plan_commands.sh and a console line)."""
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN.replace("title: a small corpus", 'title: "list runs\\ntouch PWNED"'), encoding="utf-8")
    assert main(["run", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"file {plan}, record corpus, field 'title': " in err[0], err
    assert "a control character ('\\n')" in err[0] and not (tmp_path / "plan_commands.sh").exists()
    assert not (tmp_path / "PWNED").exists()


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


def _bomb(levels: int, word: str = "lol") -> str:
    """A plan whose variable ``bomb`` expands to ``10 ** levels`` copies of ``word`` through anchors nesting
    anchors, and whose command uses it."""
    lines = ["vars:", f"  l0: &l0 {word}"]
    for k in range(1, levels + 1):
        lines.append(f"  l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 10)}]")
    lines += [f"  bomb: *l{levels}", "stages:", "  - name: a", "    run: models --x {bomb}"]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_load_in_bounded_memory(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 32: anchors nesting anchors (a YAML "alias bomb") took gigabytes in ``--dry-run``; the plan's
    size with its aliases expanded is bounded before it is built."""
    import tracemalloc

    # l0 counts 1 + 120, l_k 1 + 10 l_(k-1) (l4: 1,211,111), vars 1 + 20 for its keys + l0..l4 + bomb (= l4),
    # the whole plan 1 + 5 ("vars") + 2,556,797 + 7 ("stages") + 31 (the stage)
    with pytest.raises(DataError, match=r"file b.yaml: expands to 2,556,841 characters and nodes with its aliases"):
        parse_plan(_bomb(4, "lol" * 40), source="b.yaml")  # without the bound: a command line of 1.2 MB
    plan = tmp_path / "bomb.yaml"
    plan.write_text(_bomb(9))  # 10**9 strings
    tracemalloc.start()
    try:
        assert main(["run", str(plan), "--dry-run"]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"file {plan}: expands to" in err[0] and "MAX" not in err[0], err
    assert peak < 20e6, peak
    assert parse_plan(_bomb(2), source="ok.yaml").vars["bomb"][9] == ["lol"] * 10  # a few aliases are fine


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ("models {v:>2000000}", r"\{v:>2000000\}: a format wider or more precise than 1000 characters"),
        ("models {v:.2000000f}", r"\{v:.2000000f\}: a format wider or more precise than 1000 characters"),
        ("models {v:{w}}", r"\{v:\{w\}\}: a format cannot hold a \{variable\}"),
        ("models {v.__class__}", r"\{v.__class__\}: a variable is named by letters, digits and '_'"),
        ("models " + "{big}" * 30, r"builds more than 1,000,000 characters with its variables in place"),
    ],
)
def test_substitution_cannot_build_strings_beyond_a_bound(run: str, message: str, tmp_path: Path, capsys) -> None:
    """Issue 44: a plan of 102 bytes (``{v:>1500000000}``) took a gigabyte under ``--dry-run``; a format spec,
    like a YAML alias, cannot make a plan larger than :data:`spotdiff.plans.file.MAX_EXPANDED`."""
    import tracemalloc

    plan = tmp_path / "p.yaml"
    plan.write_text(f"vars: {{v: 1.5, w: 9, big: {'x' * 40_000}}}\nstages: [{{name: a, run: '{run}'}}]\n")
    assert main(["run", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(rf"file {re.escape(str(plan))}, record a, field 'run': {message}", err[0]), err
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match=message):
            load_plan(plan)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10e6, peak
    ok = parse_plan("vars: {lr: 0.0005, n: 7}\nstages: [{name: a, run: 'train --lr {lr:.0e} --n {n:03d} {n!r}'}]\n")
    assert ok.stages[0].commands == [["train", "--lr", "5e-04", "--n", "007", "7"]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("vars: {a: &a [*a]}\nstages: [{name: a, run: models}]\n", r"line 1: an alias \(\*name\) inside the node"),
        ("stages: [{name: a, run: models, params: &p {x: *p}}]\n", r"line 1: an alias \(\*name\) inside the node"),
        ("vars: {a: " + "[" * 5000 + "]" * 5000 + "}\n", r"nested too deeply to read"),
    ],
)
def test_recursive_and_deeply_nested_plans_are_one_error(text: str, message: str) -> None:
    with pytest.raises(DataError, match=rf"^file r.yaml: {message}"):
        parse_plan(text, source="r.yaml")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("evl --model m", r"spotdiff has no sub-command 'evl'; it has benchmarks, .*, eval, "),
        ("synth spc --out x", r"spotdiff synth has no sub-command 'spc'; it has .*spec"),
        ("-v demo --out d tokenise --captions c", r"spotdiff demo has no sub-command 'tokenise'"),
        ("--workers 2", r"names no spotdiff sub-command"),
    ],
)
def test_an_unknown_sub_command_is_refused_at_load(
    command: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 32: a stage naming an unknown sub-command was found only when the stage started (``--dry-run``
    accepted it)."""
    plan = tmp_path / "p.yaml"
    plan.write_text(
        f"stages:\n  - name: ok\n    run: models\n  - name: bad\n    run:\n      - models\n      - {command}\n"
    )
    assert main(["run", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert re.match(rf"spotdiff run: error: file {re.escape(str(plan))}, record bad, field 'run': line 7: {message}",
                    err[0]), err  # fmt: skip


def test_plans_that_run_themselves_are_refused_at_load(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 32: a plan whose stage runs the plan itself recursed until a RecursionError traceback; that and
    longer cycles (a runs b, b runs a, in b's own folder) are refused before anything runs."""
    own = tmp_path / "self.yaml"
    own.write_text("stages:\n  - name: again\n    run: run self.yaml --workers 1\n")
    assert main(["run", str(own), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"spotdiff run: error: file {own}, record again, field 'run': runs the plan {own}, which is "
                   f"running already ({own} -> {own}); a plan cannot run itself"]  # fmt: skip
    a, b = tmp_path / "a.yaml", tmp_path / "sub" / "b.yaml"
    b.parent.mkdir()
    a.write_text("stages:\n  - name: to-b\n    run: run --out elsewhere sub/b.yaml --set n=2\n")
    b.write_text("vars: {n: 1}\nstages:\n  - name: to-a\n    run: run ../a.yaml --out {n}\n")
    assert main(["run", str(a), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"file {b}, record to-a, field 'run': runs the plan {a}" in err[0], err
    assert f"({a} -> {b} -> {a})" in err[0] and not (tmp_path / "logs").exists()
    b.write_text("vars: {n: 1}\nstages:\n  - name: listing\n    run: models\n")  # no cycle: accepted
    assert main(["run", str(a), "--dry-run"]) == 0
