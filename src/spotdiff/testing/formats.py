"""Writers of small datasets in the exact published schemas of benchmarks, for tests.

Each ``write_*`` function writes a tiny deterministic dataset with real image files into ``root``
(created if needed; the same ``seed`` writes the same files) and returns the folder to pass as
``--data``. Which formats: docs/testing.md.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image

from spotdiff.benchmarks.eqben import SUBSETS as EQBEN_SUBSETS
from spotdiff.benchmarks.spec import SPEC_K
from spotdiff.jsonio import write_jsonl

__all__ = [
    "CREPE_COMPLEXITIES",
    "EQBEN_SUBSETS",
    "SPEC_K",
    "SUGARCREPE_SUBSETS",
    "ZEROSHOT_CLASSES",
    "write_aro_vg_attribution",
    "write_aro_vg_relation",
    "write_crepe",
    "write_eqben",
    "write_eqben_full",
    "write_karpathy",
    "write_spec",
    "write_sugarcrepe",
    "write_valse",
    "write_winoground",
    "write_zeroshot_cifar",
    "write_zeroshot_folder",
    "write_zeroshot_wds",
]

CREPE_COMPLEXITIES = (4, 5)

_NOUNS = ("dog", "cat", "horse", "car", "man", "woman", "bench", "table", "kite", "boat", "tree", "clock")
_ADJS = ("red", "white", "large", "small", "wooden", "striped", "young", "old")
_VERBS = ("sitting on", "standing near", "looking at", "next to", "behind", "riding")
_PLACES = ("beach", "street", "kitchen", "park", "field", "table")


def _pixels(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """An HxWx3 uint8 array of a few random colour blocks (distinct per draw, compresses well)."""
    w, h = size
    a = np.empty((h, w, 3), dtype=np.uint8)
    a[:] = rng.integers(0, 256, size=3, dtype=np.uint8)
    for _ in range(3):
        x0, y0 = int(rng.integers(0, w - 1)), int(rng.integers(0, h - 1))
        x1, y1 = int(rng.integers(x0 + 1, w + 1)), int(rng.integers(y0 + 1, h + 1))
        a[y0:y1, x0:x1] = rng.integers(0, 256, size=3, dtype=np.uint8)
    return a


def _save_image(path: Path, rng: np.random.Generator, size: tuple[int, int] = (40, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(_pixels(rng, size), mode="RGB")
    if path.suffix.lower() in (".jpg", ".jpeg"):
        image.save(path, format="JPEG", quality=95)
    else:
        image.save(path, format="PNG")


def _save_npy_bgr(path: Path, rng: np.random.Generator, size: tuple[int, int] = (40, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, _pixels(rng, size)[..., ::-1].copy())  # stored BGR, as EqBen YouCook2 frames


def _write_json(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def _caption(rng: np.random.Generator) -> str:
    noun, noun2 = rng.choice(_NOUNS, size=2, replace=False)
    return f"A {rng.choice(_ADJS)} {noun} {rng.choice(_VERBS)} a {noun2} in the {rng.choice(_PLACES)}."


# --------------------------------------------------------------------------------------------------
# EqBen
# --------------------------------------------------------------------------------------------------


def _eqben_image_path(subset: str, sample: int, which: int) -> str:
    ext = "npy" if subset == "eqbenyoucook2" else "png"
    return f"{subset}/video{sample:03d}/frame{which}.{ext}"


def _eqben_samples(images: Path, n: int, rng: np.random.Generator) -> list[dict]:
    samples = []
    for i in range(n):
        subset = EQBEN_SUBSETS[i % len(EQBEN_SUBSETS)]
        record = {}
        for k in (0, 1):
            rel = _eqben_image_path(subset, i, k)
            if rel.endswith(".npy"):
                _save_npy_bgr(images / rel, rng)
            else:
                _save_image(images / rel, rng)
            record[f"image{k}"] = rel
        record["caption0"] = f"sample {i}: the person picks up the cup"
        record["caption1"] = f"sample {i}: the person puts down the cup"
        samples.append(record)
    return samples


def write_eqben(root: Path, n: int = 7, seed: int = 0, *, filename: str = "all_select.json") -> Path:
    """EqBen Winoground-style annotation (t2v_metrics ``eqben_vllm`` layout).

    Writes ``root/<filename>`` = ``[{"image0", "image1", "caption0", "caption1"}]`` and the images under
    ``root/images/<subset>/video<i>/frame<k>.png`` (``.npy`` BGR arrays for eqbenyoucook2). Record ``i``
    is in sub-dataset ``EQBEN_SUBSETS[i % 7]``. Returns ``root``.

    Args:
        n: the number of records.
        filename: the annotation file's name.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    _write_json(root / filename, _eqben_samples(root / "images", n, rng))
    return root


