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
from spotdiff.synth import generative
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
    #: generative backend: the text-to-image model (hub name or folder) for objects and backgrounds
    t2i: str = generative.DEFAULT_T2I
    #: generative backend: the inpainting model that expands the background (SPEC Fig. 4)
    inpaint: str = generative.DEFAULT_INPAINT
    #: generative backend: the Grounding DINO detector
    detector: str = generative.DEFAULT_DETECTOR
    #: generative backend: the SAM segmenter
    segmenter: str = generative.DEFAULT_SEGMENTER
    #: generative backend: diffusion steps per image
    steps: int = 30
    #: generative backend: the side in pixels of a generated object photo
    object_size: int = 512
    #: generative backend: a folder caching generated object photos across runs; None: no cache
    instance_cache: Path | None = None
    #: generative backend: the object photos generated per class, from which cases pick their instances
    library_size: int = generative.LIBRARY_SIZE
    #: generative backend: object prompts per text-to-image call; None: 8 on CUDA, 1 on the CPU
    batch_size: int | None = None
    #: generative backend: ``auto`` (CUDA when available, in fp16), ``cpu`` or ``cuda[:N]``
    device: str = "auto"

    def generative_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`spotdiff.synth.generative.make_generative_stages`."""
        return {
            "t2i_model": self.t2i,
            "inpaint_model": self.inpaint,
            "detector": self.detector,
            "segmenter": self.segmenter,
            "steps": self.steps,
            "object_size": self.object_size,
            "cache_dir": self.instance_cache,
            "library_size": self.library_size,
            "batch_size": self.batch_size,
            "device": self.device,
        }

    def pipeline(self) -> Pipeline:
        """The canvas pipeline these options describe."""
        scenes = list(self.scenes) if self.scenes else None
        return make_pipeline(
            self.image_size,
            backend=self.backend,
            objects=self.objects,
            scenes=scenes,
            generative_options=self.generative_options() if self.backend == "generative" else None,
        )

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
    #: True: the engine always draws with diffusion models (no canvas backend to choose)
    generative: ClassVar[bool] = False

    def __init__(self, config: SynthConfig) -> None:
        self.config = replace(config, workers=cap_workers(config.workers))

    @abstractmethod
    def write(self, out: Path) -> dict[str, Any]:
        """Write the dataset under ``out``; return a short summary (also saved as ``synth.json``)."""


ENGINES: Registry[type[SynthEngine]] = Registry("synthesis engine", "spotdiff.synth", on_register=name_class)
