"""Food of the procedural object library."""

from __future__ import annotations

import math

import numpy as np

from spotdiff.synth.canvas.objects.category import category
from spotdiff.synth.canvas.objects.paint import LEAF, RGB, WHITE, WOOD, Pen, dark, light, polar, profile


@category("apple", ["red", "green", "yellow"])
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


@category("banana", ["yellow", "green"])
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


@category("strawberry", ["red"], plural="strawberries")
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


@category("carrot", ["orange"])
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


@category("pizza", [])
def _pizza(p: Pen, c: RGB, j: float) -> None:
    p.poly([(0.14, 0.16), (0.86, 0.16), (0.5, 0.96)], (250, 206, 92))
    p.rect((0.09, 0.06, 0.91, 0.22), (190, 120, 55), r=0.07)
    for x, y in ((0.38, 0.32), (0.62, 0.34), (0.5, 0.52), (0.45, 0.7), (0.3 + 0.02 * j, 0.24)):
        if y > 0.28 or x > 0.2:
            p.circle(x, y + 0.02, 0.065, (196, 48, 40))
    for x, y in ((0.58, 0.6), (0.40, 0.46), (0.66, 0.26)):
        p.circle(x, y, 0.018, (60, 120, 40), outline=None)


@category("donut", ["pink", "brown", "white", "blue", "yellow"])
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


@category("cake", ["pink", "white", "brown", "yellow"])
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


@category("mushroom", ["red", "brown", "orange"])
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
