"""Vinoground (Zhang, Cai and Lee, 2024): 500 pairs of short natural videos whose captions hold the same words
in another temporal order ("the man opens the door, then sits" / "... sits, then opens the door").

``vinoground`` reads ``vinoground.csv`` and ``vinoground_videos/`` of the gated hub dataset
HanSolo9682/Vinoground and scores them as the authors' ``eval/imagebind_eval.py`` scores contrastive models
(text, video and group score, strict ``>``). Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import find_file, read_csv_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.sources import ImagesSource, Part
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
DATA_NOTES = (
    "Gated: log in at huggingface.co, accept the conditions on the dataset page, create a read token and set "
    "HF_TOKEN (or run `hf auth login`)."
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
        data_notes=DATA_NOTES,
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

    def cases(self, subset: str | None = None):
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
