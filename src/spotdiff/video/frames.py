"""Frames out of videos, by rule: the n-th frame, the frame shown at a time, the last before or the first
at or after a time (a boundary), decoded with PyAV; each video decoded once, forward, for all its frames.

Times are seconds from the video stream's first frame; a frame's time is its presentation timestamp,
compared exactly (in the stream's time base). An unreadable, truncated or too short video is a
:class:`VideoError` (a :class:`~spotdiff.errors.DataError`) naming the file, never a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from PIL import Image

from spotdiff.errors import ConfigError, DataError

#: what a rule asks for: ``index`` the n-th decoded frame (from 0, the frame ffmpeg's ``%06d.png``
#: numbers n + 1); ``at`` the frame shown at a time; ``before`` the last frame strictly before it;
#: ``after`` the first frame at or after it
RULES = ("index", "at", "before", "after")
#: a forward gap (seconds) past which the decoder seeks instead of decoding its way there
SEEK_GAP = 2.0
#: how far (seconds) a stream may end before the last frame its container declares (a rounded duration)
COUNT_SLACK = 2.0
VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".avi", ".mov")
#: Kinetics clips are named ``<YouTube id>_<start>_<end>`` (GEBD's INSTRUCTIONS.md: ``3y1V7BNNBds_000000_000010.mp4``)
_KINETICS_CLIP = re.compile(r"(?P<id>.{11})_\d{6}_\d{6}")


class VideoError(DataError):
    """A video that cannot give a requested frame (unreadable, truncated, or shorter than the time asked)."""


@dataclass(frozen=True)
class Frame:
    """One frame request: ``rule`` (one of :data:`RULES`) and its ``value`` (an index, or seconds)."""

    rule: str
    value: float

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ConfigError(f"unknown frame rule {self.rule!r}; known: {', '.join(RULES)}")


def _open(video: Path):
    """The video's container, its first video stream's frame size checked (:func:`_too_large`) before any
    frame is decoded."""
    import av

    try:
        container = av.open(str(video))
    except (OSError, av.FFmpegError) as exc:
        raise VideoError(f"cannot open the video: {exc}", file=video) from None
    if not container.streams.video:
        container.close()
        raise VideoError("no video stream", file=video)
    context = container.streams.video[0].codec_context
    refused = _too_large(context.width, context.height)
    if refused:
        container.close()
        raise VideoError(refused, file=video)
    return container


def _too_large(width: int, height: int) -> str | None:
    """Why frames of ``width`` x ``height`` are refused, as images are (more pixels than twice Pillow's
    ``Image.MAX_IMAGE_PIXELS``: a decompression bomb, a small file that decodes to gigabytes); None when not."""
    limit = Image.MAX_IMAGE_PIXELS
    if limit is None or width * height <= 2 * limit:
        return None
    return (
        f"frames of {width} x {height} pixels ({width * height}) are refused as a possible decompression bomb "
        "(Pillow's limit for images, 2 x Image.MAX_IMAGE_PIXELS); if the video is genuine, scale it down"
    )


def _image(frame) -> Image.Image:
    """A decoded frame as an RGB image; a frame larger than the limit (:func:`_too_large`) is refused."""
    refused = _too_large(frame.width, frame.height)
    if refused:
        raise _NoFrame(refused)
    return frame.to_image()


def video_rate(video: Path) -> Fraction:
    """The frame rate of the video's first video stream (its average rate)."""
    with _open(video) as container:
        rate = container.streams.video[0].average_rate
    if not rate:
        raise VideoError("the video stream has no frame rate", file=video)
    return Fraction(rate)


def stream_frames(video: Path) -> tuple[int, Fraction]:
    """``(frames, rate)`` of the video's first video stream: the frame count its container records
    (else its duration times its rate, rounded down), checked against the stream (:func:`_check_count`), and
    its average frame rate.

    Args:
        video: the video file.
    """
    with _open(video) as container:
        stream = container.streams.video[0]
        rate = Fraction(stream.average_rate) if stream.average_rate else None
        if rate is None:
            raise VideoError("the video stream has no frame rate", file=video)
        frames = int(stream.frames or 0)
        if frames <= 0:
            if stream.duration is not None and stream.time_base is not None:
                seconds = Fraction(stream.duration) * Fraction(stream.time_base)
            elif container.duration is not None:
                seconds = Fraction(container.duration, 1_000_000)  # FFmpeg's AV_TIME_BASE
            else:
                raise VideoError("the video records neither its frame count nor its duration", file=video)
            frames = int(seconds * rate)
        if frames <= 0:
            raise VideoError("the video has no frames", file=video)
        _check_count(container, stream, frames, rate, video)
    return frames, rate


def _check_count(container, stream, frames: int, rate: Fraction, video: Path) -> None:
    """Refuse a frame count the stream does not hold (a damaged or forged header), before a frame rule picks,
    and allocates, frames by it: the stream must reach within :data:`COUNT_SLACK` seconds (and 64 frames) of
    the last frame declared, found by seeking there and decoding forward (one group of pictures)."""
    import av

    last = Fraction(frames - 1) / rate
    goal = last - min(Fraction(COUNT_SLACK), 64 / rate)
    if goal <= 0:
        return
    base, start, reached = Fraction(stream.time_base), stream.start_time or 0, None
    try:
        container.seek(int(goal / base) + start, stream=stream, backward=True, any_frame=False)
        for frame in container.decode(stream):
            if frame.pts is not None:
                reached = (frame.pts - start) * base
                if reached >= goal:
                    return
    except av.FFmpegError as exc:
        raise VideoError(f"cannot decode the video: {exc}", file=video) from None
    ends = "holds no frame" if reached is None else f"ends at {float(reached):g} s"
    raise VideoError(f"its header declares {frames} frames ({float(last):g} s at {float(rate):g} fps), but its "
                     f"stream {ends}: a damaged or forged header; re-encode the video", file=video)  # fmt: skip


