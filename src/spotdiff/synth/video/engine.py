"""EqBen pairs mined from natural video: ``spotdiff synth eqben-video`` (EqBen Sec. 4.1, App. B.1-B.3).

"We assume the 'visual-minimal change' is naturally guaranteed between any two frames I_i and I_j
ideally [...] Therefore, we utilize a frame filter to filter out invalid samples automatically for
different video sources" (Sec. 4.1). Each source's filter runs on its annotations first
(:mod:`.action_genome`, :mod:`.gebc`; YouCook2's face filter needs the frames), and only the frames of
kept pairs are decoded, one video at a time, resumably. The output is EqBen's ``all_select.json`` +
``images/<subset>/``, read by ``--benchmark eqben``; ``metadata.json`` says where each image came from.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.errors import ConfigError
from spotdiff.synth import (
    ENGINES,
    ReviewOptions,
    SynthConfig,
    SynthEngine,
    count_option,
    option,
)
from spotdiff.synth.eqben_pairs import write_from_review
from spotdiff.synth.output import save_npy, save_png, write_json
from spotdiff.synth.run import make_items, resumable
from spotdiff.synth.video import action_genome as ag
from spotdiff.synth.video import gebc, youcook2
from spotdiff.video.frames import Frame, VideoError, read_frames, video_index

log = logging.getLogger(__name__)

SOURCES = ("ag", "gebc", "youcook2")
SUBSETS = {"ag": "eqbenag", "gebc": "eqbengebc", "youcook2": "eqbenyoucook2"}
#: the Action Genome file ``--annotations`` names (or the folder holding it)
AG_FILE = "object_bbox_and_relationship.pkl"
#: what to do with a video that is missing, unreadable or too short
ON_BAD_VIDEO = ("skip", "stop")


@dataclass(frozen=True)
class EqbenVideoConfig(ReviewOptions, SynthConfig):
    """The options of the ``eqben-video`` engine; each rule's reading names the sentence it comes from."""

    n: int = count_option(1000, "the most pairs")
    source: str = option("ag", "the annotations' dataset", choices=SOURCES)
    annotations: tuple[Path, ...] | None = option(
        None,
        f"ag: {AG_FILE} (or its folder); gebc: one or more GEBC JSON files (train and val together); "
        "youcook2: youcookii_annotations_trainval.json",
        kind="paths",
        metavar="PATH",
    )
    videos: Path | None = option(
        None, "the videos the annotations name, searched recursively by file name or id", kind="path", metavar="DIR"
    )
    workers: int | None = option(
        None,
        "processes decoding videos side by side (default: the usable cores, at most 4); the output does not "
        "depend on them",
        kind="positive",
        identity=False,
    )
    on_bad_video: str = option(
        "skip",
        "a missing, unreadable or too short video: skip it (counted, one line each) or stop the run cleanly "
        "(what was finished is kept for a re-run)",
        choices=ON_BAD_VIDEO,
    )
    ag_reading: str = option(
        "appendix",
        "EQ-AG's skip rule. appendix: " + ag.READINGS["appendix"] + ". main-text: " + ag.READINGS["main-text"],
        choices=tuple(ag.READINGS),
    )
    ag_skip: int = option(
        1,
        'EQ-AG: frames skipped after a chosen one ("skip the subsequent frame [...] move to I_{j+2}": 1)',
        kind="count",
    )
    ag_compare: str = option(
        "sets",
        'EQ-AG: "at least 2 of 3 relationships are different" compares each relationship\'s label set (sets) or '
        "its first label (first)",
        choices=ag.COMPARISONS,
    )
    ag_relation: str = option(
        "contacting",
        "EQ-AG: the caption's verb: contacting (every caption EqBen prints: 'The person is sitting on the sofa "
        "which is behind him/her.') or attention (App. B.1's template: 'The person is <attention relationship> "
        "<object> which is <spatial relationship> him/her.')",
        choices=ag.CAPTION_RELATIONS,
    )
    gebc_frame: str = option(
        "middle",
        "EQ-GEBC: the middle frame of the segments before boundary k and after boundary k+1, or (edge) the last "
        "frame before boundary k and the first at or after boundary k+1",
        choices=gebc.FRAMES,
    )
    gebc_step: int = option(
        1,
        'EQ-GEBC: 1: every pair of App. B.2 ("skip an additional boundary to choose I_i and I_{i+2}"); 2: every '
        'other one (a reading of Sec. 4.1\'s "sparse sampling across multiple boundaries")',
        kind="positive",
    )
    youcook2_pairs: str = option(
        "all",
        'EQ-YouCook2: all: "any two frames I_i and I_j" of a video (Sec. 4.1); consecutive: (1, 2), (3, 4), ...',
        choices=youcook2.PAIRINGS,
    )
    youcook2_format: str = option(
        "npy", "EQ-YouCook2: frames as EqBen released them (npy, BGR arrays) or as PNG", choices=("npy", "png")
    )

    def validate(self) -> None:
        """--annotations and --videos exist and fit --source (with --from-review: neither is read)."""
        c = self
        if c.from_review is not None:
            return
        if not c.annotations or c.videos is None:
            raise ConfigError("eqben-video needs --annotations and --videos")
        if c.source != "gebc" and len(c.annotations) != 1:
            raise ConfigError(f"--source {c.source} reads one annotation file; got {len(c.annotations)}")
        if not Path(c.videos).is_dir():
            raise ConfigError(f"--videos {c.videos} is not a folder")
        for path in c.annotations:
            if not (_pickle_file(path) if c.source == "ag" else path).is_file():
                raise ConfigError(
                    f"--annotations {path}: not found" + (f" (nor {AG_FILE} in it)" if path.is_dir() else "")
                )


