"""VisMin (Awal et al., NeurIPS 2024): pairs of images with a minimal change (object, attribute, count,
spatial relation) and their two captions; Winoground's text / image / group scores per category.

Reads the hub dataset ``mair-lab/vismin-bench`` (split test: its ``save_to_disk`` Arrow shards, or the
hub's parquet conversion), the columns that the authors' ``vismin-bench/eval.py`` (github.com/rabiulcste/vismin,
commit 29ce2c0) reads. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import field, option_choice
from spotdiff.benchmarks._parquet import find_parquet, iter_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.metadata import Reading
from spotdiff.benchmarks.sources import HubSource, Part
from spotdiff.cases import PROMPTS_TAG, Case
from spotdiff.errors import DataError

#: The ``category`` values of the test split (vismin-bench/solutions/vqa_solution.csv: 579 object,
#: 294 attribute, 622 relation, 589 counting), in the order of the paper's tables.
SUBSETS = ("object", "attribute", "relation", "counting")
#: The hub's own files (``datasets`` save_to_disk: Arrow stream shards of split test), then its parquet
#: conversion (revision refs/convert/parquet), then a parquet export of the split.
FILES = ("data/test/data-*.arrow", "test/data-*.arrow", "default/test/*.parquet", "data/test-*.parquet", "*.parquet")

#: How generated answers are read, per setting of option ``reader`` (a question style of
#: :data:`spotdiff.cases.PROMPT_STYLES`), the default first: as the authors read them, or naming one option only.
READERS = {"authors": "vismin-authors", "strict": "vismin-strict"}
#: The readings of generated answers, as ``spotdiff benchmarks vismin`` lists them.
READINGS = (
    Reading(
        "-o reader=authors", "the authors'",
        "evals/mllm_inference.py matches each answer against its gold label only (evals/metrics/itm.py "
        "is_match_with_label, commit 29ce2c0): an answer naming both options ('A or B', 'the first, not the "
        "second') is right, one naming none wrong; gen_* are then compute_mllm_score_itg's scores",
        default=True,
    ),
    Reading(
        "-o reader=strict", "spotdiff's",
        "is_match_with_label's matches, one option only: an answer naming both options is no answer, counted in "
        "unparsed with those naming none; on the 20 pairs of tests/benchmarks/test_mllm_paths.py's "
        "VISMIN_FREE_FORM (6 with an answer naming both), text score 55.0 here against 85.0 by the authors' reading",
    ),
)  # fmt: skip

CITATION = """\
@inproceedings{awal2024vismin,
  title     = {{VisMin}: Visual Minimal-Change Understanding},
  author    = {Awal, Rabiul and Ahmadi, Saba and Zhang, Le and Agrawal, Aishwarya},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2024}
}
"""


@BENCHMARKS.register("vismin")
class VisMin(Benchmark):
    option_names = ("reader",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="VisMin (Awal et al., NeurIPS 2024)",
        protocols=("group", "mllm", "mllm-text"),
        subsets=SUBSETS,
        layout="""\
