"""EQ-AG's rules on Action Genome's scene graphs (EqBen Sec. 4.1, App. B.1), on the annotations alone.

Action Genome publishes ``object_bbox_and_relationship.pkl``: ``{'<video>.mp4/<NNNNNN>.png': [{'class',
'bbox', 'attention_relationship', 'spatial_relationship', 'contacting_relationship', 'visible',
'metadata'}]}``, the relationships lists of names with underscores (``not_looking_at``), the classes
with slashes (``sofa/couch``). Its frame ``NNNNNN.png`` is the NNNNNN-th frame ffmpeg dumps at the
video's own rate (``tools/dump_frames.py``: ``ffmpeg -i VIDEO %06d.png``, numbered from 1), so it is
decoded frame NNNNNN - 1. The pickle is read by :func:`load_pickle`, which admits only what such
files hold (builtins and NumPy arrays): a pickle that names any other callable is refused, never run.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError, DataError
from spotdiff.pickles import load_data

#: the three relationships of a scene graph, in the order of App. B.1's triple
RELATIONS = ("attention_relationship", "spatial_relationship", "contacting_relationship")
#: the relationship the caption's verb comes from (App. B.1's template names the attention one; every
#: EQ-AG caption EqBen prints, Fig. 5 and Fig. 16, uses the contacting one: "sitting on the sofa")
CAPTION_RELATIONS = ("contacting", "attention")
#: how "2 of 3 relationships are different" compares two frames' relationships
COMPARISONS = ("sets", "first")
#: the readings of the skip rule, each named after the sentence it comes from
READINGS = {
    "appendix": (
        'App. B.1: "if I_i (I_j) is chosen, we will skip the subsequent frame (red cross in Figure 10 (bottom)), '
        'and move to I_{i+2} (I_{j+2})", against problem #2, "The two sample pairs {I_i, I_j} and {I_i, I_{j+1}} '
        'are too similar": a frame pairs with every later frame that differs, but after a chosen partner I_j the '
        "next partner is looked for from I_{j+2}, and after a chosen frame I_i the next first frame is I_{i+2}"
    ),
    "main-text": (
        'Sec. 4.1: "if I_j is chosen for previous samples, we empirically skip the subsequent 2 frames to I_{j+2}": '
        "a chain, each frame in at most one pair: I_i pairs with the first later I_j that differs, and the next "
        "pair starts at I_{j+2}"
    ),
}
def load_pickle(path: Path) -> Any:
    """An Action Genome pickle, read without running code (:func:`spotdiff.pickles.load_data`)."""
    return load_data(path, "an Action Genome annotation")


@dataclass(frozen=True)
class AgFrame:
    """One visible object in one annotated frame: its class and its three relationships (label lists)."""

    video: str
    frame: int
    object: str
    relations: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]

    def labels(self, comparison: str) -> tuple[frozenset[str], ...] | tuple[str, ...]:
        """What is compared: each relationship's label set, or its first label."""
        if comparison == "sets":
            return tuple(frozenset(r) for r in self.relations)
        return tuple(r[0] for r in self.relations)


def _frame_key(key: Any, path: Path) -> tuple[str, int]:
    video, _, name = str(key).rpartition("/")
    stem, dot, ext = name.partition(".")
    if not video or not stem.isdigit() or int(stem) < 1 or (dot and ext.lower() not in ("png", "jpg")):
        raise DataError("expected a key '<video>.mp4/<frame number from 1>.png'", file=path, record=str(key))
    return video, int(stem)


def read_action_genome(path: Path) -> tuple[list[AgFrame], dict[str, int]]:
    """The visible annotated objects of ``object_bbox_and_relationship.pkl``; and the counts left out.

    Args:
        path: the pickle (read with :func:`load_pickle`).
    """
    data = load_pickle(path)
    if not isinstance(data, dict):
        raise DataError("expected a dict keyed by '<video>.mp4/<frame>.png'", file=path)
    out: list[AgFrame] = []
    invisible = 0
    for key in sorted(data, key=str):
        video, frame = _frame_key(key, path)
        entries = data[key]
        if not isinstance(entries, list):
            raise DataError("expected a list of objects", file=path, record=str(key))
        for k, obj in enumerate(entries):
            where = f"{key} object {k}"
            if not isinstance(obj, dict) or not isinstance(obj.get("class"), str):
                raise DataError("expected an object with a 'class' string", file=path, record=where, field="class")
            if not obj.get("visible", False):
                invisible += 1  # AG leaves the relationships of an invisible object None
                continue
            relations = []
            for name in RELATIONS:
                value = obj.get(name)
                if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                    raise DataError("expected a non-empty list of strings", file=path, record=where, field=name)
                relations.append(tuple(value))
            out.append(AgFrame(video, frame, obj["class"], tuple(relations)))  # type: ignore[arg-type]
    return out, {"object not visible": invisible}


