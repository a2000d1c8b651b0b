"""EqBen's natural subsets as clips (EqBen Sec. 4.1): each frame pair of EQ-AG, EQ-GEBC or EQ-YouCook2 read as the
two clips around its frames, scored by models of videos.

EqBen released its frames, not where they come from: no released file maps a pair to its video and times
(only EQ-AG's paths name a video and a frame), so the clips are read from a folder ``spotdiff synth eqben-video``
wrote, whose ``metadata.json`` records each pair's video and frames, and from the user's videos. Format and
rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import field, find_file, images_dir, read_json
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.eqben import CITATION, PAPER, REFERENCE
from spotdiff.benchmarks.sources import ManualSource, Part
from spotdiff.cases import Case
from spotdiff.errors import ConfigError, DataError
from spotdiff.video.clips import VideoRef
from spotdiff.video.frames import stream_frames, video_index

#: The natural subsets, as the frames' paths name them (image0's first folder).
SUBSETS = ("eqbenag", "eqbengebc", "eqbenyoucook2")
#: The clip around a frame, in seconds (option window=SECONDS): centred on the frame's time.
DEFAULT_WINDOW = 2.0

_MINED = ManualSource(
    "EqBen pairs mined from your videos",
    "https://github.com/Wangt-CN/EqBen",
    "EqBen's released files hold frames, not the videos and times they come from. Mine the pairs from your "
    "Action Genome, Kinetics-GEBC or YouCook2 videos and their annotations with `spotdiff synth eqben-video "
    "--source ag|gebc|youcook2 --annotations ... --videos DIR --out {target}` (docs/synthesis.md), then evaluate "
    "with -o videos=DIR.",
    ("metadata.json",),
)


@BENCHMARKS.register("eqben-clips")
class EqBenClips(Benchmark):
    option_names = ("videos", "window")  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="EqBen natural subsets as clips (Wang et al., ICCV 2023)",
        protocols=("group",),
        subsets=SUBSETS,
        layout="""\
DIR = a folder `spotdiff synth eqben-video` wrote: DIR/metadata.json {"pairs": [{"image0": "<subset>/...",
  "image1", "caption0", "caption1", "video": id, and the frames: "frames": [[rule, seconds], [rule, seconds]]
  (EQ-GEBC), "frames": [n, m] (EQ-AG: ffmpeg's 1-based frame numbers at the video's rate), or "times": [s, t]
  (EQ-YouCook2)}, ...]}
videos: option videos=DIR, default DIR/videos (the videos the synth run read, searched by file name, stem or
  Kinetics id)
case: 2 clips x 2 captions [caption0, caption1], diagonal truth; clip k = the window of option window=SECONDS
  (default 2) centred on frame k's time, from 0; id <subset>/<position>; subset = image0's first folder
tags: subset, video""",
        description="EqBen's natural subsets (EQ-AG, EQ-GEBC, EQ-YouCook2) as pairs of clips around their frames, "
        "from a folder spotdiff synth eqben-video wrote and the user's videos (Wang et al., ICCV 2023)",
        paper=PAPER,
        reference=REFERENCE,
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="no table: EqBen scores frames (benchmark eqben); this reads the same pairs as clips",
        license="the annotations' and the videos' own terms (Action Genome, Kinetics-GEBC, YouCook2)",
        parts=(Part("mined", "both", _MINED, license="the annotations' and the videos' own terms"),),
        data_notes="No released EqBen file maps a frame pair to its video and times; only pairs mined here carry them.",
        metric_sources=(
            ("group", ("text", "image", "group"), "EqBen's text, image and group score (eval_batch_my.py), on clips"),
        ),
        ties="strict, as EqBen's evaluation code (c0_i0 > c1_i0 ...); --ties argmax counts a tie for the first listed",
    )

    def data_files(self) -> list[Path]:
        return [find_file(self.root, ("metadata.json",), what="eqben-video metadata.json")]

    def _window(self) -> float:
        value = self.options.get("window", DEFAULT_WINDOW)
        try:
            window = float(str(value))
        except ValueError:
            window = -1.0
        if not window > 0:
            raise ConfigError(f"option window={value!r}: expected a positive number of seconds")
        return window

    def _videos(self, path: Path) -> dict[str, Path]:
        if not self.options.get("videos") and not (self.root / "videos").is_dir():
            recorded = read_json(path.parent / "synth.json") if (path.parent / "synth.json").is_file() else {}
            was = (recorded.get("options") or {}).get("videos") if isinstance(recorded, dict) else None
            hint = f" (the synth run read {was})" if was else ""
            raise ConfigError(f"eqben-clips reads the videos of the pairs: give -o videos=DIR{hint}")
        return video_index(images_dir(self.root, self.options, "videos", option="videos"))

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        (path,) = self.data_files()
        data = read_json(path)
        pairs = data.get("pairs") if isinstance(data, dict) else None
        if not isinstance(pairs, list):
            raise DataError('expected {"pairs": [...]} as spotdiff synth eqben-video writes it', file=path)
        videos, window = self._videos(path), self._window()
        rates: dict[Path, float] = {}
        for k, record in enumerate(pairs):
            self.report.records += 1
            where = f"pair {k}"
            image0 = field(record, "image0", str, file=path, record_id=where)
            name = image0.split("/")[0]
            if name not in SUBSETS:
                raise DataError(f"unknown subset {name!r}; known: {', '.join(SUBSETS)}", file=path, record=where,
                                field="image0")  # fmt: skip
            if subset is not None and name != subset:
                continue
            video_id = field(record, "video", str, file=path, record_id=where)
            video = videos.get(video_id)
            if video is None:
                raise DataError(
                    f"no video {video_id!r} under the videos folder", file=path, record=where, field="video"
                )
            times = _frame_times(record, video, rates, path, where)
            refs = tuple(VideoRef(video, max(0.0, t - window / 2), t + window / 2) for t in times)
            captions = tuple(field(record, f"caption{i}", str, file=path, record_id=where) for i in (0, 1))
            yield pair_case(f"{name}/{k}", captions, refs, {"subset": name, "video": video_id})


def _frame_times(record: dict, video: Path, rates: dict[Path, float], path: Path, where: str) -> list[float]:
    """The times (seconds) of a pair's two frames as its metadata records them: ``times`` (EQ-YouCook2),
    ``frames`` of ``[rule, seconds]`` (EQ-GEBC), or ``frames`` of 1-based frame numbers at the video's rate
    (EQ-AG: frame ``n`` is decoded frame ``n - 1``, shown from ``(n - 1) / rate``)."""
    values = record.get("times", record.get("frames"))
    if not isinstance(values, list) or len(values) != 2:
        raise DataError("expected two frames (frames or times)", file=path, record=where, field="frames")
    out = []
    for value in values:
        if isinstance(value, list) and len(value) == 2 and isinstance(value[1], (int, float)):
            out.append(float(value[1]))
        elif "times" in record and isinstance(value, (int, float)):
            out.append(float(value))
        elif isinstance(value, int) and value >= 1:
            if video not in rates:
                rates[video] = float(stream_frames(video)[1])
            out.append((value - 1) / rates[video])
        else:
            raise DataError(f"a frame {value!r} is none of [rule, seconds], seconds or a frame number", file=path,
                            record=where, field="frames")  # fmt: skip
    return out
