"""A held-out zero-shot classification set: ``spotdiff synth zeroshot``.

Single-object images with balanced classes, in the image-folder layout of the
``zeroshot-classification`` benchmark. Details: docs/synthesis.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spotdiff.errors import SpotdiffError
from spotdiff.jsonio import write_jsonl
from spotdiff.synth import ENGINES, CanvasConfig, SynthEngine, count_option
from spotdiff.synth.canvas.layout import placement_at
from spotdiff.synth.canvas.pipeline import Composer, Infeasible, Pipeline, make_pipeline
from spotdiff.synth.output import save_png
from spotdiff.synth.run import make_items, resumable

#: The prompt ensemble written with the set (CLIP-style templates, none naming colour or texture).
TEMPLATES = (
    "a photo of a {c}.",
    "a photo of the {c}.",
    "a picture of a {c}.",
    "an image of a {c}.",
    "a photo of one {c}.",
    "a {c} in the picture.",
)
_CODE = 171  # the seed stream of these images (SPEC's cls uses its own)
MAX_ATTEMPTS = 50


def folder_name(category: str) -> str:
    return category.replace(" ", "_")


class ZeroShotBuilder(Composer):
    """One centred object of a given category per image."""

    def build(self, index: int, category: str):
        for attempt in range(MAX_ATTEMPTS):
            rng = self.rng(_CODE, index, attempt)
            try:
                bg, scene = self.p.background.fill(self.s, rng)
                inst = self.p.source.sample(rng, split=self.split, category=category)
                placed = self.fit(inst, rng.uniform(0.12, 0.3), 0.8)
                c = self.s / 2
                r = self.render(bg, [placement_at(inst, placed, c + rng.uniform(-0.08, 0.08) * self.s, c)])
                if len(r.of_role("target")) != 1 or not self.inside(r.objects[0].bbox):
                    raise Infeasible("object not visible")
                return inst, scene, r
            except Infeasible:
                continue
        raise SpotdiffError(f"zero-shot image {index}: no valid layout")  # pragma: no cover


@resumable
def write_zeroshot(
    out: Path, *, n: int = 100, seed: int = 0, size: int = 224, pipeline: Pipeline | None = None, workers: int = 1
) -> dict:
    """Write ``n`` class-labelled images under ``out``; return the summary (docs/synthesis.md).

    Options as in :class:`spotdiff.synth.SynthConfig` (``size`` is its ``image_size``).
    """
    out = Path(out)
    pipeline = pipeline or make_pipeline(size)
    builder = ZeroShotBuilder(pipeline, seed)
    categories = list(pipeline.source.categories())
    classes = sorted(categories, key=folder_name)

    def one(index: int) -> dict:
        category = categories[index % len(categories)]
        inst, scene, r = builder.build(index, category)
        rel = f"{folder_name(category)}/{index:05d}.png"
        save_png(r.image, out / rel)
        return {"image": rel, "label": category, "object": inst.as_dict(), "scene": scene}

    records = make_items(
        out, one, list(range(n)), key=lambda i: f"{i:06d}", workers=workers, desc="images",
        prepare=lambda todo: builder.prefetch_backgrounds([(_CODE, i) for i in todo]),
    )  # fmt: skip
    for category in classes:  # every class is a candidate, even one without images (n < classes)
        (out / folder_name(category)).mkdir(parents=True, exist_ok=True)
    (out / "classnames.txt").write_text("".join(c + "\n" for c in classes), encoding="utf-8")
    (out / "zeroshot_classification_templates.txt").write_text("".join(t + "\n" for t in TEMPLATES), encoding="utf-8")
    write_jsonl(out / "metadata.jsonl", records)
    return {"images": n, "classes": len(classes), "templates": len(TEMPLATES)}


@dataclass(frozen=True)
class ZeroShotConfig(CanvasConfig):
    """The options of the ``zeroshot`` engine."""

    n: int = count_option(10, "images, balanced over the classes")


@ENGINES.register("zeroshot")
class ZeroShotEngine(SynthEngine, config=ZeroShotConfig, benchmark="zeroshot-classification"):
    """a held-out zero-shot classification set: one object per image, balanced classes, a prompt ensemble"""

    def make(self, out: Path) -> dict:
        return write_zeroshot(out, **self.config.arguments())
