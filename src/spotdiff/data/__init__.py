"""The data home: benchmark sources, downloads and verification (``spotdiff data``).

``fetch_benchmark(name)`` brings a benchmark's data from its official source into the data home
(``$SPOTDIFF_DATA``, default ``~/.cache/spotdiff/data``); ``resolve_data(name, None)`` is where
``eval``, ``bias``, ``train --cases`` and ``report`` find it when ``--data`` is omitted, and
``data_provenance(folder)`` is the source record saved with every run. What to fetch is each
benchmark's declaration (:mod:`spotdiff.benchmarks.metadata`), looked up in :mod:`spotdiff.data.catalog`.
"""

from spotdiff.benchmarks.shared import COLLECTIONS
from spotdiff.data.catalog import CATALOG, benchmark_sources
from spotdiff.data.fetch import FetchIncomplete, PartOutcome, fetch_benchmark, select_parts
from spotdiff.data.home import (
    BenchmarkState,
    PartState,
    benchmark_dir,
    benchmark_state,
    data_home,
    data_provenance,
    resolve_data,
)
from spotdiff.data.verify import PartCheck, verify_benchmark

__all__ = [
    "CATALOG",
    "COLLECTIONS",
    "BenchmarkState",
    "FetchIncomplete",
    "PartCheck",
    "PartOutcome",
    "PartState",
    "benchmark_dir",
    "benchmark_sources",
    "benchmark_state",
    "data_home",
    "data_provenance",
    "fetch_benchmark",
    "resolve_data",
    "select_parts",
    "verify_benchmark",
]