def write_eqben_full(root: Path, n: int = 4, seed: int = 0) -> Path:
    """EqBen randomized full set plus the repository's ground truth to rebuild it.

    Writes ``root/ann_json_finegrained_random.json`` (``[{"image", "caption"}]``: the four
    combinations c0i0 c0i1 c1i0 c1i1 of ``n`` samples, shuffled), ``root/src_file/private_random_idx.json``
    (the permutation ``p``: random entry ``i`` is original position ``p[i]``) and
    ``root/src_file/private_info.json`` (per original position ``{"dataset", "name", "sample_cnt"}``),
    and the images under ``root/images/``. Sample ``s`` has the same content as record ``s`` of
    :func:`write_eqben` with the same ``n`` and ``seed``. Returns ``root``.

    Args:
        n: the number of EqBen samples (four records each).
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    samples = _eqben_samples(root / "images", n, rng)
    original, info = [], []
    for cnt, s in enumerate(samples):
        dataset = s["image0"].split("/")[0]
        for slot in ("c0i0", "c0i1", "c1i0", "c1i1"):
            c, i = int(slot[1]), int(slot[3])
            original.append({"image": s[f"image{i}"], "caption": s[f"caption{c}"]})
            info.append({"dataset": dataset, "name": slot, "sample_cnt": cnt})
    perm = [int(p) for p in np.random.default_rng(seed + 1).permutation(len(original))]
    _write_json(root / "ann_json_finegrained_random.json", [original[p] for p in perm])
    _write_json(root / "src_file" / "private_random_idx.json", perm)
    _write_json(root / "src_file" / "private_info.json", info)
    return root


# --------------------------------------------------------------------------------------------------
# Winoground
# --------------------------------------------------------------------------------------------------

_WINO_TAGS = (("Object", "Noun", ""), ("Relation", "Verb", "Symbolic"), ("Both", "Adjective-Color", "Series"))


def write_winoground(root: Path, n: int = 4, seed: int = 0) -> Path:
    """Winoground ``examples.jsonl`` + ``images/ex_<i>_img_<k>.png``.

    Example ``i`` has ``collapsed_tag`` Object / Relation / Both for ``i % 3`` = 0 / 1 / 2, an empty
    ``secondary_tag`` when ``i % 3 == 0`` and ``num_main_preds = 1 + i % 2``. Returns ``root``.

    Args:
        n: the number of examples.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        collapsed, tag, secondary = _WINO_TAGS[i % 3]
        for k in (0, 1):
            _save_image(root / "images" / f"ex_{i}_img_{k}.png", rng)
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        record = {
            "id": i,
            "image_0": f"ex_{i}_img_0",
            "image_1": f"ex_{i}_img_1",
            "caption_0": f"the {a} is left of the {b}",
            "caption_1": f"the {b} is left of the {a}",
            "tag": tag,
            "secondary_tag": secondary,
            "num_main_preds": 1 + i % 2,
            "collapsed_tag": collapsed,
        }
        records.append(record)
    write_jsonl(root / "examples.jsonl", records)
    return root


SUGARCREPE_SUBSETS = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")


