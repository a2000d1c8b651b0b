"""Paired comparison of two stored runs (``spotdiff compare RUN_A RUN_B``).

Both runs must use the same benchmark and protocol. Their per-unit outcomes are re-read from the
store and compared with :func:`spotdiff.protocols.stats.paired_comparison` on every metric, overall
and per subset: ``A - B`` in percentage points, a paired bootstrap interval (the same resampled
units for both runs) and a p-value (exact McNemar for per-unit 0/1 metrics, paired permutation
otherwise). When the runs hold different units (another ``--limit`` or data), only the units
present in both are compared, and the output says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from spotdiff.diagnose.store import Run, RunStore
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import PairedComparison, get_protocol, paired_comparison
from spotdiff.report.collect import evaluation_from_units, short_model


@dataclass
class Comparison:
    run_a: Run
    run_b: Run
    results: list[PairedComparison]
    notes: list[str] = field(default_factory=list)


def compare_runs(
    store: RunStore,
    run_a: str,
    run_b: str,
    *,
    metrics: Sequence[str] | None = None,
    subsets: Sequence[str] | None = None,
    n_boot: int | None = None,
    n_perm: int = 10_000,
    seed: int | None = None,
) -> Comparison:
    a, b = store.get(run_a), store.get(run_b)
    if a.id == b.id:
        raise ConfigError("compare needs two different runs")
    if (a.benchmark, a.protocol) != (b.benchmark, b.protocol):
        raise ConfigError(
            f"runs are not comparable: {a.id} is {a.benchmark}/{a.protocol}, {b.id} is {b.benchmark}/{b.protocol}"
        )
    for r in (a, b):
        if r.status != "done":
            raise ConfigError(f"run {r.id} is not finished ({r.status})")
    notes = []
    if a.data_digest != b.data_digest:
        notes.append("the runs read different data (data digests differ)")
    units_a, units_b = list(store.units(a.id)), list(store.units(b.id))
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
    protocol = get_protocol(a.protocol)
    n_boot = int((a.info or {}).get("n_boot", 1000)) if n_boot is None else n_boot
    seed = a.seed if seed is None else seed
    eval_a = evaluation_from_units(protocol, units_a, seed=seed)
    eval_b = evaluation_from_units(protocol, units_b, seed=seed)
    names = list(metrics) if metrics else list(protocol.metrics)
    unknown = [m for m in names if m not in protocol.metrics]
    if unknown:
        raise ConfigError(
            f"protocol {protocol.name!r} has no metric {unknown[0]!r}; it has {', '.join(protocol.metrics)}"
        )
    all_subsets = sorted(set(eval_a.subsets.tolist()))
    scopes: list[str | None] = [None] if not subsets else []
    if subsets:
        bad = [s for s in subsets if s != "all" and s not in all_subsets]
        if bad:
            raise ConfigError(f"no subset {bad[0]!r} in these runs; they have {', '.join(all_subsets)}")
        scopes = [None if s == "all" else s for s in subsets]
    elif len(all_subsets) > 1:
        scopes += all_subsets
    results = []
    for scope in scopes:
        for m in names:
            results.append(paired_comparison(eval_a, eval_b, m, subset=scope, n_boot=n_boot, n_perm=n_perm, seed=seed))
    return Comparison(a, b, results, notes)


def _f(x: float, signed: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def format_comparison(cmp: Comparison, alpha: float = 0.05) -> str:
    """A terminal table of the comparison."""
    a, b = cmp.run_a, cmp.run_b
    lines = [
        f"A = {a.id}  {short_model(a.model, 60)}  (seed {a.seed}, spotdiff {a.version})",
        f"B = {b.id}  {short_model(b.model, 60)}  (seed {b.seed}, spotdiff {b.version})",
        f"{a.benchmark} | {a.protocol} | data {a.data_digest[:12]}"
        + ("" if a.data_digest == b.data_digest else f" vs {b.data_digest[:12]}"),
    ]
    lines += [f"note: {n}" for n in cmp.notes]
    level = round(cmp.results[0].ci_level * 100) if cmp.results else 95
    header = ["scope", "metric", "n", "A", "B", f"A-B [{level}% CI]", "p", "test", "A only/B only", ""]
    cells = [header]
    for c in cmp.results:
        disc = "" if c.a_only is None else f"{c.a_only}/{c.b_only}"
        mark = "*" if c.p_value < alpha else ""
        cells.append(
            [
                c.scope,
                c.metric,
                str(c.n_units),
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
                v.ljust(w) if i < 2 or i >= 7 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths).rstrip())
    lines.append(
        f"values in %; paired over the same units; * p < {alpha}; mcnemar-exact on per-unit 0/1 outcomes, "
        "permutation otherwise; ties count as failures"
    )
    return "\n".join(lines)
