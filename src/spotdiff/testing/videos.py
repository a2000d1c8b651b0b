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
