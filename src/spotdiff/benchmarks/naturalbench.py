"""NaturalBench (Li et al., NeurIPS 2024 D&B): 1,900 natural adversarial samples, each 2 images x 2
questions whose answers differ between the images; Acc, Q-Acc, I-Acc and G-Acc. And its retrieval task,
NaturalBench-Retrieval: image pairs with two captions, text / image / group score.

Reads the hub parquet layout of ``BaiqiL/NaturalBench`` (split train) and builds the prompts as the
authors' ``naturalbench_vqa.py`` (github.com/Baiqi-Li/NaturalBench, commit 9967605) does; the retrieval
task's ``metadata.json`` as ``naturalbench_retrieval.py`` and t2v_metrics read it. Format and rules:
docs/loaders.md; the scores: protocols ``naturalbench`` and ``group`` (docs/protocols.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from spotdiff.benchmarks._io import field, find_file, images_dir, option_choice, read_json
from spotdiff.benchmarks._parquet import find_parquet, iter_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.metadata import Reading
from spotdiff.benchmarks.sources import HubSource, Part, Unpack
from spotdiff.cases import ANSWER_SEP, ANSWERS_TAG, READER_TAG, Case, FileImage
from spotdiff.errors import DataError

#: Question type -> its candidate answers (the first is extract_answer's 1, the second its 0).
ANSWERS = {"yes_no": ("Yes", "No"), "multiple_choice": ("A", "B")}
SUBSETS = tuple(ANSWERS)
#: naturalbench_vqa.py's SUFFIX_FOR_VQA, appended to each question.
SUFFIX = {
    "yes_no": "Please answer Yes or No.",
    "multiple_choice": "Please output the letter corresponding to the correct option.",
}
#: How the suffix joins the question: the authors' script concatenates, lmms-eval puts a space.
JOINS = {"authors": "", "lmms-eval": " "}
PARQUET = ("data/train-*.parquet", "train-*.parquet", "*.parquet")
#: The question-type column: "Question Type" on the card's main revision, "Question_Type" earlier and in
#: the authors' script.
TYPE_COLUMNS = ("Question Type", "Question_Type")
#: ``(question, image)`` -> the gold answer column.
GOLD = {(q, i): f"Image_{i}_Question_{q}" for q in (0, 1) for i in (0, 1)}
#: The gold answers get_scores presumes (it never reads the gold columns): the first candidate for
#: (q0, i0) and (q1, i1), the second for (q0, i1) and (q1, i0); as truth[image, question], the identity.
_PATTERN = np.eye(2, dtype=bool)

CITATION = """\
@inproceedings{naturalbench,
  title     = {{NaturalBench}: Evaluating Vision-Language Models on Natural Adversarial Samples},
  author    = {Li, Baiqi and Lin, Zhiqiu and Peng, Wenxuan and Nyandwi, Jean de Dieu and Jiang, Daniel and
               Ma, Zixian and Khanuja, Simran and Krishna, Ranjay and Neubig, Graham and Ramanan, Deva},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
  year      = {2024}
}
"""


@BENCHMARKS.register("naturalbench")
class NaturalBench(Benchmark):
    option_names = ("suffix",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="NaturalBench (Li et al., NeurIPS 2024)",
        protocols=("naturalbench",),
        subsets=SUBSETS,
        layout="""\
