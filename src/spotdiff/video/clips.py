"""Clips as a case's items: a video file or a window of one (:class:`VideoRef`), the rule its frames are
sampled by (:class:`FrameRule`), and the sampled frames (:class:`Clip`), cached by content and rule.

A :class:`VideoRef` is an :class:`~spotdiff.cases.ImageRef` whose key is the video file's SHA-256 and its
window, so the engine deduplicates equal clips wherever they appear; it is never decoded as an image. The
engine binds each one to the rule of the scorer it asks (:func:`sampled_case`): a :class:`SampledVideo`,
whose key adds the rule's and whose ``load()`` gives the :class:`Clip` (the frames decoded with PyAV by
:func:`~spotdiff.video.frames.read_frames`). The rules, with the code each one transcribes: docs/scorers.md,
"Frame sampling".
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from spotdiff.cases import Case, ImageRef
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import atomic_path
from spotdiff.video.frames import Frame, VideoError, read_frames, stream_frames

log = logging.getLogger(__name__)

#: The kinds of frame rule: ``uniform`` (transformers' default sampler), ``segments`` (the centre frame of
#: N equal segments, mmaction2's test-mode ``SampleFrames`` that X-CLIP evaluates with) and ``processor``
#: (the model's own video processor's ``sample_frames``).
RULE_KINDS = ("uniform", "segments", "processor")
_RULE = re.compile(r"(?P<kind>[a-z]+)(?::(?P<value>\d+(?:\.\d+)?)(?P<fps>fps)?)?")


@dataclass(frozen=True)
class FrameRule:
    """Which frames of a clip a model sees.

    Attributes:
        kind: one of :data:`RULE_KINDS`.
        frames: N frames (None: by ``fps``, or the processor's own setting).
        fps: frames per second of the clip (``uniform``, ``processor``), instead of ``frames``.
        sampler: the model's video processor (kind ``processor``): its ``sample_frames(metadata, num_frames=,
            fps=)`` chooses the frames.
        sampler_key: what identifies the sampler's own settings in :attr:`key` (kind ``processor``).
    """

    kind: str
    frames: int | None = None
    fps: float | None = None
    sampler: Any = field(default=None, compare=False, repr=False)
    sampler_key: str = ""

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ConfigError(f"unknown frame rule {self.kind!r}; known: {', '.join(RULE_KINDS)}")
        if self.frames is not None and self.fps is not None:
            raise ConfigError("a frame rule takes a number of frames or a rate (fps), not both")
        if (self.frames is not None and self.frames < 1) or (self.fps is not None and not self.fps > 0):
            raise ConfigError(f"frame rule {self.text}: the number of frames and the rate must be positive")
        if self.kind == "segments" and self.frames is None:
            raise ConfigError("frame rule segments needs a number of frames (segments:N)")
        if self.kind == "uniform" and self.frames is None and self.fps is None:
            raise ConfigError("frame rule uniform needs a number of frames (uniform:N) or a rate (uniform:Ffps)")
        if self.kind == "processor" and self.sampler is None:
            raise ConfigError("frame rule processor needs a model whose processor samples video frames")

    @property
    def text(self) -> str:
        """The rule as :func:`parse_frame_rule` reads it (``uniform:8``, ``uniform:2fps``, ``processor``)."""
        if self.frames is None and self.fps is None:
            return self.kind
        return f"{self.kind}:{_number(self.fps)}fps" if self.frames is None else f"{self.kind}:{self.frames}"

    @property
    def key(self) -> str:
        """What the frames depend on: the rule, and for ``processor`` the sampler's settings."""
        return self.text + (f"[{self.sampler_key}]" if self.kind == "processor" else "")

    def indices(self, total: int, rate: float) -> list[int]:
        """The frames (numbered from 0 within the clip) a clip of ``total`` frames at ``rate`` per second shows.

        Args:
            total: the clip's frame count.
            rate: its frames per second.
        """
        if self.kind == "segments":  # mmaction2 SampleFrames._get_test_clips, clip_len = frame_interval = 1
            avg = total / self.frames
            return [int(k * avg + avg / 2.0) for k in range(self.frames)]
        if self.kind == "uniform":  # transformers video_utils.default_sample_indices_fn
            n = self.frames if self.frames is not None else max(1, int(total / rate * self.fps))
            return [k * total // n for k in range(n)]
        from transformers.video_utils import VideoMetadata

        meta = VideoMetadata(total_num_frames=total, fps=float(rate), duration=total / float(rate))
        try:
            chosen = self.sampler.sample_frames(meta, num_frames=self.frames, fps=self.fps)
        except ValueError as exc:
            name = self.sampler_key.split(":")[0] or type(self.sampler).__name__
            raise DataError(f"{name}.sample_frames refuses a clip of {total} frames: {exc}") from exc
        return [int(i) for i in np.asarray(chosen).reshape(-1)]


def _number(value: float) -> str:
    return f"{value:g}"


def parse_frame_rule(text: str, *, sampler: Any = None, sampler_key: str = "") -> FrameRule:
    """A frame rule from its text: ``N`` or ``uniform:N`` (N frames), ``uniform:Ffps`` (F frames a second),
    ``segments:N``, ``processor`` (the video processor's own setting), ``processor:N``, ``processor:Ffps``.

    Args:
        text: the rule (a spec option's value).
        sampler: the model's video processor, for ``processor`` rules.
        sampler_key: what identifies the processor's settings (:attr:`FrameRule.key`).

    >>> parse_frame_rule("8").key, parse_frame_rule("uniform:2fps").text, parse_frame_rule("segments:4").frames
    ('uniform:8', 'uniform:2fps', 4)
    """
    value = str(text).strip()
    if value.isdigit():
        value = f"uniform:{value}"
    m = _RULE.fullmatch(value)
    if m is None:
        raise ConfigError(
            f"frame rule {text!r}: expected N, uniform:N, uniform:Ffps, segments:N, processor, processor:N or "
            "processor:Ffps"
        )
    number = m.group("value")
    frames = fps = None
    if number is not None and m.group("fps"):
        fps = float(number)
    elif number is not None:
        if "." in number:
            raise ConfigError(f"frame rule {text!r}: a number of frames is a whole number")
        frames = int(number)
    return FrameRule(m.group("kind"), frames, fps, sampler if m.group("kind") == "processor" else None, sampler_key)


@dataclass(frozen=True, eq=False)
class Clip:
    """A clip's sampled frames, in order, and where they come from.

    Attributes:
        frames: the decoded RGB frames.
        indices: each frame's number within the clip (from 0).
        times: each frame's time in seconds from the video's start.
        total: the clip's frame count.
        rate: its frames per second.
        source: the clip, as :meth:`VideoRef.describe` names it.
    """

    frames: tuple[Image.Image, ...]
    indices: tuple[int, ...]
    times: tuple[float, ...]
    total: int
    rate: float
    source: str

    def __len__(self) -> int:
        return len(self.frames)

    def array(self) -> np.ndarray:
        """The frames as one ``[T, H, W, 3]`` uint8 array."""
        return np.stack([np.asarray(f.convert("RGB")) for f in self.frames])

    def metadata(self) -> dict[str, Any]:
        """What a transformers video processor knows of sampled frames (``VideoMetadata``'s fields)."""
        return {"total_num_frames": self.total, "fps": self.rate, "duration": self.total / self.rate,
                "frames_indices": list(self.indices)}  # fmt: skip


@dataclass(frozen=True, eq=False)
class VideoRef(ImageRef):
    """A video file, or its window ``[start, end)`` in seconds: the frames whose timestamps lie in it.

    Frame ``k`` of a video at ``r`` frames per second is shown from ``k / r``; a window holds the frames
    ``ceil(start * r)`` to ``ceil(end * r) - 1`` (the end clipped to the video's last frame).
    """

    path: Path
    start: float | None = None
    end: float | None = None
    what: ClassVar[str] = "video"

    def __post_init__(self) -> None:
        start, end = self.start, self.end
        if (start is not None and start < 0) or (end is not None and start is not None and not end > start):
            raise DataError(f"video {self.path}: the window [{start}, {end}) is empty or negative")

    @cached_property
    def key(self) -> str:  # type: ignore[override]
        window = "" if self.start is None and self.end is None else f":[{self.start},{self.end})"
        return f"video:{self._file_digest(self.path)}{window}"

    def load(self) -> Image.Image:
        raise DataError(
            f"video {self.describe()} is a clip, not an image: a model that takes videos samples its frames "
            "(spotdiff.video.clips.SampledVideo)"
        )

    def describe(self) -> str:
        if self.start is None and self.end is None:
            return str(self.path)
        return f"{self.path} [{_number(self.start or 0.0)}s, {'end' if self.end is None else _number(self.end)}s)"

    def span(self) -> tuple[int, int, Fraction]:
        """``(first frame, frame count, rate)`` of the clip within its video."""
        frames, rate = stream_frames(self.path)
        first = 0 if self.start is None else math.ceil(Fraction(repr(self.start)) * rate)
        stop = frames if self.end is None else min(frames, math.ceil(Fraction(repr(self.end)) * rate))
        if stop <= first:
            raise VideoError(f"the window {self.describe()} holds no frame of its {frames}", file=self.path)
        return first, stop - first, rate

    def sample(self, rule: FrameRule) -> Clip:
        """The frames ``rule`` picks, decoded (:func:`~spotdiff.video.frames.read_frames`).

        Args:
            rule: the frame rule.
        """
        first, total, rate = self.span()
        indices = rule.indices(total, float(rate))
        if not indices or min(indices) < 0 or max(indices) >= total:
            raise DataError(f"frame rule {rule.text} picks frames {indices} of a clip of {total}: {self.describe()}")
        frames = read_frames(self.path, [Frame("index", first + i) for i in indices])
        times = tuple(float((first + i) / rate) for i in indices)
        return Clip(tuple(frames), tuple(indices), times, total, float(rate), self.describe())

    def strip(self, n: int = 4, height: int = 96) -> Image.Image:
        """``n`` frames of the clip side by side (uniformly sampled, ``height`` pixels high): its preview.

        Args:
            n: the frames shown.
            height: their height in pixels.
        """
        clip = self.sample(FrameRule("uniform", frames=n))
        tiles = [f.convert("RGB").resize((max(1, round(f.width * height / f.height)), height)) for f in clip.frames]
        out = Image.new("RGB", (sum(t.width for t in tiles) + 2 * (len(tiles) - 1), height), "white")
        x = 0
        for tile in tiles:
            out.paste(tile, (x, 0))
            x += tile.width + 2
        return out


@dataclass(frozen=True, eq=False)
class SampledVideo(ImageRef):
    """A clip bound to a frame rule: ``load()`` gives its :class:`Clip` (not an image), read from the frame
    cache folder ``cache`` when it holds it, else decoded and stored there.

    Only scorers that declare a frame rule (:meth:`spotdiff.scorers.base.Scorer.frame_rule`) are given one.
    """

    video: VideoRef
    rule: FrameRule
    cache: Path | None = None

    @property
    def key(self) -> str:  # type: ignore[override]
        return f"{self.video.key}|frames:{self.rule.key}"

    def describe(self) -> str:
        return self.video.describe()

    def load(self) -> Clip:  # type: ignore[override]
        path = None
        if self.cache is not None:
            path = self.cache / (name := hashlib.sha256(self.key.encode()).hexdigest())[:2] / f"{name}.npz"
            clip = _read_cached(path, self.describe())
            if clip is not None:
                return clip
        clip = self.video.sample(self.rule)
        if path is not None:
            _write_cached(path, clip)
        return clip


def _read_cached(path: Path, source: str) -> Clip | None:
    """The clip stored at ``path``, or None when there is none; a damaged entry (it does not decompress, or
    its arrays are not a clip's) is removed with a warning naming it, and None returned: it is decoded again."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            frames, indices, times, info = (data[k] for k in ("frames", "indices", "times", "info"))
        n = len(frames)
        if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or not len(indices) == len(times) == n:
            raise ValueError(f"arrays of shapes {frames.shape}, {indices.shape}, {times.shape} are not a clip's frames")
        if info.shape != (2,):
            raise ValueError(f"its info holds {info.shape} values, not 2")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        log.warning("frame cache entry %s (clip %s) is damaged (%s): removed, and the frames decoded again",
                    path, source, exc)  # fmt: skip
        path.unlink(missing_ok=True)
        return None
    return Clip(tuple(Image.fromarray(a, "RGB") for a in frames), tuple(int(i) for i in indices),
                tuple(float(t) for t in times), int(info[0]), float(info[1]), source)  # fmt: skip


def _write_cached(path: Path, clip: Clip) -> None:
    """Store a clip's frames (losslessly, compressed) at ``path``; a cache that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path, sweep=False) as tmp, open(tmp, "wb") as fh:
            np.savez_compressed(fh, frames=clip.array(), indices=np.asarray(clip.indices, np.int64),
                                times=np.asarray(clip.times), info=np.asarray([clip.total, clip.rate]))  # fmt: skip
    except OSError:
        return


def sampled_case(case: Case, rule: FrameRule | None, cache: Path | None, model: str) -> Case:
    """``case`` with each of its clips bound to ``rule`` (:class:`SampledVideo`, frames cached in ``cache``);
    a case without clips as it is.

    Args:
        case: the case.
        rule: the scorer's frame rule; None for a scorer of images, which a case of clips refuses.
        cache: the frame cache folder, or None.
        model: the scorer's spec, named in the error.
    """
    if not any(isinstance(ref, VideoRef) for ref in case.images):
        return case
    if rule is None:
        raise ConfigError(
            f"model {model!r} scores images, and case {case.id} holds videos: give a model that takes videos "
            "(docs/scorers.md, 'Frame sampling')"
        )
    images = tuple(SampledVideo(r, rule, cache) if isinstance(r, VideoRef) else r for r in case.images)
    return replace(case, images=images)
