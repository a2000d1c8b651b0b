"""Winoground / EqBen text, image and group scores (EqBen paper, Sec. 4, "Benchmarks").

A case is K images x K texts whose truth is a permutation; comparisons are strict (a tie or a NaN
fails) unless ``ties="argmax"``. The definitions: docs/protocols.md.
"""

from __future__ import annotations

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores, beats


def _permutation(case: Case) -> np.ndarray:
    """``t[i]``: the true text of image ``i``; the truth must be a K x K permutation, K >= 2."""
    truth = case.truth
    k = truth.shape[0]
    if len(case.images) < 2 or truth.shape != (k, k):
        raise DataError(
            f"case {case.id}: protocol 'group' needs K x K images x texts with K >= 2 "
            f"(Winoground/EqBen: 2 x 2), got {len(case.images)} images x {truth.shape[1]} texts"
        )
    if not (truth.sum(axis=0) == 1).all() or not (truth.sum(axis=1) == 1).all():
        raise DataError(
            f"case {case.id}: protocol 'group' needs exactly one true text per image and vice versa"
        )
    return truth.argmax(axis=1)


@PROTOCOLS.register("group")
class GroupScore(Protocol):
    """Winoground/EqBen text, image and group scores, strict ``>`` (EqBen Sec. 4).

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    >>> case = Case("c", ("a mug in some grass", "some grass in a mug"), np.eye(2), images, {"subset": "s"})
    >>> GroupScore().outcomes(case, np.array([[0.9, 0.2], [0.4, 0.7]]))
    [{'text': 1.0, 'image': 1.0, 'group': 1.0}]
    >>> GroupScore().outcomes(case, np.array([[0.9, 0.2], [0.8, 0.7]]))  # image 1 prefers text 0
    [{'text': 0.0, 'image': 1.0, 'group': 0.0}]
    >>> GroupScore().outcomes(case, np.full((2, 2), 0.5))  # a 2 x 2 tie scores 0
    [{'text': 0.0, 'image': 0.0, 'group': 0.0}]
    """

    needs = "image-text"
    ties_within_lines = True
    metrics = ("text", "image", "group")
    description = "Winoground/EqBen text, image and group score on K x K (2 x 2) cases; ties fail"

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        t_of = _permutation(case)
        k = len(t_of)
        s = as_scores(case, scores, (k, k), "image-text")
        if np.isnan(s).any():
            return [{"text": 0.0, "image": 0.0, "group": 0.0}]
        others = [np.delete(np.arange(k), j) for j in range(k)]
        # text score: each image row, its true text beats every other text in the row
        text = all(beats(s[i], np.array([t_of[i]]), others[t_of[i]], self.ties) for i in range(k))
        # image score: each text column, its true image beats every other image in the column
        i_of = np.argsort(t_of)  # the true image of each text
        image = all(beats(s[:, j], np.array([i_of[j]]), others[i_of[j]], self.ties) for j in range(k))
        return [{"text": float(text), "image": float(image), "group": float(text and image)}]
