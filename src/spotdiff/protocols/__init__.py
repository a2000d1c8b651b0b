"""Protocols: metrics per benchmark family, bootstrap confidence intervals, paired comparisons.

Every protocol is a registered :class:`Protocol` subclass in a module of this package (``group``,
``spec``, ``top1``, ``valse``, ``visla``, ``retrieval``); :func:`get_protocol` finds one by name and
tie rule (:data:`TIES`). :func:`evaluate` runs one over cases with bootstrap intervals and the
papers' aggregates (:class:`UnitTable` and :func:`evaluate_table` do the same while streaming;
:mod:`.stats`); :func:`paired_comparison` compares two runs on the same units, cluster-aware, and
:func:`mcnemar` is its exact test of one-unit cases (:mod:`.paired`).
"""

from spotdiff.cases import TIES
from spotdiff.protocols.base import NEEDS, PROTOCOLS, Protocol, get_protocol
from spotdiff.protocols.paired import TESTS, PairedComparison, mcnemar, paired_comparison
from spotdiff.protocols.stats import SUBSET_MEAN, Evaluation, UnitTable, evaluate, evaluate_table

__all__ = [
    "NEEDS",
    "PROTOCOLS",
    "SUBSET_MEAN",
    "TESTS",
    "TIES",
    "Evaluation",
    "PairedComparison",
    "Protocol",
    "UnitTable",
    "evaluate",
    "evaluate_table",
    "get_protocol",
    "mcnemar",
    "paired_comparison",
]
