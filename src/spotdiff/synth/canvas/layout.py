"""Arranging objects on a canvas: stage 3 of SPEC's pipeline (SPEC Sec. 3.2.3), with measurement.

Objects from the library are pasted, in order (later on top), onto a case's shared background.
While pasting, the canvas keeps a label map (object ``i`` visible at a pixel -> ``i + 1``), so each
rendered image is *measured* from what is actually visible (:func:`spotdiff.synth.canvas.geometry.measure`):
clipping at the border and occlusion by later objects are accounted for, and the engines assert the
measured quantity against the label of every image (SPEC Sec. 3.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from spotdiff.synth.canvas.geometry import Measured, measure
from spotdiff.synth.canvas.objects import ObjectInstance, ObjectLibrary, Placed


@dataclass(frozen=True)
class Placement:
    """One object on the canvas: its instance, resized layer size and top-left corner."""

    instance: ObjectInstance
    x: int
    y: int
    w: int
    h: int
    role: str = "target"

    def as_dict(self) -> dict:
        return {"object": self.instance.as_dict(), "role": self.role, "layer": [self.x, self.y, self.w, self.h]}


def placement_at(instance: ObjectInstance, placed: Placed, cx: float, cy: float, role: str = "target") -> Placement:
    """Place a resized layer so that the centre of its opaque box lands on ``(cx, cy)``.

    Args:
        instance: the instance the layer shows.
        placed: the resized layer.
        cx: the x of the opaque box's centre.
        cy: the y of the opaque box's centre.
        role: the object's role in the case (``target``, ``reference``, ...).
    """
    x0, y0, x1, y1 = placed.bbox
    w, h = placed.size
    return Placement(instance, round(cx - (x0 + x1) / 2), round(cy - (y0 + y1) / 2), w, h, role)


def placement_box(placement: Placement, placed: Placed) -> tuple[int, int, int, int]:
    """The canvas box of a placement's opaque pixels (before clipping)."""
    x0, y0, x1, y1 = placed.bbox
    return (placement.x + x0, placement.y + y0, placement.x + x1, placement.y + y1)


@dataclass
class Rendered:
    """One rendered image, its label map and the measured objects (same order as the placements)."""

    image: Image.Image
    label_map: np.ndarray
    objects: list[Measured]
    placements: list[Placement] = field(default_factory=list)

    def of_role(self, role: str) -> list[Measured]:
        return [o for o in self.objects if o.role == role and o.visible]


class Canvas:
    """Composites placements over a background and measures the result."""

    def __init__(self, library: ObjectLibrary, size: int) -> None:
        self.library = library
        self.size = int(size)

    def layer(self, placement: Placement) -> Placed:
        return self.library.placed(placement.instance, placement.w, placement.h)

    def box(self, placement: Placement) -> tuple[int, int, int, int]:
        return placement_box(placement, self.layer(placement))

    def render(self, background: Image.Image, placements: list[Placement]) -> Rendered:
        s = self.size
        image = background.copy()
        label = np.zeros((s, s), dtype=np.uint8)
        info = []
        regions = []
        for i, pl in enumerate(placements):
            placed = self.layer(pl)
            # composited through the opaque mask every measurement uses (alpha >= 128), as SPEC pastes SAM's
            # binary masks: no half-blended rim, so every pixel outside the changed objects' masks is the
            # same in every candidate of a case
            image.paste(placed.layer.convert("RGB"), (pl.x, pl.y), Image.fromarray(placed.mask.astype(np.uint8) * 255))
            # the part of the layer that falls inside the canvas
            lx0, ly0 = max(0, -pl.x), max(0, -pl.y)
            lx1, ly1 = min(pl.w, s - pl.x), min(pl.h, s - pl.y)
            if lx1 > lx0 and ly1 > ly0:
                sub = placed.mask[ly0:ly1, lx0:lx1]
                view = label[pl.y + ly0 : pl.y + ly1, pl.x + lx0 : pl.x + lx1]
                view[sub] = i + 1
            info.append((pl.instance.category, pl.role, placed.mask_area))
            regions.append((pl.x, pl.y, pl.x + pl.w, pl.y + pl.h))
        return Rendered(image, label, measure(label, info, regions), list(placements))
