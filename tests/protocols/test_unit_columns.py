"""The columnar UnitTable: the same arrays and the same bootstrap numbers as the list-of-dicts table
it replaced, in a few tens of bytes per unit."""

from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from spotdiff.errors import DataError
from spotdiff.protocols import UnitTable, evaluate, get_protocol
from spotdiff.protocols import columns as columns_module
from spotdiff.protocols.columns import CodeColumn, FloatColumn, IdSet, StringColumn
from spotdiff.testing.synthetic_runs import SPECS, make_cases, synthetic_scores

#: ``evaluate`` metrics computed by the list-of-dicts UnitTable (main at 190837a, with the subset
#: means) with the script in this test: every number must stay bit-identical.
BEFORE = Path(__file__).parent / "data" / "bootstrap_before_columns.json"
BENCHMARKS = ("winoground", "spec", "valse", "aro-vg-relation", "coco-retrieval", "visla-generic", "sugarcrepe")


def _run(bench: str):
    protocol = get_protocol(SPECS[bench][0])
    cases = make_cases(bench, 40, seed=7)
    rng = np.random.default_rng(11)
    mats = [synthetic_scores(c, protocol.needs, 0.8, rng) for c in cases]
    return protocol, cases, mats


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_bootstrap_metrics_are_unchanged(bench: str) -> None:
    protocol, cases, mats = _run(bench)
    metrics = evaluate(protocol, cases, mats, n_boot=200, seed=3).metrics
    before = json.loads(BEFORE.read_text(encoding="utf-8"))[bench]
    assert json.loads(json.dumps(metrics, sort_keys=True, default=str)) == before


def _reference_arrays(protocol, units):
    """The replaced implementation: lists of ids, tag dicts and outcome dicts, stacked at the end."""
    n = len(units)
    values = {
        m: np.fromiter((float(o.get(m, math.nan)) for *_, o in units), dtype=float, count=n)
        for m in protocol.unit_metrics
    }
    names: list[str] = []
    for _, _, tags, _ in units:
        names.extend(k for k in tags if k not in names)
    groups = {k: np.array([str(t.get(k, "")) for _, _, t, _ in units], dtype=object) for k in names}
    groups["case"] = np.array([c for _, c, _, _ in units], dtype=object)
    groups["subset"] = np.array([str(t["subset"]) for _, _, t, _ in units], dtype=object)
    return values, groups


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_arrays_equal_the_list_of_dicts_table(bench: str, monkeypatch) -> None:
    monkeypatch.setattr(columns_module, "CHUNK", 7)  # many chunks, tags and metrics appearing late
    protocol, cases, mats = _run(bench)
    table, units = UnitTable(), []
    for k, (case, matrix) in enumerate(zip(cases, mats, strict=True)):
        tags = dict(case.tags, **({"late": f"v{k % 3}"} if k >= 11 else {}))
        for uid, outcome in protocol.units(case, matrix):
            if k >= 13:
                outcome = {**outcome, "extra": 0.5}
            table.add(uid, case.id, tags, outcome)
            units.append((uid, case.id, tags, outcome))
    values, groups = table.arrays(protocol)
    ref_values, ref_groups = _reference_arrays(protocol, units)
    assert list(groups) == list(ref_groups)
    for name in ref_groups:
        assert groups[name].dtype == object and groups[name].tolist() == ref_groups[name].tolist()
    assert list(values) == list(ref_values)
    for m in ref_values:
        np.testing.assert_array_equal(values[m], ref_values[m])
    assert table.unit_ids.tolist() == [u for u, *_ in units]
    assert table.n_cases == len(cases)


def test_bad_units_are_refused(monkeypatch) -> None:
    monkeypatch.setattr(columns_module, "CHUNK", 2)
    table = UnitTable()
    table.add("u1", "c1", {"subset": "s"}, {"accuracy": 1.0})
    with pytest.raises(DataError, match="tags must include 'subset'"):
        table.add("u2", "c2", {}, {"accuracy": 0.0})
    table.add("u2", "c2", {"subset": "s"}, {"accuracy": 0.0})
    assert len(table) == 2 and table.unit_ids.tolist() == ["u1", "u2"]
    table.add("u1", "c3", {"subset": "s"}, {"accuracy": 0.0})
    with pytest.raises(DataError, match="duplicate unit id 'u1'"):
        table.arrays(get_protocol("i2t-top1"))
    bad = UnitTable()
    bad.add("u1", "c1", {"subset": "s"}, {"accuracy": 1.0})
    with pytest.raises(DataError, match="unit 'u2': outcome 'accuracy' must be a number"):
        bad.add("u2", "c2", {"subset": "s"}, {"accuracy": "yes"})  # checked when the rows are packed
        bad.arrays(get_protocol("i2t-top1"))


def test_id_set_across_merges(monkeypatch) -> None:
    monkeypatch.setattr(columns_module, "CHUNK", 5)
    seen = IdSet()
    ids = [f"case-{i}" for i in range(23)] + ["", "é", "a" * 300]
    assert all(seen.add(i) for i in ids)
    assert len(seen) == len(ids) and len(seen._high) == 25  # merged in blocks of five
    assert not any(seen.add(i) for i in ids)
    assert np.all(np.diff(seen._high.astype(np.float64)) >= 0)


def test_columns_round_trip(monkeypatch) -> None:
    monkeypatch.setattr(columns_module, "CHUNK", 3)
    strings, floats, codes = StringColumn(), FloatColumn(), CodeColumn()
    floats.extend_constant(math.nan, 2)
    words = ["x", "long string " * 5, "", "ü", "x"]
    for k, w in enumerate(words):
        strings.append(w)
        floats.append(float(k))
        codes.append(codes.code(w))
    assert strings.objects().tolist() == words
    np.testing.assert_array_equal(floats.array(), [math.nan, math.nan, 0, 1, 2, 3, 4])
    assert codes.objects().tolist() == words and codes.values == ["x", "long string " * 5, "", "ü"]


def test_a_unit_costs_tens_of_bytes(monkeypatch) -> None:
    """Memory held per unit by a table of SPEC-like units (ids of 20 characters, two tags, two metrics),
    Python's pending rows included."""
    monkeypatch.setattr(columns_module, "CHUNK", 2048)
    n = 40_000
    ids = [(f"case-{k // 4:08d}/{k % 4}xx", f"case-{k // 4:08d}") for k in range(n)]
    tags = [{"subset": f"s{k % 4}", "kind": "count"} for k in range(n // 4)]
    outcome = {"i2t": 1.0, "t2i": 0.0}
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    table = UnitTable()
    for k, (uid, cid) in enumerate(ids):
        table.add(uid, cid, tags[k // 4], outcome)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert held / n < 100, f"{held / n:.0f} bytes per unit"
