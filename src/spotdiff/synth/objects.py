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

An *instance* (:class:`ObjectInstance`) is the unit of identity: the same instance always renders to
the same pixels, so all candidates of a SPEC case share "identical object appearance" (Sec. 3.1).
Instance seeds of evaluation data and of training corpora come from disjoint halves of the seed
space (``split``), so a model trained on a corpus never sees a test instance.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from spotdiff.errors import ConfigError, DataError
from spotdiff.synth.language import pluralize

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
        self.group([("ellipse", b)], fill, **kw)

    def circle(self, cx, cy, r, fill, **kw) -> None:
        self.group([("ellipse", (cx - r, cy - r, cx + r, cy + r))], fill, **kw)

    def poly(self, pts, fill, **kw) -> None:
        self.group([("poly", pts)], fill, **kw)

    def rect(self, b, fill, r: float = 0.0, **kw) -> None:
        self.group([("rect", b, r)], fill, **kw)

    def line(self, pts, colour, width: float) -> None:
        self.d.line(self.pts(pts), fill=colour, width=self.w(width), joint="curve")

    def clear(self, shape: tuple) -> None:
        """Make a shape fully transparent (a hole)."""
        self._shape(self.d, shape, fill=(0, 0, 0, 0))


def profile(cx: float, y0: float, y1: float, half_width: Callable[[float], float], n: int = 48) -> list:
    """A polygon symmetric about ``x = cx`` from a half-width profile ``u in [0, 1] -> w``."""
    us = [i / (n - 1) for i in range(n)]
    left = [(cx - half_width(u), y0 + (y1 - y0) * u) for u in us]
    right = [(cx + half_width(u), y0 + (y1 - y0) * u) for u in reversed(us)]
    return left + right


def rot_ellipse(cx: float, cy: float, rx: float, ry: float, angle: float, n: int = 36) -> list:
    """Polygon points of an ellipse rotated by ``angle`` radians."""
    ca, sa = math.cos(angle), math.sin(angle)
    out = []
    for i in range(n):
        t = 2 * math.pi * i / n
        x, y = rx * math.cos(t), ry * math.sin(t)
        out.append((cx + x * ca - y * sa, cy + x * sa + y * ca))
    return out


def polar(cx: float, cy: float, radius: Callable[[float], float], n: int = 72) -> list:
    return [
        (cx + radius(t) * math.cos(t), cy + radius(t) * math.sin(t)) for t in (2 * math.pi * i / n for i in range(n))
    ]


# ----------------------------------------------------------------------------------------------
# the categories


@dataclass(frozen=True)
class Category:
    """A nameable object category of the procedural library."""

    name: str
    draw: Callable[[Pen, RGB, float], None]
    colours: tuple[str, ...] = ()  # empty: one fixed look, the colour is not part of its name
    textures: tuple[str, ...] = ("plain",)
    plural: str = ""

    @property
    def plural_name(self) -> str:
        return self.plural or pluralize(self.name)


CATEGORIES: dict[str, Category] = {}


def _category(name: str, colours: Sequence[str] = (), textures: Sequence[str] = ("plain",), plural: str = ""):
    def deco(fn: Callable[[Pen, RGB, float], None]):
        CATEGORIES[name] = Category(name, fn, tuple(colours), tuple(textures), plural)
        return fn

    return deco


def _j(pen: Pen, scale: float = 1.0) -> float:
    """A small per-instance jitter in [-scale, scale] (shape variety between instances)."""
    return float(pen.rng.uniform(-scale, scale))


@_category("apple", ["red", "green", "yellow"])
def _apple(p: Pen, c: RGB, j: float) -> None:
    w = 0.02 * j
    p.group(
        [
            ("ellipse", (0.12 - w, 0.24, 0.60, 0.90)),
            ("ellipse", (0.40, 0.24, 0.88 + w, 0.90)),
            ("ellipse", (0.26, 0.46, 0.74, 0.95)),
        ],
        c,
        texture=p.texture,
    )
    p.ellipse((0.22, 0.36, 0.34, 0.56), light(c, 0.5), outline=None)
    p.line([(0.50, 0.34), (0.53 + 0.02 * j, 0.08)], WOOD, 0.035)
    p.poly([(0.55, 0.20), (0.63, 0.08), (0.82, 0.06), (0.72, 0.18)], LEAF)


@_category("banana", ["yellow", "green"])
def _banana(p: Pen, c: RGB, j: float) -> None:
    n = 40
    bend = 0.40 + 0.04 * j
    outer = [(0.08 + 0.84 * t, 0.26 + bend * math.sin(math.pi * t)) for t in (i / (n - 1) for i in range(n))]
    inner = [
        (0.08 + 0.84 * t, 0.26 + bend * math.sin(math.pi * t) - (0.03 + 0.22 * math.sin(math.pi * t) ** 0.8))
        for t in (i / (n - 1) for i in range(n))
    ]
    p.poly(outer + inner[::-1], c, texture=p.texture)
    p.line(
        [(0.12 + 0.76 * t, 0.24 + bend * math.sin(math.pi * (0.05 + 0.9 * t)) - 0.1) for t in np.linspace(0, 1, 20)],
        dark(c, 0.2),
        0.012,
    )
    p.poly([(0.86, 0.24), (0.95, 0.18), (0.97, 0.25), (0.91, 0.29)], (90, 70, 30))
    p.ellipse((0.05, 0.22, 0.11, 0.29), (70, 50, 25))


@_category("strawberry", ["red"], plural="strawberries")
def _strawberry(p: Pen, c: RGB, j: float) -> None:
    def hw(u: float) -> float:
        return 0.36 * math.sin(math.pi * (0.32 + 0.68 * u)) ** 0.8 + 0.01

    p.poly(profile(0.5, 0.22, 0.95, hw), c)
    for row in range(7):
        u = 0.08 + row * 0.12
        half = hw(u) * 0.8
        k = max(1, int(half / 0.08))
        for i in range(-k, k + 1):
            x = 0.5 + i * half / max(k, 1) + (0.03 if row % 2 else 0.0)
            y = 0.22 + 0.73 * u
            if abs(x - 0.5) < hw(u) * 0.85:
                p.ellipse((x - 0.012, y - 0.02, x + 0.012, y + 0.02), (250, 226, 120), outline=None)
    leaves = []
    for k in range(6):
        a = math.pi * (1.05 + k * 0.18) + 0.05 * j
        leaves.append(
            (
                "poly",
                [
                    (0.5, 0.24),
                    (0.5 + 0.25 * math.cos(a), 0.24 + 0.15 * math.sin(a) + 0.09),
                    (0.5 + 0.1 * math.cos(a + 0.3), 0.2),
                ],
            )
        )
    p.group(leaves, (46, 140, 50))
    p.line([(0.5, 0.2), (0.52, 0.05)], (46, 120, 50), 0.03)