def write_sugarcrepe(root: Path, n: int = 1, seed: int = 0) -> Path:
    """SugarCrepe's seven ``<subset>.json`` files (``{"<id>": {"filename", "caption",
    "negative_caption"}}``) with ``n`` records each, and their images in ``images/`` (COCO-style file
    names). Returns ``root``.

    Args:
        n: records per subset file.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    for s, subset in enumerate(SUGARCREPE_SUBSETS):
        records = {}
        for i in range(n):
            name = f"0000000{s}{i:05d}.jpg"
            _save_image(root / "images" / name, rng)
            a, b = rng.choice(_NOUNS, size=2, replace=False)
            adj, other = rng.choice(_ADJS, size=2, replace=False)
            negative = f"a {other} {a} next to a {b}" if subset.endswith("att") else f"a {adj} {b} next to a {a}"
            records[str(i)] = {"filename": name, "caption": f"a {adj} {a} next to a {b} ", "negative_caption": negative}
        _write_json(root / f"{subset}.json", records)
    return root


def write_valse(root: Path, n: int = 3, seed: int = 0, piece: str = "counting-hard") -> Path:
    """A VALSE piece ``<piece>.json`` (published schema: ``image_file``, ``caption``, ``foil``, ``mturk``
    votes, ...) with ``n`` valid samples, and their images in ``images/``. Returns ``root``.

    Args:
        n: the number of samples.
        piece: the piece's name (the file's stem).
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    records = {}
    for i in range(n):
        name = f"v7w_{i}.jpg"
        _save_image(root / "images" / name, rng)
        noun = rng.choice(_NOUNS)
        records[f"{piece}_{i}"] = {
            "dataset": "visual7w", "original_split": "test", "dataset_idx": str(i),
            "linguistic_phenomena": piece.split("-")[0], "image_file": name,
            "caption": f"there are {i + 1} {noun}s", "foil": f"there are {i + 5} {noun}s",
            "classes": str(i + 1), "classes_foil": str(i + 5), "mturk": {"foil": 0, "caption": 3, "other": 0},
        }  # fmt: skip
    _write_json(root / f"{piece}.json", records)
    return root


# --------------------------------------------------------------------------------------------------
# SPEC
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# ARO VG-Relation / VG-Attribution
# --------------------------------------------------------------------------------------------------

#: Relations for the fixture; "next to" and "near" are in ARO's symmetric (excluded) list.
ARO_FIXTURE_RELATIONS = ("on", "behind", "next to", "holding", "near", "wearing")
ARO_FIXTURE_ATTRIBUTES = (("white", "black"), ("red", "wooden"), ("small", "large"))


def _write_aro_vg(root: Path, n: int, seed: int, kind: str) -> Path:
    root = Path(root)
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        image_path = f"{2340000 + i}.jpg"
        width, height = 64, 48
        _save_image(root / "images" / image_path, rng, size=(width, height))
        x, y = int(rng.integers(0, 20)), int(rng.integers(0, 16))
        w, h = int(rng.integers(8, width - x)), int(rng.integers(8, height - y))
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        record = {
            "image_id": str(2340000 + i),
            "image_path": image_path,
            "bbox_x": x,
            "bbox_y": y,
            "bbox_w": w,
            "bbox_h": h,
        }
        if kind == "relation":
            relation = ARO_FIXTURE_RELATIONS[i % len(ARO_FIXTURE_RELATIONS)]
            record["relation_name"] = relation
            record["true_caption"] = f"the {a} is {relation} the {b}"
            record["false_caption"] = f"the {b} is {relation} the {a}"
        else:
            a0, a1 = ARO_FIXTURE_ATTRIBUTES[i % len(ARO_FIXTURE_ATTRIBUTES)]
            record["attributes"] = [a0, a1]
            record["true_caption"] = f"the {a0} {a} and the {a1} {b}"
            record["false_caption"] = f"the {a1} {a} and the {a0} {b}"
        records.append(record)
    _write_json(root / f"visual_genome_{kind}.json", records)
    return root


