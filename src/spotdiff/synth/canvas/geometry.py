"""SPEC's definitions of size, position, existence and count (SPEC Sec. 3.3), and their measurement.

:func:`measure` turns a canvas label map into per-object boxes, areas and centres; the classifiers
map them to SPEC's labels with safety bands (``None`` when ambiguous). How area and position are
read: docs/synthesis.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

#: SPEC Eq. 1: absolute size level by area proportion P (closed intervals).
ABSOLUTE_SIZE_BANDS: dict[str, tuple[float, float]] = {
    "small": (0.0, 0.2),
    "medium": (0.4, 0.6),
    "large": (0.8, 1.0),
}
#: SPEC Eq. 2: relative size by area ratio R = S_A / S_B (closed intervals).
RELATIVE_SIZE_BANDS: dict[str, tuple[float, float]] = {
    "smaller than": (0.0, 0.5),
    "equal to": (0.9, 1.1),
    "larger than": (2.0, math.inf),
}
#: SPEC Sec. 3.3: the nine cells of the 3 x 3 grid, row by row.
GRID_POSITIONS = (
    "top-left",
    "top",
    "top-right",
    "left",
    "center",
    "right",
    "bottom-left",
    "bottom",
    "bottom-right",
)
#: SPEC Sec. 3.3: the four relations between two centre points.
RELATIVE_POSITIONS = ("left of", "right of", "above", "below")
#: Dominant-axis margin for relative positions (see docs/synthesis.md).
DOMINANCE = 2.0
#: SPEC Sec. 3.3: existence quantifiers and the count range.
EXISTENCE_LEVELS = ("no", "at least one")
COUNT_RANGE = range(1, 10)


def absolute_size_level(p: float) -> str | None:
    """SPEC Eq. 1: ``small`` (P <= 0.2), ``medium`` (0.4 <= P <= 0.6), ``large`` (P >= 0.8)."""
    for level, (lo, hi) in ABSOLUTE_SIZE_BANDS.items():
        if lo <= p <= hi:
            return level
    return None


def relative_size_level(r: float) -> str | None:
    """SPEC Eq. 2: ``smaller than`` (R <= 0.5), ``equal to`` (0.9 <= R <= 1.1), ``larger than`` (R >= 2)."""
    for level, (lo, hi) in RELATIVE_SIZE_BANDS.items():
        if lo <= r <= hi:
            return level
    return None


def grid_position(cx: float, cy: float, width: int, height: int) -> str:
    """SPEC Sec. 3.3: the 3 x 3 cell that holds the centre point (cells split the image in thirds).

    Args:
        cx: the centre's x.
        cy: the centre's y.
        width: the image width.
        height: the image height.
    """
    col = min(max(int(3 * cx / width), 0), 2)
    row = min(max(int(3 * cy / height), 0), 2)
    return GRID_POSITIONS[3 * row + col]


def relative_position(a: tuple[float, float], b: tuple[float, float]) -> str | None:
    """SPEC Sec. 3.3: how A's centre relates to B's (image y grows downwards); ``None`` if ambiguous."""
    dx, dy = a[0] - b[0], a[1] - b[1]
    if abs(dx) >= DOMINANCE * abs(dy) and dx != 0:
        return "left of" if dx < 0 else "right of"
    if abs(dy) >= DOMINANCE * abs(dx) and dy != 0:
        return "above" if dy < 0 else "below"
    return None


def existence_level(count: int) -> str:
    """SPEC Sec. 3.3: ``no`` for zero instances, ``at least one`` otherwise."""
    return "no" if count == 0 else "at least one"


@dataclass(frozen=True)
class Measured:
    """One object as it appears in a rendered image (all numbers in pixels of that image)."""

    index: int  # position in the scene's object list (label ``index + 1`` in the label map)
    category: str
    role: str
    bbox: tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive) of the visible opaque pixels
    mask_area: int  # visible opaque pixels
    full_mask_area: int  # opaque pixels of the placed cut-out, before clipping and occlusion
    centre: tuple[float, float]

    @property
    def box_area(self) -> int:
        x0, y0, x1, y1 = self.bbox
        return max(0, x1 - x0) * max(0, y1 - y0)

    @property
    def visible(self) -> bool:
        return self.mask_area > 0

    def as_dict(self, width: int, height: int) -> dict:
        out = asdict(self)
        out["bbox"] = list(self.bbox)
        out["centre"] = [round(self.centre[0], 3), round(self.centre[1], 3)]
        out["box_area"] = self.box_area
        out["area_fraction"] = round(self.box_area / (width * height), 6)
        out["grid"] = grid_position(*self.centre, width, height) if self.visible else None
        return out


def measure(
    label_map: np.ndarray,
    objects: list[tuple[str, str, int]],
    regions: list[tuple[int, int, int, int]] | None = None,
) -> list[Measured]:
    """Measure every object of a label map; ``objects`` holds (category, role, full mask area).

    ``regions`` optionally bounds where each object can be (x0, y0, x1, y1), to search less.

    Args:
        label_map: per pixel, 0 or the index + 1 of the object visible there.
        objects: (category, role, full mask area) of every object, in label order.
        regions: per object, a box (x0, y0, x1, y1) it lies in, or None.
    """
    out = []
    h, w = label_map.shape
    for i, (category, role, full_area) in enumerate(objects):
        rx0, ry0, rx1, ry1 = regions[i] if regions is not None else (0, 0, w, h)
        rx0, ry0, rx1, ry1 = max(0, rx0), max(0, ry0), min(w, rx1), min(h, ry1)
        mine = label_map[ry0:ry1, rx0:rx1] == i + 1 if rx1 > rx0 and ry1 > ry0 else np.zeros((0, 0), bool)
        area = int(mine.sum())
        if area == 0:
            out.append(Measured(i, category, role, (0, 0, 0, 0), 0, full_area, (math.nan, math.nan)))
            continue
        rows, cols = np.flatnonzero(mine.any(axis=1)), np.flatnonzero(mine.any(axis=0))
        x0, x1 = int(cols[0]) + rx0, int(cols[-1]) + 1 + rx0
        y0, y1 = int(rows[0]) + ry0, int(rows[-1]) + 1 + ry0
        out.append(Measured(i, category, role, (x0, y0, x1, y1), area, full_area, ((x0 + x1) / 2, (y0 + y1) / 2)))
    return out


def boxes_overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int], gap: int = 0) -> bool:
    """Whether two (x0, y0, x1, y1) boxes overlap or come closer than ``gap`` pixels.

    Args:
        a: a box.
        b: another box.
        gap: the least distance in pixels that does not count as overlap.
    """
    return not (a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1])
