"""Animals and a teddy bear of the procedural object library."""

from __future__ import annotations

from spotdiff.synth.canvas.objects.category import category
from spotdiff.synth.canvas.objects.paint import BLACK, RGB, WHITE, Pen, dark, light, luminance, outline_of, rot_ellipse


@category(
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


@category("bird", ["red", "blue", "yellow", "black", "green", "brown"])
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


@category("cat", ["orange", "grey", "black", "white", "brown"], ["plain", "striped"])
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


@category("teddy bear", ["brown", "white", "pink", "grey", "orange"])
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
