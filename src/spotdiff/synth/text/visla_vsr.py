"""VISLA Spatial triplets mined from VSR: ``spotdiff synth visla-vsr`` (VISLA Sec. 3.3).

Reads Visual Spatial Reasoning's published JSON lines (cambridgeltl/visual-spatial-reasoning,
``data/splits/*/*.jsonl`` or ``data/data_files/all_vsr_validated_data.jsonl``: ``image``, ``caption``,
``label`` (0/1), ``relation``; the zero-shot splits add ``subj``/``obj``). "We utilized subject and object
fields to identify the positive pair (P1, P2) for an image": two true captions of one image with subject
and object switched, written once (P1 the one earlier in the file). "We extracted an initial negative
caption (N) by leveraging the observation that a different image containing the same object would
likely describe a distinct spatial arrangement between them": N is a true caption of another image with
the same two objects (the one nearest P1 by Jaccard). "Further, we identified the top three negative
candidates for each data point by ranking all unique captions in the VSR dataset using Jaccard
similarity": the candidates are the file's unique captions (true and false, every image) other than
the image's own true captions, ranked by the Jaccard similarity of their word sets to P1's. Writes
``Spatial_VISLA.tsv`` and the review sheet for the experts' step.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotdiff.benchmarks.visla import VislaSpatial
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import iter_jsonl, write_jsonl
from spotdiff.review.sheet import ReviewItem, copy_images, write_review
from spotdiff.synth import ENGINES, SynthConfig, SynthEngine, count_option, option
from spotdiff.synth.text.visla import jaccard
from spotdiff.synth.text.visla_generic import SPATIAL_TEXT_FIELDS, write_tsv

TOP_CANDIDATES = 3


@dataclass(frozen=True)
class VsrCaption:
    """One VSR record: image, caption, truth label, relation, and its subject and object."""

    line: int
    image: str
    caption: str
    label: int
    relation: str
    subj: str | None
    obj: str | None


def split_caption(caption: str, relation: str) -> tuple[str, str] | None:
    """Subject and object of a VSR caption written from its template ("The S is REL the O."), or None.

    >>> split_caption("The cat is in the basket.", "in")
    ('cat', 'basket')
    >>> split_caption("The train contains the laptop.", "contains")
    ('train', 'laptop')
    """
    rel = re.escape(relation.strip())
    m = re.fullmatch(rf"the (.+?) (?:is |are )?{rel} the (.+?)\.?", caption.strip(), re.IGNORECASE)
    return (m.group(1).lower(), m.group(2).lower()) if m else None


def read_vsr(path: Path) -> list[VsrCaption]:
    """VSR's JSON lines, checked: ``image``, ``caption``, ``relation`` strings and a 0/1 ``label``.

    Args:
        path: a VSR ``.jsonl`` file.
    """
    out = []
    for line, rec in iter_jsonl(path):
        where = f"line {line}"
        if not isinstance(rec, dict):
            raise DataError("expected a JSON object", file=path, record=where)
        for name in ("image", "caption", "relation"):
            if not isinstance(rec.get(name), str) or not rec[name].strip():
                raise DataError("missing or empty string", file=path, record=where, field=name)
        if rec.get("label") not in (0, 1) or isinstance(rec.get("label"), bool):
            raise DataError(f"label must be 0 or 1, got {rec.get('label')!r}", file=path, record=where, field="label")
        subj, obj = rec.get("subj"), rec.get("obj")
        if (subj is None) != (obj is None) or any(v is not None and not isinstance(v, str) for v in (subj, obj)):
            raise DataError("subj and obj must both be strings when given", file=path, record=where, field="subj")
        caption = " ".join(rec["caption"].split())
        out.append(VsrCaption(line, rec["image"].strip(), caption, rec["label"], rec["relation"].strip(), subj, obj))
    if not out:
        raise DataError("no VSR records", file=path)
    return out


def _roles(rec: VsrCaption) -> tuple[str, str] | None:
    """Subject and object: read off the caption's template, else the record's ``subj``/``obj`` fields (VSR's
    zero-shot splits drop a first letter in some: ``"subj": "orse"`` for "The horse is next to the bus.")."""
    parsed = split_caption(rec.caption, rec.relation)
    if parsed is not None:
        return parsed
    if rec.subj is not None and rec.obj is not None:
        return rec.subj.strip().lower(), rec.obj.strip().lower()
    return None


def _nearest(p1: str, captions: list[str]) -> list[tuple[str, float]]:
    """``captions`` by Jaccard similarity to ``p1``, most similar first (ties by text)."""
    return sorted(((c, jaccard(p1, c)) for c in captions), key=lambda x: (-x[1], x[0]))


def mine_vsr(records: list[VsrCaption], n: int | None = None) -> tuple[list[dict[str, Any]], Counter]:
    """(P1, P2, N, candidates) from VSR records (VISLA Sec. 3.3); the second value counts what was left out.

    Each pair of true captions of one image with subject and object switched gives one triplet; N is
    the initial negative (a true caption of another image with the same two objects, nearest P1 by
    Jaccard), or, when no other image has them, the top Jaccard candidate (counted).

    Args:
        records: every VSR record (all of them form the candidate pool).
        n: the most triplets; None: all.
    """
    left: Counter = Counter()
    roles = {rec.line: _roles(rec) for rec in records}
    left["no subject/object (caption off the template, no subj/obj fields)"] = sum(r is None for r in roles.values())
    true = [rec for rec in records if rec.label == 1 and roles[rec.line] is not None]
    by_image: dict[str, list[VsrCaption]] = {}
    by_objects: dict[frozenset[str], list[VsrCaption]] = {}
    for rec in true:
        by_image.setdefault(rec.image, []).append(rec)
        by_objects.setdefault(frozenset(roles[rec.line]), []).append(rec)  # type: ignore[arg-type]
    pool = sorted({rec.caption for rec in records})
    rows, used = [], set()
    for rec in true:
        if rec.line in used:
            continue  # the P2 of a triplet already written: each (P1, P2) once
        s, o = roles[rec.line]  # type: ignore[misc]
        partner = next((r for r in by_image[rec.image] if roles[r.line] == (o, s) and r.line not in used), None)
        if partner is None or partner.caption == rec.caption:
            left["no true caption of the image with subject and object switched"] += 1
            continue
        own = {r.caption for r in by_image[rec.image]}
        ranked = _nearest(rec.caption, [c for c in pool if c not in own])
        if not ranked:
            left["no negative candidate"] += 1
            continue
        others = {r.caption for r in by_objects[frozenset((s, o))] if r.image != rec.image} - own
        initial = _nearest(rec.caption, sorted(others))
        if not initial:
            left["no other image with the same objects (N: the top Jaccard candidate)"] += 1
        used |= {rec.line, partner.line}
        rows.append(
            {
                "id": f"line{rec.line}",
                "image": rec.image,
                "p1": rec.caption,
                "p2": partner.caption,
                "n": (initial or ranked)[0][0],
                "n_source": "another image with the same objects" if initial else "top Jaccard candidate",
                "irrelevant": min(ranked, key=lambda x: (x[1], x[0]))[0],
                "candidates": [{"text": c, "jaccard": round(j, 4)} for c, j in ranked[:TOP_CANDIDATES]],
            }
        )
        if n is not None and len(rows) >= n:
            break
    return rows, Counter({k: v for k, v in left.items() if v})


def write_vsr(out: Path, vsr: Path, *, n: int | None = None, images: Path | None = None) -> dict[str, Any]:
    """Write ``Spatial_VISLA.tsv``, ``candidates.jsonl`` and the review sheet from a VSR file.

    Args:
        out: the output folder.
        vsr: VSR's JSON lines.
        n: the most triplets; None: all.
        images: the COCO images folder; the triplets' images are copied into ``out/images``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = read_vsr(Path(vsr))
    rows, skipped = mine_vsr(records, n)
    if images is not None:
        copy_images([r["image"] for r in rows], Path(images), out)
    cells = [[r["image"], r["p1"], r["p2"], r["n"], r["irrelevant"]] for r in rows]
    write_tsv(out / VislaSpatial.file_name, VislaSpatial.header, cells)
    write_jsonl(
        out / "candidates.jsonl", [{"image": r["image"], "p1": r["p1"], "candidates": r["candidates"]} for r in rows]
    )
    items = [
        ReviewItem(
            r["id"],
            {"image": f"images/{r['image']}"},
            {"p1": r["p1"], "p2": r["p2"], "n": r["n"], "irrelevant": r["irrelevant"]},
            f"mined: N is the {r['n_source']}",
            True,
            "candidates: " + " | ".join(c["text"] for c in r["candidates"]),
        )
        for r in rows
    ]
    write_review(out, items, image_fields=("image",), text_fields=SPATIAL_TEXT_FIELDS, title="VISLA Spatial from VSR")
    return {
        "engine": "visla-vsr",
        "source": str(vsr),
        "records": len(records),
        "triplets": len(rows),
        "skipped": dict(sorted(skipped.items())),
    }


@dataclass(frozen=True)
class VsrConfig(SynthConfig):
    """The options of the ``visla-vsr`` engine (``n``: the most triplets)."""

    n: int = count_option(1000, "the most triplets")
    vsr: Path | None = option(
        None,
        "VSR's JSON lines (data/splits/*/*.jsonl or data/data_files/all_vsr_validated_data.jsonl); required",
        kind="path",
        metavar="FILE",
    )
    images: Path | None = option(None, "the COCO images, copied into --out", kind="path", metavar="DIR")


@ENGINES.register("visla-vsr")
class VsrEngine(SynthEngine, config=VsrConfig, benchmark="visla-spatial"):
    """VISLA Spatial triplets mined from VSR's captions, negatives ranked by Jaccard (Sec. 3.3)"""

    def make(self, out: Path) -> dict:
        c = self.config
        if c.vsr is None:
            raise ConfigError("visla-vsr needs --vsr FILE (VSR's JSON lines)")
        return write_vsr(out, c.vsr, n=c.n, images=c.images)
