"""BiVLC (Miranda et al., NeurIPS 2024 D&B): SugarCrepe's images and hard negative captions, each with a
generated image for the negative caption; 2 x 2 cases scored I2T, T2I and group.

Reads the hub parquet layout of ``imirandam/BiVLC`` (split test), as the authors'
``main_evaluation_BiVLC.py`` loads it. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import field
from spotdiff.benchmarks._parquet import find_parquet, iter_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.sources import HubSource, Part
from spotdiff.cases import Case
from spotdiff.errors import DataError

SUBSETS = ("replace", "swap", "add")
PARQUET = ("data/test-*.parquet", "test-*.parquet", "*.parquet")

CITATION = """\
@inproceedings{miranda2024bivlc,
  title     = {{BiVLC}: Extending Vision-Language Compositionality Evaluation with Text-to-Image Retrieval},
  author    = {Miranda, Imanol and Salaberria, Ander and Agirre, Eneko and Azkune, Gorka},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
  year      = {2024}
}
"""


@BENCHMARKS.register("bivlc")
class BiVLC(Benchmark):
    metadata = BenchmarkMetadata(
        title="BiVLC (Miranda et al., NeurIPS 2024)",
        protocols=("group",),
        subsets=SUBSETS,
        layout="""\
DIR/data/test-*.parquet (the hub dataset imirandam/BiVLC, split test; or DIR/*.parquet): columns image,
  caption, negative_image, negative_caption (images as bytes), type (replace/swap/add), subtype
case: 2 images [image, negative_image] x 2 captions [caption, negative_caption], diagonal truth;
  id <file stem>/<row>; subset = type; protocol group: text = BiVLC's I2T, image = T2I, group = group
tags: subset, subtype""",
        description="BiVLC: SugarCrepe positives and hard negatives, each negative caption with its generated "
        "image; I2T, T2I and group score (Miranda et al., BiVLC, NeurIPS 2024)",
        paper="Miranda, Salaberria, Agirre, Azkune. BiVLC: Extending Vision-Language Compositionality "
        "Evaluation with Text-to-Image Retrieval. NeurIPS 2024 Datasets and Benchmarks",
        reference="https://github.com/IMirandaM/BiVLC",
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="BiVLC Table 3 (I2T, T2I, group, overall and per type)",
        license="MIT (github.com/IMirandaM/BiVLC LICENSE); COCO images under the Flickr terms",
        parts=(
            Part(
                "data",
                "both",
                HubSource("imirandam/BiVLC", None, ("data/test-*.parquet",)),
                license="MIT",
                note="the test split's parquet, images inside; no commit could be read when this was declared: "
                "the fetch records the commit it downloads",
            ),
        ),
        metric_sources=(
            (
                "group",
                ("text",),
                "Table 3's I2T: evaluate_BiVLC's image picks its caption both ways "
                "(src/CLIP_fine_tuning/CLIP_utils.py, commit 776023d)",
            ),
            ("group", ("image",), "Table 3's T2I: each caption picks its image"),
            ("group", ("group",), "Table 3's group score: both"),
        ),
        ties="strict, as BiVLC's evaluate_BiVLC (src/CLIP_fine_tuning/CLIP_utils.py, commit 776023d: "
        "s_C0_I0 > s_C1_I0 and so on)",
    )

    def data_files(self) -> list[Path]:
        return find_parquet(self.root, PARQUET, what="BiVLC test")

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        columns = ("caption", "negative_caption", "type", "?subtype")
        for path, row, record in iter_rows(self.data_files(), columns, ("image", "negative_image")):
            self.report.records += 1
            where = f"row {row}"
            caption = field(record, "caption", str, file=path, record_id=where).strip()
            negative = field(record, "negative_caption", str, file=path, record_id=where).strip()
            kind = field(record, "type", str, file=path, record_id=where).strip()
            if kind not in SUBSETS:
                raise DataError(f"unknown type {kind!r}; known: {', '.join(SUBSETS)}", file=path, record=where,
                                field="type")  # fmt: skip
            if subset is not None and kind != subset:
                continue
            tags = {"subset": kind, "subtype": str(record["subtype"] or "")}
            images = (record["image"], record["negative_image"])
            yield pair_case(f"{path.stem}/{row}", (caption, negative), images, tags)
