"""Plan files (``spotdiff run PLAN.yaml``): parsing, errors naming file/stage/field, resumption, overrides."""

from __future__ import annotations

import textwrap
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
