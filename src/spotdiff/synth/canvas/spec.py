"""SPEC-style canvas engine: ``spotdiff synth spec`` (SPEC Sec. 3, "Synthesize").

Each case is a K-way candidate set (SPEC Eq. 3) in one of SPEC's six subsets, every label measured on
the rendered image; the output is SPEC's layout plus the ``cls`` task. Subsets, consistency and
output files: docs/synthesis.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotdiff.benchmarks._io import field as json_field
from spotdiff.benchmarks._io import read_json
from spotdiff.benchmarks.spec import SPEC_K, SUBSETS
from spotdiff.errors import ConfigError, DataError, SpotdiffError
from spotdiff.review.sets import OPTIONAL_FIELDS, SHEET_IMAGES, SHEET_TEXTS, read_cases
from spotdiff.review.sheet import RULES, ReviewItem, copy_images, read_reviews
from spotdiff.synth import (
    ENGINES,
    CanvasConfig,
    ReviewOptions,
    SynthEngine,
    count_option,
    option,
    subsets_option,
)
from spotdiff.synth.canvas.geometry import (
    COUNT_RANGE,
    EXISTENCE_LEVELS,
    GRID_POSITIONS,
    RELATIVE_POSITIONS,
    absolute_size_level,
    boxes_overlap,
    existence_level,
    grid_position,
    relative_position,
    relative_size_level,
)
from spotdiff.synth.canvas.layout import Rendered, placement_at, placement_box
from spotdiff.synth.canvas.objects import ObjectInstance
from spotdiff.synth.canvas.pipeline import Composer, Infeasible, Pipeline, chosen_subsets, make_pipeline
from spotdiff.synth.language import counted, with_article
from spotdiff.synth.output import save_png, write_json
from spotdiff.synth.run import make_items, resumable

LABELS: dict[str, tuple] = {
    "absolute_size": ("small", "medium", "large"),
    "relative_size": ("smaller than", "equal to", "larger than"),
    "absolute_spatial": GRID_POSITIONS,
    "relative_spatial": RELATIVE_POSITIONS,
    "existence": EXISTENCE_LEVELS,
    "count": tuple(COUNT_RANGE),
}
_SUBSET_CODE = {name: i + 1 for i, name in enumerate(SUBSETS)}
_CLS_CODE = 99
MAX_ATTEMPTS = 40
CLS_TEMPLATE = "a photo of a {}."

_SIZE_WORDS = {"small": "small", "medium": "medium-sized", "large": "large"}
_REL_SIZE_WORDS = {
    "smaller than": "that is smaller than",
    "equal to": "that is the same size as",
    "larger than": "that is larger than",
}
_GRID_WORDS = {
    "top-left": "in the top left corner",
    "top": "at the top",
    "top-right": "in the top right corner",
    "left": "on the left side",
    "center": "in the center",
    "right": "on the right side",
    "bottom-left": "in the bottom left corner",
    "bottom": "at the bottom",
    "bottom-right": "in the bottom right corner",
}
_REL_POS_WORDS = {"left of": "to the left of", "right of": "to the right of", "above": "above", "below": "below"}
#: the words between the target and the reference object of a relative subset's caption, per label
_RELATION_WORDS = {"relative_size": _REL_SIZE_WORDS, "relative_spatial": _REL_POS_WORDS}


def caption(subset: str, label: Any, target: str, other: str | None = None, plural: str | None = None) -> str:
    """The text of one candidate; texts of a case differ only in the words for ``label``.

    Args:
        subset: the SPEC subset.
        label: the candidate's label in that subset.
        target: the name of the object under test.
        other: the name of the reference object (relative subsets), or None.
        plural: the target's irregular plural (count), or None.
    """
    if subset == "absolute_size":
        return f"a photo of {with_article(_SIZE_WORDS[label] + ' ' + target)}"
    if subset == "absolute_spatial":
        return f"a photo of {with_article(target)} {_GRID_WORDS[label]} of the image"
    if subset in _RELATION_WORDS:
        return f"a photo of {with_article(target)} {_RELATION_WORDS[subset][label]} {with_article(str(other))}"
    if subset == "existence":
        return f"there is {'no' if label == 'no' else 'at least one'} {target} in the image"
    if subset == "count":
        return f"there {'is' if label == 1 else 'are'} {counted(int(label), target, plural)} in the image"
    raise ConfigError(f"unknown SPEC subset {subset!r}; known: {', '.join(SUBSETS)}")


def measured_label(subset: str, rendered: Rendered, size: int) -> Any:
    """The SPEC label of a rendered image, from its measured geometry (``None`` when ambiguous).

    Args:
        subset: the SPEC subset.
        rendered: the rendered image with its measured objects.
        size: the image side in pixels.
    """
    targets = rendered.of_role("target")
    if subset == "existence":
        return existence_level(len(targets))
    if subset == "count":
        return len(targets)
    if len(targets) != 1:
        return None
    (a,) = targets
    if subset == "absolute_size":
        return absolute_size_level(a.box_area / (size * size))
    if subset == "absolute_spatial":
        return grid_position(*a.centre, size, size)
    refs = rendered.of_role("reference")
    if len(refs) != 1:
        return None
    (b,) = refs
    if subset == "relative_size":
        return relative_size_level(a.box_area / b.box_area)
    if subset == "relative_spatial":
        return relative_position(a.centre, b.centre)
    raise ConfigError(f"unknown SPEC subset {subset!r}")


@dataclass
class SpecCase:
    """One rendered K-way case (images in memory)."""

    subset: str
    index: int
    attempt: int
    labels: list
    texts: list[str]
    renders: list[Rendered]
    scene: str
    instances: dict[str, ObjectInstance]
    background: Any = None
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.subset}/{self.index:05d}"


class SpecBuilder(Composer):
    """Builds SPEC cases on a pipeline; one method per subset (SPEC Sec. 3.3)."""

    # -- the subsets ---------------------------------------------------------------------------
    def _absolute_size(self, rng):
        inst = self.instance(rng, min_square=0.88)
        a = self.p.library.cutout(inst).aspect
        max_frac = min(a, 1 / a) * 0.985
        targets = {
            "small": rng.uniform(0.05, 0.15),
            "medium": rng.uniform(0.45, 0.55),
            "large": rng.uniform(0.84, max(0.845, min(0.95, max_frac))),
        }
        c = self.s / 2
        placements = {}
        for label, frac in targets.items():
            placed = self.fit(inst, frac, 1.0)
            placements[label] = [placement_at(inst, placed, c, c)]
        return {"target": inst}, placements, {}

    def _relative_size(self, rng):
        s = self.s
        a_inst = self.instance(rng)
        b_inst = self.instance(rng, exclude=[a_inst.category])
        a_left = bool(rng.random() < 0.5)
        margin = 0.04 * s
        region_w, region_h = s / 2 - 1.5 * margin, s - 2 * margin

        def max_area(inst):
            asp = self.p.library.cutout(inst).aspect
            w = min(region_w, region_h * asp)
            return w * (w / asp)

        ratios = {
            "smaller than": rng.uniform(0.28, 0.42),
            "equal to": 1.0,
            "larger than": rng.uniform(2.4, 3.2),
        }
        area_b = min(0.9 * max_area(b_inst), 0.95 * max_area(a_inst) / ratios["larger than"]) * rng.uniform(0.75, 1.0)
        if area_b * ratios["smaller than"] < max(16.0, 0.004 * s * s):
            raise Infeasible("relative sizes do not fit")
        ax, bx = (s / 4, 3 * s / 4) if a_left else (3 * s / 4, s / 4)
        cy = s / 2
        b_placed = self.p.library.fit_area(b_inst, area_b, max_w=int(region_w), max_h=int(region_h))
        b_pl = placement_at(b_inst, b_placed, bx, cy, "reference")
        placements = {}
        for label, r in ratios.items():
            a_placed = self.p.library.fit_area(a_inst, r * b_placed.box_area, max_w=int(region_w), max_h=int(region_h))
            placements[label] = [placement_at(a_inst, a_placed, ax, cy, "target"), b_pl]
        return {"target": a_inst, "reference": b_inst}, placements, {"target_side": "left" if a_left else "right"}

    def _absolute_spatial(self, rng):
        s = self.s
        inst = self.instance(rng)
        placed = self.fit(inst, rng.uniform(0.03, 0.055), 0.25)
        jx, jy = rng.uniform(-0.03, 0.03, 2) * s
        placements = {}
        for k, label in enumerate(GRID_POSITIONS):
            row, col = divmod(k, 3)
            placements[label] = [placement_at(inst, placed, (col + 0.5) * s / 3 + jx, (row + 0.5) * s / 3 + jy)]
        return {"target": inst}, placements, {}

    def _relative_spatial(self, rng):
        s = self.s
        a_inst = self.instance(rng)
        b_inst = self.instance(rng, exclude=[a_inst.category])
        a_placed = self.fit(a_inst, rng.uniform(0.03, 0.055), 0.26)
        b_placed = self.fit(b_inst, rng.uniform(0.03, 0.055), 0.26)
        bx, by = s / 2 + rng.uniform(-0.03, 0.03) * s, s / 2 + rng.uniform(-0.03, 0.03) * s
        gap = rng.uniform(0.04, 0.1) * s
        (aw, ah), (bw, bh) = a_placed.box_size, b_placed.box_size
        dx, dy = (aw + bw) / 2 + gap, (ah + bh) / 2 + gap
        centres = {"left of": (bx - dx, by), "right of": (bx + dx, by), "above": (bx, by - dy), "below": (bx, by + dy)}
        b_pl = placement_at(b_inst, b_placed, bx, by, "reference")
        placements = {}
        for label, (ax, ay) in centres.items():
            pl = placement_at(a_inst, a_placed, ax, ay, "target")
            if not self.inside(placement_box(pl, a_placed)):
                raise Infeasible("object A leaves the canvas")
            placements[label] = [pl, b_pl]
        return {"target": a_inst, "reference": b_inst}, placements, {}

    def _existence(self, rng):
        a_inst = self.instance(rng)
        d_inst = self.instance(rng, exclude=[a_inst.category])
        a_placed = self.fit(a_inst, rng.uniform(0.04, 0.08), 0.32)
        d_placed = self.fit(d_inst, rng.uniform(0.04, 0.08), 0.32)
        gap = max(1, int(0.02 * self.s))
        (dc,) = self.scatter(rng, d_placed, 1, [], gap)
        d_pl = placement_at(d_inst, d_placed, *dc, "distractor")
        n = 1 + int(rng.random() < 0.4)
        a_centres = self.scatter(rng, a_placed, n, [(d_pl.x, d_pl.y, d_pl.x + d_pl.w, d_pl.y + d_pl.h)], gap)
        a_pls = [placement_at(a_inst, a_placed, cx, cy, "target") for cx, cy in a_centres]
        placements = {"no": [d_pl], "at least one": [d_pl, *a_pls]}
        return {"target": a_inst, "distractor": d_inst}, placements, {"instances_when_present": n}

    def _count(self, rng):
        inst = self.instance(rng)
        placed = self.fit(inst, rng.uniform(0.015, 0.028), 0.2)
        gap = max(1, int(0.015 * self.s))
        centres = self.scatter(rng, placed, 9, [], gap)
        pls = [placement_at(inst, placed, cx, cy, "target") for cx, cy in centres]
        return {"target": inst}, {n: pls[:n] for n in COUNT_RANGE}, {}

    # -- driver --------------------------------------------------------------------------------
    def build(self, subset: str, index: int, only: Any = None) -> SpecCase:
        """Build (and check) case ``index`` of ``subset``; ``only`` renders just that label's image.

        Args:
            subset: the SPEC subset.
            index: the case's index in the subset (it seeds the case).
            only: render only the image of this label; None: every candidate.
        """
        if subset not in _SUBSET_CODE:
            raise ConfigError(f"unknown SPEC subset {subset!r}; known: {', '.join(SUBSETS)}")
        method = getattr(self, f"_{subset}")
        reason = ""
        for attempt in range(MAX_ATTEMPTS):
            rng = self.rng(_SUBSET_CODE[subset], index, attempt)
            try:
                bg, scene = self.p.background.fill(self.s, rng)
                instances, placements, extra = method(rng)
                case = self._finish(subset, index, attempt, bg, scene, instances, placements, extra, only)
            except Infeasible as exc:
                reason = str(exc)
                continue
            return case
        raise SpotdiffError(
            f"SPEC {subset} case {index}: no valid layout in {MAX_ATTEMPTS} attempts at image size {self.s} "
            f"(last reason: {reason}); try a larger --image-size"
        )

    def _finish(self, subset, index, attempt, bg, scene, instances, placements, extra, only=None) -> SpecCase:
        labels = list(LABELS[subset])
        renders = []
        for label in labels:
            if only is not None and label != only:
                renders.append(None)
                continue
            r = self.render(bg, placements[label])
            check_render(subset, label, r, self.s)
            renders.append(r)
        target = instances["target"].category
        other = instances.get("reference")
        plural = self.p.source.plural(target)
        texts = [caption(subset, label, target, other.category if other else None, plural) for label in labels]
        if len(set(texts)) != len(texts):  # pragma: no cover - templates guarantee this
            raise Infeasible("duplicate texts")
        return SpecCase(subset, index, attempt, labels, texts, renders, scene, instances, bg, extra)

    def build_cls(self, index: int):
        """One single-object image for the cls task (SPEC Sec. 4.2, Table 2 "cls")."""
        for attempt in range(MAX_ATTEMPTS):
            rng = self.rng(_CLS_CODE, index, attempt)
            try:
                bg, scene = self.p.background.fill(self.s, rng)
                inst = self.instance(rng)
                placed = self.fit(inst, rng.uniform(0.12, 0.3), 0.8)
                c = self.s / 2
                r = self.render(bg, [placement_at(inst, placed, c + rng.uniform(-0.08, 0.08) * self.s, c)])
                if len(r.of_role("target")) != 1 or not self.inside(r.objects[0].bbox):
                    raise Infeasible("cls object not visible")
                return inst, scene, r
            except Infeasible:
                continue
        raise SpotdiffError(f"cls image {index}: no valid layout")  # pragma: no cover


def check_render(subset: str, label: Any, rendered: Rendered, size: int) -> None:
    """Assert SPEC's definitions on one rendered image (raises :class:`Infeasible`).

    Args:
        subset: the SPEC subset.
        label: the label the image was drawn for.
        rendered: the rendered image with its measured objects.
        size: the image side in pixels.
    """
    for obj in rendered.objects:
        if obj.mask_area != obj.full_mask_area:
            raise Infeasible(f"{obj.category} is clipped or occluded")
    visible = [o for o in rendered.objects if o.visible]
    for i, a in enumerate(visible):
        for b in visible[i + 1 :]:
            if boxes_overlap(a.bbox, b.bbox):
                raise Infeasible("objects overlap")
    got = measured_label(subset, rendered, size)
    if got != label:
        raise Infeasible(f"measured {got!r}, wanted {label!r}")


# ------------------------------------------------------------------------------------------------
# writing


def _slug(label: Any) -> str:
    return str(label).replace(" ", "-")


class _Writer:
    def __init__(self, builder: SpecBuilder, out: Path) -> None:
        self.builder = builder
        self.out = out

    def case(self, task: tuple[str, int]) -> dict:
        subset, index = task
        case = self.builder.build(subset, index)
        folder = self.out / subset
        images = []
        measured = []
        for k, (label, r) in enumerate(zip(case.labels, case.renders, strict=True)):
            rel = f"images/{index:05d}_{k}_{_slug(label)}.png"
            save_png(r.image, folder / rel)
            images.append(rel)
            measured.append(
                {
                    "label": label,
                    "measured": measured_label(subset, r, self.builder.s),
                    "objects": [o.as_dict(self.builder.s, self.builder.s) for o in r.objects],
                }
            )
        return {
            "id": case.id,
            "attempt": case.attempt,
            "scene": case.scene,
            "objects": {role: inst.as_dict() for role, inst in case.instances.items()},
            "texts": case.texts,
            "images": images,
            "labels": case.labels,
            "extra": case.extra,
            "measured": measured,
        }

    def cls(self, index: int) -> dict:
        inst, scene, r = self.builder.build_cls(index)
        rel = f"images/{index:05d}.png"
        save_png(r.image, self.out / "cls" / rel)
        return {"image": rel, "label": inst.category, "object": inst.as_dict(), "scene": scene}


def _classification(records: list[dict], classes: list[str]) -> dict:
    items = []
    for rec in records:
        for image, m in zip(rec["images"], rec["measured"], strict=True):
            visible = [o for o in m["objects"] if o["mask_area"] > 0]
            targets = [o for o in visible if o["role"] == "target"]
            main = targets[0] if targets else max(visible, key=lambda o: o["box_area"])
            items.append(
                {"image": image, "label": main["category"], "objects": sorted({o["category"] for o in visible})}
            )
    return {"classes": classes, "template": CLS_TEMPLATE, "items": items}


def _write_subset(folder: Path, sub: str, recs: list[dict], classes: list[str]) -> None:
    """One subset's files: the I2T and T2I queries SPEC publishes, the classification items and the metadata."""
    i2t, t2i = [], []
    for rec in recs:
        for k, image in enumerate(rec["images"]):
            i2t.append({"query": image, "keys": list(rec["texts"]), "label": k})
        for k, text in enumerate(rec["texts"]):
            t2i.append({"query": text, "keys": list(rec["images"]), "label": k})
    write_json(folder / "image2text.json", i2t)
    write_json(folder / "text2image.json", t2i)
    write_json(folder / "classification.json", _classification(recs, classes))
    write_json(folder / "metadata.json", {"subset": sub, "labels": list(LABELS[sub]), "cases": recs})


