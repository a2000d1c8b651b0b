"""The report's figures, each a :class:`matplotlib.figure.Figure` built without pyplot.

* :func:`subset_bars`: per-subset bars of each model with 95% bootstrap error bars.
* :func:`equivariance_figure`: the EqSim equivariance-score distributions of 2 x 2 group-protocol
  runs (EqBen Fig. 6), drawn by :mod:`spotdiff.report.equivariance` from the stored score matrices.
* :func:`alpha_curve_figure`: VisualGPTScore alpha-debiasing curves (VisualGPTScore Table 3) from
  ``run.info["alpha_curve"]``.
* :func:`lexical_overlap_figure`: edit-distance histograms of VISLA's caption pairs (VISLA Fig. 8).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spotdiff.processes import can_fork, fork_map, usable_cores
from spotdiff.report.collect import ResultTable, unit_scores
from spotdiff.report.equivariance import equivariance_scores_from_matrices, figure_to_png_bytes, plot_equivariance

log = logging.getLogger(__name__)

#: The metrics drawn for a protocol (at most four panels); other protocols draw their first four.
HEADLINE = {
    "retrieval": ("i2t_r1", "t2i_r1", "rsum"),
    "valse-prob": ("acc", "min_pc_pf", "acc_r"),
    "aro-macro": ("macro_accuracy", "accuracy"),
}
DPI = 72
#: The gid of :func:`fast_legend`'s texts.
LEGEND_GID = "spotdiff-legend"


@dataclass
class Plot:
    """A rendered figure: ``key`` names its file (``figures/<key>.png``)."""

    key: str
    title: str
    caption: str
    png: bytes
    legend: tuple[str, ...] = ()  # the legend's entries as drawn (:func:`legend_labels`)


def legend_labels(fig: Any) -> tuple[str, ...]:
    """The entries of a figure's legends as drawn: :func:`fast_legend` texts and matplotlib legends."""
    labels = [t.get_text() for t in fig.texts if t.get_gid() == LEGEND_GID]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            labels += [t.get_text() for t in legend.get_texts()]
    return tuple(labels)


def render(fig: Any, key: str, title: str, caption: str, dpi: int = DPI) -> Plot:
    return Plot(key, title, caption, figure_to_png_bytes(fig, dpi=dpi), legend_labels(fig))


_PENDING: list = []  # figures handed to forked render workers (inherited, never pickled)


def _render_pending(i: int) -> bytes:
    return figure_to_png_bytes(_PENDING[i], dpi=DPI)


def default_jobs() -> int:
    """Figure-drawing processes by default: the usable cores, at most 4."""
    return min(4, usable_cores())


def render_many(items: Sequence[tuple[Any, str, str, str]], jobs: int | None = None) -> list[Plot]:
    """Render ``(figure, key, title, caption)`` items to :class:`Plot` objects, in order.

    Drawing is most of a report's figure time, so with ``jobs > 1`` the figures are drawn by forked
    worker processes (they inherit the built figures; only PNG bytes travel back). Where ``fork`` is
    unavailable or a worker fails, the figures are drawn here, one after another.
    """
    global _PENDING
    jobs = default_jobs() if jobs is None else max(1, jobs)
    figs = [item[0] for item in items]
    legends = [legend_labels(fig) for fig in figs]
    pngs: list[bytes] | None = None
    if jobs > 1 and len(figs) > 1 and can_fork():
        _PENDING = figs
        try:
            pngs = fork_map(_render_pending, range(len(figs)), min(jobs, len(figs)))
        except Exception as exc:  # a broken worker must not lose the report: draw here instead
            log.warning("parallel figure rendering failed (%s); rendering serially", exc)
            pngs = None
        finally:
            _PENDING = []
    if pngs is None:
        pngs = [figure_to_png_bytes(fig, dpi=DPI) for fig in figs]
    return [
        Plot(key, title, caption, png, legend)
        for (_, key, title, caption), png, legend in zip(items, pngs, legends, strict=True)
    ]


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20" if n <= 20 else "turbo"]
    if n <= 20:
        return [cmap(i) for i in range(n)]
    return [cmap(x) for x in np.linspace(0.05, 0.95, n)]


