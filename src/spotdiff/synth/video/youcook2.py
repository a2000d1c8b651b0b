"""EQ-YouCook2's rules on YouCook2's segments (EqBen Sec. 4.1, App. B.3).

``youcookii_annotations_trainval.json``: ``{"database": {id: {"duration", "subset" ("training" or
"validation"), "recipe_type", "annotations": [{"segment": [start, end] (int seconds), "id", "sentence"
(lower case, no final period)}], "video_url"}}}``; the videos lie under
``raw_videos/<subset>/<recipe_type>/<id>.{mp4,mkv,webm}``. "For each video with N segments, we directly
select the middle frame as I_i and its annotated caption as T_i" (App. B.3); frames showing a face are
discarded; then, "the 'visual-minimal change' is naturally guaranteed between any two frames I_i and
I_j" (Sec. 4.1): every two kept frames of a video pair.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError, DataError

#: how a video's kept frames pair: every two (Sec. 4.1, "any two frames I_i and I_j"), or in order
#: (1, 2), (3, 4), ... (spotdiff's reading before 2026-11)
PAIRINGS = ("all", "consecutive")
#: the face detector of the YouCook2 rule (App. B.3 used face_recognition; any packaged detector will do)
FACE_DETECTOR = (
    "scikit-image LBP frontal-face cascade (skimage.feature.Cascade, data.lbp_frontal_face_cascade_filename)"
)


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


def caption(sentence: str) -> str:
    """A YouCook2 sentence as EqBen prints it: capitalised, with a final period.

    >>> caption("put chicken and cheese on top of bread")
    'Put chicken and cheese on top of bread.'
    """
    text = sentence.strip().rstrip(".")
    return text[:1].upper() + text[1:] + "."


def middle(start: float, end: float) -> float:
    """The time of a segment's middle frame (the frame shown then is taken).

    >>> middle(90, 102)
    96.0
    """
    return (float(start) + float(end)) / 2


def pair_indices(kept: int, pairing: str = "all") -> list[tuple[int, int]]:
    """The pairs of a video's ``kept`` frames (positions among the kept ones).

    >>> pair_indices(3), pair_indices(5, "consecutive")
    ([(0, 1), (0, 2), (1, 2)], [(0, 1), (2, 3)])
    """
    if pairing not in PAIRINGS:
        raise ConfigError(f"--youcook2-pairs must be one of {', '.join(PAIRINGS)}, got {pairing!r}")
    if pairing == "all":
        return list(itertools.combinations(range(kept), 2))
    return [(k, k + 1) for k in range(0, kept - 1, 2)]


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
