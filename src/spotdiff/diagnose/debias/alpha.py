"""Alpha curves and alpha tuning for VisualGPTScore's debiasing (Sec. 6, Table 4a, Table 5).

:func:`cross_validate_alpha` tunes alpha on a 0.001 grid by Table 4a's repeated half-split
cross-validation; :func:`alpha_curves` gives a protocol metric's exact curve over the grid.
The method: docs/debiasing.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import ConfigError

log = logging.getLogger(__name__)

#: Grid step of the alpha search (Sec. 6 and Table 5: "a step size of 0.001").
ALPHA_STEP = 0.001

#: Cases with more score entries than this get their alpha curve on a coarse grid (see alpha_curves).
MAX_EXACT_ENTRIES = 4096


def alpha_grid(step: float = ALPHA_STEP) -> np.ndarray:
    """``0, step, ..., 1`` (1,001 values for the paper's step 0.001), exactly representable ends."""
    n = round(1.0 / step)
    if n < 1 or not math.isclose(n * step, 1.0, rel_tol=1e-9):
        raise ConfigError(f"alpha step must divide 1, got {step}")
    return np.arange(n + 1, dtype=np.float64) / n


# --------------------------------------------------------------------------------- curves
def i2t_alpha_curve(
    pos: np.ndarray, neg: np.ndarray, pos_prior: np.ndarray, neg_prior: np.ndarray, alphas: np.ndarray
) -> np.ndarray:
    """Top-1 correctness of one positive against its negatives for every alpha, vectorised.

    Args:
        pos, pos_prior: ``[n]`` log score and log prior of each case's positive text.
        neg, neg_prior: ``[n, M]`` the same for its negatives (NaN pads unequal M; a NaN score,
            like a tie, is a failure, as in the protocols).
        alphas: ``[A]``.

    Returns ``[n, A]`` float 0/1: ``pos - a*pos_prior > max_j(neg_j - a*neg_prior_j)`` strictly.
    """
    pos = np.asarray(pos, dtype=np.float64)[:, None]
    pos_prior = np.asarray(pos_prior, dtype=np.float64)[:, None]
    neg = np.asarray(neg, dtype=np.float64)
    neg_prior = np.asarray(neg_prior, dtype=np.float64)
    a = np.asarray(alphas, dtype=np.float64)[None, :]
    p = pos - a * pos_prior  # [n, A], the same arithmetic as debias() on the matrix
    ok = np.ones(p.shape, dtype=bool)
    nj = np.empty_like(p)
    cmp = np.empty(p.shape, dtype=bool)
    for j in range(neg.shape[1]):
        col, qcol = neg[:, j : j + 1], neg_prior[:, j : j + 1]
        np.multiply(a, qcol, out=nj)
        np.subtract(col, nj, out=nj)
        np.greater(p, nj, out=cmp)  # NaN on either side compares False: a failure
        pad = np.isnan(col[:, 0]) & np.isnan(qcol[:, 0])
        if pad.any():
            cmp[pad] = True
        ok &= cmp
    if (neg.shape[1] and np.isnan(neg).all(axis=1).any()) or not neg.shape[1]:
        ok &= ~np.isnan(p)  # a case with no real negative still fails on a NaN positive
    return ok.astype(np.float64)


def _grid_alphas(alphas: np.ndarray, n_entries: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Alphas at which a big case is evaluated, and each grid alpha's nearest evaluated index."""
    if n_entries <= MAX_EXACT_ENTRIES or len(alphas) <= 101:
        return alphas, None
    coarse = np.linspace(alphas[0], alphas[-1], 101)
    nearest = np.abs(alphas[:, None] - coarse[None, :]).argmin(axis=1)
    return coarse, nearest


def alpha_curves(
    protocol: Any,
    cases: Sequence[Case],
    matrices: Sequence[np.ndarray],
    log_priors: Sequence[np.ndarray],
    alphas: np.ndarray,
) -> dict[str, np.ndarray]:
    """Per-unit outcomes of ``protocol`` on ``S - alpha * log P(t)`` for every alpha (Eq. 12).

    Args:
        protocol: the protocol whose per-unit outcomes are computed.
        cases: the evaluated cases.
        matrices: each case's log score matrix ``S``.
        log_priors: each case's log P(t), one per text.
        alphas: the ``[A]`` grid (:func:`alpha_grid`).

    Returns metric -> ``[n_units, A]`` (units in :func:`spotdiff.protocols.evaluate` order, NaN where
    a metric is undefined). Exact on the grid: the outcome of a case changes only where two of its
    debiased entries cross, so the protocol runs once per stretch of alphas between crossings.
    Cases with more than :data:`MAX_EXACT_ENTRIES` entries (whole retrieval galleries) are evaluated
    on 101 alphas and each grid alpha takes its nearest one's outcome (logged).
    """
    from spotdiff.protocols.top1 import ImageToTextTop1

    alphas = np.asarray(alphas, dtype=np.float64)
    metrics = tuple(protocol.unit_metrics)
    if isinstance(protocol, ImageToTextTop1) and all(c.truth.shape[0] == 1 and c.truth.sum() == 1 for c in cases):
        fast = _top1_fast(cases, matrices, log_priors, alphas)
        if fast is not None:
            return {m: fast for m in metrics if m == "accuracy"}
    columns: dict[str, list[np.ndarray]] = {m: [] for m in metrics}
    warned = False
    for case, s, q in zip(cases, matrices, log_priors, strict=True):
        s = np.asarray(s, dtype=np.float64)
        s = s.reshape(1, -1) if s.ndim == 1 else s
        q = np.asarray(q, dtype=np.float64).reshape(1, -1)
        evals, nearest = _grid_alphas(alphas, s.size)
        if nearest is not None and not warned:
            log.info("alpha curve: cases with > %d entries are evaluated on 101 alphas", MAX_EXACT_ENTRIES)
            warned = True
        if nearest is None:
            stack = s[None, :, :] - evals[:, None, None] * q[None, :, :]  # [A, r, t]
            # the protocols rank entries, so an outcome can only change where the entries' order
            # (or a tie) changes: compare the stable sort order and the tie pattern alpha to alpha
            flat = stack.reshape(len(evals), -1)
            order = np.argsort(flat, axis=1, kind="stable")
            ranked = np.take_along_axis(flat, order, axis=1)
            ties = ranked[:, 1:] == ranked[:, :-1]
            change = np.ones(len(evals), dtype=bool)
            change[1:] = np.any(order[1:] != order[:-1], axis=1) | np.any(ties[1:] != ties[:-1], axis=1)
            starts = np.flatnonzero(change)
            runs = [protocol.outcomes(case, stack[k]) for k in starts]
        else:  # a whole gallery: one debiased matrix at a time
            starts = np.arange(len(evals))
            runs = [protocol.outcomes(case, s - a * q) for a in evals]
        lengths = np.diff(np.append(starts, len(evals)))
        n_units = len(runs[0])
        for m in metrics:
            vals = np.array([[float(r[u].get(m, np.nan)) for r in runs] for u in range(n_units)])
            col = np.repeat(vals, lengths, axis=1)
            if nearest is not None:
                col = col[:, nearest]
            columns[m].append(col)
    return {m: (np.concatenate(v) if v else np.zeros((0, len(alphas)))) for m, v in columns.items()}


def _top1_fast(cases, matrices, log_priors, alphas) -> np.ndarray | None:
    n = len(cases)
    width = max((len(c.texts) for c in cases), default=0) - 1
    if width < 1:
        return None
    pos = np.empty(n)
    pos_q = np.empty(n)
    neg = np.full((n, width), np.nan)
    neg_q = np.full((n, width), np.nan)
    for k, (c, s, q) in enumerate(zip(cases, matrices, log_priors, strict=True)):
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        p = int(np.flatnonzero(c.truth[0])[0])
        others = np.flatnonzero(~c.truth[0])
        pos[k], pos_q[k] = s[p], q[p]
        neg[k, : len(others)] = s[others]
        neg_q[k, : len(others)] = q[others]
        # a NaN score must fail, not look like padding: give it a NaN-free marker that wins
        bad = np.isnan(neg[k, : len(others)])
        if bad.any():
            neg[k, : len(others)][bad] = np.inf
            neg_q[k, : len(others)][bad] = 0.0
    return i2t_alpha_curve(pos, neg, pos_q, neg_q, alphas)


# --------------------------------------------------------------------------------- tuning
def curve_scores(curve: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """NaN-aware mean of each column of ``curve`` under 0/1 ``weights`` [S, n] -> [S, A] percent."""
    defined = ~np.isnan(curve)
    filled = np.where(defined, curve, 0.0)
    sums = weights @ filled
    counts = weights @ defined.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1e-300), np.nan) * 100.0


def tune_alpha(curve: np.ndarray, alphas: np.ndarray) -> tuple[float, float]:
    """``(alpha*, score)``: the grid alpha with the best mean outcome (ties: the smallest alpha)."""
    scores = curve_scores(np.asarray(curve, dtype=np.float64), np.ones((1, len(curve))))[0]
    k = int(np.nanargmax(scores)) if np.isfinite(scores).any() else 0
    return float(alphas[k]), float(scores[k])


def split_indices(n: int, n_splits: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(val, test)`` unit indices, ``[n_splits, n_val]`` and ``[n_splits, n - n_val]``: random halves.

    Args:
        n: the number of units.
        n_splits: how many random splits.
        val_fraction: share of the units in each validation part (at least 1, at most ``n - 1`` units).
        seed: seed of ``numpy.random.default_rng``.
    """
    n_val = min(n - 1, max(1, round(n * val_fraction)))
    ranks = np.argsort(np.random.default_rng(seed).random((n_splits, n)), axis=1)
    return ranks[:, :n_val], ranks[:, n_val:]


def aggregate_alpha_scores(
    protocol: Any, unit_curves: dict[str, np.ndarray], groups: dict[str, np.ndarray], metric: str, idx: np.ndarray
) -> np.ndarray:
    """``[S, A]`` scores (percent) of ``metric`` as the protocol itself aggregates it, for every alpha
    and every set of units ``idx`` ``[S, m]``: a macro average (ARO's per-relation accuracy) and other
    non-mean metrics are tuned on what the benchmark reports, not on the unit mean. The curves are
    piecewise constant in alpha, so the protocol runs once per run of identical columns.

    Args:
        protocol: the protocol whose ``aggregate_resamples`` gives the reported value.
        unit_curves: metric -> ``[n_units, A]`` per-unit outcomes (:func:`alpha_curves`).
        groups: tag -> per-unit tag values, as the protocol aggregates them.
        metric: the metric to score.
        idx: ``[S, m]`` unit indices, one set of units per row.
    """
    n_alphas = next(iter(unit_curves.values())).shape[1]
    out = np.empty((idx.shape[0], n_alphas))
    previous: dict[str, np.ndarray] | None = None
    for a in range(n_alphas):
        columns = {m: c[:, a] for m, c in unit_curves.items()}
        if previous is not None and all(np.array_equal(columns[m], previous[m], equal_nan=True) for m in columns):
            out[:, a] = out[:, a - 1]
            continue
        out[:, a] = protocol.aggregate_resamples(columns, groups, idx)[metric]
        previous = columns
    return out


def cross_validate_alpha(
    curve: np.ndarray,
    alphas: np.ndarray,
    *,
    n_splits: int = 10,
    val_fraction: float = 0.5,
    seed: int = 0,
    scores: Callable[[np.ndarray], np.ndarray] | None = None,
) -> dict[str, Any]:
    """Table 4a's protocol: tune alpha on a random half, test on the other half, ``n_splits`` times.

    Args:
        curve: ``[n_units, A]`` per-unit outcomes for every alpha (0/1, NaN where undefined).
        alphas: the ``[A]`` grid.
        n_splits: random splits (the paper: 10); val_fraction: share of units used for tuning.
        seed: seed of ``numpy.random.default_rng`` for the splits.
        scores: for a metric that is not a unit mean (a macro average), a function from unit
            indices ``[S, m]`` to ``[S, A]`` scores (:func:`aggregate_alpha_scores`); the splits
            are the same.

    Returns a JSON-ready dict: per split ``alpha_star``, ``val_score``, ``test_score``, and their
    ``*_mean`` / ``*_std`` (population std, ddof=0) over splits. Scores are percentages.
    Fully vectorised: one ``[n_splits, n] @ [n, A]`` product (two when some outcomes are NaN);
    the test half's sums are the totals minus the validation sums.
    """
    curve = np.asarray(curve, dtype=np.float64)
    n = curve.shape[0]
    if n < 2:
        raise ConfigError(f"cross-validating alpha needs at least 2 units, got {n}")
    val_idx, test_idx = split_indices(n, n_splits, val_fraction, seed)
    n_val = val_idx.shape[1]
    val = np.zeros((n_splits, n))
    np.put_along_axis(val, val_idx, 1.0, axis=1)
    defined = ~np.isnan(curve)
    if scores is not None:
        val_scores, test_scores = scores(val_idx), scores(test_idx)
    elif defined.all():
        filled = curve
        val_counts = np.full((n_splits, 1), float(n_val))
        test_counts = np.full((n_splits, 1), float(n - n_val))
    else:
        filled = np.where(defined, curve, 0.0)
        val_counts = val @ defined.astype(np.float64)
        test_counts = defined.sum(axis=0, dtype=np.float64)[None, :] - val_counts
    if scores is None:
        val_sums = val @ filled  # the one big product: [n_splits, n] @ [n, A]
        test_sums = filled.sum(axis=0)[None, :] - val_sums
        with np.errstate(invalid="ignore", divide="ignore"):
            val_scores = np.where(val_counts > 0, val_sums / np.maximum(val_counts, 1e-300), np.nan) * 100.0
            test_scores = np.where(test_counts > 0, test_sums / np.maximum(test_counts, 1e-300), np.nan) * 100.0
    filled = np.where(np.isnan(val_scores), -np.inf, val_scores)
    k = filled.argmax(axis=1)  # first maximum: the smallest alpha among ties
    rows = np.arange(n_splits)
    a_star = alphas[k]
    v_best = val_scores[rows, k]
    t_best = test_scores[rows, k]
    return {
        "n_splits": n_splits,
        "val_fraction": val_fraction,
        "seed": seed,
        "alpha_star": a_star.tolist(),
        "val_score": v_best.tolist(),
        "test_score": t_best.tolist(),
        "alpha_star_mean": float(a_star.mean()),
        "alpha_star_std": float(a_star.std()),
        "test_score_mean": float(np.nanmean(t_best)),
        "test_score_std": float(np.nanstd(t_best)),
        "val_score_mean": float(np.nanmean(v_best)),
    }
