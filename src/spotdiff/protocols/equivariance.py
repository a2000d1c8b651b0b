"""The per-case equivariance score of a 2 x 2 case (EqBen Sec. 5.4, Fig. 6 and Fig. 13).

The EqSim-v2 deviation with ``alpha = 0`` on one case (0 is exactly equivariant), for NumPy arrays
(reports) and torch tensors (training diagnostics). The formula: docs/protocols.md.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["equivariance_deviations", "equivariance_score"]


def _is_torch(x: Any) -> bool:
    """True for a torch tensor (never imports torch: a tensor exists only once torch is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _normalize_2x2(scores: Any, kind: str) -> Any:
    if kind == "none" or kind == "raw":
        return scores
    if _is_torch(scores):
        if kind == "softmax":
            return scores.softmax(dim=-1)
        if kind == "sigmoid":
            return scores.sigmoid()
    else:
        if kind == "softmax":
            e = np.exp(scores - scores.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
        if kind == "sigmoid":
            return 1.0 / (1.0 + np.exp(-scores))
    raise ValueError(f"unknown normalisation {kind!r}; use 'none', 'softmax' or 'sigmoid'")


def equivariance_deviations(scores: Any, *, normalize: str = "none") -> Any:
    """The two signed EqSim-v2 deviations of each case, shape ``[..., 2]``.

    ``scores[..., a, b]`` is image ``a`` against text ``b`` of a 2 x 2 case with diagonal truth
    (``[..., 2, 2]``, numpy or torch). Returns ``(d_i2t, d_t2i)`` with
    ``d_i2t = (s11 - s12) - (s22 - s21)`` and ``d_t2i = (s11 - s21) - (s22 - s12)``; both are 0
    for an exactly equivariant case. ``normalize`` ("none", "softmax" over each image's texts, or
    "sigmoid") is applied first.
    """
    is_torch = _is_torch(scores)
    s = scores if is_torch else np.asarray(scores, dtype=np.float64)
    if s.shape[-2:] != (2, 2):
        raise ValueError(f"equivariance scores need [..., 2, 2] score matrices, got {tuple(s.shape)}")
    s = _normalize_2x2(s, normalize)
    s11, s12, s21, s22 = s[..., 0, 0], s[..., 0, 1], s[..., 1, 0], s[..., 1, 1]
    d_i2t = (s11 - s12) - (s22 - s21)
    d_t2i = (s11 - s21) - (s22 - s12)
    if is_torch:
        import torch

        return torch.stack([d_i2t, d_t2i], dim=-1)
    return np.stack([d_i2t, d_t2i], axis=-1)


def equivariance_score(scores: Any, *, normalize: str = "none") -> Any:
    """Per-case equivariance score: the EqSim-v2 deviation ``d_i2t^2 + d_t2i^2`` (EqBen Fig. 6).

    This is EqSim-v2 (:func:`spotdiff.optimize.losses.eqsim_v2`) with ``alpha = 0`` evaluated on one
    case (each mean is over a single pair), so 0 means exactly equivariant and smaller is better.
    Vectorised over the leading dimensions of ``[..., 2, 2]`` score matrices (numpy in, numpy out;
    torch in, torch out, with gradients).

    >>> equivariance_score(np.array([[0.9, 0.2], [0.4, 0.7]]))  # d_i2t = 0.4, d_t2i = 0.0
    np.float64(0.16000000000000003)
    >>> float(equivariance_score(np.array([[0.8, 0.1], [0.1, 0.8]])))  # exactly equivariant
    0.0
    """
    d = equivariance_deviations(scores, normalize=normalize)
    return (d**2).sum(-1) if _is_torch(d) else (d**2).sum(axis=-1)
