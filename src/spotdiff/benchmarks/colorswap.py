"""ColorSwap (Burapacheep et al., 2024): pairs of images whose captions use the same words with the
colour words swapped between objects; Winoground's text / image / group scores.

Reads the README layout of github.com/Top34051/colorswap (``<split>.json`` + ``images/``) or the hub
parquet layout (``stanfordnlp/colorswap``: the same fields, images as bytes). Format: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import field, option_choice, read_json
from spotdiff.benchmarks._parquet import find_parquet, iter_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.metadata import Reading
from spotdiff.benchmarks.sources import HubSource, Part
from spotdiff.cases import PROMPTS_TAG, Case, FileImage, ImageRef
from spotdiff.errors import ConfigError, DataError

SPLITS = ("test", "train")
_FIELDS = ("caption_1", "caption_2", "image_source", "caption_source")

CITATION = """\
@article{burapacheep2024colorswap,
  author  = {Jirayu Burapacheep and Ishan Gaur and Agam Bhatia and Tristan Thrush},
  title   = {ColorSwap: A Color and Word Order Dataset for Multimodal Evaluation},
  journal = {arXiv},
  year    = {2024}
}
"""


@BENCHMARKS.register("colorswap")
class ColorSwap(Benchmark):
    option_names = ("split", "images")  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="ColorSwap (Burapacheep et al., 2024)",
        protocols=("group", "mllm", "mllm-text"),
        subsets=SPLITS,
        layout="""\
DIR/<split>.json (or DIR/data/<split>.json; split = option split, test by default), as the README of
  github.com/Top34051/colorswap: [{"id": int, "caption_1", "caption_2", "image_1": "images/img_<id>_1.png",
  "image_2", "image_source", "caption_source"}, ...]; images DIR/<image_k> (option images=PATH replaces DIR)
or the hub parquet layout DIR/data/<split>-*.parquet with the same columns, images as bytes
case: 2 images x 2 captions, caption k describes image k (diagonal truth); id <id>; subset = the split
tags: subset, image_source, caption_source, prompts (colorswap)
protocol mllm (chat VLMs, need choice): the questions of the authors' vlm_results (commit 4f2c9e4), once in
  the case's order: per image "Does this image present (A) <caption_1>, or (B) <caption_2>? Note, you must
  choose one of the two options" (gold A for image_1), per caption both images and "Which image better
  aligns with the description <caption>? The first image or the second image? Note you must choose one of
  two options." (gold first for caption_1); generated answers read by vlm_eval.py's is_option_text and
  is_option_image (both options or none: no answer); text, image, group as vlm_eval.py; the authors drew
  the option and image order at random per question, spotdiff asks in the case's; mllm-text: the caption
  questions""",
        description="ColorSwap: 1,000 image pairs whose captions swap colour words between objects; "
        "Winoground text / image / group scores (Burapacheep et al., ColorSwap, 2024)",
        paper="Burapacheep, Gaur, Bhatia, Thrush. ColorSwap: A Color and Word Order Dataset for Multimodal "
        "Evaluation. Findings of ACL 2024 (arXiv:2402.04492)",
        reference="https://github.com/Top34051/colorswap",
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="ColorSwap Table 2 (ITM models: text, image, group score on the test split; protocol mllm: the "
        "VLM rows, vlm_eval.py)",
        license="MIT (github.com/Top34051/colorswap LICENSE)",
        parts=(
            Part(
                "data",
                "both",
                HubSource("stanfordnlp/colorswap", None, ("data/*.parquet",), gated=True),
                license="MIT",
                note="both splits' parquet, images inside (or the README's Google Drive archive unpacked by hand); "
                "no commit could be read when this was declared: the fetch records the commit it downloads",
            ),
        ),
        metric_sources=(
            (
                "group",
                ("text", "image", "group"),
                "Table 2's ITM models: Winoground's text, image and group score "
                "(the authors' Colab notebook; the paper follows Winoground's definitions)",
            ),
            (
                "mllm",
                ("gen_text", "gen_image", "gen_group"),
                "the paper's VLM results (GPT-4V, LLaVA, LLaVAR): "
                "vlm_eval.py's text, image and group score of generated answers (commit 4f2c9e4)",
            ),
            (
                "mllm",
                ("text", "image", "group"),
                "spotdiff's likelihood reading of the authors' questions (the "
                "option label most likely as the answer), scored as vlm_eval.py scores",
            ),
            ("mllm", ("no_answer",), "spotdiff's diagnostic: questions the likelihood reading answers none of"),
            (
                "mllm",
                ("unparsed",),
                "spotdiff's diagnostic: generated answers vlm_eval.py reads as naming neither option or both",
            ),
            ("mllm-text", ("gen_text",), "vlm_eval.py's text score of generated answers (caption questions only)"),
            ("mllm-text", ("text",), "spotdiff's likelihood reading of the caption questions"),
            ("mllm-text", ("no_answer",), "spotdiff's diagnostic, as protocol mllm's"),
            ("mllm-text", ("unparsed",), "spotdiff's diagnostic, as protocol mllm's"),
        ),
        readings=(
            Reading(
                "always", "the authors'",
                "vlm_eval.py's is_option_text and is_option_image (github.com/Top34051/colorswap, commit 4f2c9e4): "
                "an answer that chooses one option is that option; one naming both or none is no answer (unparsed)",
                default=True,
            ),
        ),
        ties="strict: the ITM evaluation is a Colab notebook outside the repository; the paper takes "
        "Winoground's scores, whose code compares with strict >",
    )

    @property
    def split(self) -> str:
        return option_choice(self.options, "split", SPLITS, "test")

    def check_subset(self, subset: str | None) -> None:
        if subset is not None and subset != self.split:
            raise ConfigError(f"benchmark 'colorswap' reads one split (split={self.split}); its subset is the split")

    def _json(self) -> Path | None:
        return next((p for p in (self.root / f"{self.split}.json", self.root / "data" / f"{self.split}.json")
                     if p.is_file()), None)  # fmt: skip

    def data_files(self) -> list[Path]:
        path = self._json()
        if path is not None:
            return [path]
        patterns = (f"data/{self.split}-*.parquet", f"{self.split}-*.parquet")
        return find_parquet(self.root, patterns, what=f"ColorSwap {self.split} (no {self.split}.json either)")

    def _records(self) -> Iterator[tuple[Path, str, object, tuple[ImageRef, ImageRef] | None]]:
        path = self._json()
        if path is None:
            for file, row, record in iter_rows(self.data_files(), ("id", *_FIELDS), ("image_1", "image_2")):
                yield file, f"row {row}", record, (record["image_1"], record["image_2"])
            return
        data = read_json(path)
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of examples, got {type(data).__name__}", file=path)
        for k, record in enumerate(data):
            yield path, str(k), record, None

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        base = Path(str(self.options["images"])).expanduser() if self.options.get("images") else None
        for path, label, record, refs in self._records():
            self.report.records += 1
            ex_id = field(record, "id", int, file=path, record_id=label)
            values = {k: field(record, k, str, file=path, record_id=label).strip() for k in _FIELDS}
            if refs is None:
                root = base or path.parent
                refs = tuple(FileImage(root / field(record, k, str, file=path, record_id=label))
                             for k in ("image_1", "image_2"))  # fmt: skip
            tags = {"subset": self.split, "image_source": values["image_source"],
                    "caption_source": values["caption_source"], PROMPTS_TAG: "colorswap"}  # fmt: skip
            yield pair_case(str(ex_id), (values["caption_1"], values["caption_2"]), refs, tags)
