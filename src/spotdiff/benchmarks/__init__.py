"""Benchmark loaders, one module per published format, registered by name."""

from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, LoadReport, get_benchmark

__all__ = ["BENCHMARKS", "Benchmark", "LoadReport", "get_benchmark"]
