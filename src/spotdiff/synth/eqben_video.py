"""EqBen pairs mined from natural video: ``spotdiff synth eqben-video --source ag`` (EqBen Sec. 4.1, App. B.1).

EQ-AG: Action Genome's scene graphs (``object_bbox_and_relationship.pkl``, ``person_bbox.pkl``, keyed
``<video>.mp4/<frame number>.png``) become captions with App. B.1's template; two annotated frames of
one video and object are paired only when at least 2 of their 3 relationships (attention, spatial,
contacting) differ, and frames right after a chosen one are skipped. Frames are decoded from the
user's videos with PyAV, seeking by timestamp. The output is EqBen's ``all_select.json`` + images.
"""

from __future__ import annotations

import pickle
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError, DataError
from spotdiff.synth import ENGINES, SynthConfig, SynthEngine
from spotdiff.synth.output import save_png, write_json

SOURCES = ("ag",)
#: the relationship the caption names beside the spatial one: App. B.1's template names the attention
#: relationship; the captions the paper prints use contacting ones ("sitting on the sofa")
CAPTION_RELATIONS = ("attention", "contacting")
_RELATIONS = ("attention_relationship", "spatial_relationship", "contacting_relationship")


@dataclass(frozen=True)
class AgFrame:
    """One annotated object in one Action Genome frame: its three relationships (the first of each list)."""

    video: str
    frame: int
    key: str
    object: str
    attention: str
    spatial: str
    contacting: str

    @property
    def triple(self) -> tuple[str, str, str]:
        return self.attention, self.spatial, self.contacting


