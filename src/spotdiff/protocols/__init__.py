"""Protocols: metrics per benchmark family, bootstrap confidence intervals, paired comparisons.

Every protocol is a registered :class:`Protocol` subclass in a module of this package (``group``,
``spec``, ``top1``, ``valse``, ``visla``, ``retrieval``); :func:`get_protocol` finds one by name.
:func:`evaluate` runs one over cases with bootstrap intervals (:class:`UnitTable` and
:func:`evaluate_table` do the same while streaming); :func:`paired_comparison` compares
two runs on the same units.
"""

from spotdiff.protocols.base import NEEDS, PROTOCOLS, Protocol, get_protocol
from spotdiff.protocols.stats import (
    Evaluation,
    PairedComparison,
    UnitTable,
    evaluate,
    evaluate_table,
    evaluate_units,
    paired_comparison,
)

__all__ = [
    "NEEDS",
    "PROTOCOLS",
    "Evaluation",
    "PairedComparison",
    "Protocol",
    "UnitTable",
    "evaluate",
    "evaluate_table",
    "evaluate_units",
    "get_protocol",
    "paired_comparison",
]