@resumable
def write_spec(
    out: Path,
    *,
    n: int = 10,
    seed: int = 0,
    size: int = 224,
    subsets: list[str] | None = None,
    pipeline: Pipeline | None = None,
    workers: int = 1,
    cls: bool = True,
    counts: dict[str, int] | None = None,
) -> dict:
    """Write a SPEC-format dataset (see docs/synthesis.md); return the summary.

    ``n``, ``seed``, ``size`` (``image_size``), ``pipeline`` and ``workers``: the options of
    :class:`spotdiff.synth.CanvasConfig` (``pipeline`` None: the procedural pipeline at ``size``).

    Args:
        out: the output folder.
        subsets: the subsets to write; None: all six.
        cls: also write the ``cls`` task (``DIR/cls``).
        counts: cases per subset where it differs from ``n``, or None.
    """
    subsets = chosen_subsets(subsets, SUBSETS, "SPEC")
    pipeline = pipeline or make_pipeline(size)
    builder = SpecBuilder(pipeline, seed)
    writer = _Writer(builder, Path(out))
    counts = {sub: int((counts or {}).get(sub, n)) for sub in subsets}
    tasks = [(sub, i) for sub in subsets for i in range(counts[sub])]
    records = make_items(
        out, writer.case, tasks, key=lambda t: f"{t[0]}/{t[1]}", workers=workers, desc="sets",
        prepare=lambda todo: builder.prefetch_backgrounds([(_SUBSET_CODE[s], i) for s, i in todo]),
    )  # fmt: skip
    classes = sorted(pipeline.source.categories())
    by_subset: dict[str, list[dict]] = {sub: [] for sub in subsets}
    for rec in records:
        by_subset[rec["id"].split("/")[0]].append(rec)
    for sub, recs in by_subset.items():
        _write_subset(Path(out) / sub, sub, recs, classes)
    n_cls = 0
    if cls and tasks:
        n_cls = len(tasks)
        cls_records = make_items(
            out, writer.cls, list(range(n_cls)), key=lambda i: f"cls/{i}", workers=workers, desc="cls images",
            prepare=lambda todo: builder.prefetch_backgrounds([(_CLS_CODE, i) for i in todo]),
        )  # fmt: skip
        keys = [CLS_TEMPLATE.format(c) for c in classes]
        write_json(
            Path(out) / "cls" / "image2text.json",
            [{"query": r["image"], "keys": keys, "label": classes.index(r["label"])} for r in cls_records],
        )
        write_json(
            Path(out) / "cls" / "classification.json",
            {"classes": classes, "template": CLS_TEMPLATE, "items": cls_records},
        )
    return {
        **pipeline.summary("spec", seed),
        "cases": {sub: len(recs) for sub, recs in by_subset.items()},
        "images": sum(len(r["images"]) for r in records) + n_cls,
        "cls_images": n_cls,
        "classes": classes,
    }


