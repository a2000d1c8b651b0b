"""The report's retention section: metrics against the training step for every training run in the store.

Evaluations made during training (``spotdiff train --eval``) are runs linked to a training run and
step (:mod:`spotdiff.diagnose.store`); they stay out of the result tables (one row per step would
bury the models being compared) and are drawn here instead, one figure per training run
(:func:`spotdiff.optimize.retention.retention_figure`, the same figure as ``OUT/retention.png``), with
the first and last values and their 95% intervals in the caption. The runs are listed in the
provenance table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spotdiff.diagnose.store import Run, RunStore
from spotdiff.optimize.retention import drawn, retention_curves, retention_figure
from spotdiff.report.collect import short_model

TITLE = "retention during training"


def training_runs(store: RunStore, benchmarks: Sequence[str] | None = None) -> dict[str, list[Run]]:
    """The finished runs linked to a training run, by training id (oldest training first)."""
    out: dict[str, list[Run]] = {}
    for run in sorted(store.runs(status="done"), key=lambda r: (r.created, r.id)):
        if run.training and (not benchmarks or run.benchmark in benchmarks):
            out.setdefault(run.training, []).append(run)
    return out


def _label(run: Run) -> str:
    label = (run.info.get("training") or {}).get("label") if isinstance(run.info, dict) else None
    return label or (f"{run.benchmark}:{run.subset}" if run.subset else run.benchmark)


def records_of(runs: Sequence[Run]) -> list[dict]:
    """The runs as evaluation records (the shape of ``OUT/eval_log.jsonl``)."""
    return [
        {"step": r.step, "label": _label(r), "benchmark": r.benchmark, "protocol": r.protocol, "subset": r.subset,
         "run_id": r.id, "metrics": r.metrics or {}}
        for r in runs
        if r.step is not None
    ]  # fmt: skip


def _point(p: dict) -> str:
    ci = p.get("ci95")
    text = f"{p['value']:.1f}" if p.get("value") is not None else "–"
    return text + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci and None not in ci else "")


def retention_figures(runs_by_training: dict[str, list[Run]]) -> list[tuple[Any, str, str, str]]:
    """``(figure, key, title, caption)`` per training run."""
    items = []
    for ident, runs in runs_by_training.items():
        curves = retention_curves(records_of(runs))
        if not curves:
            continue
        model = runs[0].model.rsplit("@step", 1)[0]
        changes = []
        for label, group in drawn(curves).items():
            for c in group:
                first, last = c["points"][0], c["points"][-1]
                changes.append(f"{label} {c['metric']}: {_point(first)} at step {first['step']} -> "
                               f"{_point(last)} at step {last['step']}")  # fmt: skip
        caption = (
            f"Training run {ident} ({model}): each evaluated metric against the optimizer step, 95% bootstrap "
            "intervals as bands; every point is a run in the store. " + "; ".join(changes) + "."
        )
        title = f"{short_model(model)} (training {ident})"
        items.append((retention_figure(curves, title=title), f"retention-{ident}", f"retention: {title}", caption))
    return items
