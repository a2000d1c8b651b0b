"""Minimal-change data engines that write published benchmark formats (docs/synthesis.md).

Engines register themselves in :data:`ENGINES` (``spec``, ``eqben``, ``visla``, ``corpus``,
``zeroshot``); the stages of SPEC's pipeline are :mod:`~spotdiff.synth.objects`,
:mod:`~spotdiff.synth.canvas`, :mod:`~spotdiff.synth.backgrounds`, bundled by
:mod:`~spotdiff.synth.pipeline`. Every engine is seeded and deterministic.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from spotdiff.processes import cap_workers
from spotdiff.registry import Registry, name_class
from spotdiff.synth.pipeline import Pipeline, make_pipeline


@dataclass(frozen=True)
class SynthConfig:
    """The options every engine takes (``spotdiff synth ENGINE`` parses them from its command line)."""

    #: how many: cases per subset (spec), pairs per subset (eqben), scenes (visla), image-caption
    #: pairs (corpus) or images (zeroshot)
    n: int = 10
    #: random seed; the same options give the same bytes
    seed: int = 0
    #: square image side in pixels
    image_size: int = 224
    #: a folder of your own RGBA cut-outs (``DIR/<class>/*.png``); None: the procedural library
    objects: Path | None = None
    #: ``procedural`` (offline, CPU) or ``generative`` (needs the ``generate`` extra)
    backend: str = "procedural"
    #: background scenes to draw from; None: all
    scenes: tuple[str, ...] | None = None
    #: worker processes (the output does not depend on them)
    workers: int = 1

    def pipeline(self) -> Pipeline:
        """The canvas pipeline these options describe."""
        scenes = list(self.scenes) if self.scenes else None
        return make_pipeline(self.image_size, backend=self.backend, objects=self.objects, scenes=scenes)

    def common(self) -> dict[str, Any]:
        """The keyword arguments every ``write_<engine>`` function takes."""
        return {
            "n": self.n,
            "seed": self.seed,
            "size": self.image_size,
            "pipeline": self.pipeline(),
            "workers": self.workers,
        }


class SynthEngine(ABC):
    """Base class of synthesis engines: built from a :class:`SynthConfig`, ``write(out)`` a dataset."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: the loader (``spotdiff eval --benchmark NAME``) that reads what this engine writes
    benchmark: ClassVar[str | None] = None
    #: the engine's options, with their defaults
    config_class: ClassVar[type[SynthConfig]] = SynthConfig

    def __init__(self, config: SynthConfig) -> None:
        self.config = replace(config, workers=cap_workers(config.workers))

    @abstractmethod
    def write(self, out: Path) -> dict[str, Any]:
        """Write the dataset under ``out``; return a short summary (also saved as ``synth.json``)."""


ENGINES: Registry[type[SynthEngine]] = Registry("synthesis engine", "spotdiff.synth", on_register=name_class)
