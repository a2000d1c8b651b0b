"""The review sheet of EqBen pairs, whichever engine made them (``eqsd``, ``eqben``, ``eqben-video``).

The pairs' sheet has the columns of EqBen's ``all_select.json`` (``image0``, ``image1``, ``caption0``,
``caption1``; image cells ``images/<subset>/<file>``). ``eqsd`` writes it with the check's verdicts;
for the canvas and video engines, which write none, :func:`pair_items` derives it from the published
output (``all_select.json``, and ``metadata.json`` for the details). Moved here from
``spotdiff.synth.eqben_review`` (issue 43); the engines' ``--from-review``, which writes the pairs one or several
reviewers accepted, is :func:`spotdiff.synth.eqben_pairs.write_from_review`.
"""

from __future__ import annotations

import json
from pathlib import Path

from spotdiff.benchmarks._io import read_json
from spotdiff.errors import DataError
from spotdiff.review.sheet import ReviewItem

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


__all__ = ["IMAGE_FIELDS", "METADATA_FILE", "PAIRS_FILE", "TEXT_FIELDS", "pair_items"]
