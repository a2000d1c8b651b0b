"""The review sheet of SPEC sets (``spotdiff synth spec``): one row per set, the K images and texts in columns
``image0``.. and ``text0``.. (moved here from ``spotdiff.synth.canvas.spec``, issue 43). :func:`review_items` derives
it from a SPEC folder's published files (each subset's ``metadata.json``, :func:`read_cases`); the engine's
``--from-review`` is :func:`spotdiff.synth.canvas.spec.write_from_review`.
"""

from __future__ import annotations

import json
from pathlib import Path

from spotdiff.benchmarks._io import read_json
from spotdiff.benchmarks.spec import SPEC_K, SUBSETS
from spotdiff.errors import DataError
from spotdiff.review.sheet import ReviewItem

__all__ = ["OPTIONAL_FIELDS", "SHEET_IMAGES", "SHEET_TEXTS", "read_cases", "review_items"]

#: the sheet's columns, as many as the largest set (SPEC_K); a smaller set leaves the last ones empty
SHEET_IMAGES = tuple(f"image{k}" for k in range(max(SPEC_K.values())))
SHEET_TEXTS = tuple(f"text{k}" for k in range(max(SPEC_K.values())))
OPTIONAL_FIELDS = SHEET_IMAGES[min(SPEC_K.values()) :] + SHEET_TEXTS[min(SPEC_K.values()) :]


def review_items(out: Path) -> list[ReviewItem]:
    """The sets of a SPEC folder (each subset's ``metadata.json``) as review items: image cells relative to
    ``out`` (``<subset>/images/...``), every label as measured on its image in the verdict.

    Args:
        out: the folder ``spotdiff synth spec`` wrote.
    """
    items = []
    for sub in SUBSETS:
        for case in read_cases(Path(out), sub):
            pad = [""] * (len(SHEET_IMAGES) - len(case["images"]))
            measured = ", ".join(f"{m['label']} -> {m['measured']}" for m in case["measured"])
            objects = {role: f"{o.get('colour', '')} {o['category']}".strip() for role, o in case["objects"].items()}
            items.append(
                ReviewItem(
                    id=case["id"],
                    images=dict(zip(SHEET_IMAGES, [f"{sub}/{i}" for i in case["images"]] + pad, strict=True)),
                    texts=dict(zip(SHEET_TEXTS, list(case["texts"]) + pad, strict=True)),
                    verdict=f"labels measured on the images (label -> measured): {measured}",
                    accept=True,
                    details=json.dumps({"scene": case["scene"], "objects": objects, **case["extra"]}),
                )
            )
    return items


def read_cases(out: Path, sub: str) -> list[dict]:
    """The cases of one subset's ``metadata.json`` (none when the folder has no such subset).

    Args:
        out: the folder ``spotdiff synth spec`` wrote.
        sub: the subset.
    """
    path = out / sub / "metadata.json"
    if not path.is_file():
        return []
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise DataError("not a SPEC metadata file: expected a list under 'cases'", file=path)
    return data["cases"]
