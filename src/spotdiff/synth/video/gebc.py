"""EQ-GEBC's rules on Kinetics-GEBC boundaries (EqBen Sec. 4.1, App. B.2), on the annotations alone.

GEBC's files (GEB+'s ``train.json``/``val.json``, LOVEU's ``*_highest_f1.json``) map a YouTube id to
its boundaries: ``boundary_id`` (``<id>_<k>``, or ``<id>_<k><A|B|C|D>`` where several annotators'
captions were merged onto one anchor boundary), ``timestamp``, ``prev_timestamp`` (the int ``0`` on a
video's first boundary), ``next_timestamp`` (seconds in the 10-s clip), ``label``, ``subject``,
``status_before``, ``status_after``, ``caption``. Entries that share a boundary's index are one
boundary: its caption is the first entry's (GEB+'s anchor annotator, "whose labeled boundaries are most
consistent with others"), the others are kept in the metadata.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError, DataError

#: App. B.2: "we filter out images with captions containing action words (e.g., "up", "down", "upward",
#: "downward" and "towards"), which are hard to infer without temporal information"
ACTION_WORDS = ("up", "down", "upward", "downward", "towards")
#: which frame of a segment is taken: its middle, or the one at its boundary
FRAMES = ("middle", "edge")
_ID = re.compile(r"(?P<index>\d+)(?P<annotator>[A-Z]?)")
_NUMBERS = ("timestamp", "prev_timestamp", "next_timestamp")
_TEXTS = ("subject", "status_before", "status_after")


@dataclass(frozen=True)
class Boundary:
    """One boundary of a video (several annotators' entries merged): its times and its captions' parts."""

    video: str
    index: int
    timestamp: float
    prev_timestamp: float
    next_timestamp: float
    subject: str
    status_before: str
    status_after: str
    label: str
    annotators: int


def _check(entry: Any, path: Path, where: str) -> dict:
    if not isinstance(entry, dict):
        raise DataError("expected a boundary object", file=path, record=where)
    for name in _NUMBERS:
        if not isinstance(entry.get(name), (int, float)) or isinstance(entry.get(name), bool):
            raise DataError("expected a number of seconds", file=path, record=where, field=name)
    for name in (*_TEXTS, "label"):
        if not isinstance(entry.get(name), str):
            raise DataError("expected a string", file=path, record=where, field=name)
    return entry


def _index(entry: dict, video: str, position: int, path: Path, where: str) -> int:
    """The boundary an entry belongs to: the ``k`` of ``<video>_<k>[A-D]``; without an id, its position."""
    boundary_id = entry.get("boundary_id")
    if boundary_id is None:
        return position
    prefix = f"{video}_"
    m = _ID.fullmatch(str(boundary_id)[len(prefix) :]) if str(boundary_id).startswith(prefix) else None
    if m is None:
        raise DataError(f"expected '{prefix}<k>' or '{prefix}<k><A-D>'", file=path, record=where, field="boundary_id")
    return int(m.group("index"))


def read_gebc(paths: Sequence[Path]) -> dict[str, list[Boundary]]:
    """Every video's boundaries, in time order, from one or more GEBC files (train and val: one run).

    Args:
        paths: GEBC annotation JSON files; a video in two of them is an error.
    """
    videos: dict[str, list[Boundary]] = {}
    origin: dict[str, Path] = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"cannot read JSON: {exc}", file=path) from None
        if not isinstance(data, dict):
            raise DataError("expected an object keyed by video id", file=path)
        for video, entries in data.items():
            if video in origin:
                raise DataError(f"video {video!r} is also in {origin[video]}", file=path, record=video)
            origin[video] = Path(path)
            if not isinstance(entries, list):
                raise DataError("expected a list of boundaries", file=path, record=video)
            videos[video] = _boundaries(video, entries, Path(path))
    return videos


def _boundaries(video: str, entries: list, path: Path) -> list[Boundary]:
    groups: dict[int, list[dict]] = {}
    for position, entry in enumerate(entries):
        where = f"{video} entry {position}"
        entry = _check(entry, path, where)
        groups.setdefault(_index(entry, video, position, path, where), []).append(entry)
    out = []
    for index, group in groups.items():
        first = group[0]
        if any(e["timestamp"] != first["timestamp"] for e in group):
            raise DataError(f"the entries of boundary {index} disagree on its timestamp", file=path, record=video)
        parts = {name: " ".join(first[name].split()) for name in _TEXTS}
        times = {name: float(first[name]) for name in _NUMBERS}
        out.append(Boundary(video, index, **times, **parts, label=first["label"], annotators=len(group)))
    return sorted(out, key=lambda b: (b.timestamp, b.index))


def caption(subject: str, status: str) -> str:
    """A GEBC caption as EqBen prints them: subject and status, capitalised, with a final period.

    >>> caption("baby in white dress", "sitting on the bed while spreading his hand wide")
    'Baby in white dress sitting on the bed while spreading his hand wide.'
    """
    text = f"{subject} {status}".strip().rstrip(".")
    return text[:1].upper() + text[1:] + "."


def has_action_word(text: str) -> bool:
    """Whether a caption holds one of App. B.2's action words (whole words, any case).

    >>> has_action_word("Man lifts the box up."), has_action_word("Man picks upholstery.")
    (True, False)
    """
    return bool(set(re.findall(r"[a-z]+", text.lower())) & set(ACTION_WORDS))


def gebc_pairs(boundaries: Sequence[Boundary], step: int = 1) -> tuple[list[dict], int]:
    """App. B.2's pairs of one video: "we propose to skip an additional boundary to choose I_i and I_{i+2}
    as the twin images"; I_i before boundary k, captioned with its status before, I_{i+2} after boundary
    k+1, with its status after; pairs whose captions hold an action word are dropped (the count returned).

    Args:
        boundaries: the video's boundaries in time order.
        step: 1: every k (every pair the rule gives); 2: every other k.
    """
    if step not in (1, 2):
        raise ConfigError(f"--gebc-step must be 1 or 2, got {step}")
    pairs, dropped = [], 0
    for k in range(0, len(boundaries) - 1, step):
        a, b = boundaries[k], boundaries[k + 1]
        texts = (caption(a.subject, a.status_before), caption(b.subject, b.status_after))
        if any(has_action_word(t) for t in texts):
            dropped += 1
            continue
        pairs.append({"boundaries": (a, b), "captions": texts})
    return pairs, dropped


def frame_rules(a: Boundary, b: Boundary, frame: str) -> tuple[tuple[str, float], tuple[str, float]]:
    """Which frames show I_i and I_{i+2}: the middles of the segments before boundary k and after boundary
    k+1, or (``edge``) the last frame before boundary k and the first at or after boundary k+1.

    >>> a = Boundary("v", 0, 3.0, 0.0, 6.41, "s", "x", "y", "Change of Action", 1)
    >>> b = Boundary("v", 1, 6.41, 3.0, 9.0, "s", "x", "y", "Change of Action", 1)
    >>> frame_rules(a, b, "middle"), frame_rules(a, b, "edge")
    ((('at', 1.5), ('at', 7.705)), (('before', 3.0), ('after', 6.41)))
    """
    if frame not in FRAMES:
        raise ConfigError(f"--gebc-frame must be one of {', '.join(FRAMES)}, got {frame!r}")
    if frame == "middle":
        return ("at", (a.prev_timestamp + a.timestamp) / 2), ("at", (b.timestamp + b.next_timestamp) / 2)
    return ("before", a.timestamp), ("after", b.timestamp)
