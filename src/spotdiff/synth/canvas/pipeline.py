"""The progressive pipeline of SPEC Sec. 3.2 as four pluggable stages.

Object source, isolation, arrangement and background fill; the ``procedural`` and ``folder`` backends
here, the ``generative`` one in :mod:`spotdiff.synth.diffusion.stages`. Details: docs/synthesis.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError
from spotdiff.synth.canvas.backgrounds import ProceduralBackground
from spotdiff.synth.canvas.geometry import boxes_overlap
from spotdiff.synth.canvas.layout import Canvas, Placement, Rendered, placement_at, placement_box
from spotdiff.synth.canvas.objects import (
    AlphaIsolator,
    ObjectInstance,
    ObjectLibrary,
    ObjectSource,
    Placed,
    make_source,
)
from spotdiff.synth.output import case_rng

BACKENDS = ("procedural", "generative")
MIN_IMAGE_SIZE = 32


@dataclass
class Pipeline:
    """The four stages for one image size."""

    source: ObjectSource
    isolator: Any
    background: Any
    size: int

    def __post_init__(self) -> None:
        if self.size < MIN_IMAGE_SIZE:
            raise ConfigError(f"--image-size must be at least {MIN_IMAGE_SIZE}, got {self.size}")
        self.library = ObjectLibrary(self.source, self.isolator)
        self.canvas = Canvas(self.library, self.size)

    def describe(self) -> dict:
        """The stages by name; a model-backed source adds its models' device, precision and attention."""
        described = {
            "object_source": getattr(self.source, "name", type(self.source).__name__),
            "isolator": getattr(self.isolator, "name", type(self.isolator).__name__),
            "background": getattr(self.background, "name", type(self.background).__name__),
            "image_size": self.size,
        }
        models = getattr(self.source, "models", None)
        return described if models is None else {**described, "models": models.describe()}

    def summary(self, engine: str, seed: int) -> dict:
        """The head of an engine's summary (``synth.json``): engine, seed, image size, stages."""
        return {"engine": engine, "seed": seed, "image_size": self.size, "pipeline": self.describe()}


def make_pipeline(
    size: int = 224,
    *,
    backend: str = "procedural",
    objects: str | Path | None = None,
    scenes: list[str] | None = None,
) -> Pipeline:
    """Build the procedural stages (the ``folder`` source when ``objects`` is given; docs/synthesis.md).

    The ``generative`` backend's stages load diffusion models: :meth:`spotdiff.synth.CanvasConfig.pipeline`
    builds them (the diffusion family plugs into this pipeline; the canvas never imports it).

    Args:
        size: the square image side in pixels.
        backend: ``procedural``.
        objects: a folder of RGBA cut-outs (the ``folder`` backend), or None.
        scenes: the background scenes to draw from; None: all.
    """
    if backend == "procedural":
        resolution = min(1024, max(256, 2 * int(size)))
        return Pipeline(
            make_source(objects, resolution=resolution), AlphaIsolator(), ProceduralBackground(scenes), size
        )
    if backend == "generative":
        raise ConfigError("the generative backend's stages are built by spotdiff.synth.CanvasConfig.pipeline()")
    raise ConfigError(f"unknown synthesis backend {backend!r}; known: {', '.join(BACKENDS)}")


def chosen_subsets(subsets: Sequence[str] | None, known: Sequence[str], what: str) -> list[str]:
    """The subsets a canvas engine writes: ``subsets`` (each one of ``known``), or all of them.

    >>> chosen_subsets(None, ("a", "b"), "SPEC"), chosen_subsets(["b"], ("a", "b"), "SPEC")
    (['a', 'b'], ['b'])
    """
    for sub in subsets or ():
        if sub not in known:
            raise ConfigError(f"unknown {what} subset {sub!r}; known: {', '.join(known)}")
    return list(subsets or known)


class Infeasible(Exception):
    """A draw cannot satisfy the definitions; the case is redrawn with the next attempt's seed."""


