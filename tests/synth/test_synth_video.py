"""EqBen's natural subsets mined from videos this file encodes (H.264, each frame carrying its own number
in binary) and annotations hand-made in Action Genome's, Kinetics-GEBC's and YouCook2's published
schemas (their quirks: AG's 1-based frame names, slash classes, label lists, None relationships of an
invisible object; GEBC's annotator letters, the int 0, train and val files; YouCook2's int segments and
raw_videos/<subset>/<recipe>/ layout). The expected pairs and frames were worked out by hand from the
quoted sentences (EqBen Sec. 4.1, App. B.1-B.3) before the code ran, and checked again by a session that
had not read the code (the fixture and its answers: the tables below)."""

from __future__ import annotations

import json
import pickle
from fractions import Fraction

import numpy as np
import pytest
from PIL import Image

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.cli import main
from spotdiff.errors import DataError
from spotdiff.synth.video.action_genome import load_pickle
from spotdiff.testing.videos import encode_numbered, frame_number
from spotdiff.video.frames import Frame, VideoError, read_frames


def shown(path) -> int:
    """The frame number of a written image (a PNG, or EqBen's BGR .npy)."""
    if str(path).endswith(".npy"):
        return frame_number(Image.fromarray(np.load(path, allow_pickle=False)[:, :, ::-1]))
    with Image.open(path) as im:
        return frame_number(im)


def synth(*argv: str) -> int:
    return main(["synth", "eqben-video", "-q", *argv])


# ---- frames -----------------------------------------------------------------------------------------


def test_frames_by_number_time_and_boundary(tmp_path):
    """NTSC rate (30000/1001): the n-th frame by number; at, before and after a time, across keyframes."""
    video = tmp_path / "v.mp4"
    encode_numbered(video, 120, Fraction(30000, 1001))
    asks = [Frame("index", 3), Frame("index", 0), Frame("index", 119), Frame("index", 61), Frame("at", 2.0)]
    # 2.0 s is between frame 59 (1.968 s) and 60 (2.002 s): frame 59 is shown at 2.0 s
    asks += [Frame("before", 2.002), Frame("after", 2.0), Frame("after", 0.0), Frame("at", 0.0)]
    assert [frame_number(im) for im in read_frames(video, asks)] == [3, 0, 119, 61, 59, 59, 60, 0, 0]
    ten = tmp_path / "ten.mp4"
    encode_numbered(ten, 100, 10)
    # a boundary at 6.41 s: the first frame at or after it is 6.5 s, never 6.4 s; the last before 3.0 s is 2.9 s
    asks = [Frame("after", 6.41), Frame("before", 3.0), Frame("at", 6.41), Frame("after", 8.2), Frame("at", 9.95)]
    assert [frame_number(im) for im in read_frames(ten, asks)] == [65, 29, 64, 82, 99]
    with pytest.raises(VideoError, match=r"ten.mp4.*no frame after 9.95 \(the video ends before it\)"):
        read_frames(ten, [Frame("after", 9.95)])
    with pytest.raises(VideoError, match=r"no frame at 10\.5"):
        read_frames(ten, [Frame("at", 10.5)])


def test_an_unreadable_or_truncated_video_is_one_line(tmp_path):
    video = tmp_path / "v.mp4"
    encode_numbered(video, 30, 10)
    (tmp_path / "cut.mp4").write_bytes(video.read_bytes()[:2000])
    (tmp_path / "junk.mkv").write_bytes(b"\x1aE\xdf\xa3 not a video" * 50)
    for name in ("cut.mp4", "junk.mkv", "missing.mp4"):
        with pytest.raises(DataError) as err:
            read_frames(tmp_path / name, [Frame("index", 3)])
        assert str(err.value).startswith(f"file {tmp_path / name}:") and "\n" not in str(err.value)


# ---- EQ-AG ------------------------------------------------------------------------------------------