DIR/data/test/data-*.arrow (the hub dataset mair-lab/vismin-bench: datasets' save_to_disk shards of split
  test), or its parquet conversion DIR/default/test/*.parquet (revision refs/convert/parquet; or
  DIR/data/test-*.parquet, DIR/*.parquet): columns id, image_0, text_0, image_1, text_1 (images as
  bytes), category (object/attribute/relation/counting); the MLLM question columns (text_question_k,
  image_question_k) are not read
case: 2 images [image_0, image_1] x 2 captions [text_0, text_1], text_k describes image_k (diagonal
  truth); id <category>/<id> (the hub's ids restart at 0 in each category); subset = category
tags: subset, prompts (vismin-authors, or vismin-strict with option reader=strict)
protocol mllm (chat VLMs, need choice): the authors' MLLM questions (evals/dataset_zoo/task_prompts.py,
  commit 29ce2c0), once in the case's order: per image "Does this image best match: (A) <text_0>, or (B)
  <text_1>? Choices: A, B." (gold A for image_0, B for image_1), per caption both images and "Which image
  better aligns with the description: "<text_k>"? Choices: First, Second." (gold First for text_0);
  generated answers read by evals/metrics/itm.py's is_match_with_label against the gold label, as the
  authors read them (an answer matching both options is right), or with option reader=strict matching one
  option only (both or none: no answer); text, image, group = compute_mllm_score_itg's; mllm-text: the
  caption questions""",
        description="VisMin: 2,084 image pairs with one minimal change (object, attribute, count, spatial "
        "relation) and their captions; text / image / group score per category (Awal et al., VisMin, "
        "NeurIPS 2024)",
        paper="Awal, Ahmadi, Zhang, Agrawal. VisMin: Visual Minimal-Change Understanding. NeurIPS 2024",
        reference="https://github.com/rabiulcste/vismin",
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="VisMin Table 2 (foundational VLMs: image, text and group score per category; protocol mllm: "
        "the MLLM rows, compute_mllm_score_itg)",
        license="CC BY 4.0 (the hub dataset card of mair-lab/vismin-bench)",
        parts=(
            Part(
                "data",
                "both",
                HubSource("mair-lab/vismin-bench", None, ("data/test/*",)),
                license="CC BY 4.0",
                note="datasets' save_to_disk shards of split test, images inside (the parquet conversion at revision "
                "refs/convert/parquet is read too, downloaded by hand); no commit could be read when this was "
                "declared: the fetch records the commit it downloads",
            ),
        ),
        metric_sources=(
            (
                "group",
                ("text", "image", "group"),
                "Table 2's foundational VLMs: metric.py's "
                "compute_contrastive_accuracy per category (vismin-bench, commit 29ce2c0)",
            ),
            (
                "mllm",
                ("gen_text", "gen_image", "gen_group"),
                "Table 2's MLLMs: compute_mllm_score_itg on "
                "is_match_with_label's readings of generated answers (evals/metrics/itm.py)",
            ),
            (
                "mllm",
                ("text", "image", "group"),
                "spotdiff's likelihood reading of the authors' questions (the "
                "option label most likely as the answer), scored as compute_mllm_score_itg scores",
            ),
            ("mllm", ("no_answer",), "spotdiff's diagnostic: questions the likelihood reading answers none of"),
            (
                "mllm",
                ("unparsed",),
                "spotdiff's diagnostic: generated answers matching no label (or both, under reader=strict)",
            ),
            ("mllm-text", ("gen_text",), "compute_mllm_score_itg's text score (caption questions only)"),
            ("mllm-text", ("text",), "spotdiff's likelihood reading of the caption questions"),
            ("mllm-text", ("no_answer",), "spotdiff's diagnostic, as protocol mllm's"),
            ("mllm-text", ("unparsed",), "spotdiff's diagnostic, as protocol mllm's"),
        ),
        readings=READINGS,
        ties="strict, as VisMin's compute_contrastive_accuracy (vismin-bench/metric.py, commit 29ce2c0: "
        "T0_I0 > T1_I0 and T1_I1 > T0_I1 and so on)",
    )

    def data_files(self) -> list[Path]:
        return find_parquet(self.root, FILES, what="VisMin test (Arrow or parquet)")

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        style = READERS[option_choice(self.options, "reader", tuple(READERS), next(iter(READERS)))]
        for path, row, record in iter_rows(self.data_files(), ("id", "text_0", "text_1", "category"),
                                           ("image_0", "image_1")):  # fmt: skip
            self.report.records += 1
            where = f"row {row}"
            ex_id = field(record, "id", int, file=path, record_id=where)
            texts = tuple(field(record, k, str, file=path, record_id=where).strip() for k in ("text_0", "text_1"))
            category = field(record, "category", str, file=path, record_id=where).strip()
            if category not in SUBSETS:
                raise DataError(f"unknown category {category!r}; known: {', '.join(SUBSETS)}", file=path,
                                record=where, field="category")  # fmt: skip
            if subset is not None and category != subset:
                continue
            case_id = f"{category}/{ex_id}"  # the hub's ids restart at 0 in each category
            tags = {"subset": category, PROMPTS_TAG: style}
            yield pair_case(case_id, texts, (record["image_0"], record["image_1"]), tags)
