"""Fixture writers of one image against hard-negative captions: SugarCrepe, SugarCrepe++, VALSE, ARO (VG-Relation,
VG-Attribution), CREPE and What'sUp."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from spotdiff.testing.formats._common import _ADJS, _NOUNS, _save_image, _write_json

CREPE_COMPLEXITIES = (4, 5)
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