AG_VIDEO = "0A8CF.mp4"
#: AG frame (1-based, as its file names) -> (attention, spatial, contacting) label lists; None: not visible
CUP = {
    3: (["looking_at"], ["in_front_of"], ["holding"]),
    7: (["looking_at"], ["in_front_of"], ["holding", "touching"]),
    11: (["not_looking_at"], ["in_front_of", "beneath"], ["holding"]),
    15: (["not_looking_at"], ["beneath"], ["not_contacting"]),
    19: (["looking_at"], ["beneath"], ["not_contacting"]),
    23: (["looking_at"], ["in_front_of"], ["holding"]),
    27: (["unsure"], ["on_the_side_of"], ["wiping"]),
    31: None,
    35: (["unsure"], ["on_the_side_of"], ["holding"]),
}
SOFA = {
    3: (["not_looking_at"], ["beneath", "behind"], ["sitting_on"]),
    11: (["not_looking_at"], ["beneath"], ["sitting_on", "leaning_on"]),
    19: (["looking_at"], ["behind"], ["lying_on"]),
    27: (["not_looking_at"], ["beneath", "behind"], ["sitting_on"]),
}
#: worked out by hand from App. B.1 / Sec. 4.1 (docs/synthesis.md's readings): (object, AG frame, AG frame)
AG_EXPECTED = {
    ("appendix", "sets", 1): [
        ("cup/glass/bottle", 3, 11), ("cup/glass/bottle", 3, 19), ("cup/glass/bottle", 3, 27),
        ("cup/glass/bottle", 11, 15), ("cup/glass/bottle", 11, 23), ("cup/glass/bottle", 11, 35),
        ("cup/glass/bottle", 19, 23), ("cup/glass/bottle", 19, 35),
        ("sofa/couch", 3, 11), ("sofa/couch", 19, 27),
    ],
    ("appendix", "first", 1): [
        ("cup/glass/bottle", 3, 15), ("cup/glass/bottle", 3, 27), ("cup/glass/bottle", 11, 15),
        ("cup/glass/bottle", 11, 27), ("cup/glass/bottle", 19, 23), ("cup/glass/bottle", 19, 35),
        ("sofa/couch", 3, 19), ("sofa/couch", 19, 27),
    ],
    ("main-text", "sets", 1): [("cup/glass/bottle", 3, 11), ("cup/glass/bottle", 19, 23), ("sofa/couch", 3, 11)],
    ("appendix", "sets", 2): [
        ("cup/glass/bottle", 3, 11), ("cup/glass/bottle", 3, 27), ("cup/glass/bottle", 15, 23), ("sofa/couch", 3, 11),
    ],
}  # fmt: skip


def ag_entry(cls, relations, frame):
    """One object as object_bbox_and_relationship.pkl holds it (AG's README and printed entries)."""
    visible = relations is not None
    att, spa, con = relations or (None, None, None)
    tag = f"{AG_VIDEO}/{cls.replace('/', '_')}/{frame:06d}"
    bbox = (57.07142857142854, 226.5, 212.4332564325793, 132.5) if visible else None
    return {"class": cls, "bbox": bbox, "attention_relationship": att, "spatial_relationship": spa,
            "contacting_relationship": con, "metadata": {"tag": tag, "set": "train"}, "visible": visible}  # fmt: skip


@pytest.fixture(scope="module")
def action_genome(tmp_path_factory):
    root = tmp_path_factory.mktemp("ag")
    (root / "videos").mkdir()
    encode_numbered(root / "videos" / AG_VIDEO, 40, Fraction(30000, 1001))
    frames: dict[str, list] = {}
    for cls, table in (("cup/glass/bottle", CUP), ("sofa/couch", SOFA)):
        for frame, relations in table.items():
            frames.setdefault(f"{AG_VIDEO}/{frame:06d}.png", []).append(ag_entry(cls, relations, frame))
    annotations = root / "annotations"
    annotations.mkdir()
    # numpy arrays as AG's person_bbox.pkl holds them, pickled by the numpy here (protocol 4)
    frames[f"{AG_VIDEO}/000003.png"][0]["extra"] = np.array([[24.29774, 71.443954, 259.23602, 268.20288]], np.float32)
    (annotations / "object_bbox_and_relationship.pkl").write_bytes(pickle.dumps(frames, protocol=4))
    return root


