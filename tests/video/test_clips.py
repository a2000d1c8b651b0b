"""Clips as case items: the frame rules (each against the code it transcribes), windows, the frame cache keyed
by content and rule, and the errors, on H.264 videos this file encodes (each frame shows its own number)."""

from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from spotdiff.errors import ConfigError, DataError
from spotdiff.testing.videos import encode_numbered, frame_number
from spotdiff.video.clips import FrameRule, SampledVideo, VideoRef, parse_frame_rule
from spotdiff.video.frames import VideoError


def _mmaction2_test_clips(num_frames: int, num_clips: int) -> np.ndarray:
    """mmaction2 ``SampleFrames._get_test_clips`` (mmaction/datasets/transforms/loading.py), as X-CLIP's
    datasets/build.py (microsoft/VideoX, commit 0cf704a) configures it: clip_len=1, frame_interval=1, test_mode."""
    ori_clip_len = 1 * 1
    avg_interval = (num_frames - ori_clip_len + 1) / float(num_clips)
    if num_frames > ori_clip_len - 1:
        base_offsets = np.arange(num_clips) * avg_interval
        clip_offsets = (base_offsets + avg_interval / 2.0).astype(np.int32)
    else:
        clip_offsets = np.zeros((num_clips,), dtype=np.int32)
    return clip_offsets


@pytest.mark.parametrize("total", [8, 9, 30, 31, 100, 301])
@pytest.mark.parametrize("n", [1, 4, 8])
def test_rules_equal_the_code_they_transcribe(total: int, n: int) -> None:
    from transformers.video_utils import VideoMetadata, default_sample_indices_fn

    meta = VideoMetadata(total_num_frames=total, fps=10.0)
    assert FrameRule("uniform", frames=n).indices(total, 10.0) == default_sample_indices_fn(meta, num_frames=n).tolist()
    assert FrameRule("uniform", fps=2.5).indices(total, 10.0) == default_sample_indices_fn(meta, fps=2.5).tolist()
    assert FrameRule("segments", frames=n).indices(total, 10.0) == _mmaction2_test_clips(total, n).tolist()


def test_short_clips_repeat_frames_where_transformers_refuses() -> None:
    """3 frames, 8 asked: transformers' sampler raises; the uniform rule repeats (k * 3 // 8), and so does
    mmaction2's (int((k + 0.5) * 3 / 8))."""
    assert FrameRule("uniform", frames=8).indices(3, 10.0) == [0, 0, 0, 1, 1, 1, 2, 2]
    assert FrameRule("segments", frames=8).indices(3, 10.0) == [0, 0, 0, 1, 1, 2, 2, 2]


def test_processor_rule_is_the_video_processors_own() -> None:
    """Qwen2-VL's sample_frames rounds the frames to its temporal patch (2) and keeps at least min_frames."""
    from transformers import Qwen2VLVideoProcessor

    proc = Qwen2VLVideoProcessor()
    key = "Qwen2VLVideoProcessor:0123456789abcdef"  # as spotdiff.scorers.video keys a processor's settings
    rule = parse_frame_rule("processor:7", sampler=proc, sampler_key=key)
    assert rule.indices(40, 10.0) == [0, 5, 10, 15, 20, 25, 30, 35]  # 7 frames -> 8, arange(0, 40, 5)
    assert parse_frame_rule("processor:1fps", sampler=proc).indices(40, 10.0) == [0, 10, 20, 30]  # 4 s at 1 fps
    assert rule.key == f"processor:7[{key}]" and parse_frame_rule("processor", sampler=proc).text == "processor"
    with pytest.raises(DataError, match=r"Qwen2VLVideoProcessor\.sample_frames refuses a clip of 3 frames"):
        rule.indices(3, 10.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [("uniform", "needs a number of frames"), ("segments:2fps", "segments needs a number of frames"),
     ("every:8", "unknown frame rule 'every'"), ("8.5", "expected N"), ("processor", "processor samples"),
     ("uniform:0", "must be positive"), ("uniform:8:9", "expected N")],
)  # fmt: skip
def test_bad_rules_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_frame_rule(text)


