"""The report's key from each run label to the full model spec and run ids, with per-run diagnostics.

Diagnostics are the rates a run records next to its metrics (``tie_rate``: units whose candidates
tied; ``yes_rate``: yes answers of a yes/no scorer; ``unparseable_rate``: answers that could not be
read; ``nan_rate``: cases with NaN scores, in a run made with ``--nan-as-failure``), looked up in the
run's ``all`` metrics, then its info (top level or ``info["diagnostics"]``). A run without them shows none.

>>> run_diagnostics({"all": {"acc": 50.0, "tie_rate": 12.5}}, {})
{'tie_rate': 12.5}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spotdiff.report.collect import RunData

#: The diagnostics shown per run, in this order, with what each is.
DIAGNOSTICS = {
    "tie_rate": "units whose candidates tied (%)",
    "yes_rate": "yes answers of a yes/no scorer (%)",
    "unparseable_rate": "answers that could not be read (%)",
    "nan_rate": "cases whose model scores were NaN, scored as failures (%)",
    "judge_agreement": "generated answers a judge grades as the answer's reader does, of its yes/no verdicts (%)",
}


def diagnostics_notes(key: Sequence[KeyEntry]) -> list[str]:
    """``name = what it is`` for each diagnostic some run of ``key`` records."""
    present = {name for entry in key for diag in entry.diagnostics.values() for name in diag}
    return [f"{name} = {text}" for name, text in DIAGNOSTICS.items() if name in present]


def run_diagnostics(metrics: Mapping[str, Any] | None, info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's :data:`DIAGNOSTICS` that it records, in that order.

    Args:
        metrics: the run's metrics, scope -> metric -> value (``metrics.json``'s ``metrics``).
        info: the run's info record.
    """
    places = [(metrics or {}).get("all") or {}, info or {}, (info or {}).get("diagnostics") or {}]
    out: dict[str, Any] = {}
    for name in DIAGNOSTICS:
        for place in places:
            if isinstance(place, Mapping) and place.get(name) is not None:
                out[name] = place[name]
                break
    return out


@dataclass
class KeyEntry:
    """One label of the key: the model spec it stands for and its runs with their diagnostics."""

    label: str
    model: str
    run_ids: list[str] = field(default_factory=list)
    benchmarks: list[str] = field(default_factory=list)
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)  # run id -> name -> value


def build_key(runs: Sequence[RunData], labels: Mapping[str, str]) -> list[KeyEntry]:
    """The key, one entry per label in label order.

    Args:
        runs: the report's runs.
        labels: run id -> label (:func:`spotdiff.report.labels.run_labels`).
    """
    entries: dict[str, KeyEntry] = {}
    for rd in runs:
        label = labels.get(rd.id)
        if label is None:
            continue
        entry = entries.setdefault(label, KeyEntry(label, rd.run.model))
        entry.run_ids.append(rd.id)
        if rd.run.benchmark not in entry.benchmarks:
            entry.benchmarks.append(rd.run.benchmark)
        diag = run_diagnostics(rd.run.metrics, rd.run.info)
        if diag:
            entry.diagnostics[rd.id] = diag
    return [entries[k] for k in sorted(entries)]