def _ag_pairs(out):
    meta = json.loads((out / "metadata.json").read_text())["pairs"]
    return [(m["object"], *m["frames"]) for m in meta]


def test_eq_ag_follows_app_b1_with_several_partners_per_frame(action_genome, tmp_path):
    root = action_genome
    out = tmp_path / "ag"
    assert synth("--annotations", str(root / "annotations"), "--videos", str(root / "videos"), "--out", str(out)) == 0
    assert _ag_pairs(out) == AG_EXPECTED["appendix", "sets", 1]
    records = json.loads((out / "all_select.json").read_text())
    first = records[0]
    # frame 11 differs from 3 in its second spatial label: its caption names it (not one caption for both)
    assert first["caption0"] == "The person is holding the cup which is in front of him/her."
    assert first["caption1"] == "The person is holding the cup which is beneath him/her."
    sofa = records[8]
    assert sofa["caption0"] == "The person is sitting on the sofa which is behind him/her."
    assert sofa["caption1"] == "The person is leaning on the sofa which is beneath him/her."
    meta = json.loads((out / "metadata.json").read_text())["pairs"][8]
    assert meta["captions"][0] == [
        "The person is sitting on the sofa which is beneath him/her.",
        "The person is sitting on the sofa which is behind him/her.",
    ]
    # EqBen's path scheme: eqbenag/<video>/<object>/<pair of the object, 5 digits>/<AG frame, 6 digits>.png
    assert first["image0"] == "eqbenag/0A8CF.mp4/cup_glass_bottle/00000/000003.png"
    for rec, (_obj, a, b) in zip(records, AG_EXPECTED["appendix", "sets", 1], strict=True):
        # AG's 000003.png is the third frame ffmpeg dumps: decoded frame 2 (one frame late before)
        assert (shown(out / "images" / rec["image0"]), shown(out / "images" / rec["image1"])) == (a - 1, b - 1)
    summary = json.loads((out / "synth.json").read_text())["summary"]
    assert summary["left_out"] == {"object not visible": 1} and summary["pairs"] == 10
    assert "I_{i+2} (I_{j+2})" in summary["rules"]["reading"]["appendix"]
    cases = list(BENCHMARKS.get("eqben")(out).cases())
    assert len(cases) == 10 and {c.tags["subset"] for c in cases} == {"eqbenag"}


@pytest.mark.parametrize(
    ("options", "key"),
    [
        (["--ag-compare", "first"], ("appendix", "first", 1)),
        (["--ag-reading", "main-text"], ("main-text", "sets", 1)),
        (["--ag-skip", "2"], ("appendix", "sets", 2)),
    ],
)
def test_eq_ag_other_readings(action_genome, tmp_path, options, key):
    root = action_genome
    out = tmp_path / "ag"
    argv = ["--annotations", str(root / "annotations"), "--videos", str(root / "videos"), "--out", str(out)]
    assert synth(*argv, *options) == 0
    assert _ag_pairs(out) == AG_EXPECTED[key]


def test_an_action_genome_pickle_that_names_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("this ran",))

    path = tmp_path / "object_bbox_and_relationship.pkl"
    path.write_bytes(pickle.dumps({"x.mp4/000001.png": [Evil()]}))
    with pytest.raises(DataError, match=r"names builtins.print, which an Action Genome annotation never holds"):
        load_pickle(path)
    # what AG's files hold, as numpy 1 pickled them (module numpy.core.multiarray), loads
    data = {"k": np.arange(4, dtype=np.float32).reshape(1, 4), "t": (1.5, 2), "n": None, "s": ["a"]}
    raw = pickle.dumps(data, protocol=2).replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    path.write_bytes(raw)
    back = load_pickle(path)
    assert back["t"] == (1.5, 2) and back["k"].dtype == np.float32 and back["k"].tolist() == [[0, 1, 2, 3]]


# ---- EQ-GEBC ----------------------------------------------------------------------------------------


