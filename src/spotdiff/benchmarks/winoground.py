"""Winoground (Thrush et al., CVPR 2022): 400 examples of two images and two captions with the same words.

A case is 2 images x 2 captions with diagonal truth (protocol ``group``), read from
``examples.jsonl`` or the hub's parquet layout. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import field, find_file
from spotdiff.benchmarks._parquet import find_parquet, iter_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.metadata import CHOICE_READING
from spotdiff.benchmarks.sources import HubSource, Part
from spotdiff.cases import Case, FileImage, ImageRef
from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl

SUBSETS = ("Object", "Relation", "Both")
PARQUET = ("data/test-*.parquet", "data/*.parquet", "*.parquet")


CITATION = """\
@inproceedings{thrush2022winoground,
  title     = {Winoground: Probing Vision and Language Models for Visio-Linguistic Compositionality},
  author    = {Thrush, Tristan and Jiang, Ryan and Bartolo, Max and Singh, Amanpreet and Williams, Adina and
               Kiela, Douwe and Ross, Candace},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2022}
}
"""


@BENCHMARKS.register("winoground")
class Winoground(Benchmark):
    option_names = ("images",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="Winoground (Thrush et al., CVPR 2022)",
        protocols=("group", "choice", "choice-text"),
        subsets=SUBSETS,
        layout="""\
DIR/examples.jsonl (or DIR/data/examples.jsonl, or DIR = the file itself), one JSON per line:
  {"id": int, "image_0": "ex_0_img_0", "image_1": ..., "caption_0": str, "caption_1": str,
   "tag": str, "secondary_tag": str (may be ""), "num_main_preds": int,
   "collapsed_tag": "Object" | "Relation" | "Both"}
images: <images>/<image id>.png, <images> = option images=PATH, default <examples.jsonl dir>/images
case: 2 images x 2 texts [caption_0, caption_1], diagonal truth; id = str(id)
subset = collapsed_tag; tags: tag, secondary_tag, collapsed_tag, num_main_preds
or the hub parquet layout: DIR/data/test-*.parquet (or DIR/*.parquet) with the same fields as columns,
  image_0 / image_1 holding the image bytes (read lazily, keyed by their sha256)""",
        description="Winoground: 400 expert-curated pairs of images and captions with the same words reordered "
        "(Thrush et al., Winoground, CVPR 2022)",
        paper=(
            "Thrush, Jiang, Bartolo, Singh, Williams, Kiela, Ross. Winoground: Probing Vision and "
            "Language Models for Visio-Linguistic Compositionality. CVPR 2022"
        ),
        reference="https://huggingface.co/datasets/facebook/winoground",
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="Winoground Table 3; EqBen Table 3; VisualGPTScore Table 2",
        license="Winoground licence agreement (license_agreement.txt in the repository): research use only; "
        "images licensed from Getty Images",
        parts=(
            Part(
                "data",
                "both",
                HubSource("facebook/winoground", "b400e173549071916ad1b3d449293bc8d8b4b763", ("data/*.parquet",),
                          gated=True),
                note="the revision MTEB pins; the captions, tags and image bytes in parquet",
            ),
        ),
        data_notes="Gated: log in at huggingface.co, accept the conditions on the dataset page, create a read "
        "token and set HF_TOKEN (or run `hf auth login`).",
        readings=(CHOICE_READING,),
        ties="strict, as Winoground's and EqBen's code (c0_i0 > c1_i0 ...); MTEB's "
        "ImageTextPairClassificationEvaluator takes argmax per image and per text (first listed wins a tie): "
        "--ties argmax",
    )

    def _file(self) -> Path:
        return find_file(
            self.root, ("examples.jsonl", "data/examples.jsonl"), what="Winoground examples.jsonl"
        )

    def _parquet(self) -> list[Path] | None:
        """The hub parquet files, when there is no examples.jsonl."""
        try:
            self._file()
        except DataError:
            return find_parquet(self.root, PARQUET, what="Winoground (no examples.jsonl either)")
        return None

    def data_files(self) -> list[Path]:
        return self._parquet() or [self._file()]

    def _images(self, ann: Path) -> Path:
        value = self.options.get("images")
        return Path(str(value)).expanduser() if value else ann.parent / "images"

    def _records(self) -> Iterator[tuple[Path, str, dict, tuple[ImageRef, ImageRef] | None]]:
        """``(file, record label, record, images or None for the JSONL layout)`` in file order."""
        files = self._parquet()
        if files is None:
            path = self._file()
            for lineno, record in iter_jsonl(path):
                yield path, f"line {lineno}", record, None
            return
        columns = ("id", "caption_0", "caption_1", "tag", "secondary_tag", "num_main_preds", "collapsed_tag")
        for path, row, record in iter_rows(files, columns, ("image_0", "image_1")):
            yield path, f"row {row}", record, (record["image_0"], record["image_1"])

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        seen: dict[int, str] = {}
        for path, label, record, refs in self._records():
            self.report.records += 1
            ex_id = field(record, "id", int, file=path, record_id=label)
            if ex_id in seen:
                raise DataError(
                    f"duplicate id {ex_id} (first at {seen[ex_id]})", file=path, record=label, field="id"
                )
            seen[ex_id] = label
            where = f"id {ex_id} ({label})"
            if refs is None:
                images = self._images(path)
                refs = tuple(
                    FileImage(images / f"{field(record, k, str, file=path, record_id=where)}.png")
                    for k in ("image_0", "image_1")
                )
            caption_0 = field(record, "caption_0", str, file=path, record_id=where)
            caption_1 = field(record, "caption_1", str, file=path, record_id=where)
            tag = field(record, "tag", str, file=path, record_id=where)
            if "secondary_tag" not in record:
                raise DataError("missing field", file=path, record=where, field="secondary_tag")
            secondary = record["secondary_tag"]
            if secondary is None:
                secondary = ""
            if not isinstance(secondary, str):
                raise DataError(f"expected str, got {type(secondary).__name__}",
                                file=path, record=where, field="secondary_tag")
            n_preds = field(record, "num_main_preds", int, file=path, record_id=where)
            collapsed = field(record, "collapsed_tag", str, file=path, record_id=where)
            if collapsed not in SUBSETS:
                raise DataError(f"unknown collapsed_tag {collapsed!r}; known: {', '.join(SUBSETS)}",
                                file=path, record=where, field="collapsed_tag")
            if subset is not None and collapsed != subset:
                continue
            tags = {
                "subset": collapsed,
                "tag": tag,
                "secondary_tag": secondary,
                "collapsed_tag": collapsed,
                "num_main_preds": str(n_preds),
            }
            yield pair_case(str(ex_id), (caption_0, caption_1), refs, tags)
