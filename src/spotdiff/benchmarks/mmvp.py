"""MMVP (Tong et al., "Eyes Wide Shut?", CVPR 2024): 150 pairs of "CLIP-blind" images, each image with
a two-option question; a chat VLM's pair counts only when it answers both questions right.

Reads ``Questions.csv`` and ``MMVP Images/<n>.jpg`` as the authors' ``scripts/evaluate_mllm.py``
(github.com/tsb0601/MMVP, commit 7635005) does, and asks each question as lmms-eval's mmvp task
words it (the options lettered A, B; :data:`PROMPT`); option ``labels`` applies lmms-eval's
corrections of four answers. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from spotdiff.benchmarks._io import find_file, images_dir, option_choice, read_csv_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.metadata import Reading
from spotdiff.benchmarks.sources import HubSource, Part
from spotdiff.cases import ANSWER_SEP, ANSWERS_TAG, LETTERS, PAIRS_TAG, READER_TAG, Case, FileImage
from spotdiff.errors import DataError

#: The columns evaluate_mllm.py reads (the first column, the 1-based Index, is read by position).
COLUMNS = ("Question", "Options", "Correct Answer")
#: The image folder evaluate_mllm.py reads, ``<folder>/<row number>.jpg``.
IMAGE_FOLDER = "MMVP Images"
#: Answer corrections by 1-based Index -> right option (0 = (a)), per setting of option ``labels``.
#: ``lmms-eval``: lmms-eval's current MMVP task (lmms_eval/tasks/mmvp/utils.py at commit d8fcb9c3, PR
#: 1210; the corrected dataset lmms-lab-eval/MMVP) swaps the answers of pairs 99/100 (elephant tusks)
#: and 279/280 (elderly person standing or sitting), as MMVP issues 14 and 30 report.
#: ``lmms-eval-pr1028``: the first version, PR 1028 (commit 34465550): ``GROUND_TRUTH_CORRECTIONS =
#: {99: "A", 279: "A"}`` on 0-based row numbers, i.e. Index 100 and 280 set to (a) and 99, 279 kept.
CORRECTIONS: dict[str, dict[int, int]] = {
    "original": {},
    "lmms-eval": {99: 1, 100: 0, 279: 1, 280: 0},
    "lmms-eval-pr1028": {100: 0, 280: 0},
}
#: lmms-eval's mmvp prompt (lmms_eval/tasks/mmvp/utils.py ``mmvp_doc_to_text`` with the task's
#: post_prompt), the options lettered ``A. ...`` one per line.
PROMPT = "{question}\n{options}\nAnswer with the option's letter from the given choices directly."
#: How a generated answer is read, per setting of option ``reader`` (a name of :data:`spotdiff.cases.READERS`),
#: the default first: ``lmms-eval`` as lmms-eval's ``_extract_answer_letter`` reads it, quirks included;
#: ``corrected`` in its order without the quirks; ``strict`` the letter alone.
READERS = {"lmms-eval": "letter-lmms-eval", "corrected": "letter-lmms-corrected", "strict": "letter"}
#: The readings of generated answers, as ``spotdiff benchmarks mmvp`` lists them.
READINGS = (
    Reading(
        "-o reader=lmms-eval", "lmms-eval's",
        "_extract_answer_letter of lmms_eval/tasks/mmvp/utils.py (commit d8fcb9c3, unchanged at 75571cfe), quirks "
        "included: case-insensitive, the letter alone, opening the answer, after 'answer is' or 'option', then any "
        "A or B before white space or the end ('It is a cat' is A, 'Bob sits' B), else the answer's first letter "
        "('Apple' A, 'Both' B); gen_question and gen_pair are then its mmvp_accuracy and mmvp_pair_accuracy",
        default=True,
    ),
    Reading(
        "-o reader=corrected", "spotdiff's",
        "lmms-eval's order without those quirks (a lower-case letter only alone or in parentheses, a letter only as "
        "a whole word, an opening 'A' before a lower-case word starting with a consonant is the article, no "
        "first-letter fallback): the two read a bare letter alike and differ on the article 'a', an opening 'A', "
        "words' first and last letters; on the ten free-form pairs of tests/benchmarks/test_mmvp.py (FREE_FORM), "
        "pair and question accuracy 40.0 and 55.0 here against 70.0 and 75.0 by lmms-eval's reading",
    ),
    Reading("-o reader=strict", "spotdiff's", "the letter alone, optionally (B), B. or B: (parse_choice)"),
    Reading(
        "--judge SPEC", "the authors'",
        "scripts/gpt_grader.py (commit 7635005): GPT-4 grades each free answer against the gold option; a judge "
        "model graded so gives the judge_* metrics beside the reader's gen_*",
    ),
)  # fmt: skip
_OPTION = re.compile(r"\(([a-z])\)\s*")
_ANSWER = re.compile(r"^\(?([a-z])\)?(?:\s|$)")

CITATION = """\
@inproceedings{tong2024eyes,
  title     = {Eyes Wide Shut? Exploring the Visual Shortcomings of Multimodal {LLMs}},
  author    = {Tong, Shengbang and Liu, Zhuang and Zhai, Yuexiang and Ma, Yi and LeCun, Yann and Xie, Saining},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2024}
}
"""


def parse_options(text: str) -> tuple[str, ...]:
    """The two option texts of an MMVP ``Options`` cell, ``"(a) Yes (b) No"``, lettered (a), (b) in order.

    >>> parse_options("(a) Towards the camera (b) Away from the camera")
    ('Towards the camera', 'Away from the camera')
    """
    parts = _OPTION.split(text.strip())
    letters, options = parts[1::2], tuple(p.strip() for p in parts[2::2])
    expected = [chr(ord("a") + k) for k in range(len(letters))]
    if parts[0].strip() or len(letters) != 2 or letters != expected or not all(options):
        raise ValueError(f"expected '(a) ... (b) ...' (two options), got {text!r:.80}")
    return options


def prompt(question: str, options: tuple[str, ...]) -> str:
    """The question as lmms-eval's mmvp task asks it (:data:`PROMPT`), its options lettered A, B, ...

    >>> print(prompt("Are the feet visible?", ("Yes", "No")))
    Are the feet visible?
    A. Yes
    B. No
    Answer with the option's letter from the given choices directly.
    """
    listed = "\n".join(f"{LETTERS[k]}. {option}" for k, option in enumerate(options))
    return PROMPT.format(question=question, options=listed)


def parse_answer(text: str, n_options: int) -> int:
    """The option index of an MMVP ``Correct Answer`` cell (``"(a)"`` -> 0), as lmms-eval normalises it.

    >>> parse_answer("(b)", 2), parse_answer(" (a) Yes", 2)
    (1, 0)
    """
    m = _ANSWER.match(text.strip().lower())
    index = ord(m.group(1)) - ord("a") if m else -1
    if not 0 <= index < n_options:
        raise ValueError(f"expected one of (a) to ({chr(ord('a') + n_options - 1)}), got {text!r:.40}")
    return index


@BENCHMARKS.register("mmvp")
class MMVP(Benchmark):
    option_names = ("labels", "images", "reader")  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="MMVP (Tong et al., CVPR 2024)",
        protocols=("answer",),
        subsets=("mmvp",),
        layout=f"""\
