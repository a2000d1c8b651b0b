"""VISLA-style spatial triplets: ``spotdiff synth visla`` (VISLA Sec. 3.3, App. C.1).

(P1, P2, N) triplets mined from relation annotations (canvas scenes, or ``--relations FILE``), with
the edit-distance analysis of App. C.1. Relations, mining rules and output files: docs/synthesis.md.
With ``--pairs FILE`` the engine writes VISLA Generic triplets instead, P2 written and validated by an
LLM (Sec. 3.2, :mod:`spotdiff.synth.text.visla_generic`); ``--from-review FILE`` writes them from an edited
review sheet.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz.distance import Levenshtein

from spotdiff.errors import ConfigError, DataError, SpotdiffError
from spotdiff.jsonio import iter_jsonl, write_jsonl
from spotdiff.synth import (
    ENGINES,
    CanvasConfig,
    ReviewOptions,
    SynthEngine,
    count_option,
    option,
)
from spotdiff.synth.canvas.eqben import EqbenBuilder, measured_relation
from spotdiff.synth.canvas.layout import Placement, Rendered, placement_at, placement_box
from spotdiff.synth.canvas.pipeline import Infeasible, Pipeline, make_pipeline
from spotdiff.synth.language import sentence
from spotdiff.synth.output import case_rng, save_png, write_json
from spotdiff.synth.run import make_items, resumable
from spotdiff.synth.text.visla_generic import (
    DEFAULT_LLM,
    ChatLM,
    read_pairs,
    write_from_review,
    write_generic,
    write_tsv,
)

HEADER = (
    "image",
    "sent1",
    "sent2",
    "Best reference (Semantically close)",
    "Reference-2 (Completely irrelevant)",
)
TSV_NAME = "Spatial_VISLA.tsv"
_CODE = 21
MAX_ATTEMPTS = 40


@dataclass(frozen=True)
class Relation:
    name: str
    phrasings: tuple[str, ...]  # "The S is <phrasing> the O."; "contains" is "The S contains the O."
    inverse: str | None  # the relation of (O, S)
    contradicts: tuple[str, ...]  # relations that cannot hold for (S, O) at the same time


RELATIONS: dict[str, Relation] = {
    r.name: r
    for r in (
        Relation("left of", ("to the left of", "on the left side of", "at the left of"), "right of", ("right of",)),
        Relation("right of", ("to the right of", "on the right side of", "at the right of"), "left of", ("left of",)),
        Relation("above", ("above", "over"), "below", ("below", "under")),
        Relation("below", ("below", "beneath"), "above", ("above", "on top of")),
        Relation("on top of", ("on top of", "on"), "under", ("under", "below", "inside")),
        Relation("under", ("under", "underneath"), "on top of", ("on top of", "above")),
        Relation("in front of", ("in front of",), "behind", ("behind",)),
        Relation("behind", ("behind", "in back of"), "in front of", ("in front of",)),
        Relation("inside", ("inside", "in", "within"), "contains", ("outside", "contains")),
        Relation("contains", ("contains",), "inside", ("inside",)),
        Relation("outside", ("outside", "out of"), None, ("inside",)),
        Relation("near", ("near", "close to", "next to"), "near", ("far from",)),
        Relation("far from", ("far from", "far away from"), "far from", ("near", "touching")),
        Relation("touching", ("touching",), "touching", ("far from",)),
    )
}
#: relations the canvas engine can draw and measure
CANVAS_RELATIONS = (
    "left of",
    "right of",
    "above",
    "below",
    "on top of",
    "under",
    "in front of",
    "behind",
    "near",
    "far from",
)
_PHRASE_TO_RELATION = {p: r.name for r in RELATIONS.values() for p in r.phrasings}
_PHRASE_TO_RELATION.update({r: r for r in RELATIONS})
_PHRASE_TO_RELATION.update({"left": "left of", "right": "right of", "on top": "on top of", "in back of": "behind"})


def normalize_relation(text: str) -> str:
    """A relation name from a name or phrasing (``"on"`` -> ``"on top of"``); KeyError if unknown."""
    key = " ".join(text.lower().replace("_", " ").split())
    key = re.sub(r"^(is|are)\s+", "", key)
    key = re.sub(r"\s+(the|a|an)$", "", key)
    return _PHRASE_TO_RELATION[key]


def relation_sentence(subject: str, relation: str, obj: str, phrasing: str | None = None, negate: bool = False) -> str:
    """A caption stating ``subject relation obj`` (or its negation).

    Args:
        subject: the subject's name.
        relation: a relation of :data:`RELATIONS`.
        obj: the object's name.
        phrasing: one of the relation's phrasings; None: its first.
        negate: state that the relation does not hold.
    """
    rel = RELATIONS[relation]
    phrase = phrasing or rel.phrasings[0]
    if relation == "contains":
        return sentence(f"the {subject} {'does not contain' if negate else 'contains'} the {obj}")
    return sentence(f"the {subject} is {'not ' if negate else ''}{phrase} the {obj}")


def equivalent_forms(subject: str, relation: str, obj: str) -> set[tuple[str, str, str]]:
    """The triple and its inverse reading (same meaning).

    Args:
        subject: the subject's name.
        relation: a relation of :data:`RELATIONS`.
        obj: the object's name.
    """
    forms = {(subject, relation, obj)}
    inv = RELATIONS[relation].inverse
    if inv is not None:
        forms.add((obj, inv, subject))
    return forms


def contradicts(a: tuple[str, str, str], b: tuple[str, str, str]) -> bool:
    """Whether triple ``b`` cannot hold together with triple ``a`` (on any reading of either)."""
    for s, r, o in equivalent_forms(*a):
        for s2, r2, o2 in equivalent_forms(*b):
            if (s, o) == (s2, o2) and (r2 in RELATIONS[r].contradicts or r in RELATIONS[r2].contradicts):
                return True
    return False


_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def jaccard(a: str, b: str) -> float:
    wa, wb = words(a), words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


@dataclass(frozen=True)
class Annotation:
    """One relation annotation (VISLA Sec. 3.3: subject, relation, object, caption)."""

    image: str
    subject: str
    relation: str
    object: str
    caption: str | None = None

    @property
    def triple(self) -> tuple[str, str, str]:
        return (self.subject, self.relation, self.object)

    def as_dict(self) -> dict:
        out = {"image": self.image, "subject": self.subject, "relation": self.relation, "object": self.object}
        if self.caption:
            out["caption"] = self.caption
        return out


def read_relations(path: Path) -> list[Annotation]:
    """A user's relation file: JSON lines (``.jsonl``/``.json``) or CSV; see docs/synthesis.md."""
    rows: list[tuple[str, dict]] = []
    if path.suffix.lower() == ".csv":
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read relation file: {exc}", file=path) from exc
        for i, row in enumerate(csv.DictReader(io.StringIO(text, newline="")), start=2):
            rows.append((f"line {i}", {k.strip(): (v or "").strip() for k, v in row.items() if k}))
    else:
        for i, value in iter_jsonl(path):
            if not isinstance(value, dict):
                raise DataError("expected a JSON object", file=path, record=f"line {i}")
            rows.append((f"line {i}", value))
    out = []
    for where, row in rows:
        for name in ("image", "subject", "relation", "object"):
            value = row.get(name)
            if not isinstance(value, str) or not value.strip():
                raise DataError("missing or empty field", file=path, record=where, field=name)
        try:
            relation = normalize_relation(row["relation"])
        except KeyError:
            raise DataError(
                f"unknown relation {row['relation']!r}; known: {', '.join(RELATIONS)} (or their phrasings)",
                file=path,
                record=where,
                field="relation",
            ) from None
        caption = row.get("caption")
        if caption is not None and not isinstance(caption, str):
            raise DataError("expected a string", file=path, record=where, field="caption")
        out.append(
            Annotation(
                row["image"].strip(),
                " ".join(row["subject"].lower().split()),
                relation,
                " ".join(row["object"].lower().split()),
                caption.strip() if caption and caption.strip() else None,
            )
        )
    if not out:
        raise DataError("no relation annotations", file=path)
    return out


