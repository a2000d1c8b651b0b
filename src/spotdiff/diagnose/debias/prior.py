"""VisualGPTScore's PMI and alpha-debiasing of a generative score (Sec. 4-5, Eq. 3-12).

``log VisualGPTScore_alpha(t, i) = log VisualGPTScore(t, i) - alpha * log P(t)`` (Eq. 12), on the log
scores ``vgpt:`` returns, with P(t) from null or real images or a retrieval case's own gallery.
The derivation: docs/debiasing.md.
"""

from __future__ import annotations

import numpy as np

from spotdiff.errors import ConfigError
from spotdiff.scorers.null_prior import log_prior_from_scores


def gallery_log_prior(matrix: np.ndarray) -> np.ndarray:
    """P(t) from a case's own images (App. 8, Table 6): Eq. 6 over the gallery's rows."""
    return log_prior_from_scores(matrix)


def debias(log_vgs: np.ndarray, log_prior: np.ndarray, alpha: float) -> np.ndarray:
    """``log VisualGPTScore - alpha * log P(t)`` (Eq. 12); ``log_prior`` broadcasts over rows.

    Args:
        log_vgs: log VisualGPTScore matrix ``[n_images, n_texts]``.
        log_prior: log P(t) of each text.
        alpha: in [0, 1]; 0 is the raw score, 1 PMI (a ``ConfigError`` otherwise).
    """
    if not 0.0 <= float(alpha) <= 1.0:
        raise ConfigError(f"alpha must lie in [0, 1] (Eq. 12), got {alpha}")
    return np.asarray(log_vgs, dtype=np.float64) - float(alpha) * np.asarray(log_prior, dtype=np.float64)


def pmi(log_vgs: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """``log pmi(t, i) = log P(t|i) - log P(t)`` (Eq. 5): the alpha = 1 member (Eq. 11)."""
    return debias(log_vgs, log_prior, 1.0)
