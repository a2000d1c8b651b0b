"""EqBen pairs mined from natural video: ``spotdiff synth eqben-video`` (EqBen Sec. 4.1, App. B.1-B.3).

* ``--source ag``: Action Genome's scene graphs (``object_bbox_and_relationship.pkl``,
  ``person_bbox.pkl``) as captions with App. B.1's template; two annotated frames of one video and
  object pair only when at least 2 of their 3 relationships differ; frames after a chosen one are skipped.
* ``--source gebc``: Kinetics-GEBC boundaries (App. B.2): a frame before boundary k and one after
  boundary k+1 (I_i and I_{i+2}), captions with action words dropped.
* ``--source youcook2``: the middle frame of each YouCook2 segment (App. B.3), frames with a human face
  discarded (scikit-image's LBP frontal-face cascade).

Frames are decoded from the user's videos with PyAV, seeking by timestamp. The output is EqBen's
``all_select.json`` + ``images/<subset>/``, read by ``--benchmark eqben``.
"""

from __future__ import annotations

import json
import pickle
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError, DataError
from spotdiff.synth import ENGINES, SynthConfig, SynthEngine, option
from spotdiff.synth.output import save_png, write_json

SOURCES = ("ag", "gebc", "youcook2")
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
        shown, past = None, False
        for frame in container.decode(stream):
            if frame.time is not None and frame.time > target + half:
                past = True
                break
            shown = frame
        if shown is None or (not past and shown.time is not None and target > shown.time + 3 * half):
            end = "" if shown is None or shown.time is None else f" (its last frame is at {shown.time - start:.3f} s)"
            raise DataError(f"no frame at {seconds:.3f} s{end}", file=video)
        return shown.to_image()


def _fps(video: Path) -> float:
    import av

    with av.open(str(video)) as container:
        rate = container.streams.video[0].average_rate
    if not rate:
        raise DataError("the video stream has no frame rate", file=video)
    return float(rate)


def _video_index(videos: Path) -> dict[str, Path]:
    """The videos under ``videos`` by file name and by stem (YouTube id)."""
    index: dict[str, Path] = {}
    for path in sorted(Path(videos).rglob("*")):
        if path.suffix.lower() in (".mp4", ".mkv", ".webm", ".avi", ".mov") and path.is_file():
            index.setdefault(path.name, path)
            index.setdefault(path.stem, path)
    return index


def _video(index: dict[str, Path], name: str, record: str, videos: Path) -> Path:
    if name not in index:
        raise DataError(f"no video {name!r} under {videos}", file=videos, record=record)
    return index[name]


def _save(out: Path, subset: str, video: Path, seconds: float) -> str:
    rel = f"{subset}/{video.stem}_{round(seconds * 1000):08d}ms.png"
    if not (out / "images" / rel).is_file():
        save_png(frame_at(video, seconds), out / "images" / rel)
    return rel


def _record(paths: list[str], captions: tuple[str, str]) -> dict[str, str]:
    return {"image0": paths[0], "image1": paths[1], "caption0": captions[0], "caption1": captions[1]}


def mine_ag(out: Path, annotations: Path, videos: Path, *, skip: int, relation: str, n: int | None) -> dict:
    """EQ-AG (App. B.1): pairs, their records and the summary; frames saved under ``out/images/eqbenag``."""
    if skip < 0:
        raise ConfigError("--ag-skip must be >= 0")
    frames, left = read_action_genome(annotations / "object_bbox_and_relationship.pkl", annotations / "person_bbox.pkl")
    groups: dict[tuple[str, str], list[AgFrame]] = {}
    for f in frames:
        groups.setdefault((f.video, f.object), []).append(f)
    pairs = [p for key in sorted(groups) for p in pair_frames(sorted(groups[key], key=lambda f: f.frame), skip)]
    index, fps = _video_index(videos), {}
    records, meta = [], []
    for a, b in pairs[:n]:
        video = _video(index, a.video, a.key, videos)
        fps.setdefault(a.video, _fps(video))
        paths = [_save(out, "eqbenag", video, f.frame / fps[a.video]) for f in (a, b)]
        records.append(_record(paths, (ag_caption(a, relation), ag_caption(b, relation))))
        meta.append(
            {"video": a.video, "object": a.object, "frames": [a.frame, b.frame], "relations": [a.triple, b.triple]}
        )
    rules = {
        "pair": "at least 2 of 3 relationships differ (EqBen App. B.1)",
        "skip_after_chosen": skip,
        "caption_relation": relation,
        "frame_time": "frame number / the video's average frame rate",
    }
    return {"records": records, "meta": meta, "rules": rules, "left_out": dict(left), "annotated": len(frames)}