def test_windows_hold_the_frames_whose_timestamps_lie_in_them(tmp_path: Path) -> None:
    video = encode_numbered(tmp_path / "v.mp4", 30, 10)
    assert VideoRef(video).span() == (0, 30, 10)
    # [1.0, 2.05) at 10 fps: frames 10 .. 20 (frame 20 is shown from 2.0 s); uniform 4 of 11: 0, 2, 5, 8
    clip = VideoRef(video, 1.0, 2.05).sample(FrameRule("uniform", frames=4))
    assert [frame_number(f) for f in clip.frames] == [10, 12, 15, 18]
    assert (clip.indices, clip.total, clip.rate) == ((0, 2, 5, 8), 11, 10.0)
    assert clip.times == pytest.approx((1.0, 1.2, 1.5, 1.8))
    assert VideoRef(video, 2.5).span() == (25, 5, 10)  # to the end
    ntsc = encode_numbered(tmp_path / "ntsc.mp4", 60, Fraction(30000, 1001))
    # [1.0, 1.5) at 29.97 fps: frames 30 (1.001 s) .. 44 (1.468 s)
    assert VideoRef(ntsc, 1.0, 1.5).span() == (30, 15, Fraction(30000, 1001))
    segments = VideoRef(ntsc, 1.0, 1.5).sample(FrameRule("segments", frames=3))
    assert [frame_number(f) for f in segments.frames] == [32, 37, 42]  # centres of 5-frame segments


def test_keys_hold_content_window_and_rule(tmp_path: Path) -> None:
    a = encode_numbered(tmp_path / "a.mp4", 12, 4)
    copy = tmp_path / "copy.mp4"
    copy.write_bytes(a.read_bytes())
    assert VideoRef(a).key == VideoRef(copy).key and VideoRef(a).key.startswith("video:")
    assert VideoRef(a, 0.5, 2.0).key != VideoRef(a).key
    eight, four = FrameRule("uniform", frames=8), FrameRule("uniform", frames=4)
    assert SampledVideo(VideoRef(a), eight).key != SampledVideo(VideoRef(a), four).key
    assert SampledVideo(VideoRef(a), eight).key == SampledVideo(VideoRef(copy), eight).key


def test_frame_cache_round_trip_and_a_damaged_file(tmp_path: Path) -> None:
    video = encode_numbered(tmp_path / "v.mp4", 20, 5)
    cache = tmp_path / "frames"
    ref = SampledVideo(VideoRef(video), FrameRule("uniform", fps=1.0), cache)
    first = ref.load()
    (stored,) = list(cache.rglob("*.npz"))
    again = ref.load()
    assert [frame_number(f) for f in again.frames] == [0, 5, 10, 15]
    assert all((np.asarray(x) == np.asarray(y)).all() for x, y in zip(first.frames, again.frames, strict=True))
    assert (again.indices, again.times, again.total, again.rate) == (first.indices, first.times, 20, 5.0)
    stored.write_bytes(b"not a zip")  # a damaged entry is decoded again and rewritten
    assert [frame_number(f) for f in ref.load().frames] == [0, 5, 10, 15]
    assert stored.read_bytes()[:2] == b"PK"


