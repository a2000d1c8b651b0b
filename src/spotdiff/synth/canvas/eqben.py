"""EqBen-style visual-minimal pairs: ``spotdiff synth eqben`` (EqBen Sec. 4.2, App. B.4, B.5).

EQ-Kubric's caption templates (Fig. 14) rendered with the SPEC canvas engine, and EQ-SD caption
pairs (Fig. 15, text only), in the format the ``eqben`` loader reads. Details: docs/synthesis.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError, SpotdiffError
from spotdiff.synth import (
    ENGINES,
    CanvasConfig,
    ReviewOptions,
    SynthEngine,
    count_option,
    option,
    subsets_option,
)
from spotdiff.synth.canvas.geometry import Measured, boxes_overlap, relative_position
from spotdiff.synth.canvas.layout import Placement, Rendered, placement_at, placement_box
from spotdiff.synth.canvas.objects import ObjectInstance
from spotdiff.synth.canvas.pipeline import Composer, Infeasible, Pipeline, chosen_subsets, make_pipeline
from spotdiff.synth.eqben_pairs import write_from_review
from spotdiff.synth.language import number_word, sentence, with_article
from spotdiff.synth.output import case_rng, save_png, write_json
from spotdiff.synth.run import make_items, resumable

SUBSETS = ("eqbenkubric_loc", "eqbenkubric_cnt", "eqbenkubric_attr")
_CODE = {"eqbenkubric_loc": 11, "eqbenkubric_cnt": 12, "eqbenkubric_attr": 13, "eqbensd": 14}
MAX_ATTEMPTS = 40

# ---- EqBen Fig. 14 vocabularies ------------------------------------------------------------------
VERBS = ("is", "is located", "is placed")
LOCATIONS = (
    "in front of",
    "behind",
    "on the left of",
    "on the left side of",
    "on the left hand of",
    "on the right of",
    "on the right side of",
    "on the right hand of",
    "on the top of",
    "above",
)
#: the relation each Location phrase depicts
RELATION = {
    "in front of": "front",
    "behind": "behind",
    "on the left of": "left",
    "on the left side of": "left",
    "on the left hand of": "left",
    "on the right of": "right",
    "on the right side of": "right",
    "on the right hand of": "right",
    "on the top of": "top",
    "above": "above",
}
#: relation pairs that are not a semantic change (one implies the other)
_NOT_CONTRASTING = {frozenset({"top", "above"})}
COUNTS = (1, 2, 3, 4, 5)
COUNT_LOCATIONS = ("in the scene", "on the platform")
COUNT_TEMPLATES = ("There <Verb> <Counts> <Object> <Location>.", "<Counts> <Object> <Verb> <Location>.")
SIZES = ("small", "large")
SIZE_BANDS = {"small": (0.015, 0.04), "large": (0.08, 0.16)}

# ---- EqBen Fig. 15 (EQ-SD) vocabularies ----------------------------------------------------------
SD_OBJECT_SETS = (
    (
        ("cattle", "horse", "elephant", "goat", "deer", "camel", "zebra"),
        ("standing on the grass", "in the desert", "near the river", "in the zoo"),
    ),
    (
        ("rabbit", "cat", "dog", "wolf", "fox", "rat", "squirrel"),
        ("standing on the grass", "eating", "in the wild", "on the desk", "on the bench"),
    ),
    (("monkey", "koala", "panda"), ("standing on the grass", "in the jungle", "on the tree", "in the wild")),
    (("bird", "eagle", "dove"), ("in the sky", "on the tree", "standing on the branch")),
    (("duck", "chicken"), ("on the ground", "in the wild")),
    (("shark", "fish", "shrimp", "whale", "dolphin"), ("in the river", "under the water")),
    (("crab", "frog"), ("aside the river", "under the water")),
    (("bear", "tiger", "lion", "pig"), ("in the desert", "near the river", "in the zoo")),
)
SD_SCENE_OBJECTS = (
    ("a house on a mountain", ("at sunset", "at night", "at winter", "at fall", "at fog", "in the desert")),
    (
        "a river through the valley",
        ("at sunset with clouds", "under noon sunshine", "at winter with snow", "at fall", "at fog"),
    ),
    ("modern city street", ("at sunset with clouds", "at winter with snow", "at fall", "at fog", "in heavy raining")),
    ("beach", ("at sunset", "at fog", "at rainstorm")),
)
SD_ACCESSORIES = (
    "",
    "wearing a sunglasses",
    "wearing a scarf",
    "wearing a crown",
    "wearing a cap",
    "wearing a cowboy hat",
)
SD_ACCESSORY_OBJECTS = ("dog", "cat")
SD_COLOURS = ("black", "blue", "brown", "red")
SD_STYLES = (
    "a real image of",
    "an oil painting of",
    "a pencil sketch of",
    "an Van Gogh post-impressionism painting of",
)
SD_STYLE_OBJECTS = ("dog", "car", "bicycle", "cat", "bus", "train", "bird", "horse", "cake", "desk")
#: EQ-SD attribute changes: objects, attributes, caption template (``a_X``: X with its article); the
#: slots hold the medium where the caption names it
_SD_ATTRIBUTE_CHANGES = (
    (SD_ACCESSORY_OBJECTS, SD_ACCESSORIES, "a {medium} of {a_object} {attribute}"),
    (SD_ACCESSORY_OBJECTS, SD_COLOURS, "a {medium} of {a_attribute_object}"),
    (SD_STYLE_OBJECTS, SD_STYLES, "{attribute} {a_object}"),
)


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _pick_two(rng, options):
    i, j = rng.choice(len(options), size=2, replace=False)
    return options[int(i)], options[int(j)]


# ---- captions ------------------------------------------------------------------------------------


def loc_caption(slots: dict) -> str:
    """``The <Object> <Verb> <Location> the <Subject>.`` (Fig. 14, Location)."""
    return sentence(f"the {slots['object']} {slots['verb']} {slots['location']} the {slots['subject']}")


def cnt_caption(slots: dict, plural: str) -> str:
    """Fig. 14, Counting; the verb and noun agree with the count."""
    n = int(slots["counts"])
    noun = slots["object"] if n == 1 else plural
    verb = "is" if n == 1 else "are"
    if slots["template"] == 0:
        return sentence(f"there {verb} {number_word(n)} {noun} {slots['location']}")
    return sentence(f"{number_word(n)} {noun} {verb} {slots['location']}")


def attr_caption(slots: dict) -> str:
    """``The <Size> <Object> <Verb> <Location> the <Size> <Subject>.`` (Fig. 14, Attribute)."""
    return sentence(
        f"the {slots['object_size']} {slots['object']} {slots['verb']} {slots['location']} "
        f"the {slots['subject_size']} {slots['subject']}"
    )


def changed_slots(a: dict, b: dict) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def sd_caption_pair(rng) -> dict:
    """One EQ-SD caption pair from Fig. 15: object, scene or attribute change (chosen at random)."""
    kind = _pick(rng, ("object", "scene", "attribute"))
    medium = _pick(rng, ("photo", "painting"))
    if kind == "object":
        objects, scenes = SD_OBJECT_SETS[int(rng.integers(len(SD_OBJECT_SETS)))]
        o0, o1 = _pick_two(rng, objects)
        scene = _pick(rng, scenes)
        s0 = {"medium": medium, "object": o0, "scene": scene}
        s1 = {**s0, "object": o1}

        def text(s):
            return sentence(f"a {s['medium']} of {with_article(s['object'])} {s['scene']}")

    elif kind == "scene":
        obj, scenes = SD_SCENE_OBJECTS[int(rng.integers(len(SD_SCENE_OBJECTS)))]
        sc0, sc1 = _pick_two(rng, scenes)
        s0 = {"object": obj, "scene": sc0}
        s1 = {**s0, "scene": sc1}

        def text(s):
            return sentence(f"a photo of {s['object']} {s['scene']}")

    else:
        objects, attributes, template = _SD_ATTRIBUTE_CHANGES[int(rng.integers(len(_SD_ATTRIBUTE_CHANGES)))]
        obj = _pick(rng, objects)
        a0, a1 = _pick_two(rng, attributes)
        s0 = {"medium": medium} if "{medium}" in template else {}
        s0 = {**s0, "object": obj, "attribute": a0}
        s1 = {**s0, "attribute": a1}

        def text(s):
            a_object, a_attribute_object = with_article(s["object"]), with_article(f"{s['attribute']} {s['object']}")
            return sentence(template.format(**s, a_object=a_object, a_attribute_object=a_attribute_object))

    return {
        "aspect": f"{kind} change",
        "caption0": text(s0),
        "caption1": text(s1),
        "slots0": s0,
        "slots1": s1,
        "changed": changed_slots(s0, s1),
    }


#: draws per caption pair before a run is told Fig. 15's templates hold no more distinct pairs
SD_MAX_DRAWS = 100_000


def sd_caption_pairs(seed: int, n: int) -> list[dict]:
    """``n`` EQ-SD caption pairs, each distinct from every other of the run (in either order).

    Pair ``i`` is the first draw of :func:`sd_caption_pair` from ``case_rng(seed, code, i, attempt)``
    that no earlier pair of the run has made (as ``{caption0, caption1}``, order ignored); a run asking
    for more distinct pairs than the templates give (:data:`SD_MAX_DRAWS` draws in vain) is refused.

    Args:
        seed: the run's seed.
        n: how many pairs.

    >>> pairs = sd_caption_pairs(0, 100)
    >>> len({frozenset((p["caption0"], p["caption1"])) for p in pairs})
    100
    """
    seen: set[frozenset[str]] = set()
    pairs = []
    for i in range(n):
        for attempt in range(SD_MAX_DRAWS):
            pair = sd_caption_pair(case_rng(seed, _CODE["eqbensd"], i, attempt))
            key = frozenset((pair["caption0"], pair["caption1"]))
            if key not in seen:
                seen.add(key)
                pairs.append({**pair, "attempt": attempt})
                break
        else:
            raise ConfigError(
                f"EQ-SD: {len(pairs)} distinct caption pairs drawn and no new one in {SD_MAX_DRAWS} draws; "
                f"Fig. 15's templates give {sd_pair_space()} distinct pairs: ask for fewer"
            )
    return pairs


def sd_pair_space() -> int:
    """How many distinct (unordered) caption pairs Fig. 15's templates give.

    >>> sd_pair_space()
    686
    """

    def two(k: int) -> int:
        return k * (k - 1) // 2

    media = 2
    objects = sum(two(len(objs)) * len(scenes) * media for objs, scenes in SD_OBJECT_SETS)
    scenes = sum(two(len(s)) for _obj, s in SD_SCENE_OBJECTS)
    attributes = sum(
        len(objs) * two(len(attrs)) * (media if "{medium}" in template else 1)
        for objs, attrs, template in _SD_ATTRIBUTE_CHANGES
    )
    return objects + scenes + attributes


# ---- rendering -----------------------------------------------------------------------------------


def measured_relation(obj: Measured, subj: Measured) -> str | None:
    """Which Fig. 14 relation the rendered object has to the subject (None if none cleanly holds)."""
    obj_full = obj.mask_area == obj.full_mask_area
    subj_full = subj.mask_area == subj.full_mask_area
    if not obj.visible or not subj.visible:
        return None
    if obj_full and not subj_full:
        return "front"
    if subj_full and not obj_full:
        return "behind" if obj.mask_area >= 0.3 * obj.full_mask_area else None
    if not (obj_full and subj_full) or boxes_overlap(obj.bbox, subj.bbox):
        return None
    rel = relative_position(obj.centre, subj.centre)
    if rel in ("left of", "right of"):
        return rel.split()[0]
    if rel == "above":
        return "top" if obj.bbox[3] == subj.bbox[1] else "above"
    return None


@dataclass
class EqbenPair:
    subset: str
    index: int
    attempt: int
    captions: tuple[str, str]
    slots: tuple[dict, dict]
    renders: tuple[Rendered, Rendered]
    scene: str
    instances: dict[str, Any]
    extra: dict = field(default_factory=dict)

    @property
    def changed(self) -> list[str]:
        return changed_slots(*self.slots)


class EqbenBuilder(Composer):
    """Builds EqBen-Kubric-style pairs on the canvas pipeline (EqBen App. B.4)."""

    def _arrange(self, rng, obj: ObjectInstance, o_placed, subj: ObjectInstance, s_placed, relation: str):
        """Placements (in paint order) for ``obj <relation> subj`` with the subject fixed."""
        s = self.s
        sw, sh = s_placed.box_size
        ow, oh = o_placed.box_size
        scx = s / 2 + rng.uniform(-0.06, 0.06) * s
        base = s * rng.uniform(0.7, 0.8)  # the subject stands on this line
        scy = base - sh / 2
        gap = max(2.0, rng.uniform(0.05, 0.09) * s)
        return self._arrange_at(obj, o_placed, subj, s_placed, relation, scx, scy, gap, (sw, sh, ow, oh))

    def _arrange_at(self, obj, o_placed, subj, s_placed, relation, scx, scy, gap, dims):
        sw, sh, ow, oh = dims
        sub_pl = placement_at(subj, s_placed, scx, scy, "subject")
        sx0, sy0, sx1, sy1 = placement_box(sub_pl, s_placed)
        if relation == "left":
            c = (sx0 - gap - ow / 2, sy1 - oh / 2)
        elif relation == "right":
            c = (sx1 + gap + ow / 2, sy1 - oh / 2)
        elif relation == "top":
            c = (scx, sy0 - oh / 2)
        elif relation == "above":
            c = (scx, sy0 - max(gap * 1.5, 0.5 * oh) - oh / 2)
        elif relation == "front":
            c = (scx + 0.25 * sw, sy1 + 0.35 * oh - oh / 2 + 0.04 * self.s)
        elif relation == "behind":
            c = (scx + 0.45 * (sw + ow) / 2, sy1 - 0.3 * sh - oh / 2)
        else:  # pragma: no cover
            raise ValueError(relation)
        obj_pl = placement_at(obj, o_placed, *c, "object")
        if relation == "top":  # touching: the object's box bottom on the subject's box top
            ob = placement_box(obj_pl, o_placed)
            obj_pl = Placement(obj, obj_pl.x, obj_pl.y + (sy0 - ob[3]), obj_pl.w, obj_pl.h, "object")
        if not self.inside(placement_box(obj_pl, o_placed)) or not self.inside((sx0, sy0, sx1, sy1)):
            raise Infeasible("objects leave the canvas")
        return [obj_pl, sub_pl] if relation == "behind" else [sub_pl, obj_pl]

    def _check_relation(self, rendered: Rendered, relation: str) -> None:
        obj = next(o for o in rendered.objects if o.role == "object")
        subj = next(o for o in rendered.objects if o.role == "subject")
        got = measured_relation(obj, subj)
        if got != relation:
            raise Infeasible(f"measured relation {got!r}, wanted {relation!r}")

    def _loc(self, rng, bg):
        obj = self.instance(rng)
        subj = self.instance(rng, exclude=[obj.category])
        o_placed = self.fit(obj, rng.uniform(0.03, 0.06), 0.28)
        s_placed = self.fit(subj, rng.uniform(0.03, 0.06), 0.3)
        while True:
            l0, l1 = _pick_two(rng, LOCATIONS)
            r0, r1 = RELATION[l0], RELATION[l1]
            if r0 != r1 and frozenset({r0, r1}) not in _NOT_CONTRASTING:
                break
        verb = _pick(rng, VERBS)
        state = rng.bit_generator.state
        renders = []
        for rel in (r0, r1):
            rng.bit_generator.state = state  # the subject stays put in both images
            r = self.render(bg, self._arrange(rng, obj, o_placed, subj, s_placed, rel))
            self._check_relation(r, rel)
            renders.append(r)
        base = {
            "object": obj.phrase(colour=True, texture=True),
            "verb": verb,
            "subject": subj.phrase(colour=True, texture=True),
        }
        slots = ({**base, "location": l0}, {**base, "location": l1})
        return (
            slots,
            (loc_caption(slots[0]), loc_caption(slots[1])),
            renders,
            {"object": obj, "subject": subj},
            {"relations": [r0, r1]},
        )

    def _cnt(self, rng, bg):
        obj = self.instance(rng)
        c0, c1 = _pick_two(rng, COUNTS)
        placed = self.fit(obj, rng.uniform(0.02, 0.04), 0.24)
        gap = max(1, int(0.015 * self.s))
        centres = self.scatter(rng, placed, max(c0, c1), [], gap)
        pls = [placement_at(obj, placed, cx, cy, "object") for cx, cy in centres]
        renders = []
        for c in (c0, c1):
            r = self.render(bg, pls[:c])
            if len(r.of_role("object")) != c or any(o.mask_area != o.full_mask_area for o in r.objects):
                raise Infeasible("count not rendered")
            renders.append(r)
        base = {
            "template": int(rng.integers(len(COUNT_TEMPLATES))),
            "object": obj.phrase(colour=True, texture=True),
            "location": _pick(rng, COUNT_LOCATIONS),
        }
        slots = ({**base, "counts": c0}, {**base, "counts": c1})
        prefix = obj.phrase(colour=True, texture=True)[: -len(obj.category)]
        plural = prefix + self.p.source.plural(obj.category)
        caps = (cnt_caption(slots[0], plural), cnt_caption(slots[1], plural))
        return slots, caps, renders, {"object": obj}, {"counts": [c0, c1]}

    def _attr(self, rng, bg):
        src = self.p.source
        recolourable = any(len(src.colours(c)) >= 2 for c in src.categories())
        change = "object" if recolourable and rng.random() < 0.5 else "object_size"
        obj = self.instance(rng, min_colours=2 if change == "object" else 0)
        subj = self.instance(rng, exclude=[obj.category])
        location = _pick(rng, [loc for loc in LOCATIONS if RELATION[loc] in ("left", "right", "front", "behind")])
        relation = RELATION[location]
        verb = _pick(rng, VERBS)
        subj_size = _pick(rng, SIZES)
        s_placed = self.fit(subj, _target(rng, subj_size), 0.42)
        if change == "object":
            size = _pick(rng, SIZES)
            colours = [c for c in self.p.source.colours(obj.category) if c != obj.colour]
            other = ObjectInstance(obj.category, _pick(rng, colours), obj.texture, obj.seed, obj.source, obj.path)
            objs, sizes = (obj, other), (size, size)
        else:
            objs, sizes = (obj, obj), _pick_two(rng, SIZES)
        fracs = {sz: _target(rng, sz) for sz in SIZES}
        state = rng.bit_generator.state
        renders = []
        for inst, sz in zip(objs, sizes, strict=True):
            rng.bit_generator.state = state
            o_placed = self.fit(inst, fracs[sz], 0.42)
            r = self.render(bg, self._arrange(rng, inst, o_placed, subj, s_placed, relation))
            self._check_relation(r, relation)
            subj_m = next(o for o in r.objects if o.role == "subject")
            area = self.s * self.s
            # the object's whole (unoccluded) box decides its size word
            obj_frac = self._full_box_area(r, "object") / area
            if not _in_band(obj_frac, sz) or not _in_band(subj_m.box_area / area, subj_size):
                raise Infeasible("size outside its band")
            renders.append(r)
        slots = tuple(
            {
                "object_size": sz,
                "object": inst.phrase(colour=True, texture=True),
                "verb": verb,
                "location": location,
                "subject_size": subj_size,
                "subject": subj.phrase(colour=True, texture=True),
            }
            for inst, sz in zip(objs, sizes, strict=True)
        )
        caps = (attr_caption(slots[0]), attr_caption(slots[1]))
        return slots, caps, renders, {"object": objs[0], "object1": objs[1], "subject": subj}, {"change": change}

    def _full_box_area(self, rendered: Rendered, role: str) -> int:
        i = next(k for k, pl in enumerate(rendered.placements) if pl.role == role)
        pl = rendered.placements[i]
        x0, y0, x1, y1 = placement_box(pl, self.p.canvas.layer(pl))
        return (x1 - x0) * (y1 - y0)

    def build(self, subset: str, index: int) -> EqbenPair:
        method = {"eqbenkubric_loc": self._loc, "eqbenkubric_cnt": self._cnt, "eqbenkubric_attr": self._attr}.get(
            subset
        )
        if method is None:
            raise ConfigError(f"unknown EqBen synthetic subset {subset!r}; known: {', '.join(SUBSETS)}")
        reason = ""
        for attempt in range(MAX_ATTEMPTS):
            rng = self.rng(_CODE[subset], index, attempt)
            try:
                bg, scene = self.p.background.fill(self.s, rng)
                slots, caps, renders, instances, extra = method(rng, bg)
            except Infeasible as exc:
                reason = str(exc)
                continue
            if caps[0] == caps[1] or len(changed_slots(*slots)) != 1:
                reason = "captions do not differ in exactly one slot"
                continue
            return EqbenPair(subset, index, attempt, caps, slots, tuple(renders), scene, instances, extra)
        raise SpotdiffError(f"EqBen {subset} pair {index}: no valid layout in {MAX_ATTEMPTS} attempts ({reason})")


def _in_band(frac: float, size: str) -> bool:
    lo, hi = SIZE_BANDS[size]
    return lo <= frac <= hi


def _target(rng, size: str) -> float:
    """A target area inside the band with a margin, so that whole-pixel sizes land inside it."""
    lo, hi = SIZE_BANDS[size]
    return float(rng.uniform(lo * 1.15, hi * 0.9))


@resumable
def write_eqben(
    out: Path,
    *,
    n: int = 10,
    seed: int = 0,
    size: int = 224,
    subsets: list[str] | None = None,
    pipeline: Pipeline | None = None,
    workers: int = 1,
    sd_pairs: int | None = None,
) -> dict:
    """Write an EqBen-format dataset (see docs/synthesis.md); return the summary.

    ``n``, ``seed``, ``size`` (``image_size``), ``pipeline`` and ``workers``: the options of
    :class:`spotdiff.synth.CanvasConfig` (``pipeline`` None: the procedural pipeline at ``size``).

    Args:
        out: the output folder.
        subsets: the EQ-Kubric subsets to write; None: all.
        sd_pairs: EQ-SD caption pairs to write; None: ``n``.
    """
    subsets = chosen_subsets(subsets, SUBSETS, "EqBen synthetic")
    out = Path(out)
    pipeline = pipeline or make_pipeline(size)
    builder = EqbenBuilder(pipeline, seed)

    def one(task):
        subset, index = task
        pair = builder.build(subset, index)
        paths = []
        for k, r in enumerate(pair.renders):
            rel = f"{subset}/{index:05d}_{k}.png"
            save_png(r.image, out / "images" / rel)
            paths.append(rel)
        record = {"image0": paths[0], "image1": paths[1], "caption0": pair.captions[0], "caption1": pair.captions[1]}
        meta = {
            "subset": subset,
            "index": index,
            "attempt": pair.attempt,
            "scene": pair.scene,
            "changed": pair.changed,
            "slots0": pair.slots[0],
            "slots1": pair.slots[1],
            "objects": {k: v.as_dict() for k, v in pair.instances.items()},
            "extra": pair.extra,
            "measured": [[o.as_dict(builder.s, builder.s) for o in r.objects] for r in pair.renders],
        }
        return record, meta

    tasks = [(sub, i) for sub in subsets for i in range(n)]
    results = make_items(
        out, one, tasks, key=lambda t: f"{t[0]}/{t[1]}", workers=workers, desc="pairs",
        prepare=lambda todo: builder.prefetch_backgrounds([(_CODE[s], i) for s, i in todo]),
    )  # fmt: skip
    write_json(out / "all_select.json", [r for r, _ in results])
    write_json(out / "metadata.json", {"pairs": [m for _, m in results]})
    n_sd = n if sd_pairs is None else sd_pairs
    sd = sd_caption_pairs(seed, n_sd)
    write_json(out / "eqbensd_captions.json", sd)
    return {
        **pipeline.summary("eqben", seed),
        "pairs": {sub: sum(1 for _, m in results if m["subset"] == sub) for sub in subsets},
        "eqbensd_caption_pairs": n_sd,
    }


@dataclass(frozen=True)
class EqbenConfig(ReviewOptions, CanvasConfig):
    """The options of the ``eqben`` engine."""

    n: int = count_option(10, "pairs per subset")
    subsets: tuple[str, ...] | None = subsets_option(SUBSETS)
    sd_pairs: int | None = option(None, "EQ-SD caption pairs to write, text only (default: --n)", kind="count")


@ENGINES.register("eqben")
class EqbenEngine(SynthEngine, config=EqbenConfig, benchmark="eqben", reviewed=write_from_review):
    """EqBen-Kubric-style location / counting / attribute+size pairs (EqBen App. B.4, Fig. 14)"""

    def make(self, out: Path) -> dict:
        return write_eqben(out, **self.config.arguments())
