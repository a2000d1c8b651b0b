"""Fixture writer of the BLIP Karpathy splits (COCO / Flickr30K retrieval, ARO COCO-Order / Flickr30k-Order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from spotdiff.testing.formats._common import _caption, _save_image, _write_json


def write_karpathy(
    root: Path,
    dataset: str = "coco",
    n_images: int = 3,
    seed: int = 0,
    *,
    split: str = "test",
    captions_per_image: int = 5,
) -> Path:
    """BLIP Karpathy split file + images.

    ``dataset="coco"`` writes ``root/coco_karpathy_<split>.json`` with images
    ``root/val2014/COCO_val2014_<id:012d>.jpg``; ``dataset="flickr"`` writes ``root/flickr30k_<split>.json``
    with images ``root/flickr30k-images/<id>.jpg``. Records are ``{"image": <path relative to root>,
    "caption": [captions_per_image captions]}``; captions are plain words with a final period. Returns
    ``root``.

    Args:
        dataset: ``coco`` or ``flickr``.
        n_images: the number of images.
        split: the split in the file's name.
        captions_per_image: captions per image.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n_images):
        if dataset == "coco":
            image = f"val2014/COCO_val2014_{391895 + i:012d}.jpg"
            name = f"coco_karpathy_{split}.json"
        elif dataset == "flickr":
            image = f"flickr30k-images/{1000092795 + i}.jpg"
            name = f"flickr30k_{split}.json"
        else:
            raise ValueError(f"dataset must be coco or flickr, got {dataset!r}")
        _save_image(root / image, rng)
        records.append({"image": image, "caption": [_caption(rng) for _ in range(captions_per_image)]})
    _write_json(root / name, records)
    return root
