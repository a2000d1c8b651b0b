"""Fixture writer of SPEC's K x K sets (its six subsets' ``metadata`` and images)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from spotdiff.benchmarks.spec import SPEC_K
from spotdiff.testing.formats._common import _save_image, _write_json


def write_spec(
    root: Path,
    n: int = 2,
    seed: int = 0,
    *,
    subsets: tuple[str, ...] = tuple(SPEC_K),
    files: tuple[str, ...] = ("image2text", "text2image"),
    shared_captions: bool = True,
) -> Path:
    """SPEC subset folders ``root/<subset>/{image2text,text2image}.json`` + ``images/set<s>_<k>.png``.

    Each subset gets ``n`` candidate sets of ``SPEC_K[subset]`` images and captions; caption ``k`` of a
    set describes image ``k``. ``image2text.json`` has one record per image, ``text2image.json`` one
    per caption, with the candidate ``keys`` shuffled per record and ``label`` pointing at the right
    one (image paths relative to the subset folder). With ``shared_captions`` every set of a subset
    uses the same K captions (as real SPEC sets of one object category can), so records cannot be
    grouped by caption set alone. ``files`` limits which of the two files are written. Returns ``root``.

    Args:
        n: candidate sets per subset.
        subsets: the subsets to write.
        files: which of ``image2text`` and ``text2image`` to write.
        shared_captions: give every set of a subset the same K captions.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    for subset in subsets:
        k_size = SPEC_K[subset]
        folder = root / subset
        i2t, t2i = [], []
        for s in range(n):
            images = [f"images/set{s}_{k}.png" for k in range(k_size)]
            for rel in images:
                _save_image(folder / rel, rng, size=(32, 24))
            tail = "" if shared_captions else f" (set {s})"
            captions = [f"a photo of the {subset.replace('_', ' ')} variant {k}{tail}" for k in range(k_size)]
            for k in range(k_size):
                order = [int(j) for j in rng.permutation(k_size)]
                i2t.append({"query": images[k], "keys": [captions[j] for j in order], "label": order.index(k)})
            for k in range(k_size):
                order = [int(j) for j in rng.permutation(k_size)]
                t2i.append({"query": captions[k], "keys": [images[j] for j in order], "label": order.index(k)})
        if "image2text" in files:
            _write_json(folder / "image2text.json", i2t)
        if "text2image" in files:
            _write_json(folder / "text2image.json", t2i)
        folder.mkdir(parents=True, exist_ok=True)
    return root