def gebc_entry(video, bid, t, prev, nxt, label, subject, before, after):
    """One entry as GEB+'s train.json / val.json write it (prev_timestamp the int 0 on a first boundary)."""
    return {"boundary_id": f"{video}_{bid}", "timestamp": t, "prev_timestamp": prev, "next_timestamp": nxt,
            "label": label, "subject": subject, "status_before": before, "status_after": after,
            "action_of_cause": None,
            "caption": f"Subject: {subject} //Status_Before: {before} //Status_After: {after}"}  # fmt: skip


BABY, MAN = "Xy3kLm9PqRs", "Qw7eRt5YuIo"
GEBC_TRAIN = {
    BABY: [
        gebc_entry(BABY, "0A", 2.03, 0, 4.47, "Change of Action", "baby in white dress",
                   "sitting on the bed while spreading his hand wide", "crawl to the pillow"),
        gebc_entry(BABY, "0B", 2.03, 0, 4.47, "Change of Action", "baby", "sitting", "crawl"),
        gebc_entry(BABY, "1A", 4.47, 2.03, 6.41, "Change of Subject", "baby in white shirt", "crawling on the bed",
                   "stop to hold the feet with the hands"),
        gebc_entry(BABY, "2A", 6.41, 4.47, 8.2, "Change of Action", "baby in white shirt", "holding the feet",
                   "lift the feet up"),
        gebc_entry(BABY, "3A", 8.2, 6.41, 9.9, "Multiple", "baby in white shirt", "lying on the bed",
                   "roll to the left"),
    ]
}  # fmt: skip
GEBC_VAL = {
    MAN: [
        gebc_entry(MAN, "0A", 3.0, 0, 5.5, "Change of Action", "man in red t-shirt", "standing near the table",
                   "walk towards the door"),
        gebc_entry(MAN, "1A", 5.5, 3.0, 7.25, "Change of Color", "the light", "shining white", "turn blue"),
        gebc_entry(MAN, "2A", 7.25, 5.5, 9.5, "Change of Object Being Interacted", "man in red t-shirt",
                   "holding a cup", "hold a phone"),
    ]
}  # fmt: skip
#: worked out by hand from App. B.2: (video, k, caption0, caption1, middle frames, edge frames) at 10 fps
GEBC_EXPECTED = [
    (MAN, 0, "Man in red t-shirt standing near the table.", "The light turn blue.", (15, 63), (29, 55)),
    (MAN, 1, "The light shining white.", "Man in red t-shirt hold a phone.", (42, 83), (54, 73)),
    (BABY, 0, "Baby in white dress sitting on the bed while spreading his hand wide.",
     "Baby in white shirt stop to hold the feet with the hands.", (10, 54), (20, 45)),  # EqBen Fig. 16
    (BABY, 2, "Baby in white shirt holding the feet.", "Baby in white shirt roll to the left.", (54, 90), (64, 82)),
]  # fmt: skip


@pytest.fixture(scope="module")
def kinetics(tmp_path_factory):
    root = tmp_path_factory.mktemp("gebc")
    videos = root / "videos" / "val_split" / "abseiling"  # Kinetics clips: <YouTube id>_<start>_<end>.mp4
    videos.mkdir(parents=True)
    for vid in (BABY, MAN):
        encode_numbered(videos / f"{vid}_000011_000021.mp4", 100, 10)
    (root / "train.json").write_text(json.dumps(GEBC_TRAIN), encoding="utf-8")
    (root / "val.json").write_text(json.dumps(GEBC_VAL), encoding="utf-8")
    return root


@pytest.mark.parametrize("frame", ["middle", "edge"])
def test_eq_gebc_keeps_every_pair_of_app_b2(kinetics, tmp_path, frame):
    root = kinetics
    out = tmp_path / frame
    argv = ["--source", "gebc", "--annotations", str(root / "train.json"), str(root / "val.json")]
    assert synth(*argv, "--videos", str(root / "videos"), "--gebc-frame", frame, "--out", str(out)) == 0
    records = json.loads((out / "all_select.json").read_text())
    meta = json.loads((out / "metadata.json").read_text())["pairs"]
    got = [(m["video"], m["boundaries"][0], r["caption0"], r["caption1"]) for m, r in zip(meta, records, strict=True)]
    assert got == [e[:4] for e in GEBC_EXPECTED]
    column = 4 if frame == "middle" else 5
    for rec, expected in zip(records, GEBC_EXPECTED, strict=True):
        assert (shown(out / "images" / rec["image0"]), shown(out / "images" / rec["image1"])) == expected[column]
    summary = json.loads((out / "synth.json").read_text())["summary"]
    assert summary["left_out"] == {"pair whose caption holds an action word (App. B.2)": 1}
    assert summary["annotated"] == 7  # boundaries: BABY's two entries of boundary 0 are one
    assert meta[2]["annotators"] == [2, 1]