def _pickle_file(path: Path) -> Path:
    return path / AG_FILE if path.is_dir() else path


def _plan_ag(c: EqbenVideoConfig) -> tuple[list[dict], dict[str, Any]]:
    """EQ-AG's pairs from the annotations alone, the first ``n``, as one job per video."""
    (path,) = c.annotations  # type: ignore[misc]
    frames, left = ag.read_action_genome(_pickle_file(path))
    groups: dict[tuple[str, str], list[ag.AgFrame]] = {}
    for f in frames:
        groups.setdefault((f.video, f.object), []).append(f)
    jobs: dict[str, dict] = {}
    count = 0
    for video, obj in sorted(groups):
        pairs = ag.pair_frames(sorted(groups[video, obj], key=lambda f: f.frame), c.ag_reading, c.ag_skip, c.ag_compare)
        for group, (a, b) in enumerate(pairs):
            if count == c.n:
                break
            count += 1
            folder = f"{SUBSETS['ag']}/{video}/{obj.replace('/', '_')}/{group:05d}"
            texts = (ag.captions(a, c.ag_relation), ag.captions(b, c.ag_relation))
            chosen = ag.distinct_captions(*texts)
            job = jobs.setdefault(video, {"video": video, "pairs": []})
            job["pairs"].append(
                {
                    "frames": [["index", f.frame - 1, f"{folder}/{f.frame:06d}.png"] for f in (a, b)],
                    "captions": list(chosen),
                    "meta": {"video": video, "object": obj, "frames": [a.frame, b.frame],
                             "relations": [a.relations, b.relations], "captions": texts},
                }
            )  # fmt: skip
    rules = {
        "pair": 'App. B.1: "we only choose frames I_i and I_j if and only if at least 2 of 3 relationships are '
        f'different", comparing {c.ag_compare}',
        "reading": {c.ag_reading: ag.READINGS[c.ag_reading]},
        "skip_after_chosen": c.ag_skip,
        "caption_relation": c.ag_relation,
        "frame": "Action Genome's NNNNNN.png is ffmpeg's frame NNNNNN, numbered from 1 at the video's own rate: "
        "decoded frame NNNNNN - 1 (the nearest timestamp to (NNNNNN - 1) / fps)",
    }
    return list(jobs.values()), {"rules": rules, "annotated": len(frames), "left_out": left}


