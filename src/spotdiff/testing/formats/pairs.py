"""Fixture writers of image pairs, 2 x 2 and the like: EqBen (2.5 and full), Winoground, MMVP-VLM, VisMin."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from spotdiff.benchmarks.eqben import SUBSETS as EQBEN_SUBSETS
from spotdiff.jsonio import write_jsonl
from spotdiff.testing.formats._common import _NOUNS, _save_image, _save_npy_bgr, _write_json


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