@_category("carrot", ["orange"])
def _carrot(p: Pen, c: RGB, j: float) -> None:
    p.poly(profile(0.5, 0.30, 0.97, lambda u: 0.14 * (1 - u) ** 0.9 + 0.006), c)
    for k in range(5):
        y = 0.40 + 0.1 * k
        x = 0.5 + (0.06 if k % 2 else -0.06) * (1 - k * 0.15)
        p.line([(x - 0.04, y), (x + 0.04, y + 0.01)], dark(c, 0.3), 0.012)
    for k, a in enumerate((-0.5, -0.2, 0.1, 0.4)):
        a = a + 0.05 * j
        tip = (0.5 + 0.45 * math.sin(a), 0.02 + 0.06 * abs(k - 1.5))
        p.poly([(0.47, 0.31), tip, (0.53, 0.31)], (60, 160, 60))


@_category("pizza", [])
def _pizza(p: Pen, c: RGB, j: float) -> None:
    p.poly([(0.14, 0.16), (0.86, 0.16), (0.5, 0.96)], (250, 206, 92))
    p.rect((0.09, 0.06, 0.91, 0.22), (190, 120, 55), r=0.07)
    for x, y in ((0.38, 0.32), (0.62, 0.34), (0.5, 0.52), (0.45, 0.7), (0.3 + 0.02 * j, 0.24)):
        if y > 0.28 or x > 0.2:
            p.circle(x, y + 0.02, 0.065, (196, 48, 40))
    for x, y in ((0.58, 0.6), (0.40, 0.46), (0.66, 0.26)):
        p.circle(x, y, 0.018, (60, 120, 40), outline=None)


@_category("donut", ["pink", "brown", "white", "blue", "yellow"])
def _donut(p: Pen, c: RGB, j: float) -> None:
    dough = (214, 160, 90)
    p.ellipse((0.06, 0.14, 0.94, 0.86), dough)
    p.poly(polar(0.5, 0.5, lambda t: 0.37 + 0.025 * math.sin(7 * t + j)), c, outline=False)
    p.ellipse((0.35, 0.37, 0.65, 0.63), dough, outline=False)
    p.clear(("ellipse", (0.41, 0.43, 0.59, 0.57)))
    sprinkles = [(255, 80, 80), (80, 160, 255), (255, 240, 90), (120, 220, 120), (250, 250, 250)]
    for k in range(22):
        a = 2 * math.pi * k / 22 + 0.3 * j
        r = 0.26 + 0.06 * ((k * 7) % 3 - 1)
        x, y = 0.5 + r * math.cos(a), 0.5 + 0.8 * r * math.sin(a)
        b = a + 1.3 * k
        p.line([(x, y), (x + 0.035 * math.cos(b), y + 0.035 * math.sin(b))], sprinkles[k % 5], 0.016)


@_category("cake", ["pink", "white", "brown", "yellow"])
def _cake(p: Pen, c: RGB, j: float) -> None:
    p.ellipse((0.04, 0.82, 0.96, 0.97), (220, 220, 226))
    p.rect((0.14, 0.46, 0.86, 0.88), c, texture=p.texture)
    p.line([(0.14, 0.68), (0.86, 0.68)], dark(c, 0.25), 0.02)
    p.ellipse((0.14, 0.38, 0.86, 0.54), light(c, 0.35))
    p.poly(
        [(0.14, 0.46)]
        + [(0.14 + 0.72 * t, 0.5 + 0.05 * abs(math.sin(7 * t))) for t in np.linspace(0, 1, 30)]
        + [(0.86, 0.46)],
        WHITE,
        outline=False,
    )
    p.rect((0.465, 0.2, 0.535, 0.44), (120, 170, 240), texture="striped", period=0.04)
    p.poly(profile(0.5, 0.06, 0.2, lambda u: 0.045 * math.sin(math.pi * u) ** 0.7), (255, 170, 40))
    p.circle(0.3, 0.43, 0.035, (200, 30, 50))
    p.circle(0.7, 0.43, 0.035, (200, 30, 50))


@_category(
    "cup",
    ["red", "blue", "green", "yellow", "white", "purple", "orange", "pink", "black"],
    ["plain", "striped", "dotted"],
)
def _cup(p: Pen, c: RGB, j: float) -> None:
    p.ellipse((0.58, 0.38, 0.92, 0.76), c, outline=True)
    p.clear(("ellipse", (0.65, 0.46, 0.85, 0.68)))
    p.group([("rect", (0.14, 0.26, 0.72, 0.92), 0.06)], c, texture=p.texture)
    p.ellipse((0.14, 0.2, 0.72, 0.32), light(c, 0.25))
    p.ellipse((0.18, 0.22, 0.68, 0.30), (110, 62, 30), outline=False)
    for x in (0.32, 0.46):
        p.line([(x, 0.17), (x + 0.03, 0.11), (x - 0.02, 0.05), (x + 0.01, 0.0)], (200, 200, 205), 0.014)


@_category("bottle", ["green", "blue", "brown"])
def _bottle(p: Pen, c: RGB, j: float) -> None:
    def hw(u: float) -> float:
        if u < 0.28:
            return 0.07
        if u < 0.45:
            t = (u - 0.28) / 0.17
            return 0.07 + 0.11 * (0.5 - 0.5 * math.cos(math.pi * t))
        return 0.18 - (0.02 * ((u - 0.97) / 0.03) ** 2 if u > 0.97 else 0.0)

    p.poly(profile(0.5, 0.1, 0.98, hw), c)
    p.rect((0.41, 0.02, 0.59, 0.12), (200, 40, 40), r=0.02)
    p.rect((0.32, 0.56, 0.68, 0.8), (246, 240, 220))
    p.rect((0.32, 0.62, 0.68, 0.66), (200, 40, 40), outline=False)
    p.rect((0.36, 0.5, 0.40, 0.94), light(c, 0.45), outline=False)


