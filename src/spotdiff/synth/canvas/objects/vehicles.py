"""Vehicles of the procedural object library."""

from __future__ import annotations

import math

from spotdiff.synth.canvas.objects.category import category
from spotdiff.synth.canvas.objects.paint import BLACK, COLOURS, RGB, WHITE, Pen, dark, profile, rot_ellipse


@category("car", ["red", "blue", "green", "yellow", "white", "black", "grey", "orange"], ["plain", "striped"])
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


@category("bus", ["yellow", "red", "blue", "green", "white"], plural="buses")
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


@category("sailboat", ["red", "blue", "white", "brown", "yellow"])
def _sailboat(p: Pen, c: RGB, j: float) -> None:
    p.line([(0.5, 0.04), (0.5, 0.74)], (100, 70, 40), 0.02)
    p.poly([(0.53, 0.06), (0.53, 0.68), (0.88 + 0.03 * j, 0.68)], WHITE)
    p.poly([(0.47, 0.14), (0.47, 0.68), (0.16, 0.68)], (236, 236, 226))
    p.poly([(0.5, 0.04), (0.62, 0.07), (0.5, 0.1)], (220, 40, 40))
    p.poly([(0.06, 0.72), (0.94, 0.72), (0.8, 0.92), (0.2, 0.92)], c, texture=p.texture)
    p.line([(0.12, 0.78), (0.88, 0.78)], dark(c, 0.3) if c != COLOURS["white"] else (40, 90, 200), 0.02)


@category("airplane", ["white", "grey", "blue", "red"])
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


@category("rocket", ["white", "grey", "red", "blue"])
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


@category("bicycle", ["red", "blue", "green", "yellow", "black", "purple", "orange"])
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
