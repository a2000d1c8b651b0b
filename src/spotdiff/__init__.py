"""spotdiff: does a vision-language or text-embedding model see a minimal change?

The Python API (:mod:`spotdiff.api`): ``load_model(spec)`` returns a scorer callable as
``scorer(images, texts)``; ``load_benchmark(name, data)`` the cases of a benchmark;
``evaluate(model, benchmark, data)`` the run ``spotdiff eval`` would record, as a :class:`Result`;
``evaluate_grid(models, benchmarks, data)`` every model on every benchmark, as a :class:`Grid`.
"""

from spotdiff.api import Grid, LoadedBenchmark, Result, evaluate, evaluate_grid, load_benchmark, load_model
from spotdiff.cases import (
    ArrayImage,
    Case,
    FileImage,
    ImageRef,
    NoiseImage,
    NpyImage,
    ParquetImage,
    PILImage,
)
from spotdiff.errors import ConfigError, DataError, SpotdiffError
from spotdiff.version import __version__

__all__ = [
    "ArrayImage",
    "Case",
    "ConfigError",
    "DataError",
    "FileImage",
    "Grid",
    "ImageRef",
    "LoadedBenchmark",
    "NoiseImage",
    "NpyImage",
    "PILImage",
    "ParquetImage",
    "Result",
    "SpotdiffError",
    "__version__",
    "evaluate",
    "evaluate_grid",
    "load_benchmark",
    "load_model",
]
