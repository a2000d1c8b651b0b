"""VALSE metrics (VALSE, Parcalabescu et al. 2022, Sec. 5; EqBen paper Sec. 4 / Table 2).

``valse-pairwise``: ``acc_r``, the caption ranked above the foil. ``valse-prob``: ``acc``, ``p_c``,
``p_f``, ``min(p_c, p_f)`` and ``acc_r`` from match probabilities or ITM logits, as VALSE's released
code computes them. The definitions and thresholds: docs/protocols.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores, beats


def _caption_foil(case: Case, protocol: str) -> tuple[int, int]:
    truth = case.truth
    if truth.shape != (1, 2) or truth.sum() != 1:
        raise DataError(
            f"case {case.id}: protocol {protocol!r} needs one image x 2 texts (caption, foil) "
            f"with one true text, got truth of shape {truth.shape}"
        )
    cap = int(np.flatnonzero(truth[0])[0])
    return cap, 1 - cap


@PROTOCOLS.register("valse-pairwise")
class ValsePairwise(Protocol):
    """VALSE pairwise ranking accuracy ``acc_r``: s(caption) > s(foil), strict.

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> case = Case("c", ("There are two dogs.", "There are three dogs."), np.array([[True, False]]),
    ...             (ArrayImage(np.zeros((2, 2, 3), np.uint8)),), {"subset": "counting-hard"})
    >>> ValsePairwise().outcomes(case, np.array([0.6, 0.4]))
    [{'acc_r': 1.0}]
    >>> ValsePairwise().outcomes(case, np.array([0.5, 0.5]))  # a tie fails
    [{'acc_r': 0.0}]
    >>> ValsePairwise("argmax").outcomes(case, np.array([0.5, 0.5]))  # ... or goes to the caption, listed first
    [{'acc_r': 1.0}]
    """

    needs = "image-text"
    ties_within_lines = True
    metrics = ("acc_r",)
    description = "VALSE pairwise ranking accuracy acc_r: the caption must outscore the foil; ties fail"

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        cap, foil = _caption_foil(case, self.name)
        s = as_scores(case, scores, (1, 2), self.needs)[0]
        return [{"acc_r": float(beats(s, np.array([cap]), np.array([foil]), self.ties))}]


@PROTOCOLS.register("valse-prob")
class ValseProb(Protocol):
    """VALSE acc, p_c, p_f, min(p_c, p_f) and acc_r from match probabilities or ITM logits (VALSE code).

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> case = Case("c", ("A man exercises his torso.", "A torso exercises for a man."),
    ...             np.array([[True, False]]), (ArrayImage(np.zeros((2, 2, 3), np.uint8)),), {"subset": "actant-swap"})
    >>> ValseProb().outcomes(case, np.array([[0.73, 0.999]]))  # probabilities: the foil ranks higher
    [{'acc': 0.5, 'p_c': 1.0, 'p_f': 0.0, 'acc_r': 0.0}]
    >>> logits = np.array([[[2.0, 3.0], [-5.0, 2.0]]])  # (no-match, match): p = 0.73 and 0.999 again
    >>> ValseProb().outcomes(case, logits)  # VALSE ranks the match logits: 3 > 2
    [{'acc': 0.5, 'p_c': 1.0, 'p_f': 0.0, 'acc_r': 1.0}]
    """

    needs = "match-prob"
    metrics = ("acc", "p_c", "p_f", "min_pc_pf", "acc_r")
    derived = ("min_pc_pf",)
    description = "VALSE/EqBen acc, p_c, p_f, min(p_c, p_f) at threshold 0.5, and pairwise acc_r"

    threshold = 0.5

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        cap, foil = _caption_foil(case, self.name)
        arr = np.asarray(scores)
        if arr.ndim == 3:  # ITM logits (no-match, match) per pair
            logits = as_itm_logits(case, arr)
            margin = logits[:, 1] - logits[:, 0]  # > 0 exactly when p > 0.5
            rank = logits[:, 1]
        else:
            p = as_scores(case, arr, (1, 2), self.needs)[0]
            finite = p[~np.isnan(p)]
            if finite.size and (finite.min() < 0.0 or finite.max() > 1.0):
                raise DataError(f"case {case.id}: match probabilities must lie in [0, 1], got {p.tolist()}")
            margin = p - self.threshold
            rank = p
        with np.errstate(invalid="ignore"):
            fits = bool(margin[cap] > 0)
            detected = bool(margin[foil] < 0) or (self.ties == "argmax" and bool(margin[foil] == 0))
        return [
            {
                "acc": (float(fits) + float(detected)) / 2.0,
                "p_c": float(fits),
                "p_f": float(detected),
                "acc_r": float(beats(rank, np.array([cap]), np.array([foil]), self.ties)),
            }
        ]

    def derive(self, means: dict[str, Any]) -> dict[str, Any]:
        if "p_c" in means and "p_f" in means:
            return {"min_pc_pf": np.minimum(means["p_c"], means["p_f"])}
        return {}


def as_itm_logits(case: Case, scores: np.ndarray) -> np.ndarray:
    """A ``[1, 2, 2]`` matrix of ITM logits as ``[2 texts, (no-match, match)]`` float64."""
    if scores.shape != (1, 2, 2):
        raise DataError(
            f"case {case.id}: expected ITM logits of shape (1, 2, 2) (image, text, [no-match, match]), "
            f"got {scores.shape}"
        )
    return scores[0].astype(np.float64)