@_category("clock", ["red", "blue", "green", "black", "white", "yellow"])
def _clock(p: Pen, c: RGB, j: float) -> None:
    p.ellipse((0.04, 0.04, 0.96, 0.96), c)
    p.ellipse((0.12, 0.12, 0.88, 0.88), WHITE)
    for k in range(12):
        a = 2 * math.pi * k / 12
        r0 = 0.28 if k % 3 else 0.25
        p.line(
            [(0.5 + r0 * math.cos(a), 0.5 + r0 * math.sin(a)), (0.5 + 0.34 * math.cos(a), 0.5 + 0.34 * math.sin(a))],
            BLACK,
            0.025 if k % 3 == 0 else 0.014,
        )
    hour = -math.pi / 2 + 2 * math.pi * (0.3 + 0.1 * j)
    minute = -math.pi / 2 + 2 * math.pi * (0.7 + 0.2 * j)
    p.line([(0.5, 0.5), (0.5 + 0.17 * math.cos(hour), 0.5 + 0.17 * math.sin(hour))], BLACK, 0.04)
    p.line([(0.5, 0.5), (0.5 + 0.27 * math.cos(minute), 0.5 + 0.27 * math.sin(minute))], BLACK, 0.025)
    p.circle(0.5, 0.5, 0.035, (210, 40, 40), outline=False)


@_category("book", ["red", "blue", "green", "purple", "orange", "brown", "black"])
def _book(p: Pen, c: RGB, j: float) -> None:
    p.poly([(0.02, 0.22), (0.5, 0.3), (0.98, 0.22), (0.98, 0.84), (0.5, 0.92), (0.02, 0.84)], c, texture=p.texture)
    page = (250, 246, 232)
    p.poly([(0.06, 0.16), (0.5, 0.26), (0.5, 0.86), (0.06, 0.78)], page)
    p.poly([(0.94, 0.16), (0.5, 0.26), (0.5, 0.86), (0.94, 0.78)], page)
    for k in range(8):
        y = 0.26 + 0.065 * k
        p.line([(0.11, y - 0.02 + 0.0), (0.45, y + 0.06)], (150, 150, 160), 0.012)
        p.line([(0.55, y + 0.06), (0.89, y - 0.02)], (150, 150, 160), 0.012)
    p.line([(0.5, 0.26), (0.5, 0.86)], dark(c, 0.3), 0.02)


@_category(
    "umbrella", ["red", "blue", "green", "yellow", "purple", "pink", "orange", "black"], ["plain", "striped", "dotted"]
)
def _umbrella(p: Pen, c: RGB, j: float) -> None:
    p.line([(0.5, 0.3), (0.5, 0.86)], (70, 70, 76), 0.03)
    p.d.arc(p.box((0.36, 0.76, 0.5, 0.96)), 0, 180, fill=(70, 70, 76), width=p.w(0.03))
    p.group([("pie", (0.04, 0.06, 0.96, 0.78), 180, 360)], c, texture=p.texture)
    for k in range(4):
        x = 0.04 + 0.115 + 0.23 * k
        p.clear(("ellipse", (x - 0.115, 0.39, x + 0.115, 0.47)))
    for k in range(1, 4):
        x = 0.04 + 0.23 * k
        p.line([(0.5, 0.07), (x, 0.41)], dark(c, 0.35), 0.012)
    p.line([(0.5, 0.07), (0.5, 0.0)], (70, 70, 76), 0.025)


@_category("car", ["red", "blue", "green", "yellow", "white", "black", "grey", "orange"], ["plain", "striped"])
def _car(p: Pen, c: RGB, j: float) -> None:
    roof = 0.26 + 0.02 * j
    p.group(
        [
            ("rect", (0.03, 0.45, 0.97, 0.74), 0.07),
            ("poly", [(0.2, 0.47), (0.32, roof), (0.66, roof), (0.8, 0.47)]),
        ],
        c,
        texture=p.texture,
        period=0.12,
    )
    glass = (170, 214, 240)
    p.poly([(0.26, 0.46), (0.345, roof + 0.04), (0.48, roof + 0.04), (0.48, 0.46)], glass, outline=False)
    p.poly([(0.52, 0.46), (0.52, roof + 0.04), (0.645, roof + 0.04), (0.74, 0.46)], glass, outline=False)
    p.line([(0.5, 0.48), (0.5, 0.7)], dark(c, 0.3), 0.01)
    for cx in (0.24, 0.76):
        p.circle(cx, 0.74, 0.115, BLACK)
        p.circle(cx, 0.74, 0.05, (190, 190, 196))
    p.rect((0.9, 0.5, 0.97, 0.56), (255, 230, 120), outline=False)
    p.rect((0.03, 0.5, 0.07, 0.56), (220, 40, 40), outline=False)


@_category("bus", ["yellow", "red", "blue", "green", "white"], plural="buses")
def _bus(p: Pen, c: RGB, j: float) -> None:
    p.rect((0.02, 0.2, 0.98, 0.8), c, r=0.05)
    p.rect((0.02, 0.6, 0.98, 0.64), dark(c, 0.25), outline=False)
    glass = (170, 214, 240)
    n = 5
    for k in range(n):
        x0 = 0.06 + k * 0.148
        p.rect((x0, 0.28, x0 + 0.12, 0.48), glass, r=0.01)
    p.rect((0.83, 0.28, 0.95, 0.72), glass, r=0.01)
    p.line([(0.89, 0.28), (0.89, 0.72)], dark(c, 0.4), 0.01)
    for cx in (0.2, 0.78):
        p.circle(cx, 0.8, 0.09, BLACK)
        p.circle(cx, 0.8, 0.04, (190, 190, 196))
    p.rect((0.94, 0.66, 0.98, 0.72), (255, 236, 140), outline=False)


@_category("house", ["white", "yellow", "pink", "blue", "orange", "grey"])
def _house(p: Pen, c: RGB, j: float) -> None:
    roof = (170, 50, 40) if c != COLOURS["orange"] else (110, 60, 30)
    p.rect((0.64, 0.12, 0.74, 0.36), (150, 80, 60))
    p.rect((0.16, 0.44, 0.84, 0.96), c, texture=p.texture)
    p.poly([(0.06, 0.48), (0.5, 0.08 + 0.02 * j), (0.94, 0.48)], roof)
    p.rect((0.43, 0.68, 0.57, 0.96), (120, 72, 40))
    p.circle(0.54, 0.83, 0.012, (240, 210, 80), outline=False)
    for x0 in (0.22, 0.64):
        p.rect((x0, 0.56, x0 + 0.14, 0.7), (170, 214, 240))
        p.line([(x0 + 0.07, 0.56), (x0 + 0.07, 0.7)], WHITE, 0.012)
        p.line([(x0, 0.63), (x0 + 0.14, 0.63)], WHITE, 0.012)


