"""Scorers: one module per model family, registered by spec prefix."""

from spotdiff.scorers.base import (
    ALIASES,
    CAPABILITIES,
    SCORERS,
    EmbeddingScorer,
    PairScorer,
    Scorer,
    ScorerOptions,
    load_scorer,
    resolve_spec,
)

__all__ = [
    "ALIASES",
    "CAPABILITIES",
    "SCORERS",
    "EmbeddingScorer",
    "PairScorer",
    "Scorer",
    "ScorerOptions",
    "load_scorer",
    "resolve_spec",
]
