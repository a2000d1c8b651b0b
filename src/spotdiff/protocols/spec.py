"""SPEC I2T and T2I accuracy (SPEC paper, Sec. 4.1 "Evaluation protocols", Eq. 4 and 5).

A case is ``K`` images x ``K`` texts with diagonal (or any) truth. The paper's ``h(I_j, T_i)`` is 1
when image ``I_j``'s true text scores strictly higher than all the other candidate texts, and
``g(T_j, I_i)`` is 1 when text ``T_j``'s true image scores strictly higher than all the other
candidate images. Ties and NaN scores fail; under ``ties="argmax"`` a tie goes to the candidate
listed first, as SPEC's code does (``spec/models/*_wrapper.py``: ``scores.argmax(dim=-1) == label``).

Units are queries: one ``i2t`` unit per image row that has a true text and at least one false
text, one ``t2i`` unit per text column that has a true image and at least one false image. A row
with several true texts succeeds only if every true text beats every false one. Partial cases are
therefore supported: SPEC's released files are ``image2text.json`` (one image, K captions: a 1 x K
case giving one i2t unit) and ``text2image.json`` (one caption, K images: a K x 1 case giving one
t2i unit), and a K x K case whose truth covers only some rows/columns gives units only for those.

``i2t`` and ``t2i`` are each averaged over their own units (the other is NaN on a unit). Within a
SPEC subset every case has the same K, so this unit mean equals Eq. 4/5's mean over cases of the
per-case mean over queries; across subsets with different K ("all") it is a micro average.
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

    name = "spec"
    needs = "image-text"
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
