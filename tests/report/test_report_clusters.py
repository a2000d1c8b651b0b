"""The report's best-cell marks on clustered units, its aggregate columns and its tie-rule tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from spotdiff import __version__
from spotdiff.diagnose.store import RunStore
from spotdiff.protocols import UnitTable, evaluate_table, get_protocol
from spotdiff.report.collect import _fast_mcnemar, build_tables, load_run_data, select_runs

# the example: 40 cases; A alone solves 6, B alone 2
A_WINS = [1] * 6 + [0] * 2 + [1] * 10 + [0] * 22
B_WINS = [0] * 6 + [1] * 2 + [1] * 10 + [0] * 22


def spec_store(path: Path, runs: dict[str, list[int]], k: int, *, ties: str = "strict") -> RunStore:
    """A store of ``spec`` runs whose cases hold ``k`` i2t units repeating the case's outcome, split
    over two subsets."""
    store = RunStore(path)
    protocol = get_protocol("spec", ties)
    for model, wins in runs.items():
        table, units = UnitTable(), []
        for c, w in enumerate(wins):
            tags = {"subset": "count" if c % 2 else "existence"}
            for q in range(k):
                outcome = {"i2t": float(w), "t2i": float("nan")}
                table.add(f"c{c}/i2t/{q}", f"c{c}", tags, outcome)
                units.append({"unit_id": f"c{c}/i2t/{q}", "case_id": f"c{c}", "subset": tags["subset"],
                              "scores": None, "outcomes": {"i2t": float(w), "t2i": None}, "tags": tags})  # fmt: skip
        metrics = evaluate_table(protocol, table, n_boot=20, seed=0).metrics
        rid = store.start_run(
            benchmark="spec", subset=None, protocol="spec", model=model, model_identity={"m": model},
            data_path="/nowhere", data_digest="0" * 64, seed=0, version=__version__,
            info={"n_boot": 20, "ties": ties},
        )  # fmt: skip
        store.add_units(rid, units)
        store.finish_run(rid, metrics, len(wins))
    return store


def test_clustered_units_are_not_marked_by_a_unit_level_mcnemar(tmp_path: Path) -> None:
    store = spec_store(tmp_path / "runs.sqlite", {"A": A_WINS, "B": B_WINS}, k=9)
    runs = load_run_data(store, select_runs(store))
    assert _fast_mcnemar(runs[0], runs[1], "i2t", None) is None  # 9 units per case: no unit McNemar
    (table,) = build_tables(runs)
    assert not any(c.best for row in table.rows for c in row.cells.values())  # p ~ 0.29, not 2.6e-05
    tests = {(d["subset"], d["test"]) for d in table.tests}
    assert ("all", "sign-flip-cases") in tests
    assert all(d["n_cases"] < d["n_units"] for d in table.tests if d["subset"] == "all")
    assert table.subsets[:2] == ["all", "subset_mean"]  # aggregates first
    notes = " ".join(table.notes)
    assert "all = pooled" in notes and "subset_mean = unweighted mean" in notes and "ties: strict" in notes
    assert "sign-flip-cases = " in notes


def test_strong_clustered_difference_is_marked(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    good = (rng.random(60) < 0.9).astype(int).tolist()
    bad = (rng.random(60) < 0.2).astype(int).tolist()
    store = spec_store(tmp_path / "runs.sqlite", {"good": good, "bad": bad}, k=4)
    (table,) = build_tables(load_run_data(store, select_runs(store)))
    cell = next(row for row in table.rows if row.label == "good").cells[("all", "i2t")]
    assert cell.best and cell.test == "sign-flip-cases" and cell.p_value < 0.05


def test_runs_with_other_tie_rules_get_their_own_table(tmp_path: Path) -> None:
    store = spec_store(tmp_path / "runs.sqlite", {"A": A_WINS}, k=2)
    spec_store(tmp_path / "runs.sqlite", {"A-argmax": B_WINS}, k=2, ties="argmax")
    tables = build_tables(load_run_data(store, select_runs(store)))
    assert sorted(t.ties for t in tables) == ["argmax", "strict"]
    assert len({t.slug for t in tables}) == 2
    assert any("ties: argmax" in n for t in tables for n in t.notes)
