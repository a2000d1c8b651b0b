"""Object sources and isolation: stages 1 and 2 of SPEC's progressive pipeline (SPEC Sec. 3.2.1-3.2.2).

SPEC generates one image per object with a text-to-image model ("a photo of a single and fully
visible [class name]", Sec. 3.2.1) and isolates it with Grounding DINO + SAM (Sec. 3.2.2), giving a
library of background-free instances. The embedded default does the same offline and on the CPU:

* :class:`ProceduralObjectSource` draws each instance with ``PIL.ImageDraw`` on a transparent
  canvas (33 nameable categories, several colours each, plain / striped / dotted / checked
  textures, and per-instance shape jitter), so the isolation is exact: the alpha channel *is* the
  segmentation.
* :class:`FolderObjectSource` reads a user's own RGBA cut-outs (``DIR/<category>/*.png`` or
  ``DIR/<category>_<anything>.png``).
* :class:`AlphaIsolator` crops a source image to its opaque pixels; the generative isolator lives in
  :mod:`spotdiff.synth.generative`.

The package: :mod:`.paint` (colours and the pen), :mod:`.category` and one module per family of
categories (:mod:`.food`, :mod:`.household`, :mod:`.vehicles`, :mod:`.outdoors`, :mod:`.animals`,
:mod:`.toys`), and :mod:`.library` (instances, cut-outs, sources, the ordered :data:`CATEGORIES`).

An *instance* (:class:`ObjectInstance`) is the unit of identity: the same instance always renders to
the same pixels, so all candidates of a SPEC case share "identical object appearance" (Sec. 3.1).
Instance seeds of evaluation data and of training corpora come from disjoint halves of the seed
space (``split``), so a model trained on a corpus never sees a test instance.
"""

from __future__ import annotations

from spotdiff.synth.objects.library import (
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
from spotdiff.synth.objects.paint import ALPHA_OPAQUE, COLOURS, SPLITS, TEXTURES, font

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
