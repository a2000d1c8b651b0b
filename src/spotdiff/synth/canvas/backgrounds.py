"""Background fill: stage 4 of SPEC's pipeline (SPEC Sec. 3.2.4), procedural and CPU-only.

One background per case, drawn from its seed and shared by all its candidates; the scenes are listed
in docs/synthesis.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

from spotdiff.errors import ConfigError

SCENES: dict[str, str] = {
    "meadow": "on the grass",
    "room": "in a room",
    "beach": "on the beach",
    "table": "on a wooden table",
    "studio": "in a studio",
    "tiles": "on a tiled floor",
    "snow": "in the snow",
}


def _vgradient(size: int, top: Sequence[float], bottom: Sequence[float], y0: int = 0, y1: int | None = None):
    y1 = size if y1 is None else y1
    t = np.linspace(0.0, 1.0, max(1, y1 - y0), dtype=np.float32)[:, None, None]
    top_a = np.asarray(top, np.float32)[None, None, :]
    bot_a = np.asarray(bottom, np.float32)[None, None, :]
    return np.broadcast_to(top_a + (bot_a - top_a) * t, (y1 - y0, size, 3))


def _jitter(rng: np.random.Generator, colour: Sequence[int], amount: float = 14.0) -> np.ndarray:
    return np.clip(np.asarray(colour, np.float32) + rng.uniform(-amount, amount, 3), 0, 255)


def _noise(rng: np.random.Generator, arr: np.ndarray, amount: float) -> np.ndarray:
    """Soft, low-frequency lighting (a tilted plane of brightness) instead of per-pixel noise.

    Per-pixel noise made PNGs 7x larger and 3x slower to encode; smooth shading compresses well.
    """
    h, w = arr.shape[:2]
    gx, gy = rng.uniform(-1.0, 1.0, 2) * amount * 2.0
    xs = np.linspace(-1.0, 1.0, w, dtype=np.float32)[None, :, None]
    ys = np.linspace(-1.0, 1.0, h, dtype=np.float32)[:, None, None]
    return arr + gx * xs + gy * ys


def _scene_array(scene: str, size: int, rng: np.random.Generator) -> tuple[np.ndarray, list]:
    """The base pixels of a scene (float32 HxWx3) and a list of ImageDraw overlays to add."""
    s = size
    overlays: list = []
    if scene == "meadow":
        horizon = int(s * rng.uniform(0.42, 0.58))
        arr = np.empty((s, s, 3), np.float32)
        arr[:horizon] = _vgradient(s, _jitter(rng, (120, 176, 236)), _jitter(rng, (200, 226, 248)), 0, horizon)
        arr[horizon:] = _vgradient(s, _jitter(rng, (126, 190, 96)), _jitter(rng, (78, 146, 62)), horizon, s)
        for _ in range(int(rng.integers(1, 4))):
            cx, cy, r = rng.uniform(0, s), rng.uniform(0.05, 0.3) * s, rng.uniform(0.05, 0.09) * s
            overlays.append(("cloud", cx, min(cy, horizon - r), r))
        overlays.append(("grass", horizon))
        return _noise(rng, arr, 3.0), overlays
    if scene == "room":
        floor = int(s * rng.uniform(0.58, 0.7))
        wall = _jitter(rng, [(236, 226, 204), (214, 228, 236), (236, 214, 214), (222, 236, 214)][rng.integers(4)])
        arr = np.empty((s, s, 3), np.float32)
        arr[:floor] = _vgradient(s, wall, wall * 0.9, 0, floor)
        arr[floor:] = _vgradient(s, _jitter(rng, (176, 128, 84)), _jitter(rng, (138, 96, 60)), floor, s)
        if rng.random() < 0.5:
            period = max(4, s // 14)
            cols = (np.arange(s) // period) % 2 == 0
            arr[:floor, cols] *= 0.95
        overlays.append(("planks", floor))
        overlays.append(("skirting", floor))
        return _noise(rng, arr, 2.5), overlays
    if scene == "beach":
        sea = int(s * rng.uniform(0.34, 0.44))
        sand = int(s * rng.uniform(0.52, 0.6))
        arr = np.empty((s, s, 3), np.float32)
        arr[:sea] = _vgradient(s, _jitter(rng, (110, 170, 236)), _jitter(rng, (196, 224, 248)), 0, sea)
        arr[sea:sand] = _vgradient(s, _jitter(rng, (40, 120, 180)), _jitter(rng, (80, 170, 200)), sea, sand)
        arr[sand:] = _vgradient(s, _jitter(rng, (240, 220, 170)), _jitter(rng, (220, 194, 140)), sand, s)
        overlays.append(("waves", sea, sand))
        return _noise(rng, arr, 3.5), overlays
    if scene == "table":
        base = _jitter(rng, (184, 134, 86), 18)
        arr = np.broadcast_to(base, (s, s, 3)).astype(np.float32).copy()
        xs = np.arange(s, dtype=np.float32)
        grain = 8 * np.sin(xs[None, :] / s * rng.uniform(20, 40) + np.sin(np.arange(s)[:, None] / s * 6.0) * 3)
        arr += grain[..., None]
        overlays.append(("plank-lines",))
        return _noise(rng, arr, 3.0), overlays
    if scene == "studio":
        c = _jitter(rng, [(226, 226, 230), (238, 230, 214), (214, 226, 238), (230, 220, 236)][rng.integers(4)])
        yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) / s
        v = 1.0 - 0.35 * ((xx - 0.5) ** 2 + (yy - 0.45) ** 2)
        return _noise(rng, c[None, None, :] * v[..., None], 2.0), overlays
    if scene == "tiles":
        a = _jitter(rng, [(222, 214, 200), (206, 220, 226), (226, 210, 210)][rng.integers(3)])
        b = a * 0.86
        period = max(4, int(s / rng.uniform(5, 9)))
        yy, xx = np.mgrid[0:s, 0:s]
        on = ((xx // period) + (yy // period)) % 2 == 0
        arr = np.where(on[..., None], a, b).astype(np.float32)
        return _noise(rng, arr, 2.5), overlays
    if scene == "snow":
        horizon = int(s * rng.uniform(0.4, 0.55))
        arr = np.empty((s, s, 3), np.float32)
        arr[:horizon] = _vgradient(s, _jitter(rng, (150, 176, 206)), _jitter(rng, (210, 222, 236)), 0, horizon)
        arr[horizon:] = _vgradient(s, _jitter(rng, (236, 240, 246)), _jitter(rng, (206, 216, 232)), horizon, s)
        overlays.append(("flakes",))
        return _noise(rng, arr, 2.0), overlays
    raise ConfigError(f"unknown background scene {scene!r}; known: {', '.join(SCENES)}")


def _draw_overlays(image: Image.Image, overlays: list, rng: np.random.Generator) -> None:
    s = image.size[0]
    d = ImageDraw.Draw(image)
    for item in overlays:
        kind = item[0]
        if kind == "cloud":
            _, cx, cy, r = item
            for dx, dy, f in ((-0.9, 0.2, 0.7), (0.0, 0.0, 1.0), (0.9, 0.25, 0.75), (0.4, 0.35, 0.7)):
                rr = r * f
                d.ellipse(
                    [cx + dx * r - rr, cy + dy * r - rr, cx + dx * r + rr, cy + dy * r + rr], fill=(246, 248, 252)
                )
        elif kind == "grass":
            horizon = item[1]
            n = max(8, s // 3)
            xs = rng.uniform(0, s, n)
            ys = rng.uniform(horizon + 2, s, n)
            for x, y in zip(xs, ys, strict=True):
                h = max(2.0, s * 0.02)
                d.line([(x, y), (x + rng.uniform(-1, 1) * h * 0.4, y - h)], fill=(60, 120, 50), width=1)
        elif kind == "planks":
            floor = item[1]
            step = max(3, s // 12)
            for k, y in enumerate(range(floor + step, s, step)):
                d.line([(0, y), (s, y)], fill=(112, 76, 46), width=1)
                off = (k * 37) % s
                d.line([(off, y - step), (off, y)], fill=(112, 76, 46), width=1)
        elif kind == "skirting":
            floor = item[1]
            d.rectangle([0, floor - max(1, s // 40), s, floor], fill=(246, 244, 238))
        elif kind == "waves":
            sea, sand = item[1], item[2]
            for k in range(3):
                y = sea + (sand - sea) * (k + 1) / 4
                d.line([(0, y), (s, y + 1)], fill=(200, 230, 246), width=1)
            d.line([(0, sand), (s, sand)], fill=(250, 250, 250), width=max(1, s // 80))
        elif kind == "plank-lines":
            step = max(6, s // 5)
            for x in range(step, s, step):
                d.line([(x, 0), (x, s)], fill=(120, 80, 46), width=max(1, s // 100))
        elif kind == "flakes":
            for _ in range(max(10, s // 3)):
                x, y = rng.uniform(0, s), rng.uniform(0, s)
                r = max(0.6, s / 300)
                d.ellipse([x - r, y - r, x + r, y + r], fill=(255, 255, 255))


class ProceduralBackground:
    """Stage 4, procedural: ``fill(size, rng)`` draws one scene; a case calls it once (Sec. 3.2.4)."""

    name = "procedural"

    def __init__(self, scenes: Sequence[str] | None = None) -> None:
        self.scenes = tuple(scenes) if scenes else tuple(SCENES)
        unknown = [s for s in self.scenes if s not in SCENES]
        if unknown:
            raise ConfigError(f"unknown background scenes {unknown}; known: {', '.join(SCENES)}")

    def choose(self, rng: np.random.Generator) -> str:
        return self.scenes[int(rng.integers(len(self.scenes)))]

    def fill(self, size: int, rng: np.random.Generator, scene: str | None = None) -> tuple[Image.Image, str]:
        """Draw one background; return it with its scene's name.

        Args:
            size: the square image side in pixels.
            rng: the case's generator.
            scene: the scene to draw; None: one of the allowed scenes, drawn with ``rng``.
        """
        scene = scene or self.choose(rng)
        arr, overlays = _scene_array(scene, size, rng)
        image = Image.fromarray(np.clip(arr, 0, 255).round().astype(np.uint8), "RGB")
        _draw_overlays(image, overlays, rng)
        return image, scene
