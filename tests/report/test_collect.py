"""Evaluations rebuilt from the run store's unit records equal the outcomes recorded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from spotdiff.diagnose.store import RunStore
from spotdiff.report.collect import evaluation_from_units


def test_each_unit_keeps_its_own_outcomes(tmp_path: Path) -> None:
    """Every unit read back through the store keeps its own outcomes, undefined ones as NaN.

    Outcome dicts were once shared by the ``id()`` of the record decoded from the store; CPython reuses
    an id once its object is freed, so in a long process (the demo's) a unit could take an earlier
    unit's outcomes. Whether ids collide depends on the allocator's history, so this test checks the
    invariant; the demo test recomputing findings in a fresh process is where the collision showed."""
    rng = np.random.default_rng(0)
    units = []
    for c in range(400):
        subset = "count" if c % 2 else "existence"
        for k, metric in enumerate(("i2t", "i2t", "t2i", "t2i")):  # a 2 x 2 SPEC case: its 4 queries
            outcomes = {"i2t": None, "t2i": None, metric: float(rng.integers(0, 2))}  # undefined: null, as stored
            units.append({"unit_id": f"c{c:04d}/{k}", "case_id": f"c{c:04d}", "subset": subset, "scores": [0.5, 0.25],
                          "outcomes": outcomes, "tags": {"subset": subset}})  # fmt: skip
    with RunStore(tmp_path / "runs.sqlite") as store:
        run_id = store.start_run(benchmark="spec", subset=None, protocol="spec", model="m", model_identity={},
                                 data_path="d", data_digest="x", seed=0, version="0")  # fmt: skip
        store.add_units(run_id, units)
        evaluation = evaluation_from_units("spec", store.units(run_id))
    expected = {u["unit_id"]: u["outcomes"] for u in units}
    for metric in ("i2t", "t2i"):
        want = np.array([expected[u][metric] for u in evaluation.unit_ids], dtype=float)  # None -> NaN
        np.testing.assert_array_equal(evaluation.values[metric], want)