def write_aro_vg_relation(root: Path, n: int = 6, seed: int = 0) -> Path:
    """ARO ``visual_genome_relation.json`` + ``images/<id>.jpg`` (64 x 48 JPEGs, boxes inside them).

    Record ``i`` has ``relation_name = ARO_FIXTURE_RELATIONS[i % 6]``. Returns ``root``.

    Args:
        n: the number of records.
    """
    return _write_aro_vg(root, n, seed, "relation")


def write_aro_vg_attribution(root: Path, n: int = 6, seed: int = 0) -> Path:
    """ARO ``visual_genome_attribution.json`` + ``images/<id>.jpg``; record ``i`` has ``attributes =
    list(ARO_FIXTURE_ATTRIBUTES[i % 3])``. Returns ``root``.

    Args:
        n: the number of records.
    """
    return _write_aro_vg(root, n, seed, "attribution")


# --------------------------------------------------------------------------------------------------
# Karpathy splits (COCO / Flickr30K retrieval, ARO COCO-Order / Flickr30k-Order)
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# CREPE
# --------------------------------------------------------------------------------------------------


def _crepe_rows(n: int, rng: np.random.Generator, image_ids: list[int]) -> list[dict]:
    rows = []
    for i in range(n):
        image_id = image_ids[i % len(image_ids)]
        width, height = 64, 48
        x, y = int(rng.integers(0, 20)), int(rng.integers(0, 16))
        w, h = int(rng.integers(8, width - x)), int(rng.integers(8, height - y))
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        caption = f"a {a} on a {b}, and a {rng.choice(_ADJS)} sky."
        rows.append({"image_id": image_id, "x": x, "y": y, "width": w, "height": h, "caption": caption})
    return rows


def write_crepe(
    root: Path,
    n: int = 3,
    seed: int = 0,
    *,
    prod_types: tuple[str, ...] = ("atom", "swap", "negate"),
    complexities: tuple[int, ...] = CREPE_COMPLEXITIES,
    systematicity: bool = True,
) -> Path:
    """CREPE CSVs + Visual Genome-style images.

    Writes ``root/prod_hard_negatives/<type>/prod_vg_hard_negs_<type>_complexity_<c>.csv`` (columns: a
    pandas index column, ``image_id,x,y,width,height,caption,hard_negs``; ``n`` rows with 5 negatives as a
    Python-literal list) for each type and complexity, and, with ``systematicity``,
    ``root/syst_hard_negatives/syst_vg_hard_negs_seen_compounds_in_cc12m.csv`` (columns
    ``image_id,x,y,width,height,caption,valid_hard_negs_atom,valid_hard_negs_comp,``
    ``valid_hard_negs_combined``; ``n`` rows with 3 and 2 negatives, combined their concatenation).
    Images are ``root/images/<image_id>.jpg`` (64 x 48), except the first, which is put in
    ``root/images/VG_100K/`` as in a Visual Genome download. Returns ``root``.

    Args:
        n: rows per file.
        prod_types: the productivity negative types to write.
        complexities: the productivity complexities to write.
        systematicity: also write the systematicity file.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    image_ids = [107900 + k for k in range(4)]
    for k, image_id in enumerate(image_ids):
        sub = "VG_100K/" if k == 0 else ""
        _save_image(root / "images" / f"{sub}{image_id}.jpg", rng, size=(64, 48))

    def negatives(caption: str, m: int, tag: str) -> list[str]:
        return [caption.replace("a ", f"a {tag}{j} ", 1) for j in range(m)]

    for t in prod_types:
        for c in complexities:
            path = root / "prod_hard_negatives" / t / f"prod_vg_hard_negs_{t}_complexity_{c}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(["", "image_id", "x", "y", "width", "height", "caption", "hard_negs"])
                for i, row in enumerate(_crepe_rows(n, rng, image_ids)):
                    negs = negatives(row["caption"], 5, f"{t}{c}-")
                    writer.writerow([i, *row.values(), str(negs)])
    if systematicity:
        path = root / "syst_hard_negatives" / "syst_vg_hard_negs_seen_compounds_in_cc12m.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(
                [
                    "image_id",
                    "x",
                    "y",
                    "width",
                    "height",
                    "caption",
                    "valid_hard_negs_atom",
                    "valid_hard_negs_comp",
                    "valid_hard_negs_combined",
                ]
            )
            for row in _crepe_rows(n, rng, image_ids):
                caption = row["caption"]
                atom, comp = negatives(caption, 3, "atom-"), negatives(caption, 2, "comp-")
                writer.writerow([*row.values(), str(atom), str(comp), str(atom + comp)])
    return root


# ------------------------------------------------------------------------------ zero-shot classification
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


# ------------------------------------------------------------------------------ What'sUp
def _whatsup_controlled(
    folder: str, a: str, b: str, words: dict[str, str], pictured: tuple[str, ...] | None = None
) -> list[dict]:
    """One controlled set as What'sUp's JSON lists it: an image per preposition (of ``pictured``, default all
    four), its four captions with the true one first and the others in another order per image, the
    captions' article kept as published ("a armchair")."""
    captions = {p: f"A {a.replace('-', ' ')} {w} a {b}" for p, w in words.items()}
    out = []
    for k, prep in enumerate(pictured or tuple(words)):
        others = [captions[p] for p in words if p != prep]
        others = others[k % 3 :] + others[: k % 3]
        out.append({"image_path": f"data/{folder}/{a}_{prep}_{b}.jpeg", "caption_options": [captions[prep], *others]})
    return out


