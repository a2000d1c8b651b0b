"""EqBen's natural subsets as clips: a folder `spotdiff synth eqben-video` writes from Kinetics-GEBC annotations
and videos this file encodes (each frame shows its number), read as the two clips around each pair's frames;
EQ-AG's frame numbers and EQ-YouCook2's times in metadata.json hand-made in the engine's schema; scored end to
end by a tiny X-CLIP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.errors import ConfigError, DataError
from spotdiff.testing.tiny_models import make_tiny_xclip
from spotdiff.testing.videos import encode_numbered, frame_number
from spotdiff.video.clips import FrameRule

VIDEO = "Qw7eRt5YuIo"


def _boundary(k: int, t: float, prev: float, nxt: float, subject: str, before: str, after: str) -> dict:
    """One entry as GEB+'s train.json writes it (tests/synth/test_synth_video.py has the full schema's quirks)."""
    return {
        "boundary_id": f"{VIDEO}_{k}A",
        "timestamp": t,
        "prev_timestamp": prev,
        "next_timestamp": nxt,
        "label": "Change of Action",
        "subject": subject,
        "status_before": before,
        "status_after": after,
        "action_of_cause": None,
        "caption": f"Subject: {subject} //Status_Before: {before} //Status_After: {after}",
    }


@pytest.fixture(scope="module")
def mined(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("gebc")
    videos = root / "videos" / "val_split"
    videos.mkdir(parents=True)
    encode_numbered(videos / f"{VIDEO}_000011_000021.mp4", 100, 10)  # 10 s at 10 fps
    annotations = {VIDEO: [
        _boundary(0, 3.0, 0, 5.5, "man in red t-shirt", "standing near the table", "walk to the door"),
        _boundary(1, 5.5, 3.0, 7.25, "the light", "shining white", "turn blue"),
        _boundary(2, 7.25, 5.5, 9.5, "man in red t-shirt", "holding a cup", "hold a phone"),
    ]}  # fmt: skip
    (root / "train.json").write_text(json.dumps(annotations))
    out = root / "mined"
    argv = ["synth", "eqben-video", "-q", "--source", "gebc", "--annotations", str(root / "train.json"),
            "--videos", str(root / "videos"), "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    return out, root / "videos"


def test_gebc_pairs_read_as_the_clips_around_their_frames(mined) -> None:
    out, videos = mined
    cases = get_benchmark("eqben-clips")(out, videos=str(videos)).load()
    # pairs (boundaries 0, 1) and (1, 2); the first's frames: the middle of the segment before boundary 0,
    # [0, 3.0): 1.5 s, and of the segment after boundary 1, [5.5, 7.25): 6.375 s; a 2 s window around each
    assert [c.id for c in cases] == ["eqbengebc/0", "eqbengebc/1"]
    first = cases[0]
    assert first.texts == ("Man in red t-shirt standing near the table.", "The light turn blue.")
    assert first.tags == {"subset": "eqbengebc", "video": VIDEO} and first.truth.tolist() == [[1, 0], [0, 1]]
    windows = [(ref.start, ref.end) for ref in first.images]
    assert windows == [(0.5, 2.5), (5.375, 7.375)]
    # the window [0.5, 2.5) at 10 fps holds frames 5 .. 24; segments:4 shows their centres 7, 12, 17, 22
    clip = first.images[0].sample(FrameRule("segments", frames=4))
    assert [frame_number(f) for f in clip.frames] == [7, 12, 17, 22]
    wide = get_benchmark("eqben-clips")(out, videos=str(videos), window="4").load()[0]
    assert (wide.images[0].start, wide.images[0].end) == (0.0, 3.5)  # clipped at the video's start


def test_ag_frame_numbers_and_youcook2_times(tmp_path: Path) -> None:
    """EQ-AG's metadata holds ffmpeg's 1-based frame numbers (frame 31 of a 10 fps video is shown from 3.0 s);
    EQ-YouCook2's holds times; the videos are looked for in DIR/videos by default."""
    videos = tmp_path / "videos"
    videos.mkdir()
    encode_numbered(videos / "0A8CF.mp4", 60, 10)
    encode_numbered(videos / "GLd3aX16zBg.mp4", 60, 10)
    pairs = [
        {"image0": "eqbenag/0A8CF.mp4/cup/00000/000031.png", "image1": "x", "caption0": "a", "caption1": "b",
         "video": "0A8CF.mp4", "object": "cup", "frames": [31, 51]},
        {"image0": "eqbenyoucook2/GLd3aX16zBg/000.npy", "image1": "y", "caption0": "c", "caption1": "d",
         "video": "GLd3aX16zBg", "segments": [0, 2], "times": [4.0, 1.0]},
    ]  # fmt: skip
    (tmp_path / "metadata.json").write_text(json.dumps({"pairs": pairs}))
    cases = get_benchmark("eqben-clips")(tmp_path).load()  # the videos in DIR/videos: no option needed
    assert [(r.start, r.end) for c in cases for r in c.images] == [(2.0, 4.0), (4.0, 6.0), (3.0, 5.0), (0.0, 2.0)]
    assert [c.subset for c in cases] == ["eqbenag", "eqbenyoucook2"]
    pairs[1]["video"] = "missing"
    (tmp_path / "metadata.json").write_text(json.dumps({"pairs": pairs}))
    with pytest.raises(DataError, match=r"no video 'missing'.*pair 1|pair 1.*no video 'missing'"):
        get_benchmark("eqben-clips")(tmp_path, videos=str(videos)).load()


def test_without_videos_it_says_which_folder_the_synth_run_read(mined) -> None:
    out, videos = mined
    with pytest.raises(ConfigError, match=f"give -o videos=DIR \\(the synth run read {videos}\\)"):
        get_benchmark("eqben-clips")(out).load()
    with pytest.raises(ConfigError, match="window"):
        get_benchmark("eqben-clips")(out, videos=str(videos), window="0").load()


def test_scored_end_to_end_by_a_video_model(mined, tmp_path: Path) -> None:
    out, videos = mined
    model = "xclip:" + str(make_tiny_xclip(tmp_path / "xclip"))
    argv = ["eval", "--model", model, "--benchmark", "eqben-clips", "--data", str(out), "-o", f"videos={videos}",
            "--out", str(tmp_path / "run"), "--no-cache", "--no-store", "-q", "--n-boot", "0"]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n_cases"] == 2 and set(metrics["metrics"]["all"]) == {"text", "image", "group"}
