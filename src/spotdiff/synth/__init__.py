"""Minimal-change data engines that write published benchmark formats (docs/architecture.md, "Synthesize").

Engines (each a module registering itself in :data:`ENGINES`):

* ``spec``   -- SPEC's progressive canvas pipeline and its six subsets (SPEC Sec. 3.2, 3.3).
* ``eqben``  -- EqBen-Kubric-style caption pairs (EqBen Sec. 4.2, App. B.4, Fig. 14) rendered as
  visual-minimal image pairs, and EQ-SD caption pairs (App. B.5, Fig. 15).
* ``visla``  -- VISLA-Spatial-style (P1, P2, N) triplets (VISLA Sec. 3.3, App. C.1).
* ``corpus`` -- an ordinary image-caption training corpus from disjoint object instances.

Stages (SPEC Sec. 3.2): :mod:`~spotdiff.synth.objects` (object source + isolation),
:mod:`~spotdiff.synth.canvas` (arrangement, with :mod:`~spotdiff.synth.geometry` measuring every
rendered image), :mod:`~spotdiff.synth.backgrounds` (background fill), bundled by
:mod:`~spotdiff.synth.pipeline`; :mod:`~spotdiff.synth.generative` holds the optional generative
stages (text-to-image, Grounding DINO + SAM, inpainting).

Every engine is seeded and deterministic: the same options give byte-identical JSON and images,
whatever the number of worker processes.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from spotdiff.registry import Registry


class SynthEngine(ABC):
    """Base class of synthesis engines: options from the command line, ``write(out)`` a dataset."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: the loader (``spotdiff eval --benchmark NAME``) that reads what this engine writes
    benchmark: ClassVar[str | None] = None

    @classmethod  # noqa: B027 - an optional hook: no engine-specific options by default
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Engine-specific options (the common ones are added by the ``synth`` command)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SynthEngine:
        """The engine configured by the parsed ``spotdiff synth`` options."""
        return cls(args)

    @abstractmethod
    def write(self, out: Path) -> dict[str, Any]:
        """Write the dataset under ``out``; return a short summary (also saved as ``synth.json``)."""


def parse_subsets(value: str | None) -> list[str] | None:
    """``--subsets a,b`` as a list (None: every subset)."""
    return [v.strip() for v in value.split(",")] if value else None


ENGINES: Registry[type[SynthEngine]] = Registry("synthesis engine", "spotdiff.synth")
