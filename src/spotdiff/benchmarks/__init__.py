"""Benchmark loaders, one module per published format, registered by name."""

from spotdiff.benchmarks._io import IMAGE_ROOT
from spotdiff.benchmarks.base import (
    ALIASES,
    BENCHMARKS,
    Benchmark,
    BenchmarkMetadata,
    LoadReport,
    canonical_benchmark,
    get_benchmark,
)

__all__ = [
    "ALIASES",
    "BENCHMARKS",
    "IMAGE_ROOT",
    "Benchmark",
    "BenchmarkMetadata",
    "LoadReport",
    "canonical_benchmark",
    "get_benchmark",
]