DIR/Questions.csv: a header (Index, Question, Options, Correct Answer), then 300 rows; row n (1-based,
  its Index) asks about DIR/{IMAGE_FOLDER}/<n>.jpg (option images=PATH replaces DIR/{IMAGE_FOLDER});
  Options "(a) ... (b) ...", Correct Answer "(a)" or "(b)"; rows 2k+1 and 2k+2 are pair k (both
  evaluate_mllm.py + gpt_grader.py and lmms-eval's mmvp task pair them so)
case: the pair's 2 images x 1 question (2 x 2 when its rows differ, image i asked question i only: tag
  pairs=diagonal): texts = (the
  Question asked as lmms-eval's mmvp task words it: the question, "A. <option a>", "B. <option b>" on
  their own lines, "Answer with the option's letter from the given choices directly."); candidates
  A/B (tag answers), generated answers read as lmms-eval's _extract_answer_letter reads them, quirks
  included (tag reader=letter-lmms-eval), or with option reader=corrected in its order without its quirks
  (reader=letter-lmms-corrected), or with reader=strict the letter alone (reader=letter): the readings below;
  truth[i, 0] = image i's Correct Answer is (a); id <Index of the first row>; subset mmvp; protocol
  answer: pair = pair accuracy (the paper's), question = accuracy per question (lmms-eval's mmvp_accuracy)
option labels=original (default) | lmms-eval | lmms-eval-pr1028: the answers as published, or with
  lmms-eval's corrections (lmms-eval: Index 99 -> (b), 100 -> (a), 279 -> (b), 280 -> (a), commit
  d8fcb9c3; lmms-eval-pr1028: Index 100 -> (a), 280 -> (a), PR 1028, commit 34465550)