#: App. B.2: words that need temporal context, whose captions are dropped
GEBC_ACTION_WORDS = ("up", "down", "upward", "downward", "towards")


def read_gebc(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Kinetics-GEBC boundaries (``{video id: [{timestamp, prev_timestamp, next_timestamp, label, subject,
    status_before, status_after, ...}]}``), checked.

    Args:
        path: a GEBC annotation JSON file (train / val).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read JSON: {exc}", file=path) from None
    if not isinstance(data, dict):
        raise DataError("expected an object keyed by video id", file=path)
    for vid, boundaries in data.items():
        if not isinstance(boundaries, list):
            raise DataError("expected a list of boundaries", file=path, record=vid)
        for k, b in enumerate(boundaries):
            if not isinstance(b, dict):
                raise DataError("expected a boundary object", file=path, record=f"{vid} boundary {k}")
            for name in ("timestamp", "prev_timestamp", "next_timestamp"):
                if not isinstance(b.get(name), (int, float)) or isinstance(b.get(name), bool):
                    raise DataError("expected a number", file=path, record=f"{vid} boundary {k}", field=name)
            for name in ("label", "subject", "status_before", "status_after"):
                if not isinstance(b.get(name), str):
                    raise DataError("expected a string", file=path, record=f"{vid} boundary {k}", field=name)
    return data


def _has_action_word(text: str) -> bool:
    return bool(set(re.findall(r"[a-z]+", text.lower())) & set(GEBC_ACTION_WORDS))


def mine_gebc(out: Path, annotations: Path, videos: Path, *, frame: str, step: int, n: int | None) -> dict:
    """EQ-GEBC (App. B.2): I_i before boundary k, I_{i+2} after boundary k+1 (same subject, both changes of
    action), captions "<subject> <status>"; ``frame`` picks the segment's ``middle`` or the frame at the
    boundary (``edge``); ``step`` 2 takes every other boundary pair (sparse), 1 overlapping pairs."""
    if frame not in ("middle", "edge") or step not in (1, 2):
        raise ConfigError("--gebc-frame must be middle or edge and --gebc-step 1 or 2")
    data = read_gebc(annotations)
    index, left = _video_index(videos), Counter()
    records, meta = [], []
    for vid in sorted(data):
        bs = sorted(data[vid], key=lambda b: b["timestamp"])
        for k in range(0, len(bs) - 1, step):
            if n is not None and len(records) >= n:
                break
            a, b = bs[k], bs[k + 1]
            if a["label"] != "Change of Action" or b["label"] != "Change of Action" or a["subject"] != b["subject"]:
                left["not two changes of action of one subject"] += 1
                continue
            captions = (f"{a['subject']} {a['status_before']}", f"{b['subject']} {b['status_after']}")
            if any(_has_action_word(c) for c in captions):
                left["caption with an action word"] += 1
                continue
            video = _video(index, vid, f"{vid} boundary {k}", videos)
            if frame == "middle":
                times = ((a["prev_timestamp"] + a["timestamp"]) / 2, (b["timestamp"] + b["next_timestamp"]) / 2)
            else:  # the last frame before boundary k, the first at or after boundary k+1
                times = (max(0.0, a["timestamp"] - 1 / _fps(video)), b["timestamp"])
            records.append(_record([_save(out, "eqbengebc", video, t) for t in times], captions))
            meta.append({"video": vid, "boundaries": [k, k + 1], "times": [round(t, 3) for t in times]})
    rules = {
        "pair": "a frame before boundary k and one after boundary k+1 (I_i, I_{i+2}; EqBen App. B.2)",
        "frame": frame,
        "boundary_step": step,
        "action_words_dropped": list(GEBC_ACTION_WORDS),
    }
    return {"records": records, "meta": meta, "rules": rules, "left_out": dict(left), "annotated": len(data)}


#: the face detector of the YouCook2 rule (App. B.3 used face_recognition; any packaged detector will do)
FACE_DETECTOR = (
    "scikit-image LBP frontal-face cascade (skimage.feature.Cascade, data.lbp_frontal_face_cascade_filename)"
)


class FaceDetector:
    """scikit-image's LBP frontal-face cascade (its weights ship with scikit-image)."""

    #: the long side frames are scaled down to before detection (fewer false positives in texture)
    SIDE = 320

    def __init__(self) -> None:
        from skimage import data
        from skimage.feature import Cascade

        self.cascade = Cascade(data.lbp_frontal_face_cascade_filename())

    def has_face(self, image: Image.Image) -> bool:
        """Whether ``image`` shows a frontal face (detected at most :attr:`SIDE` pixels on the long side)."""
        image = image.convert("RGB")
        if max(image.size) > self.SIDE:
            image = image.copy()
            image.thumbnail((self.SIDE, self.SIDE), Image.Resampling.BILINEAR)
        rgb = np.asarray(image)
        side = min(rgb.shape[:2])
        found = self.cascade.detect_multi_scale(
            img=rgb, scale_factor=1.2, step_ratio=1, min_size=(24, 24), max_size=(side, side)
        )
        return len(found) > 0


def read_youcook2(path: Path) -> dict[str, list[tuple[float, float, str]]]:
    """YouCook2's ``youcookii_annotations_trainval.json``: ``{video id: [(start, end, sentence)]}`` in order.

    Args:
        path: the annotation file (``{"database": {id: {"annotations": [{"segment", "sentence"}]}}}``).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read JSON: {exc}", file=path) from None
    if not isinstance(data, dict) or not isinstance(data.get("database"), dict):
        raise DataError("expected an object with a 'database' object", file=path, field="database")
    out = {}
    for vid, video in data["database"].items():
        segments = []
        for k, ann in enumerate(video.get("annotations") or []):
            seg, text = ann.get("segment"), ann.get("sentence")
            where = f"{vid} annotation {k}"
            if not (isinstance(seg, list) and len(seg) == 2 and all(isinstance(x, (int, float)) for x in seg)):
                raise DataError("expected [start, end] seconds", file=path, record=where, field="segment")
            if not isinstance(text, str) or not text.strip():
                raise DataError("missing or empty string", file=path, record=where, field="sentence")
            segments.append((float(seg[0]), float(seg[1]), " ".join(text.split())))
        out[vid] = sorted(segments)
    return out


def mine_youcook2(out: Path, annotations: Path, videos: Path, *, n: int | None) -> dict:
    """EQ-YouCook2 (App. B.3): each segment's middle frame with its sentence, frames showing a face
    discarded; the kept frames of a video are paired in order, (1, 2), (3, 4), ..."""
    data = read_youcook2(annotations)
    index, detector = _video_index(videos), FaceDetector()
    records, meta, left = [], [], Counter()
    for vid in sorted(data):
        if n is not None and len(records) >= n:
            break
        kept = []
        for k, (start, end, sentence) in enumerate(data[vid]):
            video = _video(index, vid, f"{vid} annotation {k}", videos)
            t = (start + end) / 2
            if detector.has_face(frame_at(video, t)):
                left["frame with a face"] += 1
                continue
            kept.append((k, t, sentence, video))
        if len(kept) % 2:
            left["unpaired last frame"] += 1
        for a, b in zip(kept[0::2], kept[1::2], strict=False):  # an odd last frame stays unpaired
            if n is not None and len(records) >= n:
                break
            records.append(_record([_save(out, "eqbenyoucook2", x[3], x[1]) for x in (a, b)], (a[2], b[2])))
            meta.append({"video": vid, "segments": [a[0], b[0]], "times": [a[1], b[1]]})
    rules = {
        "frame": "the middle of each annotated segment (EqBen App. B.3)",
        "filter": f"frames with a human face discarded: {FACE_DETECTOR} (App. B.3; Sec. 4.1 names object detectors)",
        "pair": "the kept frames of a video in order, (1, 2), (3, 4), ...",
    }
    return {"records": records, "meta": meta, "rules": rules, "left_out": dict(left), "annotated": len(data)}


def write_eqben_video(out: Path, source: str, annotations: Path, videos: Path, **options: Any) -> dict[str, Any]:
    """Mine one EqBen natural subset and write ``all_select.json``, ``metadata.json`` and the frames.

    Args:
        out: the output folder.
        source: ``ag``, ``gebc`` or ``youcook2``.
        annotations: ``ag``: the folder of the two pickles; ``gebc``, ``youcook2``: the JSON file.
        videos: the folder of the videos (searched recursively, by file name or id).
        **options: the source's rules (``skip``, ``relation``; ``frame``, ``step``) and ``n``.
    """
    miners = {"ag": mine_ag, "gebc": mine_gebc, "youcook2": mine_youcook2}
    if source not in miners:
        raise ConfigError(f"--source must be one of {', '.join(SOURCES)}, got {source!r}")
    out = Path(out)
    mined = miners[source](out, Path(annotations), Path(videos), **options)
    write_json(out / "all_select.json", mined["records"])
    write_json(out / "metadata.json", {"pairs": mined["meta"]})
    return {
        "engine": "eqben-video",
        "source": source,
        "benchmark": "eqben",
        "rules": mined["rules"],
        "annotated": mined["annotated"],
        "left_out": dict(sorted(mined["left_out"].items())),
        "pairs": len(mined["records"]),
    }


@dataclass(frozen=True)
class EqbenVideoConfig(SynthConfig):
    """The options of the ``eqben-video`` engine (``n``: the most pairs)."""

    n: int = option(1000, "the most pairs", kind="count")
    source: str = option("ag", "the annotations' dataset", choices=SOURCES)
    annotations: Path | None = option(
        None,
        "ag: the folder of object_bbox_and_relationship.pkl and person_bbox.pkl; gebc: a GEBC JSON file; "
        "youcook2: youcookii_annotations_trainval.json",
        kind="path",
        metavar="PATH",
    )
    videos: Path | None = option(
        None, "the videos the annotations name (by file name or id)", kind="path", metavar="DIR"
    )
    ag_skip: int = option(1, "frames skipped after a chosen one (App. B.1: 1)", kind="count")
    ag_relation: str = option("attention", "the caption's relationship", choices=CAPTION_RELATIONS)
    gebc_frame: str = option("middle", "which frame of a segment", choices=("middle", "edge"))
    gebc_step: int = option(2, "boundary pairs: 2 sparse, 1 all", kind="positive")


@ENGINES.register("eqben-video")
class EqbenVideoEngine(SynthEngine):
    benchmark = "eqben"
    description = "EqBen natural-video pairs from Action Genome, Kinetics-GEBC or YouCook2 and your videos"
    config_class = EqbenVideoConfig

    def write(self, out: Path) -> dict:
        c = self.config
        if c.annotations is None or c.videos is None:
            raise ConfigError("eqben-video needs --annotations and --videos")
        options: dict[str, Any] = {"n": c.n}
        if c.source == "ag":
            options |= {"skip": c.ag_skip, "relation": c.ag_relation}
        elif c.source == "gebc":
            options |= {"frame": c.gebc_frame, "step": c.gebc_step}
        return write_eqben_video(Path(out), c.source, c.annotations, c.videos, **options)
