"""Clips as case items: the frame rules (each against the code it transcribes), windows, the frame cache keyed
by content and rule, and the errors, on H.264 videos this file encodes (each frame shows its own number)."""

from __future__ import annotations

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
    rule = parse_frame_rule("processor:7", sampler=proc, sampler_key="qwen2vl")
    assert rule.indices(40, 10.0) == [0, 5, 10, 15, 20, 25, 30, 35]  # 7 frames -> 8, arange(0, 40, 5)
    assert parse_frame_rule("processor:1fps", sampler=proc).indices(40, 10.0) == [0, 10, 20, 30]  # 4 s at 1 fps
    assert rule.key == "processor:7[qwen2vl]" and parse_frame_rule("processor", sampler=proc).text == "processor"
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