# ---- triplet mining --------------------------------------------------------------------------------


def _p2(ann: Annotation, p1: str) -> str | None:
    """The second positive: subject and object swapped, inverse relation, lexically farthest phrasing."""
    inv = RELATIONS[ann.relation].inverse
    if inv is None:
        return None
    options = [relation_sentence(ann.object, inv, ann.subject, ph) for ph in RELATIONS[inv].phrasings]
    options = [o for o in options if o != p1] or options
    return max(options, key=lambda o: (Levenshtein.distance(p1, o), o))


def mine_triplet(ann: Annotation, pool: list[Annotation], rng: np.random.Generator, negations: bool = False) -> dict:
    """P1, P2, N and the irrelevant reference for one annotation (VISLA Sec. 3.3).

    Args:
        ann: the annotation P1 comes from.
        pool: every annotation, searched for contradicting ones about the same objects.
        rng: the generator of this triplet.
        negations: also offer the negated P1 as a negative candidate.
    """
    p1 = ann.caption or relation_sentence(
        ann.subject,
        ann.relation,
        ann.object,
        RELATIONS[ann.relation].phrasings[int(rng.integers(len(RELATIONS[ann.relation].phrasings)))],
    )
    p2 = _p2(ann, p1)
    candidates: dict[str, str] = {}
    same_order: set[str] = set()  # candidates that keep P1's subject first, preferred on ties
    for s, r, o in sorted(equivalent_forms(*ann.triple)):
        for r2 in RELATIONS[r].contradicts:
            for ph in RELATIONS[r2].phrasings:
                text = relation_sentence(s, r2, o, ph)
                candidates.setdefault(text, "contradicting relation")
                if s == ann.subject:
                    same_order.add(text)
        if negations:
            candidates.setdefault(relation_sentence(s, r, o, negate=True), "negation")
    for other in pool:
        if other is ann or not contradicts(ann.triple, other.triple):
            continue
        text = other.caption or relation_sentence(*other.triple)
        candidates.setdefault(text, f"annotation of {other.image}")
        if other.subject == ann.subject:
            same_order.add(text)
    # a pure word-order swap of P1 (same bag of words) is ARO's phenomenon, not VISLA's: it is
    # ranked last, so it is chosen only when no other contradiction exists
    bag = sorted(_WORD.findall(p1.lower()))

    def rank(item: tuple[str, str]) -> tuple:
        text = item[0]
        return (sorted(_WORD.findall(text.lower())) == bag, -jaccard(p1, text), text not in same_order, text)

    ranked = sorted(candidates.items(), key=rank)
    top = [{"text": t, "jaccard": round(jaccard(p1, t), 4), "source": src} for t, src in ranked[:3]]
    names = {ann.subject, ann.object}
    unrelated = sorted({o.caption or relation_sentence(*o.triple) for o in pool if not names & {o.subject, o.object}})
    irrelevant = ""
    if unrelated:
        scores = [round(jaccard(p1, t), 2) for t in unrelated]
        lowest = [t for t, sc in zip(unrelated, scores, strict=True) if sc == min(scores)]
        irrelevant = lowest[int(rng.integers(len(lowest)))]
    return {
        "p1": p1,
        "p2": p2,
        "n": top[0]["text"] if top else None,
        "candidates": top,
        "irrelevant": irrelevant,
    }