def _plan_gebc(c: EqbenVideoConfig) -> tuple[list[dict], dict[str, Any]]:
    """EQ-GEBC's pairs from the boundaries alone, the first ``n``, as one job per video."""
    videos = gebc.read_gebc(c.annotations or ())
    jobs, left, count = [], Counter(), 0
    for video in sorted(videos):
        pairs, dropped = gebc.gebc_pairs(videos[video], c.gebc_step)
        left["pair whose caption holds an action word (App. B.2)"] += dropped
        job = {"video": video, "pairs": []}
        for pair in pairs:
            if count == c.n:
                break
            count += 1
            a, b = pair["boundaries"]
            rules = gebc.frame_rules(a, b, c.gebc_frame)
            frames = [
                [rule, t, f"{SUBSETS['gebc']}/{video}/{a.index:03d}_{k}.png"] for k, (rule, t) in enumerate(rules)
            ]
            meta = {"video": video, "boundaries": [a.index, b.index], "frames": [[r, t] for r, t in rules],
                    "annotators": [a.annotators, b.annotators], "labels": [a.label, b.label]}  # fmt: skip
            job["pairs"].append({"frames": frames, "captions": list(pair["captions"]), "meta": meta})
        if job["pairs"]:
            jobs.append(job)
    rules = {
        "pair": 'App. B.2: "we propose to skip an additional boundary to choose I_i and I_{i+2} as the twin images"',
        "boundary_step": c.gebc_step,
        "frame": c.gebc_frame,
        "action_words_dropped": list(gebc.ACTION_WORDS),
        "caption": "subject and status (before boundary k; after boundary k+1), capitalised, final period; "
        "the first annotator's entry where several were merged onto one boundary",
    }
    boundaries = sum(len(b) for b in videos.values())
    return jobs, {"rules": rules, "annotated": boundaries, "left_out": dict(left)}


class _Miner:
    """One video's job: its frames decoded and written, its pairs' records (or why it was skipped)."""

    def __init__(self, out: Path, config: EqbenVideoConfig, index: dict[str, Path]) -> None:
        self.out, self.config, self.index = out, config, index
        self.faces = youcook2.FaceDetector() if config.source == "youcook2" else None

    def __call__(self, job: dict) -> dict:
        try:
            video = self.index.get(job["video"])
            if video is None:
                raise VideoError(f"no video {job['video']!r} under --videos {self.config.videos}")
            return self._youcook2(job, video) if self.config.source == "youcook2" else self._frames(job, video)
        except VideoError as exc:
            if self.config.on_bad_video == "stop":
                raise
            log.warning("eqben-video: skipped video %s: %s", job["video"], exc)
            return {"pairs": [], "skipped": str(exc)}

    def _frames(self, job: dict, video: Path) -> dict:
        wanted = [f for pair in job["pairs"] for f in pair["frames"]]
        images = read_frames(video, [Frame(rule, value) for rule, value, _ in wanted])
        for (_rule, _value, rel), image in zip(wanted, images, strict=True):
            save_png(image, self.out / "images" / rel)
        return {"pairs": [_record(p, [f[2] for f in p["frames"]]) for p in job["pairs"]], "skipped": None}

    def _youcook2(self, job: dict, video: Path) -> dict:
        segments = job["segments"]
        images = read_frames(video, [Frame("at", youcook2.middle(s, e)) for s, e, _ in segments])
        kept, faces = [], 0
        for k, ((start, end, sentence), image) in enumerate(zip(segments, images, strict=True)):
            if self.faces is not None and self.faces.has_face(image):
                faces += 1
                continue
            rel = f"{SUBSETS['youcook2']}/{job['video']}/{k:03d}.{self.config.youcook2_format}"
            _save_frame(image, self.out / "images" / rel, self.config.youcook2_format)
            kept.append({"segment": k, "time": youcook2.middle(start, end), "caption": youcook2.caption(sentence),
                         "image": rel})  # fmt: skip
        pairs = []
        for i, j in youcook2.pair_indices(len(kept), self.config.youcook2_pairs):
            a, b = kept[i], kept[j]
            pair = {"captions": [a["caption"], b["caption"]],
                    "meta": {"video": job["video"], "segments": [a["segment"], b["segment"]],
                             "times": [a["time"], b["time"]]}}  # fmt: skip
            pairs.append(_record(pair, [a["image"], b["image"]]))
        return {"pairs": pairs, "skipped": None, "faces": faces, "frames": [k["image"] for k in kept]}


def _save_frame(image, path: Path, fmt: str) -> None:
    if fmt == "npy":  # EqBen's EQ-YouCook2 frames: HxWx3 uint8 arrays in BGR order
        save_npy(np.asarray(image.convert("RGB"))[:, :, ::-1], path)
    else:
        save_png(image, path)