@_category("tree", ["green", "orange", "yellow"])
def _tree(p: Pen, c: RGB, j: float) -> None:
    p.poly([(0.43, 0.96), (0.45, 0.55), (0.55, 0.55), (0.57, 0.96)], (120, 76, 40))
    blobs = [
        (0.5, 0.3, 0.24),
        (0.3, 0.42, 0.18),
        (0.7, 0.42, 0.18),
        (0.38, 0.22 + 0.02 * j, 0.16),
        (0.62, 0.22, 0.16),
        (0.5, 0.52, 0.16),
    ]
    p.group([("ellipse", (x - r, y - r, x + r, y + r)) for x, y, r in blobs], c)
    for x, y, r in ((0.42, 0.26, 0.06), (0.62, 0.38, 0.05), (0.32, 0.44, 0.045)):
        p.circle(x, y, r, light(c, 0.25), outline=False)


@_category("flower", ["red", "yellow", "pink", "purple", "blue", "orange", "white"])
def _flower(p: Pen, c: RGB, j: float) -> None:
    p.line([(0.5, 0.4), (0.5 + 0.03 * j, 0.98)], (50, 140, 50), 0.035)
    p.poly(rot_ellipse(0.39, 0.74, 0.11, 0.04, -0.5), (60, 160, 60))
    p.poly(rot_ellipse(0.61, 0.66, 0.11, 0.04, 0.5), (60, 160, 60))
    n = 7
    petals = [
        ("poly", rot_ellipse(0.5 + 0.17 * math.cos(a), 0.3 + 0.17 * math.sin(a), 0.14, 0.075, a))
        for a in (2 * math.pi * k / n + 0.2 * j for k in range(n))
    ]
    p.group(petals, c)
    p.circle(0.5, 0.3, 0.09, (250, 200, 40) if c != COLOURS["yellow"] else (140, 80, 30))


@_category(
    "fish", ["orange", "blue", "yellow", "red", "purple", "green"], ["plain", "striped", "dotted"], plural="fish"
)
def _fish(p: Pen, c: RGB, j: float) -> None:
    p.poly([(0.46, 0.32), (0.56, 0.16), (0.66, 0.34)], dark(c, 0.15))
    p.poly([(0.48, 0.66), (0.56, 0.82), (0.62, 0.66)], dark(c, 0.15))
    p.group(
        [
            ("poly", rot_ellipse(0.52, 0.5, 0.36, 0.2 + 0.01 * j, 0.0, n=48)),
            ("poly", [(0.2, 0.5), (0.03, 0.28), (0.08, 0.5), (0.03, 0.72)]),
        ],
        c,
        texture=p.texture,
        period=0.1,
    )
    p.circle(0.74, 0.45, 0.05, WHITE)
    p.circle(0.755, 0.45, 0.025, BLACK, outline=False)
    p.d.arc(p.box((0.52, 0.36, 0.66, 0.64)), -60, 60, fill=dark(c, 0.35), width=p.w(0.015))
    p.line([(0.86, 0.55), (0.82, 0.56)], dark(c, 0.5), 0.015)


@_category("bird", ["red", "blue", "yellow", "black", "green", "brown"])
def _bird(p: Pen, c: RGB, j: float) -> None:
    legs = (230, 140, 40)
    p.line([(0.42, 0.74), (0.4, 0.95)], legs, 0.018)
    p.line([(0.52, 0.74), (0.54, 0.95)], legs, 0.018)
    p.group(
        [
            ("ellipse", (0.18, 0.38, 0.76, 0.8)),
            ("ellipse", (0.56, 0.18, 0.86, 0.48)),
            ("poly", [(0.24, 0.54), (0.02, 0.42 + 0.03 * j), (0.06, 0.66)]),
        ],
        c,
    )
    p.poly([(0.84, 0.28), (0.98, 0.34), (0.84, 0.4)], (250, 160, 30))
    p.poly([(0.3, 0.5), (0.56, 0.46), (0.62, 0.6), (0.4, 0.7)], dark(c, 0.25))
    p.circle(0.74, 0.3, 0.035, WHITE, outline=False)
    p.circle(0.75, 0.3, 0.018, BLACK, outline=False)
    p.ellipse((0.34, 0.62, 0.62, 0.78), light(c, 0.3), outline=False)


@_category("cat", ["orange", "grey", "black", "white", "brown"], ["plain", "striped"])
def _cat(p: Pen, c: RGB, j: float) -> None:
    tail = [(0.74, 0.9), (0.9, 0.84), (0.95, 0.66), (0.9, 0.5 + 0.04 * j)]
    p.line(tail, outline_of(c), 0.09)
    p.line(tail, c, 0.06)
    p.group(
        [
            ("ellipse", (0.2, 0.44, 0.8, 0.98)),
            ("ellipse", (0.24, 0.12, 0.76, 0.56)),
            ("poly", [(0.27, 0.28), (0.28, 0.02), (0.47, 0.16)]),
            ("poly", [(0.73, 0.28), (0.72, 0.02), (0.53, 0.16)]),
        ],
        c,
        texture=p.texture,
        period=0.08,
    )
    pink = (240, 150, 160)
    p.poly([(0.3, 0.22), (0.31, 0.08), (0.42, 0.17)], pink, outline=False)
    p.poly([(0.7, 0.22), (0.69, 0.08), (0.58, 0.17)], pink, outline=False)
    p.ellipse((0.33, 0.26, 0.45, 0.38), (120, 200, 90))
    p.ellipse((0.55, 0.26, 0.67, 0.38), (120, 200, 90))
    p.ellipse((0.375, 0.27, 0.405, 0.37), BLACK, outline=False)
    p.ellipse((0.595, 0.27, 0.625, 0.37), BLACK, outline=False)
    p.poly([(0.46, 0.41), (0.54, 0.41), (0.5, 0.45)], pink, outline=False)
    whisk = (60, 60, 60) if luminance(c) > 90 else (220, 220, 220)
    for dy in (-0.02, 0.02):
        p.line([(0.42, 0.45), (0.16, 0.43 + 2 * dy)], whisk, 0.008)
        p.line([(0.58, 0.45), (0.84, 0.43 + 2 * dy)], whisk, 0.008)
    p.ellipse((0.3, 0.9, 0.44, 0.98), light(c, 0.3))
    p.ellipse((0.56, 0.9, 0.7, 0.98), light(c, 0.3))


