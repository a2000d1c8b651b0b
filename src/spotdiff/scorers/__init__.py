"""Scorers: one module per model family, registered by spec prefix; :mod:`.factory` parses specs."""

from spotdiff.scorers.base import CAPABILITIES, SCORERS, EmbeddingScorer, PairScorer, Scorer, ScorerOptions
from spotdiff.scorers.factory import ALIASES, load_scorer, resolve_spec
from spotdiff.scorers.runtime import quiet_progress

__all__ = [
    "ALIASES",
    "CAPABILITIES",
    "SCORERS",
    "EmbeddingScorer",
    "PairScorer",
    "Scorer",
    "ScorerOptions",
    "load_scorer",
    "quiet_progress",
    "resolve_spec",
]
