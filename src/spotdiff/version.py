"""The installed spotdiff version (recorded with every run)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("spotdiff")
except PackageNotFoundError:
    __version__ = "0.0.0+unknown"
