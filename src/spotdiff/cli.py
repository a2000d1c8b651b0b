"""The ``spotdiff`` console entry point; the sub-commands and their dispatcher live in :mod:`spotdiff.commands`."""

from spotdiff.commands import main

__all__ = ["main"]