_WHATSUP_A = {"on": "on", "under": "under", "left_of": "to the left of", "right_of": "to the right of"}
_WHATSUP_B = {"in-front_of": "in front of", "behind": "behind", "left_of": "left of", "right_of": "right of"}
#: Controlled-A: a whole set of four (beer-bottle / armchair) and a set missing its "under" image; file order
#: as published keeps a set's images together.
WHATSUP_CONTROLLED = [
    *_whatsup_controlled("controlled_images", "beer-bottle", "armchair", _WHATSUP_A),
    *_whatsup_controlled("controlled_images", "mug", "table", _WHATSUP_A, ("on", "left_of", "right_of")),
]
WHATSUP_CLEVR = _whatsup_controlled("controlled_clevr", "cube", "sphere", _WHATSUP_B)
WHATSUP_COCO_ONE = [[397133, "A photo of a dog on the left", "A photo of a dog on the right"]]
WHATSUP_COCO_TWO = [
    [37777, "A cup above a plate", "A cup below a plate"],
    [252219, "A man left of a horse", "A man right of a horse"],
]
WHATSUP_VG_ONE = [[2417871, "A tree on the top", "A tree on the bottom"]]
WHATSUP_VG_TWO = [["2344765", "A car behind a bus", "A car in front of a bus"]]


def write_whatsup(root: Path) -> Path:
    """What'sUp's six annotation files in their published schema (controlled: objects with ``image_path``
    and 4 ``caption_options``; QA sets: ``[image_id, true caption, false caption]`` lists); no images.
    Returns ``root``."""
    from spotdiff.benchmarks.whatsup import FILES

    root.mkdir(parents=True, exist_ok=True)
    records = (WHATSUP_CONTROLLED, WHATSUP_CLEVR, WHATSUP_COCO_ONE, WHATSUP_COCO_TWO, WHATSUP_VG_ONE, WHATSUP_VG_TWO)
    for subset, data in zip(FILES, records, strict=True):
        (root / FILES[subset][0]).parent.mkdir(parents=True, exist_ok=True)
        (root / FILES[subset][0]).write_text(json.dumps(data), encoding="utf-8")
    return root


