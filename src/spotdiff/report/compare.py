"""Paired comparison of two runs (``spotdiff compare A B``): stored runs or result folders.

A side is a run id (or unique prefix) in the run store, or a folder written by ``spotdiff eval --out``
(``metrics.json`` + ``scores.jsonl``, :mod:`spotdiff.diagnose.results`), so a colleague's results
compare without their store. Both runs must use the same benchmark, protocol and tie rule. Their
per-unit outcomes are compared with :func:`spotdiff.protocols.paired_comparison` on every metric and
scope: ``"all"`` (pooled), ``"subset_mean"`` and the benchmark's paper groupings (unweighted means
over subsets), and each subset. Each result is ``A - B`` in percentage points, a paired bootstrap
interval and a p-value from a cluster-aware test (exact McNemar only when every case is one unit
and the outcome 0/1; otherwise a sign-flip test swapping whole cases, or single units). When the
runs hold different units (another ``--limit`` or data), only the units present in both are
compared, and the output says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotdiff.diagnose.results import is_result_dir, read_result_dir
from spotdiff.diagnose.store import Run, RunStore
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import TESTS, PairedComparison, get_protocol, paired_comparison
from spotdiff.report.collect import (
    comparison_keys,
    evaluation_from_units,
    run_ties,
    scope_order,
    short_model,
    subset_groups,
)
from spotdiff.report.table import TIE_NOTES


@dataclass
class Comparison:
    run_a: Run
    run_b: Run
    results: list[PairedComparison]
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """``{"comparisons": [{"metric", "scope", "a", "b", "diff", "ci95", "p_value", "test",
        "n_cases", "n_units"}, ...]}`` (``spotdiff compare --json``)."""
        return {"comparisons": [c.as_json() for c in self.results]}


def load_run(ref: str, store: RunStore | str | Path | None = None) -> tuple[Run, list[dict]]:
    """A run and its unit records: from a result folder when ``ref`` is one, else from the run store
    (an open :class:`RunStore`, or its path; the default store when None)."""
    if is_result_dir(ref):
        return read_result_dir(ref)
    if Path(ref).expanduser().is_dir():
        raise ConfigError(f"{ref} is a folder without metrics.json and scores.jsonl (not written by `eval --out`)")
    if isinstance(store, RunStore):
        run = store.get(ref)
        return run, list(store.units(run.id))
    with RunStore(store, create=False) as opened:
        return load_run(ref, opened)


#: A run with its unit records, as :func:`load_run` returns them.
LoadedRun = tuple[Run, list[dict]]


def compare_runs(
    run_a: str | Path | LoadedRun,
    run_b: str | Path | LoadedRun,
    *,
    store: RunStore | str | Path | None = None,
    metrics: Sequence[str] | None = None,
    subsets: Sequence[str] | None = None,
    n_boot: int | None = None,
    n_perm: int = 10_000,
    seed: int | None = None,
) -> Comparison:
    """Compare ``run_a`` with ``run_b`` on every metric and scope (A - B is reported).

    Args:
        run_a, run_b: run ids (or unique prefixes) in ``store``, result folders, or runs already loaded
            with their unit records (:data:`LoadedRun`, as a report holds its two runs).
        store: the run store holding run ids (an open :class:`RunStore` or its path; the default when None).
        metrics: the metrics to compare (default: the protocol's).
        subsets: the scopes to compare (default: every scope, or only ``all`` for one subset).
        n_boot: bootstrap resamples of the interval (default: run A's).
        n_perm: random swaps of a sign-flip test.
        seed: the bootstrap seed (default: run A's).
    """
    (a, units_a), (b, units_b) = (run if isinstance(run, tuple) else load_run(run, store) for run in (run_a, run_b))
    _check_comparable(a, b)
    notes, units_a, units_b = _common_units(a, units_a, b, units_b)
    protocol = get_protocol(a.protocol, run_ties(a))
    n_boot = int((a.info or {}).get("n_boot", 1000)) if n_boot is None else n_boot
    seed = a.seed if seed is None else seed
    groups = subset_groups(a.benchmark)
    eval_a = evaluation_from_units(protocol, units_a, seed=seed, groups=groups)
    eval_b = evaluation_from_units(protocol, units_b, seed=seed, groups=groups)
    names = list(metrics) if metrics else list(protocol.metrics)
    unknown = [m for m in names if m not in protocol.metrics]
    if unknown:
        raise ConfigError(
            f"protocol {protocol.name!r} has no metric {unknown[0]!r}; it has {', '.join(protocol.metrics)}"
        )
    available = scope_order(a.benchmark, eval_a.metrics)
    if subsets:
        bad = [s for s in subsets if s not in available]
        if bad:
            raise ConfigError(f"no scope {bad[0]!r} in these runs; they have {', '.join(available)}")
        scopes = list(subsets)
    else:
        scopes = available if len(available) > 2 else ["all"]  # one subset: the same units as "all"
    results = [
        paired_comparison(eval_a, eval_b, m, subset=scope, n_boot=n_boot, n_perm=n_perm, seed=seed)
        for scope in scopes
        for m in names
    ]
    return Comparison(a, b, results, notes)


def _check_comparable(a: Run, b: Run) -> None:
    """Two different finished runs of one benchmark, protocol and tie rule, or a :class:`ConfigError`."""
    if a.id == b.id:
        raise ConfigError("compare needs two different runs")
    if (a.benchmark, a.protocol) != (b.benchmark, b.protocol):
        raise ConfigError(
            f"runs are not comparable: {a.id} is {a.benchmark}/{a.protocol}, {b.id} is {b.benchmark}/{b.protocol}"
        )
    if run_ties(a) != run_ties(b):
        raise ConfigError(f"runs are not comparable: {a.id} used --ties {run_ties(a)}, {b.id} --ties {run_ties(b)}")
    for r in (a, b):
        if r.status != "done":
            raise ConfigError(f"run {r.id} is not finished ({r.status})")


def _common_units(a: Run, units_a: list[dict], b: Run, units_b: list[dict]) -> tuple[list[str], list[dict], list[dict]]:
    """``(notes, units_a, units_b)``: the units present in both runs, and notes on what differs."""
    notes = []
    if a.data_digest != b.data_digest:
        notes.append("the runs read different data (data digests differ)")
    ids_a, ids_b = {u["unit_id"] for u in units_a}, {u["unit_id"] for u in units_b}
    common = ids_a & ids_b
    if not common:
        raise DataError(f"runs {a.id} and {b.id} share no units")
    if common != ids_a or common != ids_b:
        notes.append(
            f"compared on the {len(common)} units present in both runs "
            f"({len(ids_a - common)} only in A, {len(ids_b - common)} only in B)"
        )
        units_a = [u for u in units_a if u["unit_id"] in common]
        units_b = [u for u in units_b if u["unit_id"] in common]
    return notes, units_a, units_b


def _f(x: float, signed: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def format_comparison(cmp: Comparison, alpha: float = 0.05) -> str:
    """A terminal table of the comparison, with what each aggregate and test is."""
    a, b = cmp.run_a, cmp.run_b
    lines = [
        f"A = {a.id}  {short_model(a.model, 60)}  (seed {a.seed}, spotdiff {a.version})",
        f"B = {b.id}  {short_model(b.model, 60)}  (seed {b.seed}, spotdiff {b.version})",
        f"{a.benchmark} | {a.protocol} | data {a.data_digest[:12]}"
        + ("" if a.data_digest == b.data_digest else f" vs {b.data_digest[:12]}"),
    ]
    lines += [f"note: {n}" for n in cmp.notes]
    level = round(cmp.results[0].ci_level * 100) if cmp.results else 95
    header = ["scope", "metric", "cases", "units", "A", "B", f"A-B [{level}% CI]", "p", "test", "A only/B only", ""]
    cells = [header]
    for c in cmp.results:
        disc = "" if c.a_only is None else f"{c.a_only}/{c.b_only}"
        mark = "*" if c.p_value < alpha else ""
        cells.append(
            [
                *comparison_keys(c),
                _f(c.a),
                _f(c.b),
                f"{_f(c.difference, True)} [{_f(c.ci[0], True)}, {_f(c.ci[1], True)}]",
                f"{c.p_value:.3g}",
                c.test,
                disc,
                mark,
            ]
        )
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                v.ljust(w) if i < 2 or i >= 8 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths).rstrip())
    lines.append(f"values in %; paired over the same units; * p < {alpha}; {TIE_NOTES.get(run_ties(a), '')}")
    scopes = {c.scope for c in cmp.results}
    if scopes - {"all"}:
        lines.append("all = pooled over every unit; subset_mean and groups = unweighted means over subsets")
    lines += [f"{t}: {TESTS[t]}" for t in sorted({c.test for c in cmp.results}) if t in TESTS]
    return "\n".join(lines)
