"""Buildings, plants and street signs of the procedural object library."""

from __future__ import annotations

import math

from spotdiff.synth.canvas.objects.category import category
from spotdiff.synth.canvas.objects.paint import COLOURS, RGB, WHITE, Pen, font, light, rot_ellipse


@category("house", ["white", "yellow", "pink", "blue", "orange", "grey"])
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


@category("tree", ["green", "orange", "yellow"])
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


@category("flower", ["red", "yellow", "pink", "purple", "blue", "orange", "white"])
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


@category("traffic light", [])
def _traffic_light(p: Pen, c: RGB, j: float) -> None:
    p.rect((0.45, 0.7, 0.55, 0.99), (110, 110, 116))
    p.rect((0.3, 0.02, 0.7, 0.74), (40, 40, 44), r=0.06)
    for k, col in enumerate(((235, 40, 40), (250, 200, 30), (40, 200, 80))):
        y = 0.14 + 0.22 * k
        p.circle(0.5, y, 0.085, col)
        p.circle(0.47, y - 0.03, 0.025, light(col, 0.6), outline=False)


@category("stop sign", [])
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
    label = font(max(6, round(0.24 * p.s)))
    p.d.text(p.p(0.5, 0.385), "STOP", fill=WHITE, font=label, anchor="mm")
