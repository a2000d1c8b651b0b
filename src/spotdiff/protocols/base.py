"""The protocol interface: pure functions from a case's score matrix to per-unit outcomes.

A *unit* is what a metric averages over: usually one case, but one query for gallery retrieval.
``outcomes(case, scores)`` returns one ``{metric: value}`` dict per unit (1.0 / 0.0 for a strict
win / loss; ties are losses everywhere). ``aggregate`` turns the stacked unit values into the
reported percentages; the default is the mean over the units where a metric is defined, x 100.
Protocols with derived metrics (``min(p_c, p_f)``, per-relation macro averages) override it.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from spotdiff.cases import Case
from spotdiff.registry import Registry

#: What a protocol needs from a scorer, and the score matrix the engine hands it:
#: "image-text": similarity ``[n_images, n_texts]``; "text-text": similarity ``[n_texts, n_texts]``;
#: "match-prob": match probability in [0, 1], ``[n_images, n_texts]``;
#: "text-prior": a text-only log-probability, ``[1, n_texts]``.
NEEDS = ("image-text", "text-text", "match-prob", "text-prior")


class Protocol:
    """Base class of every protocol; subclasses register with ``@PROTOCOLS.register(name)``."""

    name: ClassVar[str] = ""
    needs: ClassVar[str] = "image-text"
    metrics: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        """Per-unit metric values for one case (one dict per unit)."""
        raise NotImplementedError

    def unit_ids(self, case: Case, n_units: int) -> list[str]:
        """Names of a case's units; the case id when there is one unit."""
        return [case.id] if n_units == 1 else [f"{case.id}/{k}" for k in range(n_units)]

    def aggregate(self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray]) -> dict[str, float]:
        """Reported metrics (percentages) from unit values.

        Args:
            values: metric name -> float array over units (NaN where undefined for a unit).
            groups: tag name -> array of the units' tag values (for macro averages).
        """
        out = {}
        for metric in self.metrics:
            v = values.get(metric)
            if v is None:
                continue
            v = v[~np.isnan(v)]
            out[metric] = float(v.mean() * 100.0) if v.size else float("nan")
        return out


PROTOCOLS: Registry[type[Protocol]] = Registry("protocol", "spotdiff.protocols")


def get_protocol(name: str) -> Protocol:
    """An instance of the protocol registered under ``name``."""
    return PROTOCOLS.get(name)()