class Composer:
    """Layout helpers shared by the engines: sample instances, size them, scatter them, render.

    Args:
        pipeline: the stages to draw with.
        seed: the engine's seed.
        split: ``test`` or ``train``: which half of the instance seed space.
        namespace: keeps the random streams of corpora apart from those of evaluation sets.
    """

    def __init__(self, pipeline: Pipeline, seed: int = 0, split: str = "test", namespace: int = 0) -> None:
        self.p = pipeline
        self.s = pipeline.size
        self.seed = int(seed)
        self.split = split
        self.namespace = int(namespace)

    def rng(self, *keys: int):
        """The generator of one case; ``namespace`` keeps corpora apart from evaluation sets."""
        return case_rng(self.seed, self.namespace, *keys)

    def prefetch_backgrounds(self, draws: Sequence[tuple[int, int]]) -> None:
        """Make ahead, in batches, the first-attempt backgrounds of cases ``(code, index)`` when the background
        stage can (the generative one: SPEC Sec. 3.2.4's inpainting, a pipeline call per batch)."""
        prefetch = getattr(self.p.background, "prefetch", None)
        if prefetch is not None:
            prefetch(self.s, [self.rng(code, index, 0) for code, index in draws])

    def instance(self, rng, exclude=(), min_square: float = 0.0, min_colours: int = 0) -> ObjectInstance:
        """Sample an instance; ``min_square`` asks for a near-square cut-out (min(a, 1/a) >= it).

        Args:
            rng: the case's generator.
            exclude: categories not to draw.
            min_square: the smallest accepted min(aspect, 1/aspect) of the cut-out.
            min_colours: the fewest colours the category must have.
        """
        for _ in range(60):
            inst = self.p.source.sample(rng, split=self.split, exclude=exclude)
            if len(self.p.source.colours(inst.category)) < min_colours:
                continue
            a = self.p.library.cutout(inst).aspect
            if min(a, 1 / a) >= min_square:
                return inst
        raise Infeasible("no object with a suitable aspect ratio")

    def fit(self, inst: ObjectInstance, area_frac: float, max_side: float) -> Placed:
        """Resize an instance to a box area of ``area_frac`` of the image, sides at most ``max_side``.

        Args:
            inst: the instance.
            area_frac: the box area as a fraction of the image's.
            max_side: the longest side as a fraction of the image side.
        """
        s = self.s
        side = max(2, int(max_side * s))
        placed = self.p.library.fit_area(inst, area_frac * s * s, max_w=side, max_h=side)
        if placed.box_area < 9:
            raise Infeasible("object too small to render")
        return placed

    def inside(self, box, margin: int = 0) -> bool:
        return box[0] >= margin and box[1] >= margin and box[2] <= self.s - margin and box[3] <= self.s - margin

    def scatter(self, rng, placed: Placed, n: int, taken: list, gap: int, tries: int = 3000) -> list:
        """``n`` centres for one layer, inside the canvas, the layers ``gap`` apart from each other and
        from the ``taken`` boxes.

        Args:
            rng: the case's generator.
            placed: the resized layer to place ``n`` times.
            n: how many centres.
            taken: boxes (x0, y0, x1, y1) already on the canvas.
            gap: the least distance in pixels between layers.
            tries: draws before giving up (:class:`Infeasible`).
        """
        s = self.s
        bw, bh = placed.box_size
        out: list[tuple[float, float]] = []
        boxes = list(taken)
        for _ in range(tries):
            if len(out) == n:
                break
            cx = rng.uniform(bw / 2 + gap, s - bw / 2 - gap)
            cy = rng.uniform(bh / 2 + gap, s - bh / 2 - gap)
            pl = placement_at(None, placed, cx, cy)  # type: ignore[arg-type]
            # the whole layer, anti-aliased fringe included, keeps clear of the others
            layer = (pl.x, pl.y, pl.x + pl.w, pl.y + pl.h)
            if not self.inside(placement_box(pl, placed)) or any(boxes_overlap(layer, b, gap) for b in boxes):
                continue
            boxes.append(layer)
            out.append((cx, cy))
        if len(out) < n:
            raise Infeasible("cannot scatter the objects without overlap")
        return out

    def render(self, bg, placements: list[Placement]) -> Rendered:
        return self.p.canvas.render(bg, placements)
