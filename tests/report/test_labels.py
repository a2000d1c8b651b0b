"""Run labels (:mod:`spotdiff.report.labels`), the run key's diagnostics (:mod:`spotdiff.report.runkey`)
and the findings summary (:mod:`spotdiff.report.findings`): hand-worked cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff.errors import DataError
from spotdiff.report.findings import findings_order, read_findings
from spotdiff.report.labels import RunKey, parse_spec, run_labels
from spotdiff.report.runkey import run_diagnostics


def test_variants_of_one_captioner_read_as_their_variant() -> None:
    runs = [
        RunKey("r1", "vgpt:models/captioner [raw]", "eqben"),
        RunKey("r2", "vgpt:models/captioner [alpha=1]", "eqben"),
        RunKey("r3", "vgpt:models/captioner [tuned alpha=0.8]", "eqben"),
        RunKey("r4", "hf-clip:models/ft-hn/final", "eqben"),
        RunKey("r5", "hf-clip:models/ft-plain/final", "eqben"),
    ]
    assert run_labels(runs) == {
        "r1": "captioner raw",
        "r2": "captioner alpha=1",
        "r3": "captioner tuned alpha=0.8",
        "r4": "ft-hn/final",
        "r5": "ft-plain/final",
    }


def test_only_an_option_differs() -> None:
    runs = [
        RunKey("a", "vgpt:models/captioner", "aro-coco-order", options={"tokenizer": "regex", "pos_tagger": "nltk"}),
        RunKey(
            "b", "vgpt:models/captioner", "aro-coco-order", options={"tokenizer": "regex", "pos_tagger": "heuristic"}
        ),
    ]
    assert run_labels(runs) == {"a": "captioner pos_tagger=nltk", "b": "captioner pos_tagger=heuristic"}


def test_options_of_other_benchmarks_do_not_enter_the_label() -> None:
    runs = [
        RunKey("a", "vgpt:models/captioner [raw]", "eqben"),
        RunKey("b", "vgpt:models/captioner [raw]", "aro-coco-order", options={"tokenizer": "regex"}),
    ]
    assert run_labels(runs) == {"a": "captioner raw", "b": "captioner raw"}  # the same model, two benchmarks


def test_identical_specs_get_distinct_run_id_suffixes() -> None:
    runs = [RunKey("abcdef12", "hf-clip:m", "winoground"), RunKey("abcdef34", "hf-clip:m", "winoground")]
    labels = run_labels(runs)
    assert labels == {"abcdef12": "m #abcdef1", "abcdef34": "m #abcdef3"}
    same_model_subsets = [RunKey("x1", "hf-clip:m", "spec", "count"), RunKey("x2", "hf-clip:m", "spec", "cls")]
    assert run_labels(same_model_subsets) == {"x1": "m", "x2": "m"}  # one row in the table


def test_families_and_look_alike_specs_stay_apart() -> None:
    runs = [RunKey("1", "hf-clip:ViT-B-32"), RunKey("2", "openclip:ViT-B-32"), RunKey("3", "a [b]"), RunKey("4", "a b")]
    labels = run_labels(runs)
    assert labels == {"1": "hf-clip ViT-B-32", "2": "openclip ViT-B-32", "3": "a [b]", "4": "a b"}
    assert parse_spec("synthetic-model-00").parts == ("synthetic-model-00",)


def test_labels_are_unique_among_many_runs() -> None:
    runs = [RunKey(f"{k:08d}", f"hf-clip:/ckpt/run{k % 7}/step_{k % 3}", "b", options={"o": k % 2}) for k in range(60)]
    labels = run_labels(runs)
    assert len(set(labels.values())) == len(runs)
    assert all("…" not in lab for lab in labels.values())


def test_run_diagnostics_found_where_recorded() -> None:
    assert run_diagnostics({"all": {"acc": 1.0}}, {"ties": "strict"}) == {}
    got = run_diagnostics({"all": {"tie_rate": 2.0}}, {"yes_rate": 60.0, "diagnostics": {"unparseable_rate": 0.5}})
    assert got == {"tie_rate": 2.0, "yes_rate": 60.0, "unparseable_rate": 0.5}
    assert list(got) == ["tie_rate", "yes_rate", "unparseable_rate"]


def _cmp(diff: float, lo: float, hi: float) -> dict:
    return {"metric": "i2t", "scope": "all", "n_cases": 40, "n_units": 80, "a": 60.0, "b": 60.0 - diff,
            "difference": diff, "ci95": [lo, hi], "p_value": 0.004, "test": "sign-flip-cases"}  # fmt: skip


def test_read_findings_and_their_order(tmp_path: Path) -> None:
    path = tmp_path / "findings.json"
    findings = {
        "vgpt": {"holds": False, "claim": "debiasing helps", "sets": {"eqben": {"raw": {"value": 51.25,
                 "ci95": [40.0, 60.0], "run_id": "run-eq"}}}},
        "hn": {"holds": True, "claim": "hard negatives help", "comparison": {"spec_i2t": _cmp(5.0, 1.5, 8.25)}},
    }  # fmt: skip
    path.write_text(json.dumps({"findings": findings, "note": "quick profile"}))
    views, note = read_findings(path)
    assert note == "quick profile" and [v.name for v in views] == ["vgpt", "hn"]
    assert views[0].numbers == ["sets / eqben / raw: 51.2 [40.0, 60.0]"] and not views[0].holds
    assert views[1].numbers == [
        "comparison / spec_i2t: i2t +5.0 [+1.5, +8.2] points, p = 0.004 (sign-flip-cases; all; 40 cases, 80 units)"
    ]
    assert views[1].tests == ["sign-flip-cases"]
    order = findings_order(views, {"run-eq": "eqben"}, ["aro", "eqben", "spec", "winoground"])
    assert order == ["eqben", "spec", "aro", "winoground"]


def test_bad_findings_name_the_file_and_finding(tmp_path: Path) -> None:
    path = tmp_path / "findings.json"
    path.write_text(json.dumps({"findings": {"hn": {"claim": "x"}}}))
    with pytest.raises(DataError, match=r"findings.json.*record hn.*'holds'"):
        read_findings(path)
    path.write_text("{not json")
    with pytest.raises(DataError, match=r"findings\.json"):
        read_findings(path)
