"""Small videos for tests: each frame shows its own number in binary, so a decoded frame tells which it is.

:func:`encode_numbered` writes an H.264 video with PyAV (a real codec: B-frames, keyframes every 12
frames); :func:`frame_number` reads the number back from a decoded frame (or an image written from it).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
from PIL import Image

#: frame numbers up to 1023, one 12-pixel column of the top 16 rows per bit (white: 1)
BITS = 10
SIDE = 128


def encode_numbered(
    path: str | Path, frames: int, rate: int | Fraction, photo: Callable[[int], np.ndarray] | None = None
) -> Path:
    """An H.264 video of ``frames`` frames at ``rate`` frames per second; frame n shows n in its top rows.

    Args:
        path: the video file to write (``.mp4``).
        frames: how many frames.
        rate: frames per second (a Fraction for NTSC rates, 30000/1001).
        photo: the picture below the number, a 128 x 128 x 3 uint8 array per frame number; None: grey.
    """
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width = stream.height = SIDE
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "10", "g": "12", "bf": "2"}
        for n in range(frames):
            image = np.full((SIDE, SIDE, 3), 90, np.uint8) if photo is None else np.array(photo(n))
            image[:16] = 0
            for bit in range(BITS):
                if (n >> bit) & 1:
                    image[:16, bit * 12 : bit * 12 + 12] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return Path(path)


def frame_number(image: Image.Image) -> int:
    """The number a frame of :func:`encode_numbered` shows."""
    top = np.asarray(image.convert("L"), float)[:16]
    return sum(1 << bit for bit in range(BITS) if top[:, bit * 12 + 2 : bit * 12 + 10].mean() > 128)


def coloured(colour: tuple[int, int, int]) -> Callable[[int], np.ndarray]:
    """A :func:`encode_numbered` picture of one colour (frame numbers still drawn above it)."""
    return lambda n: np.full((SIDE, SIDE, 3), colour, np.uint8)


#: VITATECS lines written by :func:`write_vitatecs`: (aspect, src_dataset, video_name, caption, counterfactual).
VITATECS_LINES = (
    ("Direction", "MSRVTT", "video9770.mp4", "a person is connecting something to system",
     "a person is disconnecting something from system"),
    ("Direction", "VATEX", "9HuUeribSjI_000000_000010.mp4", "a man runs up to a pi\u00f1ata and kicks it down",
     "a man runs up to a pi\u00f1ata and lifts it up"),
    ("Direction", "MSRVTT", "video9770.mp4", "a person is connecting something to system",
     "a person is disconnecting something from system"),
    ("Sequence", "VATEX", "VFYCU8FDRTM_000000_000010.mp4", "A person slides down a sandy path and falls down.",
     "A person falls down and slides down a sandy path."),
    ("Type", "VATEX", "9HuUeribSjI_000000_000010.mp4", "a man runs up to a pi\u00f1ata and kicks it down",
     "a man runs up to a pi\u00f1ata and punches it down"),
    ("Type", "MSRVTT", "video8646.mp4", "chef gordon ramsey chops up fresh vegetables in the kitchen",
     "chef gordon ramsey saut\u00e9s fresh vegetables in the kitchen"),
)  # fmt: skip


def write_vitatecs(root: str | Path, frames: int = 8, rate: int = 4) -> Path:
    """VITATECS as its repository publishes it (``data/<Aspect>.jsonl``, non-ASCII as ``\\u`` escapes) with the
    videos a user downloads (``videos/MSRVTT/video<n>.mp4``, ``videos/VATEX/<id>_<start>_<end>.mp4``):
    :data:`VITATECS_LINES`, with the real files' quirks (a line repeated, a video in two aspects, an aspect
    without a file). Each video is ``frames`` frames of one colour at ``rate`` per second.

    Args:
        root: the folder to write.
        frames: frames per video.
        rate: frames per second.
    """
    import json

    root = Path(root)
    (root / "data").mkdir(parents=True, exist_ok=True)
    by_aspect: dict[str, list[str]] = {}
    for aspect, source, name, caption, counterfactual in VITATECS_LINES:
        record = {"src_dataset": source, "video_name": name, "caption": caption, "counterfactual": counterfactual,
                  "aspect": aspect}  # fmt: skip
        by_aspect.setdefault(aspect, []).append(json.dumps(record))
        video = root / "videos" / source / name
        if not video.exists():
            video.parent.mkdir(parents=True, exist_ok=True)
            k = len(list((root / "videos").rglob("*.mp4")))
            encode_numbered(video, frames, rate, coloured((40 * k % 256, 200 - 30 * k % 200, 90)))
    for aspect, lines in by_aspect.items():
        (root / "data" / f"{aspect}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
