"""What `spotdiff eval --out` records: full precision, provenance, ownership of the folder, ties,
the papers' aggregates; and `spotdiff compare` on two result folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff.cli import main
from spotdiff.diagnose.results import read_result_dir
from spotdiff.diagnose.store import RunStore
from spotdiff.protocols import TESTS
from spotdiff.testing.formats import write_spec
from spotdiff.testing.tiny_models import make_tiny_clip


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("runs")
    return {
        "root": root,
        "data": write_spec(root / "spec", n=3, subsets=("count", "existence")),
        "a": f"hf-clip:{make_tiny_clip(root / 'clip_a', seed=0)}",
        "b": f"hf-clip:{make_tiny_clip(root / 'clip_b', seed=1)}",
    }


def eval_argv(setup: dict, model: str, out: Path, *extra: str) -> list[str]:
    return [
        "eval", "--model", setup[model], "--benchmark", "spec", "--data", str(setup["data"]), "--out", str(out),
        "--store", str(setup["root"] / "runs.sqlite"), "--cache", str(setup["root"] / "cache"), "--n-boot", "100",
        "--quiet", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def two_runs(setup: dict) -> dict:
    outs = {m: setup["root"] / f"out_{m}" for m in ("a", "b")}
    for m, out in outs.items():
        assert main(eval_argv(setup, m, out)) == 0
    return outs


def test_metrics_json_is_full_precision_with_aggregates_and_environment(setup: dict, two_runs: dict) -> None:
    meta = json.loads((two_runs["a"] / "metrics.json").read_text())
    assert meta["ties"] == "strict" and meta["n_boot"] == 100
    assert set(meta["metrics"]) == {"all", "subset_mean", "count", "existence"}
    sub = meta["metrics"]
    assert sub["subset_mean"]["i2t"] == pytest.approx((sub["count"]["i2t"] + sub["existence"]["i2t"]) / 2, abs=1e-12)
    assert meta["aggregates"]["subset_mean"]["mean_of"] == ["count", "existence"]
    with RunStore(setup["root"] / "runs.sqlite") as store:
        run = store.get(meta["run_id"])
    assert run.metrics == meta["metrics"]  # the store and the file hold the same full-precision values
    assert run.info["ties"] == "strict" and run.info["environment"] == meta["environment"]
    env = meta["environment"]
    assert env["packages"]["torch"] and env["packages"]["transformers"] and env["python"].count(".") == 2
    assert env["device"]["type"] == "cpu" and env["device"]["name"]
    assert env["model_hub"] is None and env["data_hub"] is None  # local model and data: no hub revision
    assert meta["run_config"]["ties"] == "strict" and meta["run_config"]["data_digest"] == meta["data"]["digest"]


def test_scores_jsonl_names_units_and_cases(two_runs: dict) -> None:
    run, units = read_result_dir(two_runs["a"])
    assert run.benchmark == "spec" and run.info["ties"] == "strict"
    by_case: dict[str, list[str]] = {}
    for u in units:
        by_case.setdefault(u["case_id"], []).append(u["unit_id"])
    sizes = {len(ids) for ids in by_case.values()}
    assert sizes == {2 * 9, 2 * 2}  # count: 9 x 9 cases, existence: 2 x 2 (one unit per query)
    assert all(uid.startswith(case + "/") for case, ids in by_case.items() for uid in ids)


def test_compare_result_folders_json_schema(two_runs: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(["compare", str(two_runs["a"]), str(two_runs["b"]), "--json", "--n-perm", "500"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert list(payload) == ["comparisons"]
    keys = {"metric", "scope", "a", "b", "diff", "ci95", "p_value", "test", "n_cases", "n_units"}
    assert all(set(c) == keys for c in payload["comparisons"])
    scopes = {c["scope"] for c in payload["comparisons"]}
    assert scopes == {"all", "subset_mean", "count", "existence"}
    for c in payload["comparisons"]:
        assert c["test"] == "sign-flip-cases" and c["test"] in TESTS  # K x K cases: whole cases swapped
        assert c["diff"] == pytest.approx(c["a"] - c["b"])
        assert c["n_cases"] < c["n_units"]
    assert main(["compare", str(two_runs["a"]), str(two_runs["b"]), "--n-perm", "200"]) == 0
    text = capsys.readouterr().out
    assert "sign-flip-cases" in text and "subset_mean" in text and "ties: strict" in text


def test_out_folder_of_another_run_is_refused(setup: dict, two_runs: dict, capsys: pytest.CaptureFixture) -> None:
    before = (two_runs["a"] / "metrics.json").read_text()
    assert main(eval_argv(setup, "b", two_runs["a"])) == 2  # another model into A's folder
    err = capsys.readouterr().err
    assert "belongs to another run" in err and "--overwrite" in err and "model" in err
    assert (two_runs["a"] / "metrics.json").read_text() == before  # nothing replaced
    # the same configuration resumes / repeats the run in its own folder
    assert main(eval_argv(setup, "a", two_runs["a"])) == 0
    again = json.loads((two_runs["a"] / "metrics.json").read_text())
    assert again["metrics"] == json.loads(before)["metrics"]
    # a folder holding run files without a claim is refused too
    stray = setup["root"] / "stray"
    stray.mkdir()
    (stray / "scores.jsonl").write_text("{}\n")
    assert main(eval_argv(setup, "a", stray)) == 2
    assert "not written by this configuration" in capsys.readouterr().err


def test_overwrite_replaces_another_runs_files(setup: dict, two_runs: dict) -> None:
    out = setup["root"] / "out_over"
    assert main(eval_argv(setup, "a", out)) == 0
    (out / "scores.alpha1.jsonl").write_text("{}\n")  # a file the previous run wrote
    assert main(eval_argv(setup, "a", out, "--ties", "argmax", "--overwrite")) == 0
    meta = json.loads((out / "metrics.json").read_text())
    assert meta["ties"] == "argmax" and not (out / "scores.alpha1.jsonl").exists()


def test_a_failing_overwrite_keeps_the_previous_runs_files(
    setup: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from spotdiff.diagnose import recorder as runner
    from spotdiff.errors import DataError

    out = setup["root"] / "out_kept"
    assert main(eval_argv(setup, "a", out)) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"metrics.json", "scores.jsonl", runner.RUN_MARKER} <= set(before)

    def boom(*args, **kwargs):
        raise DataError("boom while aggregating")

    monkeypatch.setattr(runner, "evaluate_table", boom)  # the new run fails after its cases were scored
    assert main(eval_argv(setup, "b", out, "--overwrite")) == 2
    assert "boom while aggregating" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the previous run's files, untouched


def test_ties_are_shown_and_quiet_silences_library_bars(setup: dict, capsys: pytest.CaptureFixture) -> None:
    from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars
    from transformers.utils import logging as hf_logging

    try:
        out = setup["root"] / "out_argmax"
        assert main(eval_argv(setup, "b", out, "--ties", "argmax")) == 0
        printed = capsys.readouterr().out
        assert "ties: argmax" in printed and "subset_mean = unweighted mean of count, existence" in printed
        assert not hf_logging.is_progress_bar_enabled() and are_progress_bars_disabled()
    finally:
        hf_logging.enable_progress_bar()
        enable_progress_bars()