def differ(a: AgFrame, b: AgFrame, comparison: str = "sets") -> int:
    """How many of the three relationships differ between two frames of one object.

    >>> a = AgFrame("v", 1, "cup", (("looking_at",), ("in_front_of", "beneath"), ("holding",)))
    >>> b = AgFrame("v", 2, "cup", (("looking_at",), ("in_front_of",), ("touching",)))
    >>> differ(a, b, "sets"), differ(a, b, "first")
    (2, 1)
    """
    if comparison not in COMPARISONS:
        raise ConfigError(f"unknown comparison {comparison!r}; known: {', '.join(COMPARISONS)}")
    return sum(x != y for x, y in zip(a.labels(comparison), b.labels(comparison), strict=True))


def pair_frames(frames: Sequence[AgFrame], reading: str = "appendix", skip: int = 1, comparison: str = "sets"):
    """EQ-AG's frame filter over one video's annotated frames of one object, in frame order (App. B.1).

    "we only choose frames I_i and I_j if and only if at least 2 of 3 relationships are different";
    the skip rule as :data:`READINGS` names it, ``skip`` frames skipped after a chosen one (both
    sentences land on I_{j+2}: 1).

    Args:
        frames: the object's annotated frames, in frame order.
        reading: ``appendix`` or ``main-text``.
        skip: frames skipped after a chosen frame.
        comparison: ``sets`` or ``first`` (:func:`differ`).

    Frames 0-4 whose (attention, spatial, contacting) labels are abc, xyc, xyz, aqz, abc: 0 differs from
    1 and 3 in two, 1 from 3 in three, 2 from 3 in two, 3 from 4 in two.

    >>> f = [AgFrame("v", n, "cup", tuple((x,) for x in t)) for n, t in enumerate(["abc", "xyc", "xyz", "aqz", "abc"])]
    >>> [(a.frame, b.frame) for a, b in pair_frames(f, "appendix")]
    [(0, 1), (0, 3), (2, 3)]
    >>> [(a.frame, b.frame) for a, b in pair_frames(f, "main-text")]
    [(0, 1), (3, 4)]
    """
    if reading not in READINGS:
        raise ConfigError(f"unknown EQ-AG reading {reading!r}; known: {', '.join(READINGS)}")
    if skip < 0:
        raise ConfigError(f"--ag-skip must be >= 0, got {skip}")
    step = 1 + skip
    pairs: list[tuple[AgFrame, AgFrame]] = []
    i = 0
    while i < len(frames):
        partners = []
        j = i + 1
        while j < len(frames):
            if differ(frames[i], frames[j], comparison) >= 2:
                partners.append(j)
                if reading == "main-text":
                    break
                j += step  # App. B.1: skip I_{j+1}, move to I_{j+2}
            else:
                j += 1
        pairs += [(frames[i], frames[j]) for j in partners]
        if not partners:
            i += 1
        elif reading == "main-text":
            i = partners[0] + step  # the next sample starts at I_{j+2}
        else:
            i += step  # App. B.1: I_i chosen, skip I_{i+1}, move to I_{i+2}
    return pairs


def object_name(category: str) -> str:
    """The object as EqBen's captions name it: the first name of a class with alternatives.

    >>> object_name("sofa/couch"), object_name("cup/glass/bottle"), object_name("dish")
    ('sofa', 'cup', 'dish')
    """
    return category.split("/")[0].strip()


def captions(frame: AgFrame, relation: str = "contacting") -> list[str]:
    """App. B.1's template, one caption per combination of the verb's and the spatial relationship's labels
    (EqBen's raw EQ-AG file holds caption lists, and its loaders take the first):
    "The person is <relationship> <object> which is <spatial relationship> him/her."

    Args:
        frame: the annotated object.
        relation: ``contacting`` (the captions EqBen prints) or ``attention`` (App. B.1's template).

    >>> f = AgFrame("v", 1, "sofa/couch", (("not_looking_at",), ("behind", "beneath"), ("sitting_on",)))
    >>> for text in captions(f):
    ...     print(text)
    The person is sitting on the sofa which is behind him/her.
    The person is sitting on the sofa which is beneath him/her.
    """
    if relation not in CAPTION_RELATIONS:
        raise ConfigError(f"caption relation must be one of {', '.join(CAPTION_RELATIONS)}, got {relation!r}")
    verbs = frame.relations[2] if relation == "contacting" else frame.relations[0]
    name = object_name(frame.object)
    return [
        f"The person is {verb.replace('_', ' ')} the {name} which is {spatial.replace('_', ' ')} him/her."
        for verb, spatial in itertools.product(verbs, frame.relations[1])
    ]


def distinct_captions(first: Sequence[str], second: Sequence[str]) -> tuple[str, str]:
    """One caption for each frame of a pair, each the first of its list the other frame's list lacks (its
    first when there is none), so that two frames whose label sets differ beyond their first labels are
    not given one caption (App. B.1's problem #1: "may be described by the same caption").

    >>> distinct_captions(["in front"], ["in front", "beneath"])
    ('in front', 'beneath')
    """
    a = next((text for text in first if text not in second), first[0])
    b = next((text for text in second if text not in first), second[0])
    return a, b
