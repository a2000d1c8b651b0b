"""Datasets derived from synthesized ones, in published formats (used by ``spotdiff demo``).

* :func:`write_spec_pairs`: a SPEC folder's matched (image, caption) pairs as ordinary training pairs.
* :func:`write_aro_set`: an ARO COCO-Order-style set (Karpathy JSON) from a caption corpus.
* :func:`write_cls_attribute_prompts`: a SPEC ``cls`` folder whose prompts name colour and texture.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl, write_jsonl
from spotdiff.synth.canvas.objects import ObjectInstance
from spotdiff.synth.canvas.spec import SUBSETS as SPEC_SUBSETS
from spotdiff.synth.language import sentence, with_article


def write_spec_pairs(data: Path, out: Path) -> dict:
    """The matched (image, caption) pairs of a SPEC-format folder as ``captions.jsonl``.

    Each ``image2text.json`` record gives its query image and its true caption; image paths are
    written relative to ``out``. These are the hard-negative sets' own images and captions, for a
    control that sees the same data as ordinary pairs, never grouped into candidate sets.
    """
    data, out = Path(data), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for subset in SPEC_SUBSETS:
        path = data / subset / "image2text.json"
        if not path.is_file():
            continue
        for rec in json.loads(path.read_text(encoding="utf-8")):
            image = (data / subset / rec["query"]).resolve()
            rel = os.path.relpath(image, out.resolve())
            rows.append({"image": rel, "caption": rec["keys"][rec["label"]], "subset": subset})
    if not rows:
        raise DataError(f"no SPEC image2text.json records under {data}")
    write_jsonl(out / "captions.jsonl", rows)
    return {"pairs": len(rows), "by_subset": {s: sum(r["subset"] == s for r in rows) for s in SPEC_SUBSETS}}


def write_aro_set(corpus: Path, out: Path) -> dict:
    """An ARO COCO-Order-style set from a corpus: ``out/coco_karpathy_test.json`` + ``out/images``.

    One record per corpus image with its caption (the Karpathy JSON that ARO's COCO-Order and the
    ``aro-coco-order`` loader read); the loader draws ARO's four word-order perturbations of each
    caption as its negatives. Images are copied so the folder stands alone.
    """
    corpus, out = Path(corpus), Path(out)
    path = corpus / "captions.jsonl"
    if not path.is_file():
        raise DataError(f"no captions.jsonl in {corpus}")
    (out / "images").mkdir(parents=True, exist_ok=True)
    records = []
    for _, row in iter_jsonl(path):
        src = corpus / row["image"]
        rel = f"images/{Path(row['image']).name}"
        shutil.copyfile(src, out / rel)
        records.append({"image": rel, "caption": [row["caption"]], "image_id": len(records)})
    (out / "coco_karpathy_test.json").write_text(json.dumps(records, indent=1), encoding="utf-8")
    return {"images": len(records)}


def write_cls_attribute_prompts(data: Path, out: Path) -> dict:
    """A diagnostic copy of a SPEC ``cls`` folder whose class prompts name the object's colour and texture.

    SPEC's cls task asks ``"a photo of a {class}."``; the corpus always names an object with its
    colour and texture (``"A photo of a red striped umbrella."``). This writes
    ``out/cls/image2text.json`` with the same images and labels and, for every image, the candidates
    ``"A photo of a {its colour} {its texture} {class}."`` for every class, so only the class differs
    (the images are referenced in place). It separates "does not know the object" from "does not
    understand the bare prompt"; the demo reports it beside, never instead of, SPEC's cls. The images
    lie outside ``out``, so evaluating it declares their folder: ``--image-root DATA``.
    """
    data, out = Path(data), Path(out)
    meta = json.loads((data / "cls" / "classification.json").read_text(encoding="utf-8"))
    classes = list(meta["classes"])
    folder = out / "cls"
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for item in meta["items"]:
        obj = item["object"]
        phrases = [ObjectInstance(c, obj["colour"], obj["texture"]).phrase(colour=True, texture=True) for c in classes]
        keys = [sentence(f"a photo of {with_article(x)}") for x in phrases]
        image = os.path.relpath((data / "cls" / item["image"]).resolve(), folder.resolve())
        records.append({"query": image, "keys": keys, "label": classes.index(item["label"])})
    (folder / "image2text.json").write_text(json.dumps(records, indent=1), encoding="utf-8")
    return {"images": len(records), "classes": len(classes)}

