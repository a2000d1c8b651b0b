"""Declared benchmarks for tests and measurements: VL-CheckList's records written both ways, as the built-in loader
``vl-checklist`` reads them (a corpus of YAML files and annotation JSON files) and as one table (parquet or CSV)
with the declaration that reads it to the same cases (ids, texts, images, subsets, tags).

``measurements/declared_speed.py`` times the two on a table the size of VL-CheckList (about 372,000 records).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

#: One corpus file per subset: (folder below corpus/v1, file stem, image root), as VL-CheckList's corpus lays
#: them out (an Object folder has a third level).
CORPUS = (
    ("Attribute/action", "vaw", "vg"), ("Attribute/color", "vaw", "vg"), ("Attribute/material", "vaw", "vg"),
    ("Attribute/size", "vaw", "vg"), ("Attribute/state", "vaw", "vg"), ("Object/Location/center", "vg_obj", "vg"),
    ("Object/Size/large", "vg_obj", "vg"), ("Relation/action", "swig", "swig"), ("Relation/spatial", "vg", "vg"),
)  # fmt: skip
_WORDS = ("red", "blue", "wooden", "metal", "small", "large", "dog", "cat", "table", "cup", "man", "horse")

DECLARATION = """\
spotdiff: 1
name: vl-checklist-table
title: VL-CheckList records as one table
description: VL-CheckList's records (image, positive and negative phrase, subset, tags) as one table
paper: "Zhao, Zhang, Xu, Zhong, Zhao, Li, Yang, Chen, Shen. VL-CheckList: Evaluating Pre-trained Vision-Language
  Models with Objects, Attributes and Relations. arXiv:2207.00221, 2022"
reference: https://github.com/om-ai-lab/VL-CheckList
citation: "@article{{zhao2022vlchecklist, title={{VL-CheckList}}, journal={{arXiv:2207.00221}}, year={{2022}}}}"
license: no licence file in the repository; images under their datasets' terms
protocols: [i2t-top1]
main_score: [i2t-top1, accuracy]
images: images
data:
  - path: {table}
cases:
  id: "{{{{ id }}}}"
  subset: "{{{{ subset }}}}"
  images: ["{{{{ image }}}}"]
  texts: ["{{{{ pos }}}}", "{{{{ neg }}}}"]
  truth: first
  roles: [pos, neg]
  tags: "{{{{ tags }}}}"
"""


def _entry_tags(folder: str, stem: str) -> dict[str, str]:
    """The tags the built-in loader gives every record of one corpus file."""
    parts = folder.split("/")
    tags = {"subset": "/".join(parts[:2]), "category": parts[0], "source": stem.split("_")[0],
            "corpus": "_".join((*parts, stem))}  # fmt: skip
    if parts[0] == "Object":
        tags["variant"] = parts[2]
    return tags


def write_checklist(root: str | Path, n: int, *, seed: int = 0, images: int = 5000, table: str = "parquet") -> Path:
    """``n`` VL-CheckList records (spread over :data:`CORPUS`, naming ``images`` distinct image files, none written)
    as the built-in loader's folder ``root/vl-checklist`` and as the table ``root/checklist.<table>`` with its
    declaration ``root/checklist.yaml`` (returned).

    Args:
        root: the folder to write in.
        n: records.
        seed: the phrases' and images' seed.
        images: distinct image names the records draw from (VL-CheckList reuses Visual Genome's images).
        table: ``parquet`` or ``csv``.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    folder, rows = root / "vl-checklist", []
    for k, (corpus_folder, stem, img_root) in enumerate(CORPUS):
        count = n // len(CORPUS) + (k < n % len(CORPUS))
        words = rng.integers(0, len(_WORDS), size=(count, 4))
        names = rng.integers(0, images, size=count)
        records = [[f"VG_100K/{names[i]}.jpg", {"POS": [f"{_WORDS[a]} {_WORDS[b]}"],
                                                "NEG": [f"{_WORDS[c]} {_WORDS[d]}"]}]
                   for i, (a, b, c, d) in enumerate(words)]  # fmt: skip
        anno = folder / "data" / corpus_folder / f"{stem}.json"
        anno.parent.mkdir(parents=True, exist_ok=True)
        anno.write_text(json.dumps(records), encoding="utf-8")
        yaml_path = folder / "corpus" / "v1" / corpus_folder / f"{stem}.yaml"
        yaml_path.parent.mkdir(parents=True, exist_ok=True)
        yaml_path.write_text(f"ANNO_PATH: data/{corpus_folder}/{stem}.json\nIMG_ROOT: {img_root}/\nTYPE: TUPLE_JSON\n")
        tags = _entry_tags(corpus_folder, stem)
        text = json.dumps(tags)
        rows += [{"id": f"{tags['corpus']}/{i}/0", "subset": tags["subset"], "image": f"{img_root}/{r[0]}",
                  "pos": r[1]["POS"][0], "neg": r[1]["NEG"][0], "tags": text}
                 for i, r in enumerate(records)]  # fmt: skip
    _write_table(root / f"checklist.{table}", rows)
    path = root / "checklist.yaml"
    path.write_text(DECLARATION.format(table=f"checklist.{table}"), encoding="utf-8")
    return path


def _write_table(path: Path, rows: list[dict]) -> None:
    """The rows as parquet or CSV (each record's tags a JSON object, as text)."""
    if path.suffix == ".csv":
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), path, row_group_size=65536)
