"""spotdiff: does a vision-language or text-embedding model see a minimal change?"""

from importlib.metadata import PackageNotFoundError, version

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

try:
    __version__ = version("spotdiff")
except PackageNotFoundError:
    __version__ = "0.0.0+unknown"

__all__ = [
    "ArrayImage",
    "Case",
    "ConfigError",
    "DataError",
    "FileImage",
    "ImageRef",
    "NoiseImage",
    "NpyImage",
    "PILImage",
    "ParquetImage",
    "SpotdiffError",
    "__version__",
]