# ---- EQ-YouCook2 ------------------------------------------------------------------------------------

YC2 = "GLd3aX16zBg"
SEGMENTS = [
    [2, 6, "spread margarine on two slices of white bread"],
    [7, 9, "place a slice of cheese on the bread"],
    [10, 15, "place the bread on the pan"],
    [16, 20, "flip the sandwich"],
]
#: worked out by hand from App. B.3 and Sec. 4.1: middle frames at 2 fps, segment 1's shows a face
YC2_FRAMES = {0: 8, 2: 25, 3: 36}
YC2_PAIRS = [(0, 2), (0, 3), (2, 3)]


@pytest.fixture(scope="module")
def youcook(tmp_path_factory):
    from skimage import data

    root = tmp_path_factory.mktemp("yc2")
    face = np.array(Image.fromarray(data.astronaut()).resize((128, 128)))
    food = np.array(Image.fromarray(data.coffee()).resize((128, 128)))
    face[:16] = food[:16] = 0
    videos = root / "raw_videos" / "training" / "113"
    videos.mkdir(parents=True)
    encode_numbered(videos / f"{YC2}.mp4", 44, 2, photo=lambda n: face if 14 <= n <= 17 else food)
    database = {
        YC2: {
            "duration": 21.5,
            "subset": "training",
            "recipe_type": "113",
            "annotations": [{"segment": s[:2], "id": k, "sentence": s[2]} for k, s in enumerate(SEGMENTS)],
            "video_url": f"https://www.youtube.com/watch?v={YC2}",
        }
    }
    (root / "youcookii_annotations_trainval.json").write_text(json.dumps({"database": database}), encoding="utf-8")
    return root


def test_eq_youcook2_pairs_any_two_kept_middle_frames(youcook, tmp_path):
    root = youcook
    out = tmp_path / "yc2"
    argv = ["--source", "youcook2", "--annotations", str(root / "youcookii_annotations_trainval.json")]
    assert synth(*argv, "--videos", str(root / "raw_videos"), "--out", str(out)) == 0
    records = json.loads((out / "all_select.json").read_text())
    captions = [s[2][0].upper() + s[2][1:] + "." for s in SEGMENTS]
    assert [(r["caption0"], r["caption1"]) for r in records] == [(captions[a], captions[b]) for a, b in YC2_PAIRS]
    for rec, (a, b) in zip(records, YC2_PAIRS, strict=True):
        assert rec["image0"].endswith(".npy")  # EqBen's released type: BGR arrays
        assert (shown(out / "images" / rec["image0"]), shown(out / "images" / rec["image1"])) == (
            YC2_FRAMES[a],
            YC2_FRAMES[b],
        )
    summary = json.loads((out / "synth.json").read_text())["summary"]
    assert summary["left_out"] == {"frame with a face (App. B.3)": 1} and summary["pairs"] == 3
    case = next(iter(BENCHMARKS.get("eqben")(out).cases()))
    assert frame_number(case.images[0].load()) == 8  # the loader reads the BGR arrays back as the frame
    out2 = tmp_path / "consecutive"
    assert (
        synth(*argv, "--videos", str(root / "raw_videos"), "--youcook2-pairs", "consecutive", "--out", str(out2)) == 0
    )
    assert len(json.loads((out2 / "all_select.json").read_text())) == 1


# ---- faults and resumption ---------------------------------------------------------------------------