def _record(pair: dict, images: list[str]) -> dict:
    record = {
        "image0": images[0],
        "image1": images[1],
        "caption0": pair["captions"][0],
        "caption1": pair["captions"][1],
    }
    return {"record": record, "meta": pair["meta"]}


@resumable
def write_eqben_video(out: Path, config: EqbenVideoConfig) -> dict[str, Any]:
    """Mine one EqBen natural subset and write ``all_select.json``, ``metadata.json`` and the frames.

    Args:
        out: the output folder.
        config: the engine's options (source, annotations, videos, the source's rules, ``n``).
    """
    out = Path(out)
    c = config
    index = video_index(c.videos)  # type: ignore[arg-type]
    miner = _Miner(out, c, index)
    if c.source == "youcook2":
        jobs, info = _plan_youcook2(c)
        made = make_items(out, miner, jobs, key=lambda j: j["video"], workers=c.workers or 1, desc="videos",
                          until=lambda done: sum(len(m["pairs"]) for m in done) >= c.n)  # fmt: skip
    else:
        jobs, info = (_plan_ag if c.source == "ag" else _plan_gebc)(c)
        made = make_items(out, miner, jobs, key=lambda j: j["video"], workers=c.workers or 1, desc="videos")
    pairs = [p for m in made for p in m["pairs"]][: c.n]
    if c.source == "youcook2":  # the videos up to the one that reached n; those made past it left out
        _drop_unpaired_frames(out, made, pairs)
        totals = list(itertools.accumulate(len(m["pairs"]) for m in made))
        made = made[: next((k + 1 for k, total in enumerate(totals) if total >= c.n), len(made))]
    write_json(out / "all_select.json", [p["record"] for p in pairs])
    write_json(out / "metadata.json", {"pairs": [{**p["record"], **p["meta"]} for p in pairs]})
    skipped = {job["video"]: m["skipped"] for job, m in zip(jobs, made, strict=False) if m["skipped"]}
    left = Counter(info["left_out"])
    left["frame with a face (App. B.3)"] += sum(m.get("faces", 0) for m in made)
    return {
        "engine": "eqben-video",
        "source": c.source,
        "benchmark": "eqben",
        "rules": info["rules"],
        "annotated": info["annotated"],
        "left_out": dict(sorted((k, v) for k, v in left.items() if v)),
        "videos": {"used": len(made) - len(skipped), "skipped": len(skipped)},
        "skipped_videos": skipped,
        "pairs": len(pairs),
    }


def _plan_youcook2(c: EqbenVideoConfig) -> tuple[list[dict], dict[str, Any]]:
    """EQ-YouCook2's videos and segments (the face filter and the pairs need the frames)."""
    (path,) = c.annotations  # type: ignore[misc]
    data = youcook2.read_youcook2(path)
    jobs = [{"video": vid, "segments": data[vid]} for vid in sorted(data) if data[vid]]
    rules = {
        "frame": 'App. B.3: "For each video with N segments, we directly select the middle frame as I_i and its '
        'annotated caption as T_i" (the frame shown at (start + end) / 2)',
        "filter": f'App. B.3: "we directly discard the frames with human faces": {youcook2.FACE_DETECTOR}',
        "pair": {"all": 'Sec. 4.1: "any two frames I_i and I_j" of a video', "consecutive": "(1, 2), (3, 4), ..."}[
            c.youcook2_pairs
        ],
        "caption": "the segment's sentence, capitalised, final period",
        "format": c.youcook2_format,
    }
    return jobs, {"rules": rules, "annotated": sum(len(j["segments"]) for j in jobs), "left_out": {}}


def _drop_unpaired_frames(out: Path, made: list[dict], pairs: list[dict]) -> None:
    """Remove the kept frames of the last video that no pair within ``n`` uses."""
    used = {p["record"][f] for p in pairs for f in ("image0", "image1")}
    for m in made:
        for rel in m.get("frames", []):
            if rel not in used:
                (out / "images" / rel).unlink(missing_ok=True)


@ENGINES.register("eqben-video")
class EqbenVideoEngine(SynthEngine, config=EqbenVideoConfig, benchmark="eqben", reviewed=write_from_review):
    """EqBen natural-video pairs from Action Genome, Kinetics-GEBC or YouCook2 and your videos"""

    def make(self, out: Path) -> dict:
        return write_eqben_video(out, self.config)