def write_from_review(out: Path, reviews: Path | Sequence[Path], rule: str = RULES[0]) -> dict:
    """Write the SPEC subsets of the sets accepted in reviewed sheets (their texts as edited); the ``cls``
    task is not reviewed and not written.

    Args:
        out: the output folder.
        reviews: the reviewed ``review.csv``, or several reviewers' files of it (the subsets' files and
            images are read from beside them).
        rule: how several reviewers' decisions make one (:data:`spotdiff.review.sheet.RULES`).
    """
    fields = {"image_fields": SHEET_IMAGES, "text_fields": SHEET_TEXTS, "optional": OPTIONAL_FIELDS}
    result = read_reviews(reviews, **fields, rule=rule)
    sheet = Path(result.files[0])
    accepted: dict[str, list[ReviewItem]] = {}
    for item in result.accepted:
        accepted.setdefault(item.id.split("/")[0], []).append(item)
    written = {}
    for sub in SUBSETS:
        if sub not in accepted:
            continue
        cases = {c["id"]: c for c in read_cases(sheet.parent, sub)}
        recs = [_reviewed_case(sheet, sub, item, cases) for item in accepted[sub]]
        copy_images([f"{sub}/{i}" for r in recs for i in r["images"]], sheet.parent, out, sheet=sheet, under="")
        classification = sheet.parent / sub / "classification.json"
        classes = json_field(read_json(classification), "classes", list, file=classification, record_id=None)
        _write_subset(Path(out) / sub, sub, recs, classes)
        written[sub] = len(recs)
    if accepted.keys() - written.keys():
        unknown = sorted(accepted.keys() - written.keys())
        raise DataError(f"accepted sets of no SPEC subset: {', '.join(unknown)}", file=sheet, field="id")
    return {"engine": "spec", "mode": "from a review (cls not written)", **result.summary(), "cases": written}


