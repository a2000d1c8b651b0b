"""Every benchmark's data declaration, looked up by name, in the order ``spotdiff data list`` shows them.

The declarations are the benchmarks' own (:class:`~spotdiff.benchmarks.metadata.BenchmarkMetadata`:
parts, licence, notes; shared image collections in :mod:`spotdiff.benchmarks.shared`); this module
only lists them. Where each checksum comes from: :mod:`spotdiff.benchmarks.sources`.
"""

from __future__ import annotations

from spotdiff.benchmarks import BENCHMARKS, canonical_benchmark
from spotdiff.benchmarks.metadata import BenchmarkMetadata
from spotdiff.errors import ConfigError

#: The order of ``spotdiff data list``, families together; benchmarks of plugins follow, sorted.
LISTING = (
    "visla-generic",
    "visla-spatial",
    "sugarcrepe",
    "valse",
    "vl-checklist",
    "eqben",
    "winoground",
    "spec",
    "aro-vg-relation",
    "aro-vg-attribution",
    "aro-coco-order",
    "aro-flickr-order",
    "crepe",
    "coco-retrieval",
    "flickr-retrieval",
    "zeroshot-classification",
)


def _catalog() -> dict[str, BenchmarkMetadata]:
    names = [n for n in LISTING if n in BENCHMARKS] + sorted(set(BENCHMARKS.names()) - set(LISTING))
    return {name: BENCHMARKS.get(name).metadata for name in names}


CATALOG: dict[str, BenchmarkMetadata] = _catalog()


def benchmark_sources(name: str) -> BenchmarkMetadata:
    """The declaration of benchmark ``name`` (an alias is accepted; a benchmark declared in a YAML file once it
    is registered, :mod:`spotdiff.data.declared`)."""
    canonical, _ = canonical_benchmark(name)
    if canonical in CATALOG:
        return CATALOG[canonical]
    if canonical in BENCHMARKS:
        return BENCHMARKS.get(canonical).metadata
    raise ConfigError(f"no data sources declared for benchmark {name!r}; known: {', '.join(CATALOG)}")