@_category("sailboat", ["red", "blue", "white", "brown", "yellow"])
def _sailboat(p: Pen, c: RGB, j: float) -> None:
    p.line([(0.5, 0.04), (0.5, 0.74)], (100, 70, 40), 0.02)
    p.poly([(0.53, 0.06), (0.53, 0.68), (0.88 + 0.03 * j, 0.68)], WHITE)
    p.poly([(0.47, 0.14), (0.47, 0.68), (0.16, 0.68)], (236, 236, 226))
    p.poly([(0.5, 0.04), (0.62, 0.07), (0.5, 0.1)], (220, 40, 40))
    p.poly([(0.06, 0.72), (0.94, 0.72), (0.8, 0.92), (0.2, 0.92)], c, texture=p.texture)
    p.line([(0.12, 0.78), (0.88, 0.78)], dark(c, 0.3) if c != COLOURS["white"] else (40, 90, 200), 0.02)


@_category("airplane", ["white", "grey", "blue", "red"])
def _airplane(p: Pen, c: RGB, j: float) -> None:
    sweep = 0.1 + 0.02 * j
    p.group(
        [
            (
                "poly",
                [
                    (0.5, 0.36),
                    (0.98, 0.5 + sweep),
                    (0.98, 0.58 + sweep),
                    (0.5, 0.5),
                    (0.02, 0.58 + sweep),
                    (0.02, 0.5 + sweep),
                ],
            ),
            ("poly", [(0.5, 0.8), (0.72, 0.92), (0.72, 0.96), (0.5, 0.92), (0.28, 0.96), (0.28, 0.92)]),
            ("poly", rot_ellipse(0.5, 0.5, 0.07, 0.47, 0.0, n=48)),
        ],
        c,
    )
    for x in (0.27, 0.73):
        p.rect((x - 0.03, 0.5, x + 0.03, 0.62), dark(c, 0.2), r=0.02)
    p.poly([(0.46, 0.12), (0.5, 0.07), (0.54, 0.12), (0.5, 0.15)], (60, 90, 140), outline=False)
    p.line([(0.5, 0.2), (0.5, 0.78)], dark(c, 0.15), 0.01)


@_category("traffic light", [])
def _traffic_light(p: Pen, c: RGB, j: float) -> None:
    p.rect((0.45, 0.7, 0.55, 0.99), (110, 110, 116))
    p.rect((0.3, 0.02, 0.7, 0.74), (40, 40, 44), r=0.06)
    for k, col in enumerate(((235, 40, 40), (250, 200, 30), (40, 200, 80))):
        y = 0.14 + 0.22 * k
        p.circle(0.5, y, 0.085, col)
        p.circle(0.47, y - 0.03, 0.025, light(col, 0.6), outline=False)


@_category("stop sign", [])
def _stop_sign(p: Pen, c: RGB, j: float) -> None:
    p.rect((0.46, 0.6, 0.54, 0.99), (140, 140, 146))
    octagon = [
        (0.5 + 0.44 * math.cos(a), 0.38 + 0.44 * math.sin(a)) for a in (math.pi / 8 + k * math.pi / 4 for k in range(8))
    ]
    p.poly(octagon, WHITE, outline=(120, 120, 120))
    inner = [
        (0.5 + 0.39 * math.cos(a), 0.38 + 0.39 * math.sin(a)) for a in (math.pi / 8 + k * math.pi / 4 for k in range(8))
    ]
    p.poly(inner, (206, 28, 36), outline=False)
    font = _font(max(6, round(0.24 * p.s)))
    p.d.text(p.p(0.5, 0.385), "STOP", fill=WHITE, font=font, anchor="mm")


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # pragma: no cover - PIL without FreeType
        return ImageFont.load_default()


@_category("balloon", ["red", "blue", "green", "yellow", "purple", "pink", "orange"], ["plain", "striped", "dotted"])
def _balloon(p: Pen, c: RGB, j: float) -> None:
    p.line([(0.5, 0.7), (0.46, 0.78), (0.54, 0.86), (0.47, 0.93), (0.52, 0.99)], (90, 90, 96), 0.012)
    p.poly([(0.46, 0.72), (0.5, 0.66), (0.54, 0.72)], dark(c, 0.2))
    p.poly(
        profile(0.5, 0.02, 0.68, lambda u: 0.3 * math.sin(math.pi * u) ** 0.65 * (1.08 - 0.3 * u)),
        c,
        texture=p.texture,
        period=0.1,
    )
    p.poly(rot_ellipse(0.38, 0.2, 0.04, 0.08, 0.4), light(c, 0.55), outline=False)


@_category("mushroom", ["red", "brown", "orange"])
def _mushroom(p: Pen, c: RGB, j: float) -> None:
    stem = (240, 228, 200)
    p.poly(profile(0.5, 0.4, 0.96, lambda u: 0.12 + 0.04 * u + 0.03 * (u > 0.9)), stem)
    p.group([("chord", (0.04, 0.06, 0.96, 0.8 + 0.02 * j), 180, 360)], c)
    p.rect((0.1, 0.41, 0.9, 0.47), light(stem, 0.2), r=0.03)
    for x, y, r in (
        (0.3, 0.26, 0.06),
        (0.55, 0.17, 0.05),
        (0.72, 0.3, 0.055),
        (0.46, 0.33, 0.04),
        (0.16, 0.38, 0.035),
        (0.86, 0.38, 0.03),
    ):
        p.circle(x, y, r, WHITE, outline=False)


@_category("kite", ["red", "blue", "green", "yellow", "purple", "orange"])
def _kite(p: Pen, c: RGB, j: float) -> None:
    top, right, bottom, left, mid = (0.42, 0.02), (0.8, 0.3), (0.42, 0.78), (0.04, 0.3), (0.42, 0.3)
    p.line([bottom, (0.55, 0.84), (0.6, 0.92), (0.75, 0.95), (0.9, 0.99)], (90, 90, 96), 0.01)
    for x, y in ((0.55, 0.84), (0.75, 0.95)):
        p.poly([(x, y), (x - 0.05, y - 0.04), (x - 0.04, y + 0.04)], (240, 200, 40), outline=False)
        p.poly([(x, y), (x + 0.05, y + 0.04), (x + 0.04, y - 0.04)], (240, 200, 40), outline=False)
    other = (250, 220, 60) if c != COLOURS["yellow"] else (220, 50, 50)
    p.poly([top, right, bottom, left], c)
    p.poly([top, right, mid], other, outline=False)
    p.poly([bottom, left, mid], other, outline=False)
    p.line([top, bottom], (110, 74, 40), 0.015)
    p.line([left, right], (110, 74, 40), 0.015)


