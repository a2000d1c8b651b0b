"""One evaluation run (:mod:`spotdiff.diagnose.runner`): choosing the protocol, streaming cases, batch
sizes, what makes two runs the same run, output-folder claims, and the recorder that writes a run's
store rows and files, checked on hand-made score matrices."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from spotdiff import jsonio
from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import Case
from spotdiff.diagnose.recorder import RUN_MARKER, EvalConfig, RunRecorder, claim_out_dir, run_config
from spotdiff.diagnose.runner import resolve_protocol, set_batch_size, stream_cases
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import get_protocol
from spotdiff.scorers import ScorerOptions
from spotdiff.testing.formats import write_spec, write_winoground

RIGHT = np.array([[2.0, 0.0], [0.0, 2.0]])  # both texts and both images matched: text, image, group correct
WRONG = RIGHT[:, ::-1].copy()  # every match swapped: all three wrong


@pytest.fixture
def wino(tmp_path: Path) -> tuple[Path, list[Case]]:
    data = write_winoground(tmp_path / "wino", n=4)
    return data, get_benchmark("winoground")(data).load()


def test_resolve_protocol_by_name_short_name_and_capabilities(caplog: pytest.LogCaptureFixture) -> None:
    visla = get_benchmark("visla-generic")
    assert resolve_protocol(visla, None).name == "visla-i2t"  # no model yet: the first protocol
    with caplog.at_level(logging.INFO):
        served = resolve_protocol(visla, None, frozenset({"text-text"}))
    assert served.name == "visla-t2t" and "--protocol not given: using visla-t2t" in caplog.text
    assert resolve_protocol(visla, None, frozenset({"nothing"})).name == "visla-i2t"  # none served: the first
    assert resolve_protocol(visla, "t2t").name == "visla-t2t"  # the short name
    argmax = resolve_protocol(get_benchmark("winoground"), "group", ties="argmax")
    assert (argmax.name, argmax.ties) == ("group", "argmax")
    with pytest.raises(ConfigError, match="benchmark 'visla-generic' does not support protocol 'group'; supported: "
                       "visla-i2t, visla-t2t"):  # fmt: skip
        resolve_protocol(visla, "group")


def test_stream_cases_limits_and_refuses_repeated_ids(wino) -> None:
    _, cases = wino
    bench = SimpleNamespace(root=Path("/bench"), confined_cases=lambda subset: iter(cases))
    assert [c.id for c in stream_cases(bench, None, 2)] == [c.id for c in cases[:2]]
    assert len(list(stream_cases(bench, None, None))) == 4
    bench.confined_cases = lambda subset: iter([*cases[:2], cases[0]])
    stream = stream_cases(bench, None, None)
    assert [next(stream).id, next(stream).id] == [cases[0].id, cases[1].id]  # streamed before the repeat
    with pytest.raises(DataError, match=f"^file /bench, record {cases[0].id}: duplicate case id$"):
        next(stream)


@pytest.mark.parametrize("bad", [0, -2, True, "3", 2.5])
def test_set_batch_size_takes_positive_integers(bad: object) -> None:
    scorer = SimpleNamespace(options=ScorerOptions())
    set_batch_size(scorer, 7, None)
    assert scorer.options.batch_size == 7
    with pytest.raises(ConfigError, match=rf"--batch-size must be a positive integer or 'auto', got {bad!r}"):
        set_batch_size(scorer, bad, None)
    assert scorer.options.batch_size == 7


def test_run_config_names_what_changes_results(tmp_path: Path) -> None:
    base = EvalConfig(model="m", benchmark="winoground", data=tmp_path, options={"b": 2, "a": Path("/x")})
    group = get_protocol("group")
    ref = run_config(base, group, "digest")
    assert ref == {"model": "m", "benchmark": "winoground", "data_digest": "digest", "subset": None,
                   "protocol": "group", "ties": "strict", "limit": None, "seed": 0, "n_boot": 1000, "dtype": "auto",
                   "options": {"a": "/x", "b": "2"}, "debias": None}  # fmt: skip
    assert list(ref["options"]) == ["a", "b"]
    same = EvalConfig(model="m", benchmark="winoground", data=tmp_path / "elsewhere", batch_size=3, device="cuda",
                      cache=tmp_path, progress=False, workers=0, options={"a": "/x", "b": "2"})  # fmt: skip
    assert run_config(same, group, "digest") == ref  # where and how fast it ran do not matter
    for change in ({"seed": 1}, {"limit": 5}, {"dtype": "float16"}, {"n_boot": 0}, {"subset": "Object"}):
        changed = EvalConfig(model="m", benchmark="winoground", data=tmp_path, options=base.options, **change)
        assert run_config(changed, group, "digest") != ref, change
    assert run_config(base, get_protocol("group", "argmax"), "digest")["ties"] == "argmax"
    assert run_config(base, group, "other")["data_digest"] == "other"
    assert run_config(base, group, "digest", {"alpha": 0.5})["debias"] == {"alpha": 0.5}


def test_claim_out_dir_resumes_refuses_and_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "out"
    mine, theirs = {"model": "m", "seed": 0}, {"model": "m", "seed": 1}
    claim_out_dir(out, mine)
    assert json.loads((out / RUN_MARKER).read_text()) == mine
    (out / "metrics.json").write_text("{}")
    (out / "scores_raw.jsonl").write_text("")
    (out / "notes.txt").write_text("mine")
    claim_out_dir(out, mine)  # the same configuration: resumed, its files kept
    assert (out / "metrics.json").is_file()
    with pytest.raises(ConfigError, match=rf"output folder {out} belongs to another run \(seed: 0 there, 1 now\); "
                       "choose another --out, or pass --overwrite"):  # fmt: skip
        claim_out_dir(out, theirs)
    claim_out_dir(out, theirs, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER, "notes.txt"]  # run files gone, others kept
    assert json.loads((out / RUN_MARKER).read_text()) == theirs
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "scores.jsonl").write_text("")
    with pytest.raises(ConfigError, match=r"holds run files \(scores.jsonl\) not written by this configuration"):
        claim_out_dir(bare, mine)


@pytest.mark.parametrize("garbled", ['{"model": "m", "se', "[1, 2]"])
def test_claim_out_dir_names_an_unreadable_claim(tmp_path: Path, garbled: str) -> None:
    """A garbled claim is reported as unreadable, naming the file (not as "another run ... None there")."""
    out = tmp_path / "out"
    out.mkdir()
    (out / RUN_MARKER).write_text(garbled)
    with pytest.raises(ConfigError, match=rf"holds a run's claim {out / RUN_MARKER} that is unreadable") as refused:
        claim_out_dir(out, {"model": "m", "seed": 0})
    assert "None" not in str(refused.value) and "--overwrite" in str(refused.value)
    claim_out_dir(out, {"model": "m", "seed": 0}, overwrite=True)
    assert json.loads((out / RUN_MARKER).read_text()) == {"model": "m", "seed": 0}


def test_recorder_writes_store_rows_and_files_from_hand_matrices(wino, tmp_path: Path) -> None:
    data, cases = wino
    out = tmp_path / "out"
    config = EvalConfig(model="hand", benchmark="winoground", data=data, out=out, n_boot=0, keep_cases=True)
    with RunStore(tmp_path / "runs.sqlite") as store:
        with RunRecorder(config, get_protocol("group"), {"spec": "hand"}, "digest", store=store) as rec:
            for case, matrix in zip(cases, [RIGHT, RIGHT, RIGHT, WRONG], strict=True):
                rec.add_case(case, matrix)
            result = rec.finish({"read": 4}, {"pairs": 16})
        run = store.get(result.run_id)
        units = list(store.units(result.run_id))
    for metric in ("text", "image", "group"):
        assert result.metrics["all"][metric] == pytest.approx(75.0)  # three of four cases right
    assert (result.n_cases, result.protocol, result.load_report, result.engine_stats) == (4, "group", {"read": 4},
                                                                                         {"pairs": 16})  # fmt: skip
    assert run.status == "done" and run.metrics == result.metrics and run.n_cases == 4 and run.model == "hand"
    assert run.info["load_report"] == {"read": 4} and run.info["n_boot"] == 0 and run.info["ties"] == "strict"
    assert sorted(u["case_id"] for u in units) == sorted(c.id for c in cases)
    assert [u["outcomes"]["group"] for u in sorted(units, key=lambda u: u["case_id"])] == [1.0, 1.0, 1.0, 0.0]
    lines = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == [c.id for c in cases] and lines[3]["correct"]["group"] == 0.0
    assert lines[0]["scores"] == RIGHT.tolist()
    written = json.loads((out / "metrics.json").read_text())
    assert written["metrics"] == result.metrics and written["run_id"] == result.run_id
    assert written["run_config"] == result.run_config == json.loads((out / RUN_MARKER).read_text())
    assert [c["id"] for c in result.cases] == [c.id for c in cases] and result.cases[3]["units"][0]["group"] == 0.0
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER, "metrics.json", "scores.jsonl"]


def test_a_cases_json_is_made_once_for_scores_jsonl_and_the_store(tmp_path: Path, monkeypatch) -> None:
    data = write_spec(tmp_path / "spec", n=1, subsets=("count",))
    cases = get_benchmark("spec")(data).load()
    matrices = [np.arange(c.truth.size, dtype=np.float64).reshape(c.truth.shape) / 7 for c in cases]
    made, to_jsonable = [], jsonio.to_jsonable

    def counting(value: object) -> object:
        made.extend(k for k, m in enumerate(matrices) if value is m)
        return to_jsonable(value)

    monkeypatch.setattr(jsonio, "to_jsonable", counting)
    config = EvalConfig(model="hand", benchmark="spec", data=data, out=tmp_path / "out", n_boot=0)
    with RunStore(tmp_path / "runs.sqlite") as store:
        with RunRecorder(config, get_protocol("spec"), {"spec": "hand"}, "digest", store=store) as rec:
            for case, matrix in zip(cases, matrices, strict=True):
                rec.add_case(case, matrix)
            run_id = rec.finish({}, {}).run_id
        units = list(store.units(run_id))
    assert made == list(range(len(cases)))  # each matrix serialised once, though each case has 2K units
    lines = {line["id"]: line for line in map(json.loads, (tmp_path / "out" / "scores.jsonl").read_text().splitlines())}
    assert len(units) == sum(len(line["units"]) for line in lines.values()) == sum(2 * c.truth.shape[0] for c in cases)
    for unit in units:  # the same values in both places
        line = lines[unit["case_id"]]
        assert unit["scores"] == line["scores"] and unit["tags"] == line["tags"]
        assert {"unit": unit["unit_id"], **unit["outcomes"]} in line["units"]


def test_recorder_marks_a_failed_run_and_leaves_no_partial_file(wino, tmp_path: Path) -> None:
    data, cases = wino
    out = tmp_path / "out"
    config = EvalConfig(model="hand", benchmark="winoground", data=data, out=out, n_boot=0)
    with RunStore(tmp_path / "runs.sqlite") as store:
        with (
            pytest.raises(RuntimeError, match="boom"),
            RunRecorder(config, get_protocol("group"), {}, "digest", store=store) as rec,
        ):
            rec.add_case(cases[0], RIGHT)
            raise RuntimeError("boom")
        assert store.get(rec.run_id).status == "failed: RuntimeError: boom"
        with (
            pytest.raises(DataError, match=f"^file {data}: no cases to evaluate$"),
            RunRecorder(config, get_protocol("group"), {}, "digest", store=store) as empty,
        ):
            empty.finish({}, {})
        assert store.get(empty.run_id).status == f"failed: DataError: file {data}: no cases to evaluate"
    assert list(out.iterdir()) == []  # no scores.jsonl, no temporary file, no claim: the folder stays free
    assert rec.cases is None  # keep_cases not asked


def test_recorder_replaces_another_runs_files_only_when_it_succeeds(wino, tmp_path: Path) -> None:
    data, cases = wino
    out = tmp_path / "out"
    first = EvalConfig(model="hand", benchmark="winoground", data=data, out=out, n_boot=0)
    with RunRecorder(first, get_protocol("group"), {}, "digest", store=None) as rec:
        for case in cases:
            rec.add_case(case, RIGHT)
        rec.finish({}, {})
    (out / "scores_raw.jsonl").write_text("{}\n")  # a file of the previous run the next one does not write
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    second = EvalConfig(model="hand", benchmark="winoground", data=data, out=out, n_boot=0, seed=1, overwrite=True)
    with pytest.raises(RuntimeError, match="boom"), RunRecorder(second, get_protocol("group"), {}, "digest",
                                                                store=None) as rec:  # fmt: skip
        rec.add_case(cases[0], WRONG)
        raise RuntimeError("boom")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing removed, the claim unchanged
    with RunRecorder(second, get_protocol("group"), {}, "digest", store=None) as rec:
        for case in cases:
            rec.add_case(case, WRONG)
        result = rec.finish({}, {})
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER, "metrics.json", "scores.jsonl"]
    assert json.loads((out / RUN_MARKER).read_text()) == result.run_config and result.run_config["seed"] == 1
    assert json.loads((out / "metrics.json").read_text())["metrics"]["all"]["group"] == pytest.approx(0.0)


def test_recorder_without_store_or_out_only_computes(wino, tmp_path: Path) -> None:
    data, cases = wino
    config = EvalConfig(model="hand", benchmark="winoground", data=data, n_boot=0, use_store=False)
    with RunRecorder(config, get_protocol("group", "argmax"), {}, "digest", store=None) as rec:
        for case in cases:
            rec.add_case(case, np.zeros((2, 2)))  # all tied: argmax gives the first candidate
        result = rec.finish({}, {})
    assert result.run_id is None and result.metrics["all"]["text"] == pytest.approx(0.0)
    assert result.metrics["all"]["image"] == pytest.approx(0.0) and result.n_cases == 4
