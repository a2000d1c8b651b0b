"""The review sheet of EqBen pairs, whichever engine made them (``eqsd``, ``eqben``, ``eqben-video``).

The pairs' sheet has the columns of EqBen's ``all_select.json`` (``image0``, ``image1``, ``caption0``,
``caption1``; image cells ``images/<subset>/<file>``). ``eqsd`` writes it with the check's verdicts;
for the canvas and video engines, which write none, :func:`pair_items` derives it from the published
output (``all_select.json``, and ``metadata.json`` for the details). :func:`write_from_review` writes
``all_select.json`` and the images of the pairs one or several reviewers accepted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from spotdiff.benchmarks._io import read_json
from spotdiff.errors import DataError
from spotdiff.synth.output import write_json
from spotdiff.synth.review import RULES, ReviewItem, copy_images, read_reviews, sheet_image

#: the sheet's columns
IMAGE_FIELDS = ("image0", "image1")
TEXT_FIELDS = ("caption0", "caption1")
PAIRS_FILE = "all_select.json"
METADATA_FILE = "metadata.json"


def pair_items(out: Path) -> list[ReviewItem]:
    """The items of a published EqBen folder's pairs (``all_select.json``), with ``metadata.json``'s entry
    of each pair (where the images came from, what changed) as its details when the folder has one.

    Args:
        out: the folder holding ``all_select.json`` and ``images/``.
    """
    out = Path(out)
    pairs = read_json(out / PAIRS_FILE)
    if not isinstance(pairs, list):
        raise DataError("expected a list of pairs", file=out / PAIRS_FILE)
    meta: list = [{}] * len(pairs)
    if (out / METADATA_FILE).is_file():
        meta = read_json(out / METADATA_FILE)
        meta = meta.get("pairs") if isinstance(meta, dict) else None
        if not isinstance(meta, list) or len(meta) != len(pairs):
            raise DataError(f"expected a list of {len(pairs)} pairs under 'pairs'", file=out / METADATA_FILE)
    items = []
    for i, (pair, extra) in enumerate(zip(pairs, meta, strict=True)):
        for name in (*IMAGE_FIELDS, *TEXT_FIELDS):
            if not isinstance(pair, dict) or not isinstance(pair.get(name), str):
                raise DataError("expected a text", file=out / PAIRS_FILE, record=i, field=name)
        if not isinstance(extra, dict):
            raise DataError("expected an object", file=out / METADATA_FILE, record=i)
        shown = {k: v for k, v in extra.items() if k not in pair and k != "measured"}
        items.append(
            ReviewItem(
                id=f"{i:05d}",
                images={f: f"images/{pair[f]}" for f in IMAGE_FIELDS},
                texts={f: pair[f] for f in TEXT_FIELDS},
                verdict="kept by the engine's rules (no automatic check)",
                accept=True,
                details=json.dumps(shown, ensure_ascii=False) if shown else "",
            )
        )
    return items


def write_from_review(out: Path, reviews: Path | Sequence[Path], rule: str = RULES[0]) -> dict:
    """Write ``all_select.json`` and the images of the pairs accepted in reviewed sheets.

    Args:
        out: the output folder.
        reviews: the edited ``review.csv``, or several reviewers' files of it (the images are read from
            beside them).
        rule: how several reviewers' decisions make one (:data:`spotdiff.synth.review.RULES`).
    """
    result = read_reviews(reviews, image_fields=IMAGE_FIELDS, text_fields=TEXT_FIELDS, rule=rule)
    sheet = Path(result.files[0])
    records = []
    for k, item in enumerate(result.accepted, start=1):
        record = {f: sheet_image(item, f, sheet, k) for f in IMAGE_FIELDS}
        records.append({**record, **{f: item.texts[f] for f in TEXT_FIELDS}})
    copy_images([r[f] for r in records for f in IMAGE_FIELDS], sheet.parent / "images", out, sheet=sheet)
    write_json(Path(out) / PAIRS_FILE, records)
    return {"mode": "from a review", **result.summary(), "pairs": len(records)}


__all__ = ["IMAGE_FIELDS", "TEXT_FIELDS", "pair_items", "write_from_review"]
