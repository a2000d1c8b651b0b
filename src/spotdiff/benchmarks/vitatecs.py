"""VITATECS (Li et al., ECCV 2024): MSR-VTT and VATEX test videos, each with its caption and a counterfactual
description that changes one temporal concept (Direction, Intensity, Sequence, Localization, Compositionality,
Type); accuracy per aspect.

Reads the six ``data/<Aspect>.jsonl`` files of github.com/lscpku/VITATECS (commit 58bff59, the ChatGPT-generated
release) and the videos the user downloads (``videos/MSRVTT``, ``videos/VATEX``), as the authors'
``X-CLIP/dataloaders/dataloader_vitatecs.py`` does. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import field, first_true, images_dir
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.shared import pinned_annotations
from spotdiff.benchmarks.sources import ManualSource, Part
from spotdiff.cases import Case
from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl
from spotdiff.video.clips import VideoRef

#: The aspects, in the order of the paper's tables (each is one ``<Aspect>.jsonl``).
SUBSETS = ("Direction", "Intensity", "Sequence", "Localization", "Compositionality", "Type")
SOURCES = ("MSRVTT", "VATEX")
_REPOSITORY = ("lscpku/VITATECS", "58bff59bb1d3ed287983fca8ca7589498f4db6b2")
_FIELDS = ("src_dataset", "video_name", "caption", "counterfactual", "aspect")

CITATION = """\
@inproceedings{li2024vitatecs,
  title     = {{VITATECS}: A Diagnostic Dataset for Temporal Concept Understanding of Video-Language Models},
  author    = {Li, Shicheng and Li, Lei and Ren, Shuhuai and Liu, Yuanxin and Liu, Yi and Gao, Rundong and
               Sun, Xu and Hou, Lu},
  booktitle = {European Conference on Computer Vision (ECCV)},
  year      = {2024}
}
"""

_VIDEOS = ManualSource(
    "MSR-VTT and VATEX test videos",
    "https://github.com/lscpku/VITATECS#data-preparation",
    "VITATECS ships no videos (README, commit 58bff59): download the MSR-VTT test videos (as "
    "github.com/m-bain/frozen-in-time describes) and the VATEX test videos (eric-xw.github.io/vatex-website/"
    "download.html, clips named <YouTube id>_<start>_<end>.mp4) into {target}/videos/MSRVTT/ and "
    "{target}/videos/VATEX/.",
    ("videos/MSRVTT", "videos/VATEX"),
)


@BENCHMARKS.register("vitatecs")
class Vitatecs(Benchmark):
    option_names = ("videos",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="VITATECS (Li et al., ECCV 2024)",
        protocols=("i2t-top1",),
        subsets=SUBSETS,
        layout="""\
DIR/<Aspect>.jsonl (or DIR/data/<Aspect>.jsonl) for Direction Intensity Sequence Localization Compositionality
  Type, one JSON per line: {"src_dataset": "MSRVTT" | "VATEX", "video_name": "video9770.mp4" or
  "<YouTube id>_<start>_<end>.mp4", "caption": str, "counterfactual": str, "aspect": <Aspect>}
videos: <videos>/<src_dataset>/<video_name>, <videos> = option videos=PATH, default DIR/videos
case: 1 video (the whole file) x 2 texts [caption, counterfactual], truth [[1, 0]]; id <Aspect>/<line>;
  subset = aspect; every line is a case (the files repeat some lines, and the authors count each)
tags: subset, src_dataset, video_name""",
        description="VITATECS: video captions against counterfactuals that change one temporal concept; "
        "accuracy per aspect (Li et al., VITATECS, ECCV 2024)",
        paper="Li, Li, Ren, Liu, Liu, Gao, Sun, Hou. VITATECS: A Diagnostic Dataset for Temporal Concept "
        "Understanding of Video-Language Models. ECCV 2024 (arXiv:2311.17404)",
        reference="https://github.com/lscpku/VITATECS",
        citation=CITATION,
        main_score=("i2t-top1", "accuracy"),
        reproduces="VITATECS Table 2 (accuracy per aspect of video-language models)",
        license="CC BY 4.0 (VITATECS README); the videos under MSR-VTT's and VATEX's own terms",
        parts=(
            pinned_annotations(_REPOSITORY, "vitatecs", "CC BY 4.0", strip="data/"),
            Part("videos", "images", _VIDEOS, license="MSR-VTT's and VATEX's terms"),
        ),
        data_notes="Also on the hub as lscpku/VITATECS (gated parquet); the GitHub files are the ones pinned here. "
        "The previous, OPT-generated release (data_opt/) is not read.",
        metric_sources=(
            (
                "i2t-top1",
                ("accuracy",),
                "the accuracy per aspect of X-CLIP/eval_vitatecs_xclip.py and alpro/eval_alpro.py (commit 58bff59): "
                "correct += (caption_score > counterfactual_score), over the aspect's lines",
            ),
        ),
        ties="strict, as the authors' evaluation (caption_score > counterfactual_score); --ties argmax counts a tie "
        "for the caption",
    )

    def _files(self) -> dict[str, Path]:
        """Each aspect's file present (``DIR/<Aspect>.jsonl``, else ``DIR/data/<Aspect>.jsonl``), in order."""
        found = {}
        for aspect in SUBSETS:
            for candidate in (self.root / f"{aspect}.jsonl", self.root / "data" / f"{aspect}.jsonl"):
                if candidate.is_file():
                    found[aspect] = candidate
                    break
        if not found:
            raise DataError(f"no VITATECS <Aspect>.jsonl files ({', '.join(SUBSETS)}) in {self.root} or its data/")
        return found

    def data_files(self) -> list[Path]:
        """The aspect files present (a folder may hold only the aspects a user evaluates)."""
        return list(self._files().values())

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        videos = images_dir(self.root, self.options, "videos", option="videos")
        files = self._files()
        if subset is not None and subset not in files:
            raise DataError(f"no VITATECS file {subset}.jsonl (nor data/{subset}.jsonl)", file=self.root)
        for aspect, path in files.items():
            if subset is not None and aspect != subset:
                continue
            for lineno, record in iter_jsonl(path):
                self.report.records += 1
                where = f"line {lineno}"
                values = {k: field(record, k, str, file=path, record_id=where) for k in _FIELDS}
                if values["aspect"] != aspect:
                    raise DataError(f"aspect {values['aspect']!r} in the file of {aspect}", file=path, record=where,
                                    field="aspect")  # fmt: skip
                source = values["src_dataset"]
                if source not in SOURCES:
                    raise DataError(f"unknown src_dataset {source!r}; known: {', '.join(SOURCES)}", file=path,
                                    record=where, field="src_dataset")  # fmt: skip
                tags = {"subset": aspect, "src_dataset": source, "video_name": values["video_name"]}
                video = VideoRef(videos / source / values["video_name"])
                texts = (values["caption"], values["counterfactual"])
                roles = ("caption", "counterfactual")
                yield Case(f"{aspect}/{lineno}", texts, first_true(2), (video,), tags, roles=roles)
