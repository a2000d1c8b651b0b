"""Object instances, cut-outs and sources: stages 1 and 2 of SPEC's pipeline (SPEC Sec. 3.2.1-3.2.2).

:data:`CATEGORIES` is the procedural library in its fixed :data:`ORDER`: a seeded source samples
categories by position, so the order is part of every synthesized dataset's identity.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError, DataError
from spotdiff.synth.canvas.objects import animals, food, household, outdoors, toys, vehicles
from spotdiff.synth.canvas.objects.category import DECLARED, Category
from spotdiff.synth.canvas.objects.paint import ALPHA_OPAQUE, COLOURS, SPLITS, Pen
from spotdiff.synth.language import pluralize

#: The object families, each a module declaring its categories.
FAMILIES = (food, household, vehicles, outdoors, animals, toys)

#: The library's categories in their fixed order (seeded sampling picks by position).
ORDER: tuple[str, ...] = (
    "apple",
    "banana",
    "strawberry",
    "carrot",
    "pizza",
    "donut",
    "cake",
    "cup",
    "bottle",
    "clock",
    "book",
    "umbrella",
    "car",
    "bus",
    "house",
    "tree",
    "flower",
    "fish",
    "bird",
    "cat",
    "sailboat",
    "airplane",
    "traffic light",
    "stop sign",
    "balloon",
    "mushroom",
    "kite",
    "teddy bear",
    "chair",
    "television",
    "ball",
    "rocket",
    "bicycle",
)
if set(ORDER) != set(DECLARED):  # pragma: no cover - a family added without its place in ORDER
    raise RuntimeError(f"object categories and ORDER differ: {sorted(set(ORDER) ^ set(DECLARED))}")

#: Every procedural category, by name, in :data:`ORDER`.
CATEGORIES: dict[str, Category] = {name: DECLARED[name] for name in ORDER}


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
    """Resize with premultiplied alpha (no dark fringes) and measure the opaque mask.

    Args:
        cut: the cut-out.
        width: the new width in pixels.
        height: the new height in pixels.
    """
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

    def batch(self, instance: ObjectInstance) -> list[ObjectInstance]:
        """The instances made together with ``instance`` (rendered and isolated as one batch); itself alone."""
        return [instance]

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
        """Implemented by each subclass.

        Args:
            rng: the generator to draw with.
            split: ``test`` or ``train``: which half of the instance seed space.
            category: the category to draw; None: any.
            exclude: categories not to draw.
            colour: the colour to draw; None: any of the category's.
            texture: the texture to draw; None: any of the category's.
        """

    @abstractmethod
    def generate(self, instance: ObjectInstance) -> Image.Image:
        """The raw image of one instance (RGBA for sources with alpha, RGB photos otherwise)."""


def instance_seed(rng: np.random.Generator, split: str) -> int:
    """A fresh instance seed of ``split``: test seeds are even, training seeds odd (disjoint halves)."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    return int(rng.integers(0, 2**30)) * 2 + SPLITS[split]


def _choose(rng: np.random.Generator, options: Sequence[str]) -> str:
    return options[int(rng.integers(len(options)))]


class ProceduralObjectSource(ObjectSource):
    """The embedded library: every instance drawn with PIL ImageDraw (see docs/synthesis.md).

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
        return ObjectInstance(category, colour, texture, instance_seed(rng, split))

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
        """The instance's cut-out; the instances its source makes with it (:meth:`ObjectSource.batch`) are
        isolated with it, as one batch where the isolator takes batches (``isolate_batch``)."""
        cut = self._cutouts.get(instance.key)
        if cut is None:
            if len(self._cutouts) > 512:
                self._cutouts.clear()
            batch = [
                instance,
                *(b for b in self.source.batch(instance) if b != instance and b.key not in self._cutouts),
            ]
            images = [self.source.generate(b) for b in batch]
            isolate_batch = getattr(self.isolator, "isolate_batch", None)
            if isolate_batch is None:
                cuts = [self.isolator.isolate(im, b) for im, b in zip(images, batch, strict=True)]  # type: ignore[attr-defined]
            else:
                cuts = isolate_batch(images, batch)
            for b, c in zip(batch, cuts, strict=True):
                self._cutouts[b.key] = CutOut(b, c)
            cut = self._cutouts[instance.key]
        return cut

    def placed(self, instance: ObjectInstance, width: int, height: int) -> Placed:
        """The instance's cut-out resized to ``width`` x ``height`` (cached).

        Args:
            instance: the instance.
            width: the width in pixels.
            height: the height in pixels.
        """
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

        Args:
            instance: the instance.
            target_area: the wanted box area in pixels.
            max_w: the largest width in pixels.
            max_h: the largest height in pixels.
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
