"""VISLA triplet accuracy, text-to-text and image-to-text (VISLA paper, Sec. 4, Table 1, App. B).

A case is the triplet (P1, P2, N); ``accuracy`` is N ranked last for both queries, ``p1_n`` / ``p2_n``
each comparison alone; comparisons are strict unless ``ties="argmax"``. The definitions, and which of
P1-N / P2-N is which (Table 3): docs/protocols.md.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores, beats


def triplet(case: Case, protocol: str) -> tuple[int, int, int]:
    """Indices of P1, P2 and N among the case's texts."""
    if len(case.texts) != 3 or case.truth.shape[0] != 1:
        raise DataError(
            f"case {case.id}: protocol {protocol!r} needs one image (or none) and 3 texts (P1, P2, N), "
            f"got truth of shape {case.truth.shape}"
        )
    truth = case.truth[0]
    if case.roles:
        roles = [r.lower() for r in case.roles]
        try:
            p1, p2, n = roles.index("p1"), roles.index("p2"), roles.index("n")
        except ValueError:
            raise DataError(f"case {case.id}: VISLA roles must be p1, p2, n; got {case.roles}") from None
        if not (truth[p1] and truth[p2] and not truth[n]):
            raise DataError(f"case {case.id}: VISLA truth must mark P1 and P2 true and N false")
        return p1, p2, n
    pos = np.flatnonzero(truth)
    neg = np.flatnonzero(~truth)
    if pos.size != 2 or neg.size != 1:
        raise DataError(
            f"case {case.id}: VISLA needs two true texts and one false text, got {truth.tolist()}"
        )
    return int(pos[0]), int(pos[1]), int(neg[0])


class _Triplet(Protocol):
    """A VISLA triplet protocol: :meth:`_comparisons` decides P1-N and P2-N on a case's scores of
    ``shape``; ``accuracy`` is both."""

    ties_within_lines = True
    metrics = ("accuracy", "p1_n", "p2_n")
    #: The shape of a case's score matrix.
    shape: ClassVar[tuple[int, int]]

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        p1, p2, n = triplet(case, self.name)
        p1_n, p2_n = self._comparisons(as_scores(case, scores, self.shape, self.needs), p1, p2, n)
        return [{"accuracy": float(p1_n and p2_n), "p1_n": float(p1_n), "p2_n": float(p2_n)}]

    @abstractmethod
    def _comparisons(self, s: np.ndarray, p1: int, p2: int, n: int) -> tuple[bool, bool]:
        """``(P1-N, P2-N)``: P1 above N, P2 above N, on the scores ``s`` (indices of the case's texts)."""


@PROTOCOLS.register("visla-t2t")
class VislaT2T(_Triplet):
    """VISLA text-to-text triplet accuracy, P1-N and P2-N (VISLA Sec. 4, App. B, Table 3).

    ``scores`` is the 3 x 3 text-text similarity of (P1, P2, N): query P1 must rank P2 above N,
    query P2 must rank P1 above N.

    >>> import numpy as np
    >>> from spotdiff.cases import Case
    >>> case = Case("c", ("a cat left of a dog", "a dog right of a cat", "a cat right of a dog"),
    ...             np.array([[True, True, False]]), tags={"subset": "spatial"})
    >>> s = np.array([[1.0, 0.8, 0.9], [0.8, 1.0, 0.7], [0.9, 0.7, 1.0]])
    >>> VislaT2T().outcomes(case, s)  # P1 finds N closer than P2
    [{'accuracy': 0.0, 'p1_n': 1.0, 'p2_n': 0.0}]
    """

    needs = "text-text"
    shape = (3, 3)
    description = "VISLA T2T: negative ranked last for both positive queries; P1-N, P2-N; ties fail"

    def _comparisons(self, s: np.ndarray, p1: int, p2: int, n: int) -> tuple[bool, bool]:
        p2_n = beats(s[p1], np.array([p2]), np.array([n]), self.ties)  # query P1: P2 above N
        p1_n = beats(s[p2], np.array([p1]), np.array([n]), self.ties)  # query P2: P1 above N
        return p1_n, p2_n


@PROTOCOLS.register("visla-i2t")
class VislaI2T(_Triplet):
    """VISLA image-to-text triplet accuracy, P1-N and P2-N (VISLA Sec. 4, App. B)."""

    needs = "image-text"
    shape = (1, 3)
    description = "VISLA I2T: negative ranked below both positives for the image query; ties fail"

    def _comparisons(self, s: np.ndarray, p1: int, p2: int, n: int) -> tuple[bool, bool]:
        below = np.array([n])
        return beats(s[0], np.array([p1]), below, self.ties), beats(s[0], np.array([p2]), below, self.ties)
