"""Fixture writers of zero-shot classification data: an image folder, CLIP_benchmark's webdataset and torchvision's
CIFAR files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from spotdiff.testing.formats._common import _pixels, _save_image

ZEROSHOT_CLASSES = ("cat", "dog", "red car", "tree", "cup", "horse")


def write_zeroshot_folder(
    root: Path, n_per_class: int = 3, seed: int = 0, *, classes: tuple[str, ...] = ZEROSHOT_CLASSES, split: str = ""
) -> Path:
    """An image folder (torchvision ``ImageFolder``): ``root[/split]/<class>/<k>.png``, plus ``notes.txt``
    in the first class folder (not an image: skipped by the loader).

    Args:
        n_per_class: images per class.
        classes: the class names.
        split: a sub-folder for the split; empty: none.
    """
    rng = np.random.default_rng(seed)
    base = root / split if split else root
    for cls in classes:
        for k in range(n_per_class):
            _save_image(base / cls.replace(" ", "_") / f"{k}.png", rng, (36, 36))
    (base / classes[0].replace(" ", "_") / "notes.txt").write_text("not an image\n", encoding="utf-8")
    return root


def write_zeroshot_wds(
    root: Path,
    n: int = 10,
    seed: int = 0,
    *,
    classes: tuple[str, ...] = ZEROSHOT_CLASSES,
    templates: tuple[str, ...] = ("a photo of a {c}.", "a drawing of the {c}."),
    shards: int = 2,
    split: str = "test",
) -> Path:
    """CLIP_benchmark's webdataset layout: ``root/<split>/nshards.txt``, ``<i>.tar`` shards of
    ``<key>.webp`` + ``<key>.cls`` samples, ``root/classnames.txt`` and the templates file.

    Args:
        n: the number of samples.
        classes: the class names.
        templates: the prompt templates.
        shards: the number of tar shards.
        split: the split's folder.
    """
    import io
    import tarfile

    rng = np.random.default_rng(seed)
    base = root / split
    base.mkdir(parents=True, exist_ok=True)
    (base / "nshards.txt").write_text(f"{shards}\n", encoding="utf-8")
    for shard in range(shards):
        with tarfile.open(base / f"{shard}.tar", "w") as tar:
            for i in range(shard, n, shards):
                buf = io.BytesIO()
                Image.fromarray(_pixels(rng, (36, 36)), mode="RGB").save(buf, format="WEBP", lossless=True)
                label = f"{i % len(classes)}\n".encode()
                for ext, data in (("webp", buf.getvalue()), ("cls", label)):
                    info = tarfile.TarInfo(f"s{i:07d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    (root / "classnames.txt").write_text("\n".join(classes) + "\n", encoding="utf-8")
    (root / "zeroshot_classification_templates.txt").write_text("\n".join(templates) + "\n", encoding="utf-8")
    return root


def write_zeroshot_cifar(root: Path, n: int = 12, seed: int = 0, *, kind: str = "cifar10") -> Path:
    """torchvision's on-disk CIFAR: ``cifar-10-batches-py/test_batch`` + ``batches.meta`` (or
    ``cifar-100-python/test`` + ``meta``), pickled dicts with an ``N x 3072`` uint8 ``data`` array.

    Args:
        n: the number of images.
        kind: ``cifar10`` or ``cifar100``.
    """
    import pickle

    from spotdiff.benchmarks.zeroshot_data import CIFAR10_CLASSES, CIFAR100_CLASSES

    rng = np.random.default_rng(seed)
    names = CIFAR10_CLASSES if kind == "cifar10" else CIFAR100_CLASSES
    folder = root / ("cifar-10-batches-py" if kind == "cifar10" else "cifar-100-python")
    folder.mkdir(parents=True, exist_ok=True)
    data = np.stack([_pixels(rng, (32, 32)).transpose(2, 0, 1).reshape(-1) for _ in range(n)])
    labels = [int(x) for x in rng.integers(0, len(names), size=n)]
    if kind == "cifar10":
        batch, meta = {"data": data, "labels": labels}, {"label_names": list(names)}
        files = ("test_batch", "batches.meta")
    else:
        batch, meta = {"data": data, "fine_labels": labels}, {"fine_label_names": list(names)}
        files = ("test", "meta")
    for name, value in zip(files, (batch, meta), strict=True):
        with open(folder / name, "wb") as f:
            pickle.dump(value, f)
    return root
