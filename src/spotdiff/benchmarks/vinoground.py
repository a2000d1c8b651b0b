"""Vinoground (Zhang, Cai and Lee, 2024): 500 pairs of short natural videos whose captions hold the same words
in another temporal order ("the man opens the door, then sits" / "... sits, then opens the door").

``vinoground`` reads ``vinoground.csv`` and ``vinoground_videos/`` of the gated hub dataset
HanSolo9682/Vinoground and scores them as the authors' ``eval/imagebind_eval.py`` scores contrastive models
(text, video and group score, strict ``>``); ``vinoground-lmm`` asks a chat model the authors' text-score and
video-score questions (``vinoground_textscore.json``, ``vinoground_videoscore.json``) and scores the answers as
``get_score_all.py`` does. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from spotdiff.benchmarks._io import field, find_file, option_choice, read_csv_rows, read_json
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.metadata import Reading
from spotdiff.benchmarks.sources import ImagesSource, Part
from spotdiff.cases import ANSWERS_TAG, PAIRS_TAG, READER_TAG, Case
from spotdiff.errors import DataError
from spotdiff.video.clips import VideoRef

#: The major categories (``vinoground.csv``'s ``major``), the subsets.
SUBSETS = ("action", "object", "viewpoint")
#: The minor categories (``minor``, ``;``-separated, possibly none).
MINORS = ("interaction", "cyclical", "spatial", "contextual")
COLUMNS = ("index", "major", "minor", "pos_vid", "pos_start", "pos_end", "pos_cap", "neg_vid", "neg_start",
           "neg_end", "neg_cap")  # fmt: skip
#: Where the hub dataset's files lie: the benchmark folder itself, or the shared copy linked into it.
FOLDERS = ("", "Vinoground")

CITATION = """\
@article{zhang2024vinoground,
  title   = {Vinoground: Scrutinizing {LMMs} over Dense Temporal Reasoning with Short Videos},
  author  = {Zhang, Jianrui and Cai, Mu and Lee, Yong Jae},
  journal = {arXiv preprint arXiv:2410.02763},
  year    = {2024}
}
"""

#: The hub dataset, fetched once into the data home's shared folder and linked as ``Vinoground/``.
DATA = Part(
    "data",
    "both",
    ImagesSource((("vinoground-hub", ""),), "Vinoground"),
    license="the hub dataset card's terms (gated)",
    note="the whole gated hub dataset HanSolo9682/Vinoground (its two video archives unpacked), shared with "
    "vinoground-lmm; no commit could be read when this was declared: the fetch records the one it downloads",
)



def data_folder(root: Path) -> Path:
    """The folder holding ``vinoground.csv``: ``root``, or the shared copy ``root/Vinoground``."""
    return find_file(root, [f"{d}/vinoground.csv" if d else "vinoground.csv" for d in FOLDERS],
                     what="Vinoground vinoground.csv").parent  # fmt: skip


def categories(row: dict[str, str]) -> tuple[str, list[str]]:
    """A CSV row's major category and its minor ones (``minor`` split at ``;``, blanks dropped)."""
    return row["major"].strip(), [m.strip() for m in row["minor"].split(";") if m.strip()]