def test_a_damaged_frame_cache_entry_is_dropped_counted_and_decoded_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 44: 16 bytes flipped in an entry were a ``zlib.error`` traceback on every later run. A damaged
    entry (its compressed frames, or arrays of the wrong shape) is dropped with a warning naming it and
    decoded again, and its rewritten entry reads back."""
    video = encode_numbered(tmp_path / "v.mp4", 20, 5)
    ref = SampledVideo(VideoRef(video), FrameRule("uniform", fps=1.0), tmp_path / "frames")
    first = ref.load()
    (stored,) = list((tmp_path / "frames").rglob("*.npz"))
    data = bytearray(stored.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    stored.write_bytes(bytes(data))
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, frames=np.zeros((2, 4, 4), np.uint8), indices=np.arange(3), times=np.zeros(3), info=np.ones(2))
    for damaged in (bytes(data), wrong.read_bytes()):
        stored.write_bytes(damaged)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            again = ref.load()
        assert [frame_number(f) for f in again.frames] == [frame_number(f) for f in first.frames] == [0, 5, 10, 15]
        (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert f"frame cache entry {stored} (clip {video}) is damaged" in warning and "decoded again" in warning
        assert stored.read_bytes() != damaged
    caplog.clear()
    assert [frame_number(f) for f in ref.load().frames] == [0, 5, 10, 15] and not caplog.records  # read back


def test_errors_name_the_video(tmp_path: Path) -> None:
    video = encode_numbered(tmp_path / "v.mp4", 10, 10)
    with pytest.raises(VideoError, match=r"window .*v.mp4 \[2s, 3s\) holds no frame of its 10"):
        VideoRef(video, 2.0, 3.0).span()
    with pytest.raises(DataError, match="empty or negative"):
        VideoRef(video, 2.0, 1.0)
    with pytest.raises(DataError, match=r"missing\.mp4"):
        VideoRef(tmp_path / "missing.mp4").sample(FrameRule("uniform", frames=2))
    with pytest.raises(DataError, match="is a clip, not an image"):
        VideoRef(video).load()
    strip = VideoRef(video).strip(n=3, height=32)
    assert strip.size == (3 * 32 + 2 * 2, 32)


def test_frames_obey_the_image_pixel_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44: a 191 KB video of 14000 x 14000 frames took 2.5 GB decoding one frame. Frames obey the limit
    images do (twice Pillow's ``Image.MAX_IMAGE_PIXELS``), read from the stream's header before any frame is
    decoded; lowered here so that a 128 x 128 video stands for the bomb."""
    from PIL import Image

    video = encode_numbered(tmp_path / "v.mp4", 4, 4)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 128 * 128 // 2 - 1)
    for load in (lambda: VideoRef(video).sample(FrameRule("uniform", frames=2)), lambda: VideoRef(video).span()):
        with pytest.raises(VideoError, match=r"v\.mp4: frames of 128 x 128 pixels \(16384\) are refused as a "
                                             r"possible decompression bomb"):  # fmt: skip
            load()
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 128 * 128 // 2)
    assert len(VideoRef(video).sample(FrameRule("uniform", frames=2))) == 2  # at the limit: read


def _forged_avi(path: Path, frames: int, declared: int) -> Path:
    """A 1 fps MJPEG AVI of ``frames`` frames whose headers (``avih``, the stream's ``strh``) declare ``declared``."""
    import struct

    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=1)
        stream.width = stream.height = 32
        stream.pix_fmt = "yuvj420p"
        for n in range(frames):
            image = np.full((32, 32, 3), 20 * n, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, data.index(b"avih") + 8 + 16, declared)  # dwTotalFrames
    struct.pack_into("<I", data, data.index(b"strh") + 8 + 32, declared)  # dwLength
    path.write_bytes(bytes(data))
    return path


def test_a_declared_frame_count_is_checked_against_the_stream_before_a_rule_uses_it(tmp_path: Path) -> None:
    """Issue 44: an AVI whose header claims 2**31 frames made ``uniform:1fps`` build two billion indices. The
    count a container declares is checked against the decoded stream before any rule allocates by it."""
    import tracemalloc

    honest = _forged_avi(tmp_path / "honest.avi", 10, 10)
    assert VideoRef(honest).span() == (0, 10, 1)
    assert len(VideoRef(honest).sample(parse_frame_rule("uniform:1fps"))) == 10
    forged = _forged_avi(tmp_path / "forged.avi", 10, 100_000)
    tracemalloc.start()
    try:
        with pytest.raises(VideoError, match=r"forged\.avi: its header declares 100000 frames \(99999 s at 1 fps\)"
                                             r", but its stream ends at 9 s"):  # fmt: skip
            VideoRef(forged).sample(parse_frame_rule("uniform:1fps"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, peak  # nothing allocated by the declared count


def test_errors_about_videos_say_video_not_image(tmp_path: Path) -> None:
    """Issue 45, item 9: a missing video and a video outside the data folder are named as videos."""
    from spotdiff.benchmarks import get_benchmark
    from spotdiff.testing.videos import write_vitatecs

    with pytest.raises(DataError, match=r"^cannot read video .*missing\.mp4: "):
        _ = VideoRef(tmp_path / "missing.mp4").key
    data = write_vitatecs(tmp_path / "vitatecs")
    elsewhere = tmp_path / "private.mp4"
    (data / "videos/MSRVTT/video8646.mp4").rename(elsewhere)
    (data / "videos/MSRVTT/video8646.mp4").symlink_to(elsewhere)
    with pytest.raises(DataError, match=r"video .*video8646\.mp4 is .*private\.mp4, outside the data .*name videos"):
        get_benchmark("vitatecs")(data).load()