def edit_distance_report(rows: list[dict]) -> dict:
    """VISLA App. C.1 / Fig. 8: edit distances among positives and between positives and negatives."""

    def stats(values: list[int]) -> dict:
        a = np.asarray(values, dtype=float)
        if not len(a):
            return {"n": 0}
        return {
            "n": len(a),
            "mean": round(float(a.mean()), 3),
            "median": float(np.median(a)),
            "min": int(a.min()),
            "max": int(a.max()),
        }

    pos, neg1, neg2, wpos, wneg = [], [], [], [], []
    for r in rows:
        p1, p2, n = r["p1"], r["p2"], r["n"]
        pos.append(Levenshtein.distance(p1, p2))
        neg1.append(Levenshtein.distance(p1, n))
        neg2.append(Levenshtein.distance(p2, n))
        wpos.append(Levenshtein.distance(p1.lower().split(), p2.lower().split()))
        wneg.append(Levenshtein.distance(p1.lower().split(), n.lower().split()))
    return {
        "unit": "characters (rapidfuzz Levenshtein, unit costs); *_words: whole words",
        "positives_p1_p2": stats(pos),
        "negative_p1_n": stats(neg1),
        "negative_p2_n": stats(neg2),
        "positives_p1_p2_words": stats(wpos),
        "negative_p1_n_words": stats(wneg),
        "positives_farther_than_negative": round(float(np.mean([a > b for a, b in zip(pos, neg1, strict=True)])), 4)
        if pos
        else None,
        "values": {"p1_p2": pos, "p1_n": neg1, "p2_n": neg2},
    }