# ------------------------------------------------------------------------------ MMVP-VLM
def write_mmvp_vlm(root: Path, n_pairs: int = 16) -> Path:
    """MMVP-VLM's ``Questions.csv`` (header ``Question ID,Type,Statement``; ids 1, 2, ... in pairs; Type
    the image folder) as evaluate_vlm.py reads it, for ``n_pairs`` pairs (15 per pattern, in order);
    no images. Returns ``root``.

    Args:
        n_pairs: the number of statement pairs.
    """
    root.mkdir(parents=True, exist_ok=True)
    folders = ("Orientation", "Presence", "State", "Quantity", "Spatial", "Color", "Structural_Character",
               "Text", "Camera_Perspective")  # fmt: skip
    with (root / "Questions.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Question ID", "Type", "Statement"])
        for k in range(n_pairs):
            folder = folders[k // 15]
            writer.writerow([2 * k + 1, folder, f"the dog is facing left, pair {k}"])
            writer.writerow([2 * k + 2, folder, f"the dog is facing right, pair {k}"])
    return root


# ------------------------------------------------------------------------------ MMVP
MMVP_HEADER = ("Index", "Question", "Options", "Correct Answer")


def mmvp_rows(n: int = 300) -> list[list[str]]:
    """``n`` rows in the schema of MMVP's ``Questions.csv`` (github.com/tsb0601/MMVP; rows 279 and 280 as
    MMVP issue 14 quotes them): pairs of rows share a question and options, answers (a) then (b).

    Args:
        n: the number of rows (questions).
    """
    rows = []
    for i in range(1, n + 1):
        pair = (i + 1) // 2
        if i in (279, 280):
            question, options = "Is the elderly person standing or sitting in the picture?", "(a) Standing (b) Sitting"
        elif pair % 2:
            question, options = f"Are the butterfly's feet visible? ({pair})", "(a) Yes (b) No"
        else:
            question = f"Is the bus driving towards or away from the camera? ({pair})"
            options = "(a) Towards the camera (b) Away from the camera"
        rows.append([str(i), question, options, "(a)" if i % 2 else "(b)"])
    return rows


def write_mmvp(root: Path, rows: list[list[str]] | None = None, images: int = 0, seed: int = 4) -> Path:
    """MMVP's ``Questions.csv`` (header :data:`MMVP_HEADER`, ``rows`` or :func:`mmvp_rows`) and the first
    ``images`` images ``MMVP Images/<n>.jpg``, as evaluate_mllm.py reads them. Returns ``root``.

    Args:
        rows: the CSV rows below the header.
        images: how many images to write (rows 1, 2, ...).
        seed: the images' random seed.
    """
    root.mkdir(parents=True, exist_ok=True)
    with (root / "Questions.csv").open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([MMVP_HEADER, *(mmvp_rows() if rows is None else rows)])
    rng = np.random.default_rng(seed)
    for k in range(images):
        _save_image(root / "MMVP Images" / f"{k + 1}.jpg", rng)
    return root


# ------------------------------------------------------------------------------ VisMin
VISMIN_CATEGORIES = ("object", "attribute", "relation", "counting")


def write_vismin(
    root: Path, n: int = 8, seed: int = 0, category: str | None = None, *, layout: str = "parquet"
) -> Path:
    """``n`` rows with the features of ``mair-lab/vismin-bench`` (its data/test/dataset_info.json: id,
    image_0, text_0, image_1, text_1, the four MLLM question columns, category), with the real file's
    quirks: rows in category blocks (object, attribute, relation, counting, as the authors'
    vismin-bench/solutions/vqa_solution.csv lists them) whose ``id`` restarts at 0 in each category,
    images as the ``Image`` feature's ``{"bytes", "path": None}`` struct, question columns holding
    ``<image_k>`` placeholders. Written as the hub's parquet conversion lays it out
    (``default/test/0000.parquet``) or, ``layout="arrow"``, as the hub's ``save_to_disk`` folder at revision
    b791454 (``data/test/data-0000k-of-00003.arrow``, Arrow IPC streams, beside ``dataset_info.json``,
    ``state.json`` and ``data/dataset_dict.json``). Row ``i`` has category ``VISMIN_CATEGORIES[4 i // n]``
    unless ``category`` is given. Returns ``root``.

    Args:
        n: the number of rows.
        seed: the images' random seed.
        category: one category for every row (any string).
        layout: ``"parquet"`` or ``"arrow"``.
    """
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from spotdiff.testing.hub_repos import png_bytes

    rng = np.random.default_rng(seed)
    columns = ("id", "image_0", "text_0", "image_1", "text_1", "text_question_0", "text_question_1",
               "image_question_0", "image_question_1", "category")  # fmt: skip
    rows: dict[str, list] = {k: [] for k in columns}
    next_id: dict[str, int] = {}
    for i in range(n):
        cat = category or VISMIN_CATEGORIES[len(VISMIN_CATEGORIES) * i // n]
        rows["id"].append(next_id.setdefault(cat, 0))
        next_id[cat] += 1
        texts = [f"a {'red' if k == i % 2 else 'blue'} cup left of a plate {i}" for k in (0, 1)]
        for k in (0, 1):
            rows[f"image_{k}"].append({"bytes": png_bytes(rng), "path": None})
            rows[f"text_{k}"].append(texts[k])
            rows[f"text_question_{k}"].append(
                f"<image_{k}>Does this image best match: (A) {texts[0]}, or (B) {texts[1]}? Choices: A, B."
            )
            rows[f"image_question_{k}"].append(
                f'<image_0><image_1>Which image better aligns with the description: "{texts[k]}"? '
                "Choices: First, Second."
            )
        rows["category"].append(cat)
    table = pa.table(rows)
    if layout == "arrow":
        folder = root / "data" / "test"
        folder.mkdir(parents=True, exist_ok=True)
        bounds = [n * k // 3 for k in range(4)]
        for k in range(3):
            path = folder / f"data-{k:05d}-of-00003.arrow"
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table.slice(bounds[k], bounds[k + 1] - bounds[k]), max_chunksize=3)
        features = {c: {"_type": "Image" if c in ("image_0", "image_1") else "Value"} for c in columns}
        _write_json(folder / "dataset_info.json", {"features": features})
        shards = [{"filename": f"data-{k:05d}-of-00003.arrow"} for k in range(3)]
        _write_json(folder / "state.json", {"_data_files": shards, "_split": "test"})
        _write_json(root / "data" / "dataset_dict.json", {"splits": ["test"]})
        return root
    path = root / "default" / "test" / "0000.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=3)
    path.write_bytes(buf.getvalue())
    return root


# ------------------------------------------------------------------------------ SugarCrepe++
def write_sugarcrepe_pp(root: Path, subsets: tuple[str, ...] = ("replace_att", "swap_obj")) -> Path:
    """SugarCrepe++'s ``<subset>.json`` files in the schema of github.com/Sri-Harsha/scpp ``data/`` (commit
    c083bbf: a list of ``{id, filename, caption, caption2, negative_caption}``, ids counting from 0, written
    with a one-space indent), four records each with the real files' quirks: a caption ending in a space,
    a second caption opening with one, a negative caption equal to the caption (two such records in the
    real swap_obj.json) and two records of one image (most images serve several records); no images.
    Returns ``root``.

    Args:
        subsets: the subset files to write.
    """
    root.mkdir(parents=True, exist_ok=True)
    for name in subsets:
        records = [
            {"id": k, "filename": f"{565045 + k:012d}.jpg", "caption": f"Blue bathroom with {k + 2} white towels.",
             "caption2": f"The bathroom is blue and has {k + 2} white towels.",
             "negative_caption": f"White bathroom with {k + 2} blue towels."}
            for k in range(2)
        ]  # fmt: skip
        records += [
            {"id": 2, "filename": "000000287347.jpg", "caption": "A person prepares a pizza while a person watches. ",
             "caption2": " A person watches as another person is preparing a pizza.",
             "negative_caption": "A person prepares a pizza while a person watches."},
            {"id": 3, "filename": "000000287347.jpg", "caption": "A person on a motorcycle is waving at two people.",
             "caption2": "A person is waving at two other people while being on a motorcycle.\n",
             "negative_caption": "Two people on a motorcycle are waving at a person."},
        ]  # fmt: skip
        (root / f"{name}.json").write_text(json.dumps(records, indent=1), encoding="utf-8")
    return root
