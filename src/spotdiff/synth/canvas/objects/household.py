"""Household objects of the procedural object library."""

from __future__ import annotations

import math

from spotdiff.synth.canvas.objects.category import category
from spotdiff.synth.canvas.objects.paint import BLACK, RGB, WHITE, Pen, dark, light, profile


@category(
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


@category("bottle", ["green", "blue", "brown"])
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


@category("clock", ["red", "blue", "green", "black", "white", "yellow"])
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


@category("book", ["red", "blue", "green", "purple", "orange", "brown", "black"])
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


@category(
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


@category("chair", ["brown", "red", "blue", "green", "white", "black"])
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


@category("television", ["black", "grey", "white", "red"])
def _tv(p: Pen, c: RGB, j: float) -> None:
    p.line([(0.5, 0.14), (0.3, 0.0)], (90, 90, 96), 0.014)
    p.line([(0.5, 0.14), (0.72, 0.0)], (90, 90, 96), 0.014)
    p.poly([(0.42, 0.76), (0.58, 0.76), (0.66, 0.92), (0.34, 0.92)], dark(c, 0.1))
    p.rect((0.04, 0.14, 0.96, 0.8), c, r=0.05)
    p.rect((0.1, 0.2, 0.9, 0.72), (40, 70, 120), r=0.03)
    p.poly([(0.12, 0.22), (0.42, 0.22), (0.2, 0.7), (0.12, 0.7)], (80, 120, 180), outline=False)
    p.rect((0.3, 0.9, 0.7, 0.96), dark(c, 0.1), r=0.02)