def test_a_bad_video_is_skipped_and_counted_or_stops_the_run_cleanly(kinetics, tmp_path, capsys):
    root = kinetics
    videos = tmp_path / "videos"
    videos.mkdir()
    good = root / "videos" / "val_split" / "abseiling" / f"{MAN}_000011_000021.mp4"
    (videos / good.name).write_bytes(good.read_bytes())
    (videos / f"{BABY}.mp4").write_bytes(good.read_bytes()[:3000])  # truncated
    argv = ["--source", "gebc", "--annotations", str(root / "train.json"), str(root / "val.json")]
    out = tmp_path / "stop"
    assert synth(*argv, "--videos", str(videos), "--on-bad-video", "stop", "--out", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{BABY}.mp4" in err[0] and "Traceback" not in err[0]
    out = tmp_path / "skip"
    assert synth(*argv, "--videos", str(videos), "--out", str(out)) == 0
    summary = json.loads((out / "synth.json").read_text())["summary"]
    assert summary["videos"] == {"used": 1, "skipped": 1} and summary["pairs"] == 2
    assert f"{BABY}.mp4" in summary["skipped_videos"][BABY]


def digest(root):
    import hashlib

    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def test_an_interrupted_run_resumes_to_the_clean_runs_bytes(kinetics, tmp_path, monkeypatch):
    from spotdiff.synth.video import engine

    root = kinetics
    argv = ["--source", "gebc", "--annotations", str(root / "train.json"), str(root / "val.json")]
    argv += ["--videos", str(root / "videos"), "--workers", "1"]  # the patched decoder counts in this process
    clean = tmp_path / "clean"
    assert synth(*argv, "--out", str(clean)) == 0
    calls = []
    real = engine.read_frames

    def failing(video, requests):
        calls.append(video.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the second video: the run is stopped
        return real(video, requests)

    monkeypatch.setattr(engine, "read_frames", failing)
    out = tmp_path / "resumed"
    assert synth(*argv, "--out", str(out)) == 130
    assert not (out / "synth.json").exists() and (out / ".synth-run.json").is_file()
    calls.clear()
    assert synth(*argv, "--gebc-frame", "edge", "--out", str(out)) == 2  # other options: refused
    assert synth(*argv, "--out", str(out)) == 0
    assert len(calls) == 1  # only the video not finished was decoded again
    assert digest(out) == digest(clean)


def test_the_face_detector_on_real_photographs():
    from skimage import data

    from spotdiff.synth.video.youcook2 import FaceDetector

    detector = FaceDetector()
    found = {
        name: detector.has_face(Image.fromarray(getattr(data, name)())) for name in ("astronaut", "chelsea", "coffee")
    }
    assert found == {"astronaut": True, "chelsea": False, "coffee": False}


def test_videos_decoded_by_several_workers_give_the_same_files(youcook, tmp_path):
    """Three videos, the most pairs 4: the third video is never needed, whatever the workers decoding ahead."""
    root = tmp_path / "yc2"
    videos = root / "raw_videos" / "training" / "113"
    videos.mkdir(parents=True)
    source = youcook / "raw_videos" / "training" / "113" / f"{YC2}.mp4"
    annotations = json.loads((youcook / "youcookii_annotations_trainval.json").read_text())["database"][YC2]
    database = {}
    for vid in ("aaaaaaaaaaa", "bbbbbbbbbbb", "ccccccccccc"):
        (videos / f"{vid}.mp4").write_bytes(source.read_bytes())
        database[vid] = annotations
    (root / "ann.json").write_text(json.dumps({"database": database}), encoding="utf-8")
    argv = ["--source", "youcook2", "--annotations", str(root / "ann.json"), "--videos", str(root / "raw_videos")]
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        assert synth(*argv, "--count", "4", "--workers", workers, "--out", str(out)) == 0
        outs.append(out)
    assert digest(outs[0]) == digest(outs[1])
    summary = json.loads((outs[0] / "synth.json").read_text())["summary"]
    assert summary["pairs"] == 4 and summary["videos"] == {"used": 2, "skipped": 0}
    assert not list((outs[1] / "images" / "eqbenyoucook2").glob("ccccccccccc/*"))
