"""VALSE metrics (VALSE, Parcalabescu et al. 2022, Sec. 5; EqBen paper Sec. 4 / Table 2).

A case is one image x two texts, the caption (true) and the foil (false).

``valse-pairwise`` (any similarity): ``acc_r``, pairwise ranking accuracy, is 1 when
``s(image, caption) > s(image, foil)``; ties and NaN fail.

``valse-prob`` (image-text *match probabilities* ``p = P(match | image, text)``): the binary
image-text-matching metrics that EqBen Table 2 reports as ``acc`` and ``min(p_c, p_f)``. EqBen
Sec. 4 defines ``p_c`` (``p_f``) as measuring "how well models identify the correct (foil) pair",
following VALSE. The definitions are those of VALSE's released evaluation code
(``lxmert_valse_eval.py``), where the model's two-way softmax decides:

* caption fits: ``p(caption) > 0.5`` (strict: match probability above no-match probability);
* foil detected: ``p(foil) <= 0.5`` (VALSE counts ``P(no match) >= P(match)`` as detected);
* ``p_c`` = fraction of captions that fit, ``p_f`` = fraction of foils detected. Despite their
  names these are per-class accuracies (recalls), exactly as VALSE computes them;
* ``acc`` = accuracy over all 2N caption and foil pairs = ``(p_c + p_f) / 2``;
* ``min_pc_pf`` = ``min(p_c, p_f)``, derived from the aggregates (not averaged per unit);
* ``acc_r`` = pairwise accuracy on the probabilities, ``p(caption) > p(foil)``.

The threshold is the only place where a value can sit exactly on a boundary; VALSE resolves
``p = 0.5`` as "no match", which fails a caption and passes a foil. A constant scorer therefore
gets ``acc_r = 0`` and ``min_pc_pf = 0`` (the strict headline metrics) and ``acc = 50``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores


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
    """

    name = "valse-pairwise"
    needs = "image-text"
    metrics = ("acc_r",)
    description = "VALSE pairwise ranking accuracy acc_r: the caption must outscore the foil; ties fail"

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        cap, foil = _caption_foil(case, self.name)
        s = as_scores(case, scores, (1, 2), self.needs)[0]
        return [{"acc_r": float(s[cap] > s[foil])}]  # NaN compares False


@PROTOCOLS.register("valse-prob")
class ValseProb(Protocol):
    """VALSE acc, p_c, p_f, min(p_c, p_f) and acc_r from match probabilities (VALSE code)."""

    name = "valse-prob"
    needs = "match-prob"
    metrics = ("acc", "p_c", "p_f", "min_pc_pf", "acc_r")
    derived = ("min_pc_pf",)
    description = "VALSE/EqBen acc, p_c, p_f, min(p_c, p_f) at threshold 0.5, and pairwise acc_r"

    threshold = 0.5

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        cap, foil = _caption_foil(case, self.name)
        p = as_scores(case, scores, (1, 2), self.needs)[0]
        finite = p[~np.isnan(p)]
        if finite.size and (finite.min() < 0.0 or finite.max() > 1.0):
            raise DataError(f"case {case.id}: match probabilities must lie in [0, 1], got {p.tolist()}")
        fits = bool(p[cap] > self.threshold)
        detected = bool(p[foil] <= self.threshold)
        return [
            {
                "acc": (float(fits) + float(detected)) / 2.0,
                "p_c": float(fits),
                "p_f": float(detected),
                "acc_r": float(p[cap] > p[foil]),
            }
        ]

    def derive(self, means: dict[str, Any]) -> dict[str, Any]:
        if "p_c" in means and "p_f" in means:
            return {"min_pc_pf": np.minimum(means["p_c"], means["p_f"])}
        return {}