tags: subset, answers (A/B), reader (the reading's tag), labels (the setting used), corrected (yes when the setting
  changed an answer of the pair), pairs (diagonal, when the pair's rows differ)""",
        description="MMVP: 150 CLIP-blind image pairs, a two-option question per image; a chat VLM's pair "
        "accuracy, both questions right (Tong et al., Eyes Wide Shut?, CVPR 2024)",
        paper="Tong, Liu, Zhai, Ma, LeCun, Xie. Eyes Wide Shut? Exploring the Visual Shortcomings of "
        "Multimodal LLMs. CVPR 2024",
        reference="https://github.com/tsb0601/MMVP",
        citation=CITATION,
        main_score=("answer", "pair"),
        reproduces="MMVP Sec. 3 (the MMVP benchmark: MLLMs' accuracy over question pairs); the authors grade free "
        "answers with GPT-4 (scripts/gpt_grader.py), this protocol reads the option letter",
        license="MIT (the README of github.com/tsb0601/MMVP; its tree has no LICENSE file at commit 7635005)",
        parts=(
            Part(
                "data",
                "both",
                HubSource("MMVP/MMVP", None, ("Questions.csv", f"{IMAGE_FOLDER}/*")),
                license="MIT (README)",
                note="Questions.csv and its image folder, as evaluate_mllm.py reads them; no commit could be read "
                "when this was declared: the fetch records the commit it downloads",
            ),
        ),
        metric_sources=(
            (
                "answer",
                ("judge_pair",),
                "the paper's MMVP accuracy (Sec. 3) as the authors graded it: pairs both of "
                "whose free answers GPT-4 grades right (scripts/gpt_grader.py, commit 7635005), the grader of --judge",
            ),
            ("answer", ("judge_question",), "each question graded right by the judge"),
            (
                "answer",
                ("gen_pair",),
                "the pair accuracy of the letter the case's reader reads: with the default reader, lmms-eval's "
                "mmvp_pair_accuracy (gpt_grader.py's accumulation)",
            ),
            ("answer", ("gen_question",), "with the default reader, lmms-eval's mmvp_accuracy (each question)"),
            (
                "answer",
                ("pair",),
                "spotdiff's likelihood reading (the option letters' log-probabilities) as the pair accuracy",
            ),
            ("answer", ("question",), "spotdiff's likelihood reading as mmvp_accuracy"),
            ("answer", ("no_answer",), "spotdiff's diagnostic: questions the likelihood reading answers none of"),
            ("answer", ("unparsed",), "spotdiff's diagnostic: generated answers that name no letter"),
            (
                "answer",
                ("judge_unparsed", "judge_failed"),
                "spotdiff's diagnostics: the judge's replies that are no verdict; its responses without a reply",
            ),
        ),
        readings=READINGS,
        ties="the likelihood reading: a tie of the option letters' log-probabilities is no answer (strict) or "
        "the first option (argmax, np.argmax); the authors' code grades generated answers (gpt_grader.py: "
        "a pair is right when both its answers are graded yes), where no tie arises",
    )

    def data_files(self) -> list[Path]:
        return [find_file(self.root, ("Questions.csv",), what="MMVP Questions.csv")]

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        labels = option_choice(self.options, "labels", tuple(CORRECTIONS), "original")
        reader = READERS[option_choice(self.options, "reader", tuple(READERS), next(iter(READERS)))]
        (path,) = self.data_files()
        images = images_dir(self.root, self.options, IMAGE_FOLDER)
        rows = read_csv_rows(path, COLUMNS)
        if len(rows) % 2:
            raise DataError(f"{len(rows)} rows: questions come in pairs", file=path)
        for k in range(0, len(rows), 2):
            self.report.records += 2
            read = [_row(path, line, cells, k + j + 1) for j, (line, cells) in enumerate(rows[k : k + 2])]
            (q1, options, a1), (q2, other, a2) = read
            if len(other) != len(options):
                raise DataError(f"{len(other)} options where the pair's first row has {len(options)}",
                                file=path, record=f"line {rows[k + 1][0]}", field="Options")  # fmt: skip
            fixes = CORRECTIONS[labels]
            answers = [fixes.get(k + j + 1, a) for j, a in enumerate((a1, a2))]
            texts = (prompt(q1, options),) if (q1, options) == (q2, other) else (prompt(q1, options), prompt(q2, other))
            truth = np.repeat(np.array(answers)[:, None] == 0, len(texts), axis=1)  # image i's gold, any question
            refs = (FileImage(images / f"{k + 1}.jpg"), FileImage(images / f"{k + 2}.jpg"))
            tags = {"subset": "mmvp", ANSWERS_TAG: ANSWER_SEP.join(LETTERS[: len(options)]), READER_TAG: reader,
                    "labels": labels, "corrected": "yes" if answers != [a1, a2] else "no"}  # fmt: skip
            if len(texts) == 2:  # each image is asked its own row's question only, as evaluate_mllm.py asks it
                tags[PAIRS_TAG] = "diagonal"
            yield Case(str(k + 1), texts, truth, refs, tags)


def _row(path: Path, line: int, cells: dict[str, str], number: int) -> tuple[str, tuple[str, ...], int]:
    """``(question, options, answer index)`` of CSV row ``number`` (1-based), checked."""
    index = next(iter(cells.values())).strip()
    if index != str(number):
        raise DataError(f"row {number} has Index {index!r:.20}; evaluate_mllm.py reads image {number}.jpg for it",
                        file=path, record=f"line {line}", field=next(iter(cells)))  # fmt: skip
    question = cells["Question"].strip()
    if not question:
        raise DataError("empty", file=path, record=f"line {line}", field="Question")
    try:
        options = parse_options(cells["Options"])
    except ValueError as exc:
        raise DataError(str(exc), file=path, record=f"line {line}", field="Options") from exc
    try:
        answer = parse_answer(cells["Correct Answer"], len(options))
    except ValueError as exc:
        raise DataError(str(exc), file=path, record=f"line {line}", field="Correct Answer") from exc
    return question, options, answer
