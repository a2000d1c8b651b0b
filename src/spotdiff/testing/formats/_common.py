"""What the fixture writers share: deterministic pixels, image files, JSON files and captions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

_NOUNS = ("dog", "cat", "horse", "car", "man", "woman", "bench", "table", "kite", "boat", "tree", "clock")
_ADJS = ("red", "white", "large", "small", "wooden", "striped", "young", "old")
_VERBS = ("sitting on", "standing near", "looking at", "next to", "behind", "riding")
_PLACES = ("beach", "street", "kitchen", "park", "field", "table")


def _pixels(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """An HxWx3 uint8 array of a few random colour blocks (distinct per draw, compresses well)."""
    w, h = size
    a = np.empty((h, w, 3), dtype=np.uint8)
    a[:] = rng.integers(0, 256, size=3, dtype=np.uint8)
    for _ in range(3):
        x0, y0 = int(rng.integers(0, w - 1)), int(rng.integers(0, h - 1))
        x1, y1 = int(rng.integers(x0 + 1, w + 1)), int(rng.integers(y0 + 1, h + 1))
        a[y0:y1, x0:x1] = rng.integers(0, 256, size=3, dtype=np.uint8)
    return a


def _save_image(path: Path, rng: np.random.Generator, size: tuple[int, int] = (40, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(_pixels(rng, size), mode="RGB")
    if path.suffix.lower() in (".jpg", ".jpeg"):
        image.save(path, format="JPEG", quality=95)
    else:
        image.save(path, format="PNG")


def _save_npy_bgr(path: Path, rng: np.random.Generator, size: tuple[int, int] = (40, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, _pixels(rng, size)[..., ::-1].copy())  # stored BGR, as EqBen YouCook2 frames


def _write_json(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def _caption(rng: np.random.Generator) -> str:
    noun, noun2 = rng.choice(_NOUNS, size=2, replace=False)
    return f"A {rng.choice(_ADJS)} {noun} {rng.choice(_VERBS)} a {noun2} in the {rng.choice(_PLACES)}."