def plot_edit_distances(report: dict, path: Path) -> None:
    """A Fig. 8-style histogram of the two distributions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vals = report["values"]
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    hi = max([1, *vals["p1_p2"], *vals["p1_n"], *vals["p2_n"]])
    bins = np.arange(0, hi + 3, 2)
    ax.hist(vals["p1_p2"], bins=bins, alpha=0.6, label="positives (P1, P2)")
    ax.hist(vals["p1_n"] + vals["p2_n"], bins=bins, alpha=0.6, label="positive vs negative")
    ax.set_xlabel("edit distance (characters)")
    ax.set_ylabel("pairs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


# ---- canvas scenes -----------------------------------------------------------------------------------


class VislaBuilder(EqbenBuilder):
    """Two library objects in a known relation, rendered and measured."""

    def scene(self, index: int, relation: str | None = None) -> tuple[Annotation, Rendered, str]:
        reason = ""
        for attempt in range(MAX_ATTEMPTS):
            rng = self.rng(_CODE, index, attempt)
            try:
                bg, scene = self.p.background.fill(self.s, rng)
                rel = relation or CANVAS_RELATIONS[int(rng.integers(len(CANVAS_RELATIONS)))]
                subj = self.instance(rng)
                obj = self.instance(rng, exclude=[subj.category])
                s_placed = self.fit(subj, rng.uniform(0.03, 0.06), 0.28)
                o_placed = self.fit(obj, rng.uniform(0.03, 0.06), 0.28)
                placements = self._visla_arrange(rng, subj, s_placed, obj, o_placed, rel)
                r = self.render(bg, placements)
                got = visla_measured_relation(r, self.s)
                if got != rel:
                    raise Infeasible(f"measured {got!r}, wanted {rel!r}")
            except Infeasible as exc:
                reason = str(exc)
                continue
            ann = Annotation(f"{index:06d}.png", subj.category, rel, obj.category)
            return ann, r, scene
        raise SpotdiffError(f"VISLA scene {index}: no valid layout in {MAX_ATTEMPTS} attempts ({reason})")

    def _visla_arrange(self, rng, subj, s_placed, obj, o_placed, rel) -> list[Placement]:
        # EqbenBuilder places its role "object" (the grammatical subject) relative to "subject"
        flip = {"below": "above", "under": "top"}
        direct = {
            "left of": "left",
            "right of": "right",
            "above": "above",
            "on top of": "top",
            "in front of": "front",
            "behind": "behind",
        }
        if rel in direct:
            pls = self._arrange(rng, subj, s_placed, obj, o_placed, direct[rel])
            return [_role(p, "subject" if p.role == "object" else "object") for p in pls]
        if rel in flip:
            pls = self._arrange(rng, obj, o_placed, subj, s_placed, flip[rel])
            return [_role(p, p.role) for p in pls]
        s = self.s
        if rel == "near":
            gap = max(1.0, rng.uniform(0.01, 0.03) * s)
            side = "left" if rng.random() < 0.5 else "right"
            pls = self._arrange_at(
                subj, s_placed, obj, o_placed, side, s / 2, s * 0.6, gap, (*o_placed.box_size, *s_placed.box_size)
            )
            return [_role(p, "subject" if p.role == "object" else "object") for p in pls]
        if rel == "far from":
            corners = [(0.2, 0.2), (0.8, 0.2), (0.2, 0.8), (0.8, 0.8)]
            k = int(rng.integers(4))
            a, b = corners[k], corners[3 - k]
            pa = placement_at(subj, s_placed, a[0] * s, a[1] * s, "subject")
            pb = placement_at(obj, o_placed, b[0] * s, b[1] * s, "object")
            if not self.inside(placement_box(pa, s_placed)) or not self.inside(placement_box(pb, o_placed)):
                raise Infeasible("objects leave the canvas")
            return [pa, pb]
        raise ConfigError(f"the canvas cannot draw the relation {rel!r}; it draws {', '.join(CANVAS_RELATIONS)}")


def _role(p: Placement, role: str) -> Placement:
    return Placement(p.instance, p.x, p.y, p.w, p.h, role)


def visla_measured_relation(r: Rendered, size: int) -> str | None:
    """The relation of the rendered grammatical subject to the object (measured)."""
    s = next(o for o in r.objects if o.role == "subject")
    o = next(o for o in r.objects if o.role == "object")
    fwd = measured_relation(s, o)
    back = measured_relation(o, s)
    if fwd in ("left", "right") or back in ("left", "right"):
        gap = max(o.bbox[0] - s.bbox[2], s.bbox[0] - o.bbox[2])
        if gap <= 0.035 * size and abs(s.bbox[3] - o.bbox[3]) <= 1:
            return "near"
    dist = float(np.hypot(s.centre[0] - o.centre[0], s.centre[1] - o.centre[1]))
    if fwd is None and back is None and dist >= 0.5 * size:
        return "far from"
    mapping = {
        "left": "left of",
        "right": "right of",
        "above": "above",
        "top": "on top of",
        "front": "in front of",
        "behind": "behind",
    }
    if fwd in mapping:
        return mapping[fwd]
    if back == "above":
        return "below"
    if back == "top":
        return "under"
    return None


@resumable
def write_visla(
    out: Path,
    *,
    n: int = 20,
    seed: int = 0,
    size: int = 224,
    relations_file: Path | None = None,
    pipeline: Pipeline | None = None,
    workers: int = 1,
    negations: bool = False,
) -> dict:
    """Write a VISLA-Spatial-format dataset (see docs/synthesis.md); return the summary.

    ``n``, ``seed``, ``size`` (``image_size``), ``pipeline`` and ``workers``: the options of
    :class:`spotdiff.synth.CanvasConfig` (``pipeline`` None: the procedural pipeline at ``size``).

    Args:
        out: the output folder.
        relations_file: a user's relation annotations; None: render canvas scenes.
        negations: also offer negated P1 sentences as negative candidates.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    measured: list[dict] = []
    if relations_file is not None:
        annotations = read_relations(Path(relations_file))
        source = str(relations_file)
    else:
        pipeline = pipeline or make_pipeline(size)
        builder = VislaBuilder(pipeline, seed)

        def one(i: int):
            ann, r, scene = builder.scene(i)
            save_png(r.image, out / "images" / ann.image)
            return ann.as_dict(), {"scene": scene, "objects": [o.as_dict(builder.s, builder.s) for o in r.objects]}

        results = make_items(
            out, one, list(range(n)), key=lambda i: f"{i:06d}", workers=workers, desc="scenes",
            prepare=lambda todo: builder.prefetch_backgrounds([(_CODE, i) for i in todo]),
        )  # fmt: skip
        annotations = [Annotation(**a) for a, _ in results]
        measured = [m for _, m in results]
        source = "canvas"
    rows, cands = [], []
    skipped = 0
    for i, ann in enumerate(annotations):
        t = mine_triplet(ann, annotations, case_rng(seed, _CODE + 1, i), negations)
        if t["p2"] is None or t["n"] is None:
            skipped += 1
            continue
        rows.append({"image": ann.image, **t})
        cands.append({"image": ann.image, "p1": t["p1"], "candidates": t["candidates"]})
    write_tsv(out / TSV_NAME, HEADER, [[r["image"], r["p1"], r["p2"], r["n"], r["irrelevant"]] for r in rows])
    write_jsonl(
        out / "relations.jsonl",
        [
            {**a.as_dict(), **({"measured": m} if m else {})}
            for a, m in zip(annotations, measured or [None] * len(annotations), strict=True)
        ],
    )
    write_jsonl(out / "candidates.jsonl", cands)
    report = edit_distance_report(rows)
    write_json(out / "edit_distance.json", report)
    if rows:
        plot_edit_distances(report, out / "edit_distance.png")
    summary: dict[str, Any] = {
        "engine": "visla",
        "seed": seed,
        "source": source,
        "annotations": len(annotations),
        "triplets": len(rows),
        "skipped_no_inverse": skipped,
        "edit_distance": {k: v for k, v in report.items() if k != "values"},
    }
    if pipeline is not None and relations_file is None:
        summary["image_size"] = pipeline.size
        summary["pipeline"] = pipeline.describe()
    return summary