def _load_pickle(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            data = pickle.load(fh)  # Action Genome publishes pickles: load only files you trust
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise DataError(f"cannot read the pickle: {exc}", file=path) from None
    if not isinstance(data, dict):
        raise DataError("expected a dict keyed by '<video>.mp4/<frame>.png'", file=path)
    return data


def _frame_number(key: str, path: Path) -> tuple[str, int]:
    video, _, name = key.rpartition("/")
    stem = name.rsplit(".", 1)[0]
    if not video or not stem.isdigit():
        raise DataError("expected a key '<video>.mp4/<frame number>.png'", file=path, record=key)
    return video, int(stem)


def read_action_genome(objects: Path, persons: Path) -> tuple[list[AgFrame], Counter]:
    """Annotated objects of Action Genome frames that show a person; the counts of what was left out.

    Args:
        objects: ``object_bbox_and_relationship.pkl``.
        persons: ``person_bbox.pkl``.
    """
    rels, people = _load_pickle(objects), _load_pickle(persons)
    out: list[AgFrame] = []
    left: Counter = Counter()
    for key in sorted(rels):
        video, frame = _frame_number(key, objects)
        entries = rels[key]
        if not isinstance(entries, list):
            raise DataError("expected a list of objects", file=objects, record=key)
        person = people.get(key)
        if not isinstance(person, dict) or len(np.asarray(person.get("bbox", [])).reshape(-1)) == 0:
            left["frame without a person box"] += 1
            continue
        for k, obj in enumerate(entries):
            where = f"{key} object {k}"
            if not isinstance(obj, dict) or not isinstance(obj.get("class"), str):
                raise DataError("expected an object with a 'class'", file=objects, record=where, field="class")
            if not obj.get("visible", False):
                left["object not visible"] += 1
                continue
            values = []
            for name in _RELATIONS:
                value = obj.get(name)
                if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                    raise DataError("expected a non-empty list of strings", file=objects, record=where, field=name)
                values.append(value[0].replace("_", " "))
            out.append(AgFrame(video, frame, key, obj["class"].replace("/", " or "), *values))
    return out, left


def pair_frames(frames: list[AgFrame], skip: int) -> list[tuple[AgFrame, AgFrame]]:
    """EQ-AG's frame filter (App. B.1) over one video's frames of one object, in frame order.

    I_i and I_j (j > i) are paired iff at least 2 of their 3 relationships differ; the ``skip``
    annotated frames right after a chosen frame are not used (App. B.1: 1, "skip the subsequent
    frame"; a reading of Sec. 4.1: 2).

    >>> f = [AgFrame("v", n, "", "cup", *t) for n, t in enumerate(["abc", "abd", "xyc", "xyz", "qrs", "qrs", "qbc"])]
    >>> [(a.frame, b.frame) for a, b in pair_frames(f, skip=1)]
    [(0, 2), (4, 6)]
    >>> [(a.frame, b.frame) for a, b in pair_frames(f, skip=2)]
    [(0, 3)]
    """
    pairs, i = [], 0
    while i < len(frames):
        j = next(
            (j for j in range(i + 1 + skip, len(frames)) if _differ(frames[i], frames[j]) >= 2),
            None,
        )
        if j is None:
            i += 1
            continue
        pairs.append((frames[i], frames[j]))
        i = j + 1 + skip
    return pairs


def _differ(a: AgFrame, b: AgFrame) -> int:
    return sum(x != y for x, y in zip(a.triple, b.triple, strict=True))


def ag_caption(frame: AgFrame, relation: str = "attention") -> str:
    """App. B.1's template: "The person is <relation> <object> which is <spatial relationship> him/her."

    >>> ag_caption(AgFrame("v", 0, "", "sofa", "not looking at", "beneath", "sitting on"), "contacting")
    'The person is sitting on the sofa which is beneath him/her.'
    """
    if relation not in CAPTION_RELATIONS:
        raise ConfigError(f"caption relation must be one of {', '.join(CAPTION_RELATIONS)}, got {relation!r}")
    verb = frame.attention if relation == "attention" else frame.contacting
    return f"The person is {verb} the {frame.object} which is {frame.spatial} him/her."


def frame_at(video: Path, seconds: float) -> Image.Image:
    """The frame shown at ``seconds`` in ``video`` (PyAV: seek to the keyframe before, decode forward).

    Args:
        video: the video file.
        seconds: the time from the stream's start.
    """
    import av

    try:
        container = av.open(str(video))
    except (OSError, av.FFmpegError) as exc:
        raise DataError(f"cannot open the video: {exc}", file=video) from None
    with container:
        stream = container.streams.video[0]
        start = float(stream.start_time * stream.time_base) if stream.start_time is not None else 0.0
        target = start + seconds
        container.seek(int(target / stream.time_base), stream=stream, backward=True, any_frame=False)
        half = 0.5 / float(stream.average_rate) if stream.average_rate else 0.0
        shown = None
        for frame in container.decode(stream):
            if frame.time is not None and frame.time > target + half:
                break
            shown = frame
        if shown is None:
            raise DataError(f"no frame at {seconds:.3f} s", file=video)
        return shown.to_image()


def _fps(video: Path) -> float:
    import av

    with av.open(str(video)) as container:
        rate = container.streams.video[0].average_rate
    if not rate:
        raise DataError("the video stream has no frame rate", file=video)
    return float(rate)


def write_eqben_ag(
    out: Path,
    *,
    annotations: Path,
    videos: Path,
    skip: int = 1,
    relation: str = "attention",
    n: int | None = None,
) -> dict[str, Any]:
    """Write EQ-AG pairs in EqBen's published format (``all_select.json``, ``images/eqbenag/``).

    Args:
        out: the output folder.
        annotations: the folder holding ``object_bbox_and_relationship.pkl`` and ``person_bbox.pkl``.
        videos: the folder of the ``<video>.mp4`` files the annotation keys name.
        skip: annotated frames skipped after a chosen one (App. B.1: 1; Sec. 4.1 read literally: 2).
        relation: the caption's relationship beside the spatial one (``attention`` or ``contacting``).
        n: the most pairs; None: all.
    """
    if skip < 0:
        raise ConfigError("--ag-skip must be >= 0")
    frames, left = read_action_genome(annotations / "object_bbox_and_relationship.pkl", annotations / "person_bbox.pkl")
    groups: dict[tuple[str, str], list[AgFrame]] = {}
    for f in frames:
        groups.setdefault((f.video, f.object), []).append(f)
    pairs = [p for key in sorted(groups) for p in pair_frames(sorted(groups[key], key=lambda f: f.frame), skip)]
    pairs = pairs[:n] if n is not None else pairs
    records, meta, fps = [], [], {}
    for a, b in pairs:
        paths = []
        for f in (a, b):
            video = videos / f.video
            if not video.is_file():
                raise DataError("video not found", file=video, record=f.key)
            fps.setdefault(f.video, _fps(video))
            rel = f"eqbenag/{Path(f.video).stem}_{f.frame:06d}.png"
            if not (out / "images" / rel).is_file():
                save_png(frame_at(video, f.frame / fps[f.video]), out / "images" / rel)
            paths.append(rel)
        captions = (ag_caption(a, relation), ag_caption(b, relation))
        records.append({"image0": paths[0], "image1": paths[1], "caption0": captions[0], "caption1": captions[1]})
        meta.append(
            {"video": a.video, "object": a.object, "frames": [a.frame, b.frame], "relations": [a.triple, b.triple]}
        )
    write_json(out / "all_select.json", records)
    write_json(out / "metadata.json", {"pairs": meta})
    return {
        "engine": "eqben-video",
        "source": "ag",
        "benchmark": "eqben",
        "rules": {
            "pair": "at least 2 of 3 relationships differ (EqBen App. B.1)",
            "skip_after_chosen": skip,
            "caption_relation": relation,
            "frame_time": "frame number / the video's average frame rate; PyAV seek by timestamp",
        },
        "annotated_objects": len(frames),
        "left_out": dict(sorted(left.items())),
        "pairs": len(records),
    }


@dataclass(frozen=True)
class EqbenVideoConfig(SynthConfig):
    """The options of the ``eqben-video`` engine (``n``: the most pairs)."""

    n: int = 1000
    #: the dataset whose annotations are read
    source: str = "ag"
    #: the folder of the annotation files
    annotations: Path | None = None
    #: the folder of the videos
    videos: Path | None = None
    #: EQ-AG: annotated frames skipped after a chosen one
    ag_skip: int = 1
    #: EQ-AG: the caption's relationship beside the spatial one
    ag_relation: str = "attention"


@ENGINES.register("eqben-video")
class EqbenVideoEngine(SynthEngine):
    benchmark = "eqben"
    description = "EqBen natural-video pairs from Action Genome scene graphs and your videos (EqBen App. B.1)"
    config_class = EqbenVideoConfig

    def write(self, out: Path) -> dict:
        c = self.config
        if c.source not in SOURCES:
            raise ConfigError(f"--source must be one of {', '.join(SOURCES)}, got {c.source!r}")
        if c.annotations is None or c.videos is None:
            raise ConfigError("eqben-video needs --annotations DIR and --videos DIR")
        return write_eqben_ag(
            Path(out), annotations=c.annotations, videos=c.videos, skip=c.ag_skip, relation=c.ag_relation, n=c.n
        )
