"""Toys of the procedural object library."""

from __future__ import annotations

import math

from spotdiff.synth.canvas.objects.category import category
from spotdiff.synth.canvas.objects.paint import COLOURS, RGB, WHITE, Pen, dark, light, profile, rot_ellipse


@category("balloon", ["red", "blue", "green", "yellow", "purple", "pink", "orange"], ["plain", "striped", "dotted"])
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


@category("kite", ["red", "blue", "green", "yellow", "purple", "orange"])
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


@category("ball", ["red", "blue", "green", "yellow", "purple", "orange"])
def _ball(p: Pen, c: RGB, j: float) -> None:
    p.ellipse((0.04, 0.04, 0.96, 0.96), c)
    others = [WHITE, c, (250, 210, 40) if c != COLOURS["yellow"] else (40, 92, 214), c, WHITE, c]
    for k in range(6):
        a0 = k * 60 + 10 * j
        if others[k] != c:
            p.d.pieslice(p.box((0.06, 0.06, 0.94, 0.94)), a0, a0 + 60, fill=others[k])
    p.circle(0.5, 0.5, 0.1, WHITE)
    p.ellipse((0.22, 0.18, 0.38, 0.3), light(c, 0.7), outline=False)
