"""SPEC I2T and T2I accuracy (SPEC paper, Sec. 4.1 "Evaluation protocols", Eq. 4 and 5).

Units are queries (an image row, a text column), so SPEC's partial 1 x K and K x 1 cases are
supported; ties and NaN fail unless ``ties="argmax"``. The definitions: docs/protocols.md.
"""

from __future__ import annotations

import numpy as np

from spotdiff.cases import Case
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores, beats

NAN = float("nan")


def _queries(truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Image rows and text columns that define a query (a truth and at least one false)."""
    rows = np.flatnonzero(truth.any(axis=1) & ~truth.all(axis=1))
    cols = np.flatnonzero(truth.any(axis=0) & ~truth.all(axis=0))
    return rows, cols


@PROTOCOLS.register("spec")
class SpecAccuracy(Protocol):
    """SPEC I2T/T2I accuracy (Eq. 4-5), strict: the true candidate must beat every other one.

    A K x K case gives K image queries (``i2t``) and K text queries (``t2i``), one unit each:

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> images = tuple(ArrayImage(np.full((2, 2, 3), k, np.uint8)) for k in range(2))
    >>> case = Case("c", ("one apple", "two apples"), np.eye(2), images, {"subset": "count"})
    >>> SpecAccuracy().outcomes(case, np.array([[0.9, 0.2], [0.8, 0.7]]))  # image 1 prefers text 0
    [{'i2t': 1.0, 't2i': nan}, {'i2t': 0.0, 't2i': nan}, {'i2t': nan, 't2i': 1.0}, {'i2t': nan, 't2i': 1.0}]
    >>> SpecAccuracy().outcomes(case, np.full((2, 2), 0.5))[0]  # a tie fails
    {'i2t': 0.0, 't2i': nan}
    """

    needs = "image-text"
    ties_within_lines = True
    metrics = ("i2t", "t2i")
    description = "SPEC image-to-text and text-to-image accuracy on K x K candidate sets; ties fail"

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        truth = case.truth
        s = as_scores(case, scores, truth.shape, "image-text")
        rows, cols = _queries(truth)
        out: list[dict[str, float]] = []
        for i in rows:
            ok = beats(s[i], np.flatnonzero(truth[i]), np.flatnonzero(~truth[i]), self.ties)
            out.append({"i2t": float(ok), "t2i": NAN})
        for t in cols:
            ok = beats(s[:, t], np.flatnonzero(truth[:, t]), np.flatnonzero(~truth[:, t]), self.ties)
            out.append({"i2t": NAN, "t2i": float(ok)})
        return out

    def unit_ids(self, case: Case, n_units: int) -> list[str]:
        rows, cols = _queries(case.truth)
        return [f"{case.id}/i2t/{i}" for i in rows] + [f"{case.id}/t2i/{t}" for t in cols]