@_category("teddy bear", ["brown", "white", "pink", "grey", "orange"])
def _teddy(p: Pen, c: RGB, j: float) -> None:
    pad = light(c, 0.45)
    p.group(
        [
            ("ellipse", (0.18, 0.02, 0.36, 0.2)),
            ("ellipse", (0.64, 0.02, 0.82, 0.2)),
            ("ellipse", (0.24, 0.42, 0.76, 0.9)),
            ("ellipse", (0.08, 0.46, 0.32, 0.64)),
            ("ellipse", (0.68, 0.46, 0.92, 0.64)),
            ("ellipse", (0.18, 0.78, 0.42, 0.98)),
            ("ellipse", (0.58, 0.78, 0.82, 0.98)),
            ("ellipse", (0.24, 0.06, 0.76, 0.5)),
        ],
        c,
    )
    p.circle(0.27, 0.11, 0.05, pad, outline=False)
    p.circle(0.73, 0.11, 0.05, pad, outline=False)
    p.ellipse((0.36, 0.54, 0.64, 0.8), pad, outline=False)
    p.ellipse((0.38, 0.28, 0.62, 0.46), pad, outline=False)
    p.circle(0.38, 0.24, 0.03, BLACK, outline=False)
    p.circle(0.62, 0.24, 0.03, BLACK, outline=False)
    p.ellipse((0.45, 0.3, 0.55, 0.36), BLACK, outline=False)
    p.line([(0.5, 0.36), (0.5, 0.41)], BLACK, 0.012)
    p.ellipse((0.22, 0.86, 0.38, 0.96), pad, outline=False)
    p.ellipse((0.62, 0.86, 0.78, 0.96), pad, outline=False)


@_category("chair", ["brown", "red", "blue", "green", "white", "black"])
def _chair(p: Pen, c: RGB, j: float) -> None:
    legs = dark(c, 0.25)
    p.rect((0.3, 0.6, 0.35, 0.9), dark(legs, 0.2))
    p.rect((0.65, 0.6, 0.7, 0.9), dark(legs, 0.2))
    p.rect((0.22, 0.04, 0.78, 0.12), c, r=0.02)
    for x in (0.22, 0.36, 0.5, 0.64, 0.72):
        p.rect((x, 0.1, x + 0.06, 0.52), c)
    p.poly([(0.16, 0.52), (0.84, 0.52), (0.9, 0.62), (0.1, 0.62)], c)
    p.rect((0.12, 0.6, 0.19, 0.98), legs)
    p.rect((0.81, 0.6, 0.88, 0.98), legs)


@_category("television", ["black", "grey", "white", "red"])
def _tv(p: Pen, c: RGB, j: float) -> None:
    p.line([(0.5, 0.14), (0.3, 0.0)], (90, 90, 96), 0.014)
    p.line([(0.5, 0.14), (0.72, 0.0)], (90, 90, 96), 0.014)
    p.poly([(0.42, 0.76), (0.58, 0.76), (0.66, 0.92), (0.34, 0.92)], dark(c, 0.1))
    p.rect((0.04, 0.14, 0.96, 0.8), c, r=0.05)
    p.rect((0.1, 0.2, 0.9, 0.72), (40, 70, 120), r=0.03)
    p.poly([(0.12, 0.22), (0.42, 0.22), (0.2, 0.7), (0.12, 0.7)], (80, 120, 180), outline=False)
    p.rect((0.3, 0.9, 0.7, 0.96), dark(c, 0.1), r=0.02)


@_category("ball", ["red", "blue", "green", "yellow", "purple", "orange"])
def _ball(p: Pen, c: RGB, j: float) -> None:
    p.ellipse((0.04, 0.04, 0.96, 0.96), c)
    others = [WHITE, c, (250, 210, 40) if c != COLOURS["yellow"] else (40, 92, 214), c, WHITE, c]
    for k in range(6):
        a0 = k * 60 + 10 * j
        if others[k] != c:
            p.d.pieslice(p.box((0.06, 0.06, 0.94, 0.94)), a0, a0 + 60, fill=others[k])
    p.circle(0.5, 0.5, 0.1, WHITE)
    p.ellipse((0.22, 0.18, 0.38, 0.3), light(c, 0.7), outline=False)


@_category("rocket", ["white", "grey", "red", "blue"])
def _rocket(p: Pen, c: RGB, j: float) -> None:
    p.poly(profile(0.5, 0.82, 0.99, lambda u: 0.09 * math.sin(math.pi * (1 - u) * 0.5 + 0.2)), (255, 150, 30))
    p.poly(
        profile(0.5, 0.82, 0.94, lambda u: 0.05 * math.sin(math.pi * (1 - u) * 0.5 + 0.2)),
        (255, 230, 90),
        outline=False,
    )
    fin = (214, 40, 40) if c != COLOURS["red"] else (40, 92, 214)
    p.poly([(0.38, 0.56), (0.2, 0.78), (0.2, 0.86), (0.38, 0.78)], fin)
    p.poly([(0.62, 0.56), (0.8, 0.78), (0.8, 0.86), (0.62, 0.78)], fin)

    def hw(u: float) -> float:
        return 0.14 * math.sin(min(1.0, u / 0.35) * math.pi / 2) ** 0.8 if u < 0.35 else 0.14

    p.poly(profile(0.5, 0.02, 0.84, hw), c)
    p.circle(0.5, 0.4, 0.07, (60, 120, 200), outline=(150, 150, 156))
    p.rect((0.46, 0.68, 0.54, 0.84), fin, outline=False)


