"""Drawing for the procedural object library: named colours, colour helpers, the unit-square pen."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

RGB = tuple[int, int, int]

#: Named colours: captions use the names, so they must look like their names.
COLOURS: dict[str, RGB] = {
    "red": (214, 40, 40),
    "green": (56, 158, 64),
    "blue": (40, 92, 214),
    "yellow": (246, 206, 40),
    "orange": (247, 131, 28),
    "purple": (132, 62, 176),
    "pink": (244, 128, 178),
    "brown": (134, 84, 42),
    "white": (244, 244, 240),
    "black": (34, 34, 38),
    "grey": (142, 142, 146),
}
TEXTURES = ("plain", "striped", "dotted", "checked")
ALPHA_OPAQUE = 128  # alpha at or above this counts as the object's pixels (see geometry.py)
SPLITS = {"test": 0, "train": 1}


# ----------------------------------------------------------------------------------------------
# colour helpers


def mix(a: Sequence[int], b: Sequence[int], t: float) -> RGB:
    """The colour ``t`` of the way from ``a`` to ``b``.

    Args:
        a: an RGB colour.
        b: another RGB colour.
        t: 0 gives ``a``, 1 gives ``b``.
    """
    return (
        round(a[0] + (b[0] - a[0]) * t),
        round(a[1] + (b[1] - a[1]) * t),
        round(a[2] + (b[2] - a[2]) * t),
    )


def dark(c: Sequence[int], t: float = 0.45) -> RGB:
    return mix(c, (0, 0, 0), t)


def light(c: Sequence[int], t: float = 0.45) -> RGB:
    return mix(c, (255, 255, 255), t)


def luminance(c: Sequence[int]) -> float:
    return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]


def outline_of(c: Sequence[int]) -> RGB:
    """A visible outline: darker for light colours, lighter for very dark ones."""
    return light(c, 0.38) if luminance(c) < 60 else dark(c, 0.5)


def contrast_of(c: Sequence[int]) -> RGB:
    """The second colour of a texture."""
    return light(c, 0.7) if luminance(c) < 150 else dark(c, 0.3)


WHITE: RGB = (250, 250, 248)
BLACK: RGB = (25, 25, 28)
SKYBLUE: RGB = (168, 214, 240)
WOOD: RGB = (150, 98, 52)
LEAF: RGB = (60, 150, 60)


# ----------------------------------------------------------------------------------------------
# the pen: unit-square drawing with outlines and textures


@lru_cache(maxsize=64)
def _pattern(size: int, colour: RGB, texture: str, period: int) -> Image.Image:
    """A full-canvas RGBA texture image (cached)."""
    yy, xx = np.mgrid[0:size, 0:size]
    if texture == "striped":
        on = ((xx + yy) // period) % 2 == 0
    elif texture == "checked":
        on = ((xx // period) + (yy // period)) % 2 == 0
    elif texture == "dotted":
        cx = (xx % period) - period / 2
        cy = (yy % period) - period / 2
        on = (cx * cx + cy * cy) > (period * 0.27) ** 2
    else:
        on = np.ones((size, size), dtype=bool)
    other = contrast_of(colour)
    arr = np.empty((size, size, 4), dtype=np.uint8)
    arr[..., :3] = np.where(on[..., None], np.array(colour, np.uint8), np.array(other, np.uint8))
    arr[..., 3] = 255
    return Image.fromarray(arr, "RGBA")


class Pen:
    """Draws shapes given in unit-square coordinates (x right, y down) onto a square RGBA canvas.

    ``group`` draws a union of shapes with one fill and one outline around the whole union: all
    outlines first (twice the width), then all fills, so inner edges disappear.

    Args:
        size: the canvas side in pixels.
        rng: the instance's generator.
        texture: the instance's texture.
    """

    def __init__(self, size: int, rng: np.random.Generator, texture: str = "plain") -> None:
        self.s = size
        self.rng = rng
        self.texture = texture
        self.im = Image.new("RGBA", (size, size), (0, 0, 0, 0))
        self.d = ImageDraw.Draw(self.im)
        self.lw = max(1, round(size * 0.012))

    # coordinates
    def p(self, x: float, y: float) -> tuple[float, float]:
        return (x * self.s, y * self.s)

    def pts(self, seq: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
        return [self.p(x, y) for x, y in seq]

    def box(self, b: Sequence[float]) -> list[float]:
        return [b[0] * self.s, b[1] * self.s, b[2] * self.s, b[3] * self.s]

    def w(self, unit: float) -> int:
        return max(1, round(unit * self.s))

    # primitives on any ImageDraw
    def _shape(self, d: ImageDraw.ImageDraw, shape: tuple, fill, outline=None, width: int = 0) -> None:
        kind = shape[0]
        if kind == "ellipse":
            d.ellipse(self.box(shape[1]), fill=fill, outline=outline, width=width)
        elif kind == "poly":
            pts = self.pts(shape[1])
            if fill is not None:
                d.polygon(pts, fill=fill)
            if outline is not None and width:
                d.line([*pts, pts[0]], fill=outline, width=width, joint="curve")
        elif kind == "rect":
            radius = shape[2] * self.s if len(shape) > 2 else 0
            d.rounded_rectangle(self.box(shape[1]), radius=radius, fill=fill, outline=outline, width=width)
        elif kind == "pie":
            d.pieslice(self.box(shape[1]), shape[2], shape[3], fill=fill, outline=outline, width=width)
        elif kind == "chord":
            d.chord(self.box(shape[1]), shape[2], shape[3], fill=fill, outline=outline, width=width)
        else:  # pragma: no cover - programming error
            raise ValueError(kind)

    def group(
        self,
        shapes: Sequence[tuple],
        fill: RGB,
        *,
        outline: RGB | bool | None = True,
        texture: str | None = None,
        period: float = 0.09,
    ) -> None:
        """Draw the union of ``shapes`` with one fill and one outline around the whole union.

        Args:
            shapes: ``(kind, box or points, ...)`` tuples: ``ellipse``, ``poly``, ``rect``, ``pie``, ``chord``.
            fill: the fill colour.
            outline: the outline colour; True: a darker shade of ``fill``; None or False: no outline.
            texture: ``plain`` (or None), or a pattern drawn in ``fill``'s colours.
            period: the pattern's period as a fraction of the canvas side.
        """
        line = outline_of(fill) if outline is True else (outline or None)
        if line is not None:
            for shape in shapes:
                self._shape(self.d, shape, fill=line, outline=line, width=2 * self.lw)
        texture = texture or "plain"
        if texture == "plain":
            for shape in shapes:
                self._shape(self.d, shape, fill=fill)
            return
        mask = Image.new("L", (self.s, self.s), 0)
        md = ImageDraw.Draw(mask)
        for shape in shapes:
            self._shape(md, shape, fill=255)
        self.im.paste(_pattern(self.s, tuple(fill), texture, max(2, round(period * self.s))), (0, 0), mask)

    def ellipse(self, b, fill, **kw) -> None:
        """One ellipse in the box ``b``.

        Args:
            b: the box (x0, y0, x1, y1).
            fill: the fill colour.
            **kw: further keyword arguments of :meth:`group` (``outline``, ``texture``, ``period``).
        """
        self.group([("ellipse", b)], fill, **kw)

    def circle(self, cx, cy, r, fill, **kw) -> None:
        """One circle.

        Args:
            cx: the centre's x.
            cy: the centre's y.
            r: the radius.
            fill: the fill colour.
            **kw: further keyword arguments of :meth:`group` (``outline``, ``texture``, ``period``).
        """
        self.group([("ellipse", (cx - r, cy - r, cx + r, cy + r))], fill, **kw)

    def poly(self, pts, fill, **kw) -> None:
        """One polygon.

        Args:
            pts: its points.
            fill: the fill colour.
            **kw: further keyword arguments of :meth:`group` (``outline``, ``texture``, ``period``).
        """
        self.group([("poly", pts)], fill, **kw)

    def rect(self, b, fill, r: float = 0.0, **kw) -> None:
        """One rectangle, its corners rounded with radius ``r``.

        Args:
            b: the box (x0, y0, x1, y1).
            fill: the fill colour.
            r: the corner radius.
            **kw: further keyword arguments of :meth:`group` (``outline``, ``texture``, ``period``).
        """
        self.group([("rect", b, r)], fill, **kw)

    def line(self, pts, colour, width: float) -> None:
        """A polyline.

        Args:
            pts: its points.
            colour: its colour.
            width: its width.
        """
        self.d.line(self.pts(pts), fill=colour, width=self.w(width), joint="curve")

    def clear(self, shape: tuple) -> None:
        """Make a shape fully transparent (a hole)."""
        self._shape(self.d, shape, fill=(0, 0, 0, 0))


def profile(cx: float, y0: float, y1: float, half_width: Callable[[float], float], n: int = 48) -> list:
    """A polygon symmetric about ``x = cx`` from a half-width profile ``u in [0, 1] -> w``.

    Args:
        cx: the axis of symmetry.
        y0: the top.
        y1: the bottom.
        half_width: the half-width at each fraction ``u`` of the way from ``y0`` to ``y1``.
        n: points per side.
    """
    us = [i / (n - 1) for i in range(n)]
    left = [(cx - half_width(u), y0 + (y1 - y0) * u) for u in us]
    right = [(cx + half_width(u), y0 + (y1 - y0) * u) for u in reversed(us)]
    return left + right


def rot_ellipse(cx: float, cy: float, rx: float, ry: float, angle: float, n: int = 36) -> list:
    """Polygon points of an ellipse rotated by ``angle`` radians.

    Args:
        cx: the centre's x.
        cy: the centre's y.
        rx: the radius along x before rotation.
        ry: the radius along y before rotation.
        angle: the rotation in radians.
        n: the number of points.
    """
    ca, sa = math.cos(angle), math.sin(angle)
    out = []
    for i in range(n):
        t = 2 * math.pi * i / n
        x, y = rx * math.cos(t), ry * math.sin(t)
        out.append((cx + x * ca - y * sa, cy + x * sa + y * ca))
    return out


def polar(cx: float, cy: float, radius: Callable[[float], float], n: int = 72) -> list:
    """Polygon points of a closed curve given by its radius at each angle.

    Args:
        cx: the centre's x.
        cy: the centre's y.
        radius: the radius at each angle (radians).
        n: the number of points.
    """
    return [
        (cx + radius(t) * math.cos(t), cy + radius(t) * math.sin(t)) for t in (2 * math.pi * i / n for i in range(n))
    ]


@lru_cache(maxsize=16)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """PIL's default font at ``size`` pixels (a bitmap font where PIL lacks FreeType)."""
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # pragma: no cover - PIL without FreeType
        return ImageFont.load_default()