def read_frames(video: Path, requests: list[Frame]) -> list[Image.Image]:
    """The frames ``requests`` ask for, in their order; the video is decoded once, forward.

    ``at`` gives the frame shown at the time (the last frame whose timestamp is at or before it);
    ``index`` the frame whose timestamp is nearest n / fps (half a frame either side); ``before`` the
    last frame strictly before the time; ``after`` the first frame at or after it.

    Args:
        video: the video file.
        requests: the frames wanted.
    """
    import av

    if not requests:
        return []
    with _open(video) as container:
        stream = container.streams.video[0]
        fps = Fraction(stream.average_rate) if stream.average_rate else None
        if fps is None and any(r.rule == "index" for r in requests):
            raise VideoError("the video stream has no frame rate, so frames cannot be found by number", file=video)
        clock = _Clock(stream.time_base, stream.start_time or 0, fps)
        found: dict[int, Image.Image] = {}
        try:
            _decode(container, stream, clock, requests, found)
        except _NoFrame as exc:
            raise VideoError(str(exc), file=video) from None
        except av.FFmpegError as exc:
            raise VideoError(f"cannot decode the video: {exc}", file=video) from None
        return [found[k] for k in range(len(requests))]


class _NoFrame(Exception):
    """A request no frame of the video satisfies."""


@dataclass(frozen=True)
class _Clock:
    """A stream's time: timestamps to seconds, and each request's deadline."""

    base: Fraction
    start: int
    fps: Fraction | None

    @property
    def frame(self) -> Fraction:
        """One frame's duration (0 when the rate is unknown)."""
        return 1 / self.fps if self.fps else Fraction(0)

    def seconds(self, pts: int) -> Fraction:
        return (pts - self.start) * self.base

    def deadline(self, request: Frame) -> Fraction:
        """The latest timestamp (seconds) the frame a request settles on may have (``after``: the earliest)."""
        if request.rule == "index":
            return Fraction(int(request.value)) * self.frame + self.frame / 2
        return Fraction(repr(float(request.value)))


def _decode(container, stream, clock: _Clock, requests: list[Frame], found: dict) -> None:
    """Decode forward through the requests in time order, seeking over gaps longer than :data:`SEEK_GAP`."""
    pending = sorted(range(len(requests)), key=lambda k: clock.deadline(requests[k]))
    previous = None  # (seconds, frame) of the frame decoded last
    while pending:
        goal = clock.deadline(requests[pending[0]]) - 2 * clock.frame
        if previous is None or goal - previous[0] > SEEK_GAP:
            target = max(Fraction(0), goal)
            container.seek(int(target / clock.base) + clock.start, stream=stream, backward=True, any_frame=False)
            previous = None
            sought = pending[0]  # decode forward from the keyframe until this request is settled
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            seconds = clock.seconds(frame.pts)
            pending = [k for k in pending if not _settle(k, requests[k], clock, previous, seconds, frame, found)]
            previous = (seconds, frame)
            if not pending or (pending[0] != sought and clock.deadline(requests[pending[0]]) - seconds > SEEK_GAP):
                break
        else:  # the stream ended
            _at_the_end(pending, requests, clock, previous, found)
            return


def _settle(k, request: Frame, clock: _Clock, previous, seconds: Fraction, frame, found: dict) -> bool:
    """Whether the frame at ``seconds`` (after ``previous``) settles request ``k``; if so, store its frame."""
    deadline = clock.deadline(request)
    if request.rule == "after":
        if seconds >= deadline:
            found[k] = _image(frame)
        return seconds >= deadline
    if (request.rule == "before" and seconds >= deadline) or (request.rule in ("at", "index") and seconds > deadline):
        if previous is None:  # the first frame decoded is already past it
            if request.rule == "before" or seconds - deadline > clock.frame:
                raise _NoFrame(f"no frame {request.rule} {request.value} (the video starts after it)")
            found[k] = _image(frame)  # a stream whose first frame starts a hair late
        else:
            found[k] = _image(previous[1])
        return True
    return False


def _at_the_end(pending: list[int], requests: list[Frame], clock: _Clock, previous, found: dict) -> None:
    """Requests left when the stream ends: the last frame is still shown for one frame's duration."""
    for k in pending:
        r = requests[k]
        if previous is None or r.rule == "after" or clock.deadline(r) > previous[0] + clock.frame:
            raise _NoFrame(f"no frame {r.rule} {r.value} (the video ends before it)")
        found[k] = _image(previous[1])


def video_index(videos: Path) -> dict[str, Path]:
    """The videos under ``videos`` (searched recursively) by file name, by stem, and, for Kinetics clips
    (``<id>_<start>_<end>``), by YouTube id."""
    index: dict[str, Path] = {}
    for path in sorted(Path(videos).rglob("*")):
        if path.suffix.lower() in VIDEO_SUFFIXES and path.is_file():
            index.setdefault(path.name, path)
            index.setdefault(path.stem, path)
            clip = _KINETICS_CLIP.fullmatch(path.stem)
            if clip:
                index.setdefault(clip.group("id"), path)
    return index