@_category("bicycle", ["red", "blue", "green", "yellow", "black", "purple", "orange"])
def _bicycle(p: Pen, c: RGB, j: float) -> None:
    for cx in (0.22, 0.78):
        p.d.ellipse(p.box((cx - 0.2, 0.5, cx + 0.2, 0.9)), outline=BLACK, width=p.w(0.035))
        for k in range(8):
            a = k * math.pi / 4 + 0.2 * j
            p.line([(cx, 0.7), (cx + 0.18 * math.cos(a), 0.7 + 0.18 * math.sin(a))], (150, 150, 156), 0.006)
    rear, bracket, seat, head, front = (0.22, 0.7), (0.46, 0.72), (0.4, 0.4), (0.7, 0.42), (0.78, 0.7)
    for a, b in ((rear, bracket), (bracket, seat), (seat, rear), (seat, head), (head, bracket), (head, front)):
        p.line([a, b], c, 0.03)
    p.line([seat, (0.39, 0.33)], (60, 60, 60), 0.02)
    p.ellipse((0.31, 0.29, 0.47, 0.35), BLACK, outline=False)
    p.line([head, (0.68, 0.3), (0.78, 0.27)], (60, 60, 60), 0.022)
    p.line([(0.42, 0.66), (0.5, 0.78)], (60, 60, 60), 0.02)
    p.circle(0.46, 0.72, 0.03, (60, 60, 60), outline=False)


# ----------------------------------------------------------------------------------------------
# instances, cut-outs and sources


@dataclass(frozen=True)
class ObjectInstance:
    """One object: category, attributes and a seed; the same instance always renders identically."""

    category: str
    colour: str | None = None
    texture: str = "plain"
    seed: int = 0
    source: str = "procedural"
    path: str | None = None  # a FolderObjectSource file

    @property
    def key(self) -> str:
        return f"{self.source}:{self.category}:{self.colour}:{self.texture}:{self.seed}:{self.path or ''}"

    @property
    def split(self) -> str:
        return "train" if self.seed % 2 else "test"

    def phrase(self, *, colour: bool = False, texture: bool = False) -> str:
        """``"umbrella"``, ``"red umbrella"``, ``"red striped umbrella"``."""
        words = []
        if colour and self.colour:
            words.append(self.colour)
        if texture and self.texture != "plain":
            words.append(self.texture)
        words.append(self.category)
        return " ".join(words)

    def as_dict(self) -> dict:
        out = {"category": self.category, "colour": self.colour, "texture": self.texture, "seed": self.seed}
        if self.path:
            out["path"] = self.path
        return out


@dataclass
class CutOut:
    """An isolated object: a tight RGBA crop (SPEC Sec. 3.2.2) and its instance."""

    instance: ObjectInstance
    image: Image.Image

    @property
    def aspect(self) -> float:
        w, h = self.image.size
        return w / h


@dataclass
class Placed:
    """A cut-out resized for a canvas: the RGBA layer and its opaque mask (alpha >= 128)."""

    layer: Image.Image
    mask: np.ndarray
    bbox: tuple[int, int, int, int]  # of the mask inside the layer

    @property
    def size(self) -> tuple[int, int]:
        return self.layer.size

    @property
    def box_size(self) -> tuple[int, int]:
        x0, y0, x1, y1 = self.bbox
        return x1 - x0, y1 - y0

    @property
    def box_area(self) -> int:
        w, h = self.box_size
        return w * h

    @property
    def mask_area(self) -> int:
        return int(self.mask.sum())


def tight_crop(image: Image.Image) -> Image.Image:
    """Crop an RGBA image to its opaque pixels (alpha >= 128, like every measurement)."""
    bbox = image.getchannel("A").point(lambda a: 255 if a >= ALPHA_OPAQUE else 0).getbbox()
    if bbox is None:
        raise DataError("the cut-out has no opaque pixels (alpha >= 128)")
    return image.crop(bbox)


def resize_cutout(cut: CutOut, width: int, height: int) -> Placed:
    """Resize with premultiplied alpha (no dark fringes) and measure the opaque mask."""
    width, height = max(1, int(width)), max(1, int(height))
    im = cut.image
    if im.size != (width, height):
        im = im.convert("RGBa").resize((width, height), Image.Resampling.LANCZOS, reducing_gap=3.0).convert("RGBA")
    mask = np.asarray(im.getchannel("A")) >= ALPHA_OPAQUE
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if len(rows) == 0:
        bbox = (0, 0, 0, 0)
    else:
        bbox = (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)
    return Placed(im, mask, bbox)


class AlphaIsolator:
    """SPEC Sec. 3.2.2 for sources that already have an alpha channel: crop to the opaque pixels."""

    name = "alpha"

    def isolate(self, image: Image.Image, instance: ObjectInstance) -> Image.Image:
        if image.mode != "RGBA":
            raise DataError(
                f"object {instance.key}: the alpha isolator needs an RGBA cut-out, got mode {image.mode}; "
                "use the generative isolator (Grounding DINO + SAM) for photos"
            )
        return tight_crop(image)


class ObjectSource(ABC):
    """Stage 1 (SPEC Sec. 3.2.1): a library of object categories and instances."""

    name = "base"

    @abstractmethod
    def categories(self) -> list[str]:
        """Implemented by each subclass."""

    def plural(self, category: str) -> str:
        return pluralize(category)

    def colours(self, category: str) -> tuple[str, ...]:
        return ()

    def textures(self, category: str) -> tuple[str, ...]:
        return ("plain",)

    @abstractmethod
    def sample(
        self,
        rng: np.random.Generator,
        *,
        split: str = "test",
        category: str | None = None,
        exclude: Sequence[str] = (),
        colour: str | None = None,
        texture: str | None = None,
    ) -> ObjectInstance:
        """Implemented by each subclass."""

    @abstractmethod
    def generate(self, instance: ObjectInstance) -> Image.Image:
        """The raw image of one instance (RGBA for sources with alpha, RGB photos otherwise)."""


def _instance_seed(rng: np.random.Generator, split: str) -> int:
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    return int(rng.integers(0, 2**30)) * 2 + SPLITS[split]


def _choose(rng: np.random.Generator, options: Sequence[str]) -> str:
    return options[int(rng.integers(len(options)))]


