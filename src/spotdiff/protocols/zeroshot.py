"""Zero-shot image classification: top-1, top-5 and mean per-class recall (CLIP_benchmark's metrics).

One image against every class label (``1 x C``); a class tied with the true one ranks above it unless
``ties="argmax"``. The definitions: docs/protocols.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spotdiff.cases import Case
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores, one_row_positive

NAN = float("nan")


def true_class_rank(scores: np.ndarray, positive: int, ties: str = "strict") -> float:
    """Pessimistic 0-based rank of ``scores[positive]``: the other entries scoring at least as high
    (NaN entries count as higher; under ``ties="argmax"`` an equal entry counts only when listed
    before the true one); ``inf`` when the true score is NaN.

    Args:
        scores: one score per class.
        positive: the index of the true class.
        ties: ``"strict"`` or ``"argmax"``.

    >>> true_class_rank(np.array([0.2, 0.5, 0.5, 0.1]), 1)
    1.0
    >>> true_class_rank(np.array([0.2, 0.5, 0.5, 0.1]), 1, "argmax")
    0.0
    >>> true_class_rank(np.array([0.2, 0.5, 0.4, 0.1]), 1)
    0.0
    """
    s = np.asarray(scores, dtype=float)
    p = s[positive]
    if np.isnan(p):
        return float("inf")
    tied = s == p
    if ties == "argmax":
        tied &= np.arange(s.size) < positive
    above = (s > p) | tied | np.isnan(s)
    above[positive] = False
    return float(np.sum(above))


def class_recall(values: np.ndarray, classes: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Mean over classes of the per-class mean of ``values`` (``[B]``, one per row of ``idx``).

    Classes absent from a row are left out of its mean.

    Args:
        values: per-unit 0/1 outcomes.
        classes: integer class codes aligned with ``values``.
        idx: ``[B, n]`` unit indices (default: one row of all units).

    >>> class_recall(np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 0, 1, 1]))
    array([0.75])
    """
    if idx is None:
        idx = np.arange(len(values))[None, :]
    n_classes = int(classes.max()) + 1 if classes.size else 0
    rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1]) * n_classes
    flat = rows + classes[idx].reshape(-1)
    size = idx.shape[0] * n_classes
    sums = np.bincount(flat, weights=values[idx].reshape(-1), minlength=size).reshape(idx.shape[0], -1)
    counts = np.bincount(flat, minlength=size).reshape(idx.shape[0], -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        present = (counts > 0).sum(axis=1)
        return np.where(present > 0, recall.sum(axis=1) / np.maximum(present, 1), np.nan)


@PROTOCOLS.register("zeroshot")
class ZeroShot(Protocol):
    """Zero-shot classification: top-1 (strict), top-5 (ties rank above), mean per-class recall.

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> img = (ArrayImage(np.zeros((2, 2, 3), np.uint8)),)
    >>> case = Case("i0", ("cat", "dog", "car"), np.array([[False, True, False]]), img,
    ...             {"subset": "test", "label": "dog"}, prompts=("a photo of a {c}.",))
    >>> ZeroShot().outcomes(case, np.array([[0.1, 0.3, 0.2]]))
    [{'top1': 1.0, 'top5': nan, 'rank': 0.0}]
    >>> ZeroShot().outcomes(case, np.array([[0.3, 0.3, 0.2]]))  # a tie fails top-1
    [{'top1': 0.0, 'top5': nan, 'rank': 1.0}]
    """

    needs = "image-text"
    ties_within_lines = True
    metrics = ("top1", "top5", "mean_per_class_recall")
    derived = ("mean_per_class_recall",)
    description = (
        "zero-shot classification with prompt ensembles: top-1 (strict), top-5, mean per-class recall "
        "(CLIP_benchmark's metrics; Radford et al. 2021)"
    )

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        pos, _ = one_row_positive(case, self.name)
        s = as_scores(case, scores, case.truth.shape, self.needs)[0]
        rank = true_class_rank(s, pos, self.ties)
        top5 = float(rank < 5) if s.size >= 5 else NAN
        return [{"top1": float(rank < 1), "top5": top5, "rank": rank}]

    @staticmethod
    def _codes(groups: dict[str, np.ndarray]) -> np.ndarray:
        labels = groups.get("label")
        if labels is None:
            labels = np.zeros(len(groups["case"]), dtype=object)
        return np.unique(np.asarray(labels).astype(str), return_inverse=True)[1].reshape(-1)

    def aggregate(self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray]) -> dict[str, float]:
        out = super().aggregate(values, groups)
        top1 = np.asarray(values.get("top1", []), dtype=float)
        recall = class_recall(np.nan_to_num(top1), self._codes(groups))[0] * 100.0 if top1.size else NAN
        out["mean_per_class_recall"] = float(recall)
        return {m: out[m] for m in self.metrics if m in out}

    def aggregate_resamples(
        self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray], idx: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The mean metrics and ``mean_per_class_recall`` of each resample.

        Args:
            values: metric -> per-unit values.
            groups: tag -> per-unit tag values (``"label"``: the class).
            idx: ``[B, n]`` unit indices, one resample per row.
        """
        out: dict[str, Any] = super().aggregate_resamples(values, groups, idx)
        top1 = np.nan_to_num(np.asarray(values["top1"], dtype=float))
        out["mean_per_class_recall"] = class_recall(top1, self._codes(groups), idx) * 100.0
        return {m: np.asarray(out[m], dtype=float) for m in self.metrics if m in out}