@dataclass(frozen=True)
class VislaConfig(ReviewOptions, CanvasConfig):
    """The options of the ``visla`` engine."""

    n: int = count_option(20, "scenes (Spatial) or (P1, N) pairs (Generic, --pairs)")
    relations: Path | None = option(
        None,
        "your relation annotations (.jsonl or .csv: image, subject, relation, object[, caption]); "
        "default: render canvas scenes",
        kind="path",
        metavar="FILE",
    )
    negations: bool = option(False, "also rank 'is not ...' negatives")
    pairs: Path | None = option(
        None,
        "Generic mode (Sec. 3.2): a SugarCrepe JSON file of (caption, negative) pairs",
        kind="path",
        metavar="FILE",
    )
    llm: str | None = option(None, "Generic mode: the chat LM (an lm: spec; default smollm2)", metavar="SPEC")
    images: Path | None = option(None, "Generic mode: the pairs' images, copied into --out", kind="path", metavar="DIR")
    max_new_tokens: int = option(48, "Generic mode: the most tokens per answer", kind="positive")


@ENGINES.register("visla")
class VislaEngine(SynthEngine, config=VislaConfig, benchmark="visla-spatial", reviewed=write_from_review):
    """VISLA-style (P1, P2, N) triplets: Spatial from relation annotations (Sec. 3.3), Generic written by an LLM
    (--pairs, Sec. 3.2)"""

    def make(self, out: Path) -> dict:
        c = self.config
        if c.pairs is not None:
            pairs = read_pairs(c.pairs)[: c.n]
            chat = ChatLM(c.llm or DEFAULT_LLM, max_new_tokens=c.max_new_tokens, seed=c.seed)
            return write_generic(out, pairs, chat, images=c.images, llm=chat.identity())
        if c.llm is not None or c.images is not None:
            raise ConfigError("--llm and --images belong to Generic mode: give --pairs FILE too")
        return write_visla(
            out,
            n=c.n,
            seed=c.seed,
            size=c.image_size,
            relations_file=c.relations,
            pipeline=None if c.relations else c.pipeline(),
            workers=c.workers,
            negations=c.negations,
        )
