"""Distribution plot of the per-case equivariance score (EqBen Sec. 5.4, Fig. 6 and Fig. 13).

EqBen plots, for each model, the density of the EqSim-v2 deviation over all cases of a subset, with
the model's group score in the legend; a tighter curve near 0 means a more equivariant similarity.
The scores come from :func:`spotdiff.protocols.equivariance.equivariance_score` on the cases' 2 x 2
score matrices.

The function builds a :class:`matplotlib.figure.Figure` directly (no pyplot, no global backend), so
it is safe in servers, tests and the HTML report, which embeds :func:`figure_to_png_bytes`.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.protocols.equivariance import equivariance_score

__all__ = [
    "equivariance_scores_from_matrices",
    "figure_to_png_bytes",
    "gaussian_kde_curve",
    "plot_equivariance",
]


def equivariance_scores_from_matrices(matrices: Sequence[Any] | np.ndarray, *, normalize: str = "none") -> np.ndarray:
    """Scores of 2 x 2 case matrices (a list of 2 x 2 arrays or a ``[N, 2, 2]`` array)."""
    arr = np.asarray(matrices, dtype=np.float64)
    if arr.size == 0:
        return np.zeros(0)
    return np.asarray(equivariance_score(arr.reshape(-1, 2, 2), normalize=normalize))


def gaussian_kde_curve(values: np.ndarray, grid: np.ndarray, bandwidth: float | None = None) -> np.ndarray:
    """A Gaussian kernel density estimate of ``values`` on ``grid`` (Scott's rule by default)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return np.zeros_like(grid, dtype=np.float64)
    if bandwidth is None:
        spread = float(v.std(ddof=1)) if v.size > 1 else 0.0
        bandwidth = spread * v.size ** (-1.0 / 5.0) if spread > 0 else max(1e-3, float(np.ptp(grid)) / 100)
    z = (grid[:, None] - v[None, :]) / bandwidth
    return np.exp(-0.5 * z**2).sum(axis=1) / (v.size * bandwidth * np.sqrt(2 * np.pi))


def plot_equivariance(
    scores: Mapping[str, Sequence[float] | np.ndarray],
    *,
    group_scores: Mapping[str, float] | None = None,
    title: str = "Equivariance score (EqSim-v2 deviation)",
    path: str | Path | None = None,
    log_x: bool = False,
    bins: int = 200,
    figsize: tuple[float, float] = (5.0, 3.5),
) -> Any:
    """One density curve per model of its per-case equivariance scores (EqBen Fig. 6).

    Args:
        scores: model name -> per-case scores (see :func:`spotdiff.protocols.equivariance.equivariance_score`).
        group_scores: optional model name -> group score (%) shown in the legend, as in Fig. 6.
        path: when given, the figure is saved there (format from the suffix, e.g. ``.png``, ``.svg``).
        log_x: plot against ``log10`` of the score (useful when models differ by orders of magnitude).
        bins: number of grid points of the density curve.

    Returns the :class:`matplotlib.figure.Figure`; its axis has one line per model, labelled.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    ax = fig.add_subplot(1, 1, 1)
    cleaned = {name: np.asarray(v, dtype=np.float64) for name, v in scores.items()}
    if log_x:
        cleaned = {name: np.log10(np.clip(v, 1e-12, None)) for name, v in cleaned.items()}
    finite = [v[np.isfinite(v)] for v in cleaned.values()]
    pool = np.concatenate(finite) if finite else np.zeros(0)
    if pool.size:
        lo, hi = float(pool.min()), float(pool.max())
        pad = 0.05 * (hi - lo) if hi > lo else 0.5
        # scores are >= 0, so the curve starts at 0 unless plotted on a log scale
        lo = max(0.0, lo - pad) if (not log_x and lo >= 0) else lo - pad
        grid = np.linspace(lo, hi + pad, bins)
    else:
        grid = np.linspace(0.0, 1.0, bins)
    for name, v in cleaned.items():
        label = name
        if group_scores and name in group_scores:
            label = f"{name} (group {group_scores[name]:.2f})"
        label += f", n={int(np.isfinite(v).sum())}"
        ax.plot(grid, gaussian_kde_curve(v, grid), label=label)
    ax.set_xlabel("log10 equivariance score" if log_x else "equivariance score (smaller is better)")
    ax.set_ylabel("density")
    ax.set_title(title)
    if cleaned:
        ax.legend(fontsize="small")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig


def figure_to_png_bytes(fig: Any, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (for embedding in HTML reports)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