DIR/data/train-*.parquet (the hub dataset BaiqiL/NaturalBench, split train; or DIR/*.parquet): columns
  Index, Image_0, Image_1 (images as bytes), Question_0, Question_1, Image_<i>_Question_<q> (the gold
  answer of question q about image i), Question Type (or Question_Type): yes_no / multiple_choice, Source
case: 2 images [Image_0, Image_1] x 2 questions [Question_<q> + the type's suffix], truth[i, q] = the
  gold answer of (q, i) is the first candidate (Yes / A); candidates Yes/No or A/B (tag answers);
  generated answers read as extract_answer does (tag reader=words); gold answers other than Yes/A for
  (q0, i0), (q1, i1) and No/B for the others (the pattern the authors' get_scores presumes) are an error;
  id <Index>; subset = question type; option suffix=authors (default: question + suffix, as
  naturalbench_vqa.py) or suffix=lmms-eval (question + " " + suffix)
tags: subset, answers, reader, source""",
        description="NaturalBench: 1,900 natural adversarial samples of 2 images x 2 questions with different "
        "answers per image; Acc, Q-Acc, I-Acc, G-Acc (Li et al., NaturalBench, NeurIPS 2024)",
        paper="Li, Lin, Peng, Nyandwi, Jiang, Ma, Khanuja, Krishna, Neubig, Ramanan. NaturalBench: Evaluating "
        "Vision-Language Models on Natural Adversarial Samples. NeurIPS 2024 Datasets and Benchmarks",
        reference="https://github.com/Baiqi-Li/NaturalBench",
        citation=CITATION,
        main_score=("naturalbench", "g_acc"),
        reproduces="the NaturalBench leaderboard of the paper and the hub dataset card (Acc, Q-Acc, I-Acc, G-Acc "
        "of generative VLMs)",
        license="Apache-2.0 (the hub dataset card of BaiqiL/NaturalBench)",
        parts=(
            Part(
                "data",
                "both",
                HubSource("BaiqiL/NaturalBench", None, ("data/train-*.parquet",)),
                license="Apache-2.0",
                note="the train split's parquet (the benchmark's 1,900 samples), images inside; no commit could be "
                "read when this was declared: the fetch records the commit it downloads",
            ),
        ),
        metric_sources=(
            (
                "naturalbench",
                ("gen_acc", "gen_q_acc", "gen_i_acc", "gen_g_acc"),
                "the leaderboard's Acc, Q-Acc, "
                "I-Acc, G-Acc: get_scores on extract_answer's readings of generated answers (naturalbench_vqa.py, "
                "commit 9967605; lmms-eval's naturalbench task)",
            ),
            (
                "naturalbench",
                ("acc", "q_acc", "i_acc", "g_acc"),
                "spotdiff's likelihood reading (the candidates' log-probabilities) scored by get_scores",
            ),
            (
                "naturalbench",
                ("judge_acc", "judge_q_acc", "judge_i_acc", "judge_g_acc"),
                "get_scores on --judge's verdicts (MMVP gpt_grader.py's prompt): spotdiff's judged reading",
            ),
            (
                "naturalbench",
                ("yes_rate", "gen_yes_rate"),
                "spotdiff's diagnostic: the share of Yes answers to "
                "yes/no questions (the answer bias the paper discusses)",
            ),
            ("naturalbench", ("unparsed",), "spotdiff's diagnostic: generated answers extract_answer reads as -1"),
            (
                "naturalbench",
                ("judge_unparsed", "judge_failed"),
                "spotdiff's diagnostics: the judge's replies that are no verdict; its responses without a reply",
            ),
        ),
        readings=(
            Reading(
                "always", "the authors'",
                "extract_answer of naturalbench_vqa.py (github.com/Baiqi-Li/NaturalBench, commit 9967605): the "
                "candidate whose first whole-word, case-insensitive occurrence comes first, neither a wrong answer; "
                "lmms-eval's naturalbench task reads alike (lmms_eval/tasks/naturalbench/utils.py, commit c7eaef37)",
                default=True,
            ),
            Reading("--judge SPEC", "spotdiff's", "a judge model grades each answer (judge_* metrics)"),
        ),
        ties="naturalbench_vqa.py reads generated answers (extract_answer: the earlier of the two candidate "
        "words wins; neither is -1, a wrong answer); for the likelihood reading a tie of the candidates' "
        "log-probabilities gives no answer under --ties strict and the first candidate (Yes / A) under argmax",
    )

    def data_files(self) -> list[Path]:
        return find_parquet(self.root, PARQUET, what="NaturalBench train")

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        join = JOINS[option_choice(self.options, "suffix", JOINS, "authors")]
        columns = ("Index", "Question_0", "Question_1", *GOLD.values(), *(f"?{c}" for c in TYPE_COLUMNS), "?Source")
        for path, row, record in iter_rows(self.data_files(), columns, ("Image_0", "Image_1")):
            self.report.records += 1
            where = f"row {row}"
            kind = _question_type(record, path, where)
            if subset is not None and kind != subset:
                continue
            answers = ANSWERS[kind]
            questions = tuple(
                field(record, f"Question_{q}", str, file=path, record_id=where) + join + SUFFIX[kind] for q in (0, 1)
            )
            truth = np.array([[_gold(record, GOLD[q, i], answers, path, where) for q in (0, 1)] for i in (0, 1)])
            if not (truth == _PATTERN).all():
                raise DataError(
                    f"gold answers {truth.tolist()} (True = {answers[0]}, [image][question]) break the pattern "
                    f"get_scores scores by: {answers[0]} for (q0, i0) and (q1, i1), {answers[1]} for the others",
                    file=path, record=where,
                )  # fmt: skip
            tags = {"subset": kind, ANSWERS_TAG: ANSWER_SEP.join(answers), READER_TAG: "words",
                    "source": str(record["Source"] or "")}  # fmt: skip
            index = field(record, "Index", int, file=path, record_id=where)
            yield Case(str(index), questions, truth, (record["Image_0"], record["Image_1"]), tags)


def _question_type(record: dict, path: Path, where: str) -> str:
    """The row's question type, from whichever of :data:`TYPE_COLUMNS` the file has."""
    present = [c for c in TYPE_COLUMNS if record.get(c) is not None]
    if not present:
        raise DataError(f"no question type (columns {' or '.join(TYPE_COLUMNS)})", file=path, record=where)
    kind = field(record, present[0], str, file=path, record_id=where).strip()
    if kind not in ANSWERS:
        raise DataError(f"unknown question type {kind!r}; known: {', '.join(ANSWERS)}", file=path, record=where,
                        field=present[0])  # fmt: skip
    return kind


def _gold(record: dict, column: str, answers: tuple[str, str], path: Path, where: str) -> bool:
    """True when the gold answer in ``column`` is the first candidate, False when the second."""
    gold = field(record, column, str, file=path, record_id=where).strip()
    by_name = {a.lower(): k for k, a in enumerate(answers)}
    if gold.lower() not in by_name:
        raise DataError(f"gold answer {gold!r} is none of {', '.join(answers)}", file=path, record=where, field=column)
    return by_name[gold.lower()] == 0


#: Where NaturalBench-Retrieval's metadata lies: the archive's content (as ``spotdiff data fetch`` unpacks it),
#: or the archive's top folder (as t2v_metrics unzips it into its ``datasets`` folder).
RETRIEVAL_FILES = ("metadata.json", "NaturalBench-Retrieval/metadata.json")


@BENCHMARKS.register("naturalbench-retrieval")
class NaturalBenchRetrieval(Benchmark):
    option_names = ("images",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="NaturalBench-Retrieval (Li et al., NeurIPS 2024)",
        protocols=("group",),
        subsets=("retrieval",),
        layout="""\
DIR/metadata.json and DIR/images/ (the content of NaturalBench-Retrieval.zip in the hub dataset
  BaiqiL/NaturalBench; or DIR/NaturalBench-Retrieval/..., the archive unzipped as t2v_metrics does):
  [{"index": k (its position), "image_0", "image_1" (file names under images/), "caption_0",
  "caption_1"}, ...]; option images=PATH replaces the images folder
case: 2 images x 2 captions, caption k describes image k (diagonal truth); id <index>; subset retrieval;
  protocol group: text, image, group = t2v_metrics' NaturalBench_Retrieval (get_winoground_acc)""",
        description="NaturalBench-Retrieval: NaturalBench's natural adversarial image pairs with their two "
        "captions; text / image / group score as t2v_metrics evaluates it (Li et al., NaturalBench, NeurIPS 2024)",
        paper="Li, Lin, Peng, Nyandwi, Jiang, Ma, Khanuja, Krishna, Neubig, Ramanan. NaturalBench: Evaluating "
        "Vision-Language Models on Natural Adversarial Samples. NeurIPS 2024 Datasets and Benchmarks",
        reference="https://github.com/Baiqi-Li/NaturalBench",
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="the retrieval task of the NaturalBench README (naturalbench_retrieval.py, commit 9967605; "
        "t2v_metrics dataset.py NaturalBench_Retrieval, commit 6ecb74f): text, image and group score",
        license="Apache-2.0 (the hub dataset card of BaiqiL/NaturalBench)",
        parts=(
            Part(
                "data",
                "both",
                HubSource(
                    "BaiqiL/NaturalBench",
                    None,
                    ("NaturalBench-Retrieval.zip",),
                    unpack=(("NaturalBench-Retrieval.zip", Unpack("", ("metadata.json", "images"))),),
                ),
                license="Apache-2.0",
                note="NaturalBench-Retrieval.zip (about 332 MB, as naturalbench_retrieval.py downloads it), unpacked; "
                "no commit could be read when this was declared: the fetch records the commit it downloads",
            ),
        ),
        metric_sources=(
            (
                "group",
                ("text", "image", "group"),
                "get_retrieval_acc of naturalbench_retrieval.py (commit 9967605), "
                "t2v_metrics' get_winoground_acc (dataset.py, commit 6ecb74f): text, image and group score",
            ),
        ),
        ties="strict, as t2v_metrics' get_winoground_acc and naturalbench_retrieval.py's get_retrieval_acc "
        "(c0_i0 > c1_i0 and c1_i1 > c0_i1, and so on)",
    )

    def data_files(self) -> list[Path]:
        return [find_file(self.root, RETRIEVAL_FILES, what="NaturalBench-Retrieval metadata.json")]

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        (path,) = self.data_files()
        images = images_dir(path.parent, self.options)
        data = read_json(path)
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of samples, got {type(data).__name__}", file=path)
        for k, record in enumerate(data):
            self.report.records += 1
            index = field(record, "index", int, file=path, record_id=k)
            if index != k:  # t2v_metrics asserts metadata[idx]["index"] == idx
                raise DataError(f"index {index} at position {k}", file=path, record=k, field="index")
            names = [field(record, f"image_{i}", str, file=path, record_id=k).strip() for i in (0, 1)]
            captions = tuple(field(record, f"caption_{i}", str, file=path, record_id=k).strip() for i in (0, 1))
            refs = (FileImage(images / names[0]), FileImage(images / names[1]))
            yield pair_case(str(index), captions, refs, {"subset": "retrieval"})