def _reviewed_case(sheet: Path, sub: str, item: ReviewItem, cases: dict[str, dict]) -> dict:
    """The case of an accepted row, with the row's texts; its images must be the case's, all K of them."""
    case = cases.get(item.id)
    if case is None:
        raise DataError(f"no set {item.id!r} in {sub}/metadata.json", file=sheet, record=item.id, field="id")
    k = SPEC_K[sub]
    images = [item.images[f] for f in SHEET_IMAGES]
    texts = [item.texts[f] for f in SHEET_TEXTS]
    if images != [f"{sub}/{i}" for i in case["images"]] + [""] * (len(SHEET_IMAGES) - k):
        raise DataError(f"the images are not the set's {k} images", file=sheet, record=item.id, field="image0")
    if any(texts[k:]) or not all(texts[:k]):
        raise DataError(f"a {sub} set has {k} texts, in text0 to text{k - 1}", file=sheet, record=item.id)
    return {**case, "texts": texts[:k]}


@dataclass(frozen=True)
class SpecConfig(ReviewOptions, CanvasConfig):
    """The options of the ``spec`` engine."""

    n: int = count_option(10, "candidate sets per subset")
    subsets: tuple[str, ...] | None = subsets_option(SUBSETS)
    cls: bool = option(True, "skip the cls/ classification images")


@ENGINES.register("spec")
class SpecEngine(SynthEngine, config=SpecConfig, benchmark="spec", reviewed=write_from_review):
    """SPEC's six subsets (size, position, existence, count) from the canvas pipeline (SPEC Sec. 3)"""

    def make(self, out: Path) -> dict:
        return write_spec(out, **self.config.arguments())


__all__ = [
    "LABELS",
    "SUBSETS",
    "SpecBuilder",
    "SpecCase",
    "SpecConfig",
    "caption",
    "check_render",
    "measured_label",
    "write_from_review",
    "write_spec",
]