class ProceduralObjectSource(ObjectSource):
    """The embedded library: every instance drawn with PIL ImageDraw (see the module docstring).

    ``resolution`` is the side of the square drawing canvas; cut-outs are drawn once at this size
    and resized down (anti-aliased) for each use.
    """

    name = "procedural"

    def __init__(self, resolution: int = 512, categories: Sequence[str] | None = None) -> None:
        self.resolution = int(resolution)
        names = list(categories) if categories else list(CATEGORIES)
        unknown = [n for n in names if n not in CATEGORIES]
        if unknown:
            raise ConfigError(f"unknown object categories {unknown}; known: {', '.join(CATEGORIES)}")
        self._names = names

    def categories(self) -> list[str]:
        return list(self._names)

    def plural(self, category: str) -> str:
        return CATEGORIES[category].plural_name

    def colours(self, category: str) -> tuple[str, ...]:
        return CATEGORIES[category].colours

    def textures(self, category: str) -> tuple[str, ...]:
        return CATEGORIES[category].textures

    def sample(self, rng, *, split="test", category=None, exclude=(), colour=None, texture=None):
        if category is None:
            options = [c for c in self._names if c not in exclude]
            if not options:
                raise ConfigError("no object category left to choose from")
            category = _choose(rng, options)
        spec = CATEGORIES[category]
        if colour is None and spec.colours:
            colour = _choose(rng, spec.colours)
        if texture is None:
            # plain most of the time, so that captions without texture words stay accurate enough
            texture = "plain" if rng.random() < 0.6 or len(spec.textures) == 1 else _choose(rng, spec.textures[1:])
        return ObjectInstance(category, colour, texture, _instance_seed(rng, split))

    def generate(self, instance: ObjectInstance) -> Image.Image:
        return draw_instance(instance, self.resolution)


@lru_cache(maxsize=256)
def draw_instance(instance: ObjectInstance, resolution: int) -> Image.Image:
    """Draw a procedural instance on a transparent square canvas (cached)."""
    spec = CATEGORIES[instance.category]
    rng = np.random.default_rng(instance.seed)
    colour = COLOURS[instance.colour] if instance.colour else (200, 200, 200)
    pen = Pen(resolution, rng, instance.texture)
    spec.draw(pen, colour, float(rng.uniform(-1, 1)))
    return pen.im


class FolderObjectSource(ObjectSource):
    """A user's own RGBA cut-outs: ``DIR/<category>/<name>.png`` or ``DIR/<category>_<name>.png``.

    Every file is one instance; its category is its sub-folder's name, else the file name up to the
    first ``_`` or digit (``red-car_03.png`` -> ``red-car``; underscores and dashes in category
    names become spaces). Files must be PNG/WebP with transparency. Instances are split between
    ``test`` and ``train`` by the parity of their index in the sorted file list, like procedural seeds.
    """

    name = "folder"

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ConfigError(f"object folder does not exist: {self.root}")
        files = sorted(p for p in self.root.rglob("*") if p.suffix.lower() in (".png", ".webp") and p.is_file())
        if not files:
            raise ConfigError(f"no .png or .webp cut-outs in {self.root}")
        self._files: dict[str, list[Path]] = {}
        for path in files:
            rel = path.relative_to(self.root)
            if len(rel.parts) > 1:
                name = rel.parts[0]
            else:
                stem = path.stem
                cut = len(stem)
                for i, ch in enumerate(stem):
                    if ch == "_" or ch.isdigit():
                        cut = i
                        break
                name = stem[:cut] or stem
            name = " ".join(name.replace("_", " ").replace("-", " ").split()).lower()
            self._files.setdefault(name, []).append(path)

    def categories(self) -> list[str]:
        return sorted(self._files)

    def sample(self, rng, *, split="test", category=None, exclude=(), colour=None, texture=None):
        if category is None:
            options = [c for c in self.categories() if c not in exclude]
            if not options:
                raise ConfigError("no object category left to choose from")
            category = _choose(rng, options)
        files = self._files[category]
        index = [i for i in range(len(files)) if i % 2 == SPLITS.get(split, 0)] or list(range(len(files)))
        i = index[int(rng.integers(len(index)))]
        return ObjectInstance(category, None, "plain", i, source="folder", path=str(files[i]))

    def generate(self, instance: ObjectInstance) -> Image.Image:
        path = Path(instance.path or "")
        try:
            with Image.open(path) as im:
                im.load()
                if im.mode not in ("RGBA", "LA", "PA") and "transparency" not in im.info:
                    raise DataError(f"cut-out {path} has no alpha channel; save it as RGBA PNG")
                return im.convert("RGBA")
        except OSError as exc:
            raise DataError(f"cannot read cut-out {path}: {exc}") from exc


@dataclass
class ObjectLibrary:
    """Stages 1 + 2 together, with caches: instance -> cut-out -> resized layers."""

    source: ObjectSource
    isolator: object = field(default_factory=AlphaIsolator)

    def __post_init__(self) -> None:
        self._cutouts: dict[str, CutOut] = {}
        self._placed: dict[tuple[str, int, int], Placed] = {}

    def cutout(self, instance: ObjectInstance) -> CutOut:
        cut = self._cutouts.get(instance.key)
        if cut is None:
            image = self.source.generate(instance)
            cut = CutOut(instance, self.isolator.isolate(image, instance))  # type: ignore[attr-defined]
            if len(self._cutouts) > 512:
                self._cutouts.clear()
            self._cutouts[instance.key] = cut
        return cut

    def placed(self, instance: ObjectInstance, width: int, height: int) -> Placed:
        key = (instance.key, int(width), int(height))
        hit = self._placed.get(key)
        if hit is None:
            hit = resize_cutout(self.cutout(instance), width, height)
            if len(self._placed) > 4096:
                self._placed.clear()
            self._placed[key] = hit
        return hit

    def fit_area(self, instance: ObjectInstance, target_area: float, *, max_w: int, max_h: int) -> Placed:
        """The layer whose measured box area is closest to ``target_area`` within ``max_w x max_h``.

        Sizes are searched over whole pixels: the aspect ratio is kept, the scale refined on the
        *measured* opaque box (resampling can shave a pixel off an edge).
        """
        aspect = self.cutout(instance).aspect
        best: Placed | None = None
        h = math.sqrt(max(target_area, 1.0) / aspect)
        tried: set[tuple[int, int]] = set()
        for _ in range(6):
            hh = max(1, round(h))
            ww = max(1, round(hh * aspect))
            if ww > max_w or hh > max_h:
                f = min(max_w / ww, max_h / hh)
                ww, hh = max(1, int(ww * f)), max(1, int(hh * f))
            if (ww, hh) in tried:
                break
            tried.add((ww, hh))
            placed = self.placed(instance, ww, hh)
            if best is None or abs(placed.box_area - target_area) < abs(best.box_area - target_area):
                best = placed
            if placed.box_area <= 0:
                h *= 1.5
                continue
            h = hh * math.sqrt(target_area / placed.box_area)
        assert best is not None
        return best


def make_source(objects: str | Path | None = None, *, resolution: int = 512) -> ObjectSource:
    """The procedural library, or a folder of cut-outs when ``objects`` names one."""
    if objects:
        return FolderObjectSource(objects)
    return ProceduralObjectSource(resolution=resolution)
