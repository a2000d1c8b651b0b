"""Object sources and isolation: stages 1 and 2 of SPEC's progressive pipeline (SPEC Sec. 3.2.1-3.2.2).

The embedded procedural library (:class:`ProceduralObjectSource`), a user's cut-outs
(:class:`FolderObjectSource`) and :class:`AlphaIsolator`; an :class:`ObjectInstance` always renders
to the same pixels. Details: docs/synthesis.md.
"""

from __future__ import annotations

from spotdiff.synth.canvas.objects.library import (
    CATEGORIES,
    ORDER,
    AlphaIsolator,
    CutOut,
    FolderObjectSource,
    ObjectInstance,
    ObjectLibrary,
    ObjectSource,
    Placed,
    ProceduralObjectSource,
    draw_instance,
    instance_seed,
    make_source,
    resize_cutout,
    tight_crop,
)
from spotdiff.synth.canvas.objects.paint import ALPHA_OPAQUE, COLOURS, SPLITS, TEXTURES, font

__all__ = [
    "ALPHA_OPAQUE",
    "CATEGORIES",
    "COLOURS",
    "ORDER",
    "SPLITS",
    "TEXTURES",
    "AlphaIsolator",
    "CutOut",
    "FolderObjectSource",
    "ObjectInstance",
    "ObjectLibrary",
    "ObjectSource",
    "Placed",
    "ProceduralObjectSource",
    "draw_instance",
    "font",
    "instance_seed",
    "make_source",
    "resize_cutout",
    "tight_crop",
]