def fast_legend(
    fig: Any,
    labels: Sequence[str],
    colors: Any,
    *,
    left_in: float,
    top_in: float,
    line_in: float = 0.16,
    col_w: float = 1.6,
) -> None:
    """A legend of colour squares and labels in the figure's right margin, in columns of 30.

    Labels are drawn whole (a cut label can read like another run's); :func:`legend_width` gives the
    column width they need.

    Drawn as one PolyCollection and plain texts: matplotlib's own legend lays out every entry with
    offset boxes, which takes most of the drawing time of a figure with 50 models.
    """
    from matplotlib.collections import PolyCollection

    w_in, h_in = fig.get_size_inches()
    per_col = 30
    verts, faces = [], []
    for k, label in enumerate(labels):
        x = left_in + col_w * (k // per_col)
        y = h_in - top_in - line_in * (k % per_col)
        sq = 0.1
        verts.append(
            [
                (x / w_in, (y - sq) / h_in),
                (x / w_in, y / h_in),
                ((x + sq) / w_in, y / h_in),
                ((x + sq) / w_in, (y - sq) / h_in),
            ]
        )
        faces.append(colors[k])
        fig.text((x + 0.15) / w_in, (y - sq / 2) / h_in, label, fontsize=6.5, va="center", ha="left", gid=LEGEND_GID)
    fig.add_artist(PolyCollection(verts, facecolors=faces, edgecolors="none", transform=fig.transFigure))


def legend_width(labels: Sequence[str], minimum: float = 1.6) -> float:
    """Inches a :func:`fast_legend` column needs for its longest label (6.5 pt text, about 0.05 in a character)."""
    return max(minimum, 0.3 + 0.05 * max((len(lab) for lab in labels), default=0))


def _legend(fig: Any, ax: Any, n: int) -> None:
    if n <= 1:
        return
    ncol = 1 if n <= 16 else 2 if n <= 40 else 3
    ax.legend(fontsize="x-small", ncol=ncol, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def subset_bars(table: ResultTable, metrics: Sequence[str] | None = None) -> Any | None:
    """Grouped bars: x = subsets, one bar per model, error bars = the stored 95% intervals."""
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.figure import Figure

    metrics = list(metrics or HEADLINE.get(table.protocol, ()) or table.metrics)[:4]
    metrics = [m for m in metrics if m in table.metrics][:4] or table.metrics[:4]
    subsets = table.subsets
    rows = table.rows
    if not rows or not subsets or not metrics:
        return None
    n_models, n_sub = len(rows), len(subsets)
    width_in = min(18.0, max(5.0, 0.9 + n_sub * (0.5 + 0.08 * n_models)))
    col_w = legend_width([row.label for row in rows])
    legend_in = 0.0 if n_models <= 1 else 0.2 + col_w * math.ceil(n_models / 30)
    fig_w, fig_h = width_in + legend_in, max(2.2 * len(metrics) + 0.9, 0.6 + 0.16 * min(n_models, 30))
    fig = Figure(figsize=(fig_w, fig_h))
    colors = np.asarray(_colors(n_models))
    bar_w = 0.8 / n_models
    x = np.arange(n_sub, dtype=float)
    # bars and error bars as one PolyCollection and one LineCollection per panel: thousands of bars
    # (50 models x 10 subsets) then cost a few milliseconds instead of one artist each
    left = x[None, :] - 0.4 + bar_w * np.arange(n_models)[:, None]  # [model, subset]
    for p, metric in enumerate(metrics):
        ax = fig.add_subplot(len(metrics), 1, p + 1)
        val = np.full((n_models, n_sub), np.nan)
        lo, hi = np.full_like(val, np.nan), np.full_like(val, np.nan)
        for k, row in enumerate(rows):
            for j, s in enumerate(subsets):
                cell = row.cells.get((s, metric))
                if cell is None or cell.value is None:
                    continue
                val[k, j] = cell.value
                if cell.ci and cell.ci[0] is not None and cell.ci[1] is not None:
                    lo[k, j], hi[k, j] = cell.ci
        ok = np.isfinite(val)
        l0, v0 = left[ok], val[ok]
        verts = np.stack(
            [
                np.stack([l0, np.zeros_like(v0)], -1),
                np.stack([l0, v0], -1),
                np.stack([l0 + bar_w, v0], -1),
                np.stack([l0 + bar_w, np.zeros_like(v0)], -1),
            ],
            axis=1,
        )
        face = np.broadcast_to(colors[:, None, :], (n_models, n_sub, colors.shape[1]))[ok]
        ax.add_collection(PolyCollection(verts, facecolors=face, edgecolors="none"))
        has_ci = ok & np.isfinite(lo) & np.isfinite(hi)
        xc = (left + bar_w / 2)[has_ci]
        segs = np.stack([np.stack([xc, lo[has_ci]], -1), np.stack([xc, hi[has_ci]], -1)], axis=1)
        ax.add_collection(LineCollection(segs, colors="black", linewidths=0.6))
        top = np.nanmax(np.where(np.isfinite(hi), hi, val)) if ok.any() else 1.0
        bottom_v = min(0.0, float(np.nanmin(np.where(np.isfinite(lo), lo, val)))) if ok.any() else 0.0
        ax.set_ylim(bottom_v, float(top) * 1.05 if top > 0 else 1.0)
        ax.set_ylabel(f"{metric} (%)" if metric != "rsum" else metric)
        ax.set_xticks(x)
        ax.set_xticklabels(subsets if p == len(metrics) - 1 else [""] * n_sub, rotation=20 if n_sub > 5 else 0)
        ax.set_xlim(-0.5, n_sub - 0.5)
        ax.grid(axis="y", alpha=0.3)
        if p == 0:
            ax.set_title(f"{table.benchmark} ({table.protocol}): per subset, 95% CI")
            if n_models > 1:
                labels = [row.label for row in rows]
                fast_legend(fig, labels, colors, left_in=fig_w - legend_in + 0.1, top_in=0.4, col_w=col_w)
    # fixed margins in inches instead of tight_layout, which draws the figure once more
    bottom = 0.75 if n_sub > 5 else 0.5
    fig.subplots_adjust(
        left=0.75 / fig_w,
        right=1 - (legend_in + 0.15) / fig_w,
        top=1 - 0.35 / fig_h,
        bottom=bottom / fig_h,
        hspace=0.18 * 2.2 / 2.0,
    )
    return fig


def equivariance_scores(table: ResultTable) -> dict[str, np.ndarray]:
    """Row label -> per-case equivariance scores of the stored 2 x 2 matrices (a case once per row)."""
    out: dict[str, np.ndarray] = {}
    for row in table.rows:
        mats = []
        seen: set[str] = set()
        for rd in row.runs:
            for u in rd.units:
                if u["case_id"] in seen:
                    continue
                seen.add(u["case_id"])
                s = unit_scores(u)
                if s is None:
                    continue
                a = np.asarray(s, dtype=float)
                if a.shape == (2, 2):
                    mats.append(a)
        if mats:
            out[row.label] = equivariance_scores_from_matrices(np.stack(mats))
    return out


def equivariance_figure(table: ResultTable) -> Any | None:
    """EqBen Fig. 6 for a 2 x 2 group-protocol table, or None when no 2 x 2 matrices are stored."""
    if table.protocol != "group":
        return None
    scores = equivariance_scores(table)
    if not scores:
        return None
    group = {}
    for row in table.rows:
        cell = row.cells.get(("all", "group"))
        if cell is not None and cell.value is not None:
            group[row.label] = cell.value
    n = len(scores)
    with warnings.catch_warnings():  # its tight_layout cannot fit a 50-entry legend; it is moved below
        warnings.simplefilter("ignore", UserWarning)
        fig = plot_equivariance(
            scores,
            group_scores=group,
            title=f"{table.benchmark}: equivariance score (EqSim-v2 deviation)",
            figsize=(6.5, 3.8),
        )
    if n > 8:  # move the long legend out of the axes into a right margin
        ax = fig.axes[0]
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
        lines = ax.get_lines()
        col_w = legend_width([ln.get_label() for ln in lines], 2.6)
        legend_in = 0.2 + col_w * math.ceil(n / 30)
        fig_w, fig_h = 6.5 + legend_in, max(3.8, 0.6 + 0.16 * min(n, 30))
        fig.set_size_inches(fig_w, fig_h)
        fig.subplots_adjust(left=0.8 / fig_w, right=(6.3) / fig_w, top=1 - 0.4 / fig_h, bottom=0.55 / fig_h)
        fast_legend(
            fig,
            [ln.get_label() for ln in lines],
            [ln.get_color() for ln in lines],
            left_in=6.5 + 0.1,
            top_in=0.4,
            col_w=col_w,
        )
    return fig


def alpha_curves(table: ResultTable) -> dict[str, dict[str, Any]]:
    """Row label -> ``{"alpha": [...], "curves": {metric: [...]}, "tuned": alpha or None}``.

    Reads ``run.info["alpha_curve"]`` in either form: ``{"alpha": [...], "<metric>": [...]}`` or
    :meth:`spotdiff.diagnose.debias.DebiasResult.curve_data` (``{"alphas": [...], "curves": {...}, "alpha": a}``).
    """
    out: dict[str, dict[str, Any]] = {}
    for row in table.rows:
        for rd in row.runs:
            data = (rd.run.info or {}).get("alpha_curve")
            if not isinstance(data, Mapping):
                continue
            if "alphas" in data and isinstance(data.get("curves"), Mapping):
                alphas, curves = data["alphas"], dict(data["curves"])
                tuned = data.get("alpha") if isinstance(data.get("alpha"), (int, float)) else None
            else:
                alphas = data.get("alpha")
                curves = {k: v for k, v in data.items() if k != "alpha" and isinstance(v, (list, tuple))}
                tuned = None
            if not isinstance(alphas, (list, tuple)) or not alphas:
                continue
            curves = {k: v for k, v in curves.items() if isinstance(v, (list, tuple)) and len(v) == len(alphas)}
            if curves:
                out[row.label] = {"alpha": list(alphas), "curves": curves, "tuned": tuned}
                break
    return out


def alpha_curve_figure(table: ResultTable) -> Any | None:
    """Score against alpha per model (one panel per metric), tuned alpha marked; None without data."""
    from matplotlib.figure import Figure

    data = alpha_curves(table)
    if not data:
        return None
    metrics: list[str] = []
    for d in data.values():
        metrics.extend(m for m in d["curves"] if m not in metrics)
    metrics = metrics[:4]
    legend_in = 0.0 if len(data) <= 1 else 2.0 + 1.6 * (0 if len(data) <= 16 else 1 if len(data) <= 40 else 2)
    fig_w, fig_h = 4.2 * len(metrics) + legend_in, 3.3
    fig = Figure(figsize=(fig_w, fig_h))
    colors = _colors(len(data))
    for p, metric in enumerate(metrics):
        ax = fig.add_subplot(1, len(metrics), p + 1)
        for k, (label, d) in enumerate(data.items()):
            if metric not in d["curves"]:
                continue
            a = np.asarray(d["alpha"], dtype=float)
            v = np.asarray([math.nan if y is None else y for y in d["curves"][metric]], dtype=float)
            ax.plot(a, v, color=colors[k], label=label)
            if d["tuned"] is not None and np.isfinite(v).any():
                j = int(np.argmin(np.abs(a - float(d["tuned"]))))
                ax.plot([a[j]], [v[j]], marker="o", color=colors[k])
        ax.set_xlabel("alpha")
        ax.set_ylabel(f"{metric} (%)")
        ax.set_title(f"{table.benchmark}: {metric}", fontsize="small")
        ax.grid(alpha=0.3)
        if p == len(metrics) - 1:
            _legend(fig, ax, len(data))
    fig.subplots_adjust(
        left=0.7 / fig_w, right=1 - (legend_in + 0.15) / fig_w, top=1 - 0.35 / fig_h, bottom=0.55 / fig_h, wspace=0.3
    )
    return fig


def lexical_overlap_figure(benchmark: str, distances: Mapping[str, Sequence[float]]) -> Any | None:
    """Overlaid histograms of edit distances per caption pair (VISLA Fig. 8)."""
    from matplotlib.figure import Figure

    series = {k: np.asarray(v, dtype=float) for k, v in distances.items() if len(v)}
    if not series:
        return None
    pool = np.concatenate(list(series.values()))
    hi = float(np.nanmax(pool)) if pool.size else 1.0
    bins = np.linspace(0, max(hi, 1.0) + 1, min(40, int(max(hi, 1.0)) + 2))
    fig = Figure(figsize=(6.0, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    colors = {"P1-P2": "tab:green", "P1-N": "tab:red", "P2-N": "tab:orange"}
    for name, v in series.items():
        ax.hist(
            v, bins=bins, alpha=0.5, label=f"{name} (median {np.nanmedian(v):.0f}, n={len(v)})", color=colors.get(name)
        )
    ax.set_xlabel("Levenshtein distance (characters)")
    ax.set_ylabel("triplets")
    ax.set_title(f"{benchmark}: lexical overlap of caption pairs")
    ax.legend(fontsize="small")
    fig.subplots_adjust(left=0.12, right=0.97, top=0.9, bottom=0.15)
    return fig