def read_pairs(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """The CSV's rows as ``(index, row)``, checked: the index is the row's position (the authors name the
    videos by position, ``vinoground_videos/{i}_pos.mp4``), the major category is known, the captions are
    not empty.

    Args:
        path: ``vinoground.csv``.
    """
    for position, (line, row) in enumerate(read_csv_rows(path, COLUMNS)):
        where = f"line {line}"
        if row["index"].strip() != str(position):
            raise DataError(f"index {row['index']!r} at position {position}", file=path, record=where, field="index")
        major, _ = categories(row)
        if major not in SUBSETS:
            raise DataError(f"unknown major category {major!r}; known: {', '.join(SUBSETS)}", file=path,
                            record=where, field="major")  # fmt: skip
        for column in ("pos_cap", "neg_cap"):
            if not row[column].strip():
                raise DataError("empty caption", file=path, record=where, field=column)
        yield position, row


@BENCHMARKS.register("vinoground")
class Vinoground(Benchmark):
    metadata = BenchmarkMetadata(
        title="Vinoground (Zhang et al., 2024)",
        protocols=("group",),
        subsets=SUBSETS,
        layout="""\
DIR/vinoground.csv (or DIR/Vinoground/..., as spotdiff data fetch links the shared copy): columns index,
  major, minor (";"-separated, may be empty), pos_vid, pos_start, pos_end, pos_cap, neg_vid, neg_start,
  neg_end, neg_cap; index = the row's position
videos: DIR/vinoground_videos/<index>_pos.mp4 and <index>_neg.mp4 (the hub's vinoground_videos.zip, unpacked)
case: 2 videos [pos, neg] x 2 captions [pos_cap, neg_cap], caption k describes video k (diagonal truth);
  id <index>; subset = major (action, object, viewpoint); protocol group: text, image (the video score) and
  group, as eval/imagebind_eval.py
tags: subset, major, minor (the minor categories joined by ";", empty when none), pos_vid, neg_vid""",
        description="Vinoground: 500 pairs of short videos whose captions differ only in temporal order; text, "
        "video and group score (Zhang et al., Vinoground, 2024)",
        paper="Zhang, Cai, Lee. Vinoground: Scrutinizing LMMs over Dense Temporal Reasoning with Short Videos. "
        "arXiv:2410.02763, 2024",
        reference="https://github.com/Vinoground/Vinoground",
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="Vinoground Table 2's CLIP-style models (text, video and group score)",
        license="the hub dataset card's terms (gated); the videos are clips of YouTube videos",
        parts=(DATA,),
        data_notes="Gated: log in at huggingface.co, accept the conditions on the dataset page, create a read token "
        "and set HF_TOKEN (or run `hf auth login`).",
        metric_sources=(
            (
                "group",
                ("text", "image", "group"),
                "eval/imagebind_eval.py of Vinoground/Vinoground (commit 06a5715): text_correct (each video prefers "
                "its caption), video_correct (each caption prefers its video: protocol group's image score) and "
                "group_correct, divided by the pairs",
            ),
        ),
        ties="strict, as eval/imagebind_eval.py (results[0][0] > results[1][0] and so on); --ties argmax counts a "
        "tie for the first listed",
    )

    def data_files(self) -> list[Path]:
        return [data_folder(self.root) / "vinoground.csv"]

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        (path,) = self.data_files()
        videos = path.parent / "vinoground_videos"
        for index, row in read_pairs(path):
            self.report.records += 1
            major, minors = categories(row)
            if subset is not None and major != subset:
                continue
            tags = {"subset": major, "major": major, "minor": ";".join(minors), "pos_vid": row["pos_vid"],
                    "neg_vid": row["neg_vid"]}  # fmt: skip
            refs = (VideoRef(videos / f"{index}_pos.mp4"), VideoRef(videos / f"{index}_neg.mp4"))
            yield pair_case(str(index), (row["pos_cap"], row["neg_cap"]), refs, tags)


#: The four questions of a pair, a case's texts (and its videos) in this order: the text-score questions on the
#: pos and neg videos, then the video-score questions (the concatenated videos) for the pos and neg captions.
QUESTIONS = ("text_pos", "text_neg", "video_pos", "video_neg")
#: Where each prompt file lies: beside vinoground.csv (the hub dataset, read by get_score_all.py), or in its video
#: folder (lmms-eval's vinoground task and VLMEvalKit read it there).
PROMPT_FILES = {
    "text": ("vinoground_textscore.json", "vinoground_videos/vinoground_textscore.json"),
    "video": ("vinoground_videoscore.json", "vinoground_videos_concated/vinoground_videoscore.json"),
}
#: What follows each question: nothing, as the authors' eval scripts ask it (eval/qwen.py,
#: eval/llava-onevision.py), or lmms-eval's vinoground doc_to_text suffix (commit 03a5823).
SUFFIXES = {"authors": "", "lmms-eval": "\nPlease only output one English character."}
#: How a generated answer is read, per setting of option ``reader`` (a name of :data:`spotdiff.cases.READERS`), the
#: default first: as get_score_all.py reads answers saved as strings (eval/llava-onevision.py) or as lists
#: (eval/qwen.py); :mod:`spotdiff.readers.vinoground` says how they differ.
READERS = {"strings": "first-char", "lists": "first-char-lists"}
#: The readings of generated answers, as ``spotdiff benchmarks vinoground-lmm`` lists them.
READINGS = (
    Reading(
        "-o reader=strings", "the authors'",
        "get_score_all.py (commit 2602b94) on answers saved as strings, as eval/llava-onevision.py saves them "
        "(commit 7d38b03): the answer's first character, case-insensitive, is the option; an empty answer raises "
        "there, which leaves the rest of its pair unscored (an empty text-score answer: no video score either)",
        default=True,
    ),
    Reading(
        "-o reader=lists", "the authors'",
        "get_score_all.py on answers saved as lists, as eval/qwen.py saves them (commit 7d38b03): the same first "
        "character; an empty answer is only a wrong one, and the pair is scored on",
    ),
    Reading(
        "", "lmms-eval's",
        "the vinoground task (lmms_eval/tasks/vinoground/utils.py, commit f255e5b7) asks with the suffix of "
        "-o suffix=lmms-eval and reads pred[0] alike, but an empty answer raises in vinoground_aggregate_results, "
        "which ends the whole evaluation without a score",
    ),
)  # fmt: skip


def read_prompts(path: Path, n: int) -> list[dict[str, str]]:
    """A prompt file's items, checked: ``idx``, ``video_name``, ``question``, ``GT`` (A or B), item ``2i`` the
    question of ``<i>_pos`` and ``2i + 1`` of ``<i>_neg`` (get_score_all.py pairs them by position), ``n`` pairs.

    Args:
        path: ``vinoground_textscore.json`` or ``vinoground_videoscore.json``.
        n: the pairs of ``vinoground.csv``.
    """
    data = read_json(path)
    if not isinstance(data, list) or len(data) != 2 * n:
        got = f"{len(data)} items" if isinstance(data, list) else type(data).__name__
        raise DataError(f"expected a JSON list of 2 questions per pair ({2 * n}), got {got}", file=path)
    items = []
    for k, item in enumerate(data):
        where = f"item {k}"
        values = {key: field(item, key, str, file=path, record_id=where) for key in ("idx", "video_name", "question")}
        values["GT"] = field(item, "GT", str, file=path, record_id=where)
        expected = f"{k // 2}_{('pos', 'neg')[k % 2]}"
        if values["idx"] != expected:
            raise DataError(f"idx {values['idx']!r} at position {k}, where get_score_all.py reads {expected}",
                            file=path, record=f"item {k}", field="idx")  # fmt: skip
        if values["GT"].strip().upper() not in ("A", "B"):
            raise DataError(f"GT {values['GT']!r} is neither A nor B", file=path, record=expected, field="GT")
        items.append({**values, "GT": values["GT"].strip().upper()})
    return items


@BENCHMARKS.register("vinoground-lmm")
class VinogroundLMM(Benchmark):
    option_names = ("suffix", "reader")  # the -o options it reads
    #: The same data, paper and licence as :class:`Vinoground`'s; the cases are the authors' questions to chat models.
    metadata = replace(
        Vinoground.metadata,
        title="Vinoground for chat models (Zhang et al., 2024)",
        protocols=("vinoground",),
        layout="""\
DIR/vinoground.csv as for vinoground, with the authors' prompts DIR/vinoground_textscore.json and
  DIR/vinoground_videoscore.json (or in vinoground_videos/ and vinoground_videos_concated/, lmms-eval's places):
  [{"idx": "<i>_pos" | "<i>_neg", "video_name": path under DIR, "question": str, "GT": "A" | "B"}, ...],
  item 2i for <i>_pos and 2i + 1 for <i>_neg; text-score videos vinoground_videos/<i>_<pos|neg>.mp4,
  video-score videos the concatenations in vinoground_videos_concated/ (two segments, 2 s of black between)
case: 4 videos x 4 questions [text pos, text neg, video pos, video neg], question k asked about video k only
  (tag pairs=diagonal), truth[k, k] = (GT == "A"); candidates A/B, generated answers read by their first
  character, an empty one stopping its pair (tag reader=first-char; option reader=lists: only wrong, tag
  reader=first-char-lists); id <index>; subset = major; option suffix=authors (the question as the
  file has it, as eval/qwen.py asks it) or suffix=lmms-eval (+ "\\nPlease only output one English character.")
tags: subset, major, minor, answers, reader, pairs""",
        description="Vinoground for chat models: the authors' text-score and video-score questions (A/B), text, "
        "video and group score (Zhang et al., Vinoground, 2024)",
        main_score=("vinoground", "group"),
        reproduces="Vinoground Table 2's LMMs (text, video and group score of generated answers: gen_*)",
        metric_sources=(
            (
                "vinoground",
                ("gen_text", "gen_video", "gen_group"),
                "get_score_all.py of Vinoground/Vinoground (commit 2602b94): a generated answer is right when its "
                "first character is the GT letter; an empty one leaves the rest of its pair unscored (answers saved "
                "as strings, the default reader) or is only wrong (reader=lists); lmms-eval's "
                "vinoground_aggregate_results reads answers that are not empty the same (commit 03a5823)",
            ),
            ("vinoground", ("text", "video", "group"), "spotdiff's likelihood reading of the same questions (A/B)"),
            (
                "vinoground",
                ("unparsed",),
                "spotdiff's diagnostic: generated answers whose first character names no candidate, or empty",
            ),
        ),
        readings=READINGS,
        ties="the authors read generated answers (no ties); in the likelihood reading a tie of A and B gives no "
        "answer under --ties strict and A under argmax",
    )

    def _prompt_file(self, folder: Path, kind: str) -> Path:
        return find_file(folder, PROMPT_FILES[kind], what=f"Vinoground {PROMPT_FILES[kind][0]}")

    def data_files(self) -> list[Path]:
        folder = data_folder(self.root)
        return [folder / "vinoground.csv", self._prompt_file(folder, "text"), self._prompt_file(folder, "video")]

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        suffix = SUFFIXES[option_choice(self.options, "suffix", SUFFIXES, "authors")]
        reader = READERS[option_choice(self.options, "reader", tuple(READERS), next(iter(READERS)))]
        path, text_file, video_file = self.data_files()
        pairs = list(read_pairs(path))
        prompts = {kind: read_prompts(file, len(pairs)) for kind, file in (("text", text_file), ("video", video_file))}
        for index, row in pairs:
            self.report.records += 1
            major, minors = categories(row)
            if subset is not None and major != subset:
                continue
            asked = [prompts[kind][2 * index + k] for kind in ("text", "video") for k in (0, 1)]
            truth = np.diag([item["GT"] == "A" for item in asked])
            videos = tuple(VideoRef(path.parent / item["video_name"]) for item in asked)
            tags = {"subset": major, "major": major, "minor": ";".join(minors), ANSWERS_TAG: "A/B",
                    READER_TAG: reader, PAIRS_TAG: "diagonal"}  # fmt: skip
            texts = tuple(item["question"] + suffix for item in asked)
            yield Case(str(index), texts, truth, videos, tags, roles=QUESTIONS)
