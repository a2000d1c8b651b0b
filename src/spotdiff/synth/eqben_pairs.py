"""EqBen pairs written from a review: the ``--from-review`` of ``eqsd``, ``eqben`` and ``eqben-video`` (moved here
from ``spotdiff.synth.eqben_review``, issue 43; the pairs' sheet is :mod:`spotdiff.review.pairs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spotdiff.review.pairs import IMAGE_FIELDS, PAIRS_FILE, TEXT_FIELDS
from spotdiff.review.sheet import RULES, copy_images, read_reviews, sheet_image
from spotdiff.synth.output import write_json

__all__ = ["write_from_review"]


def write_from_review(out: Path, reviews: Path | Sequence[Path], rule: str = RULES[0]) -> dict:
    """Write ``all_select.json`` and the images of the pairs accepted in reviewed sheets.

    Args:
        out: the output folder.
        reviews: the edited ``review.csv``, or several reviewers' files of it (the images are read from
            beside them).
        rule: how several reviewers' decisions make one (:data:`spotdiff.review.sheet.RULES`).
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
