"""Retention curves: each evaluated metric against the training step, with its 95% bootstrap interval.

:func:`retention_curves` turns evaluation records into curves, :func:`retention_figure` draws them and
:func:`write_retention` writes ``OUT/retention.json`` and ``OUT/retention.png``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spotdiff.jsonio import write_json

#: The metrics drawn per protocol (every metric is in the JSON); others draw their first two.
RETENTION_METRICS = {
    "zeroshot": ("top1", "top5"),
    "retrieval": ("i2t_r1", "t2i_r1"),
    "spec": ("i2t", "t2i"),
    "group": ("group", "text", "image"),
}


def retention_curves(records: Iterable[dict]) -> list[dict]:
    """Curves from evaluation records (``step``, ``label``, ``benchmark``, ``protocol``, ``run_id`` and the
    ``metrics`` block with ``all``): one curve per (label, metric), points sorted by step."""
    curves: dict[tuple[str, str], dict] = {}
    for r in records:
        scope = (r.get("metrics") or {}).get("all") or {}
        for metric, value in scope.items():
            if metric.endswith("_ci95"):
                continue
            curve = curves.setdefault(
                (r["label"], metric),
                {"label": r["label"], "benchmark": r["benchmark"], "protocol": r["protocol"], "subset": r.get("subset"),
                 "metric": metric, "points": []},
            )  # fmt: skip
            curve["points"].append(
                {"step": int(r["step"]), "value": value, "ci95": scope.get(f"{metric}_ci95"), "run_id": r.get("run_id")}
            )
    for curve in curves.values():
        curve["points"].sort(key=lambda p: p["step"])
    return list(curves.values())


def drawn(curves: list[dict]) -> dict[str, list[dict]]:
    """The curves each panel draws, by label (the protocol's :data:`RETENTION_METRICS`)."""
    panels: dict[str, list[dict]] = {}
    for curve in curves:
        panels.setdefault(curve["label"], []).append(curve)
    for label, group in panels.items():
        protocol = group[0]["protocol"]
        names = RETENTION_METRICS.get(protocol) or tuple(c["metric"] for c in group[:2])
        panels[label] = [c for name in names for c in group if c["metric"] == name]
    return panels


def retention_figure(curves: list[dict], title: str = "") -> Any:
    """A matplotlib figure (no pyplot): one panel per evaluated benchmark, metric vs step, 95% CI bands."""
    from matplotlib.figure import Figure

    panels = {label: group for label, group in drawn(curves).items() if group}
    n = max(1, len(panels))
    fig = Figure(figsize=(4.2 * n, 3.2), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (label, group) in zip(axes, panels.items(), strict=False):
        for curve in group:
            pts = [p for p in curve["points"] if p["value"] is not None]
            steps = [p["step"] for p in pts]
            line = ax.plot(steps, [p["value"] for p in pts], marker="o", markersize=3, label=curve["metric"])[0]
            bands = [(p["step"], *p["ci95"]) for p in pts if p.get("ci95") and None not in p["ci95"]]
            if bands:
                xs, lo, hi = zip(*bands, strict=True)
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def write_retention(out: Path, records: list[dict], *, training_id: str, model: str, png: bool = True) -> list[dict]:
    """``out/retention.json`` (every curve, every point with its run id) and, with ``png``,
    ``out/retention.png``; returns the curves.

    Args:
        out: the training folder.
        records: evaluation records (``eval_log.jsonl`` lines).
        training_id: the training run's id, recorded in the JSON.
        model: the model label, in the JSON and the figure's title.
        png: also draw the figure.
    """
    curves = retention_curves(records)
    write_json(out / "retention.json", {"training": training_id, "model": model, "curves": curves})
    if png and curves:
        retention_figure(curves, title=f"retention during training ({model})").savefig(out / "retention.png", dpi=80)
    return curves
