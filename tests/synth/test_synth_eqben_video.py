"""EQ-AG pairs mined from a small real video (encoded here with PyAV) and hand-made annotation files in
Action Genome's published schema, whose right answer is worked out by hand: which frames pair (at least
2 of 3 relationships differ), which are skipped (both readings of the skip rule), which frames are
decoded (seeking by timestamp), and the output scored by ``spotdiff eval``."""

from __future__ import annotations

import json
import pickle

import av
import numpy as np
import pytest
from PIL import Image

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.cli import main
from spotdiff.errors import DataError
from spotdiff.synth.video.engine import frame_at, read_action_genome

VIDEO = "ABC12.mp4"
FPS = 8
#: annotated frame -> the cup's (attention, spatial, contacting) relationships
CUP = {
    2: ("looking_at", "in_front_of", "holding"),
    5: ("looking_at", "in_front_of", "touching"),  # 1 differs from frame 2
    8: ("not_looking_at", "beneath", "holding"),  # 2 differ from frame 2
    11: ("not_looking_at", "behind", "not_contacting"),  # 3 differ from frame 2
    14: ("looking_at", "behind", "touching"),
    17: ("looking_at", "behind", "holding"),
    20: ("not_looking_at", "above", "holding"),  # 3 differ from frame 14
}


def encode(path, frames: int = 24) -> None:
    """Frame k is a flat grey of value 10 k, so a decoded frame tells its own number."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=FPS)
        stream.width = stream.height = 64
        stream.pix_fmt = "yuv420p"
        stream.gop_size = 4
        stream.options = {"qscale": "2"}
        for k in range(frames):
            image = np.full((64, 64, 3), 10 * k, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def ag_object(cls, relations, visible=True):
    att, spa, con = relations
    return {
        "class": cls,
        "bbox": (10.0, 12.0, 20.0, 18.0),
        "attention_relationship": [att],
        "spatial_relationship": [spa],
        "contacting_relationship": [con],
        "metadata": {"tag": "", "set": "train"},
        "visible": visible,
    }


@pytest.fixture
def dataset(tmp_path):
    videos, ann = tmp_path / "videos", tmp_path / "annotations"
    videos.mkdir()
    ann.mkdir()
    encode(videos / VIDEO)
    objects, persons = {}, {}
    for frame, rel in CUP.items():
        key = f"{VIDEO}/{frame:06d}.png"
        objects[key] = [ag_object("cup", rel)]
        persons[key] = {"bbox": np.array([[1.0, 2.0, 30.0, 60.0]]), "bbox_score": np.array([0.9]), "bbox_mode": "xyxy"}
    objects[f"{VIDEO}/000005.png"].append(ag_object("sofa", ("unsure", "behind", "sitting_on"), visible=False))
    objects[f"{VIDEO}/000023.png"] = [ag_object("cup", ("looking_at", "above", "wiping"))]
    persons[f"{VIDEO}/000023.png"] = {"bbox": np.zeros((0, 4)), "bbox_score": np.zeros(0), "bbox_mode": "xyxy"}
    for name, data in (("object_bbox_and_relationship.pkl", objects), ("person_bbox.pkl", persons)):
        (ann / name).write_bytes(pickle.dumps(data))
    return ann, videos


def test_frames_are_decoded_by_timestamp(tmp_path):
    encode(tmp_path / "v.mp4")
    for k in (0, 3, 9, 17, 23):  # across keyframes (gop 4): seek back, decode forward
        mean = np.asarray(frame_at(tmp_path / "v.mp4", k / FPS)).mean()
        assert round(mean / 10) == k
    with pytest.raises(DataError, match=r"no frame at 5.000 s \(its last frame is at 2.875 s\)"):
        frame_at(tmp_path / "v.mp4", 5.0)


@pytest.mark.parametrize(("skip", "frames"), [(1, [[2, 8], [14, 20]]), (2, [[2, 11]])])
def test_pairs_follow_the_frame_filter_and_eval_scores_them(dataset, tmp_path, skip, frames):
    ann, videos = dataset
    out = tmp_path / f"skip{skip}"
    argv = ["synth", "eqben-video", "--source", "ag", "--annotations", str(ann), "--videos", str(videos)]
    assert main([*argv, "--ag-skip", str(skip), "--out", str(out)]) == 0
    meta = json.loads((out / "metadata.json").read_text())["pairs"]
    assert [m["frames"] for m in meta] == frames
    summary = json.loads((out / "synth.json").read_text())["summary"]
    assert summary["left_out"] == {"frame without a person box": 1, "object not visible": 1}
    assert summary["rules"]["skip_after_chosen"] == skip
    records = json.loads((out / "all_select.json").read_text())
    assert records[0]["caption0"] == "The person is looking at the cup which is in front of him/her."
    for rec, pair in zip(records, frames, strict=True):
        for slot, frame in zip(("image0", "image1"), pair, strict=True):
            with Image.open(out / "images" / rec[slot]) as im:
                assert round(np.asarray(im).mean() / 10) == frame
    cases = list(BENCHMARKS.get("eqben")(out).cases())
    assert len(cases) == len(frames) and cases[0].tags["subset"] == "eqbenag"
    if skip == 1:
        from spotdiff.testing import tiny_models

        clip = tiny_models.make_tiny_clip(tmp_path / "clip")
        res = tmp_path / "res"
        common = ["--out", str(res), "--no-store", "--no-cache", "-q", "--n-boot", "10", "--device", "cpu"]
        assert main(["eval", "--model", f"hf-clip:{clip}", "--benchmark", "eqben", "--data", str(out), *common]) == 0
        assert json.loads((res / "metrics.json").read_text())["n_cases"] == 2


def test_contacting_captions_and_bad_annotations(dataset, tmp_path):
    ann, videos = dataset
    out = tmp_path / "c"
    argv = ["synth", "eqben-video", "--annotations", str(ann), "--videos", str(videos), "--out", str(out)]
    assert main([*argv, "--ag-relation", "contacting"]) == 0
    first = json.loads((out / "all_select.json").read_text())[0]
    assert first["caption1"] == "The person is holding the cup which is beneath him/her."
    objects = pickle.loads((ann / "object_bbox_and_relationship.pkl").read_bytes())
    objects[f"{VIDEO}/000008.png"][0]["spatial_relationship"] = []
    (ann / "object_bbox_and_relationship.pkl").write_bytes(pickle.dumps(objects))
    with pytest.raises(DataError) as err:
        read_action_genome(ann / "object_bbox_and_relationship.pkl", ann / "person_bbox.pkl")
    assert (err.value.record, err.value.field) == (f"{VIDEO}/000008.png object 0", "spatial_relationship")


def gebc_boundary(k, t, label, before, after, subject="man"):
    """One boundary as Kinetics-GEBC's annotation files write it."""
    return {
        "boundary_id": f"gebcvid0001_{k}",
        "timestamp": t,
        "prev_timestamp": round(t - 0.5, 3) if k else 0,
        "next_timestamp": t + 0.5,
        "label": label,
        "subject": subject,
        "status_before": before,
        "status_after": after,
        "action_of_cause": None if label == "Change of Action" else "comes into the scene",
        "caption": f"Subject: {subject} //Status_Before: {before} //Status_After: {after}",
    }


GEBC = {
    "gebcvid0001": [
        gebc_boundary(0, 0.5, "Change of Action", "holding a cup", "drink from the cup"),
        gebc_boundary(1, 1.0, "Change of Action", "drinking from the cup", "read a book"),
        gebc_boundary(2, 1.5, "Change of Subject", "/0", "/1", subject="woman"),
        gebc_boundary(3, 2.0, "Change of Action", "reading a book", "stand"),
        gebc_boundary(4, 2.5, "Change of Action", "standing", "look up at the ceiling"),  # an action word
    ]
}


@pytest.mark.parametrize(
    ("options", "frames", "left"),
    [
        ([], [[2, 10]], {"not two changes of action of one subject": 1}),
        (["--gebc-frame", "edge"], [[3, 8]], {"not two changes of action of one subject": 1}),
        (
            ["--gebc-step", "1"],
            [[2, 10]],
            {"caption with an action word": 1, "not two changes of action of one subject": 2},
        ),
    ],
)
def test_gebc_pairs_skip_a_boundary(tmp_path, options, frames, left):
    videos = tmp_path / "videos"
    videos.mkdir()
    encode(videos / "gebcvid0001.mp4")
    ann = tmp_path / "val.json"
    ann.write_text(json.dumps(GEBC), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["synth", "eqben-video", "--source", "gebc", "--annotations", str(ann), "--videos", str(videos)]
    assert main([*argv, *options, "--out", str(out)]) == 0
    summary = json.loads((out / "synth.json").read_text())["summary"]
    assert summary["left_out"] == left and summary["pairs"] == len(frames)
    records = json.loads((out / "all_select.json").read_text())
    assert (records[0]["caption0"], records[0]["caption1"]) == ("man holding a cup", "man read a book")
    for rec, pair in zip(records, frames, strict=True):
        got = [round(np.asarray(Image.open(out / "images" / rec[s])).mean() / 10) for s in ("image0", "image1")]
        assert got == pair
    assert [c.tags["subset"] for c in BENCHMARKS.get("eqben")(out).cases()] == ["eqbengebc"] * len(frames)


def test_youcook2_keeps_middle_frames_without_faces(tmp_path):
    from skimage import data

    photos = {
        name: np.asarray(Image.fromarray(getattr(data, name)()).resize((128, 128)))
        for name in ("chelsea", "astronaut", "coffee")
    }
    scenes = ["chelsea", "astronaut", "coffee", "chelsea"]  # 10 frames each at 4 fps: segments of 2.5 s
    videos = tmp_path / "videos"
    videos.mkdir()
    with av.open(str(videos / "yc2vid00001.mp4"), "w") as container:
        stream = container.add_stream("mpeg4", rate=4)
        stream.width = stream.height = 128
        stream.pix_fmt = "yuv420p"
        stream.options = {"qscale": "2"}
        for name in scenes:
            for _ in range(10):
                for packet in stream.encode(av.VideoFrame.from_ndarray(photos[name], format="rgb24")):
                    container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    sentences = ["look at the cat", "greet the astronaut", "pour the coffee", "feed the cat"]
    database = {
        "yc2vid00001": {
            "duration": 10.0,
            "subset": "validation",
            "recipe_type": "113",
            "annotations": [
                {"segment": [2.5 * k, 2.5 * (k + 1)], "id": k, "sentence": s} for k, s in enumerate(sentences)
            ],
            "video_url": "https://www.youtube.com/watch?v=yc2vid00001",
        }
    }
    ann = tmp_path / "youcookii_annotations_trainval.json"
    ann.write_text(json.dumps({"database": database}), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["synth", "eqben-video", "--source", "youcook2", "--annotations", str(ann), "--videos", str(videos)]
    assert main([*argv, "--out", str(out)]) == 0
    summary = json.loads((out / "synth.json").read_text())["summary"]
    assert summary["left_out"] == {"frame with a face": 1, "unpaired last frame": 1}
    assert "scikit-image LBP frontal-face cascade" in summary["rules"]["filter"]
    (rec,) = json.loads((out / "all_select.json").read_text())
    assert (rec["caption0"], rec["caption1"]) == ("look at the cat", "pour the coffee")
    for slot, name in (("image0", "chelsea"), ("image1", "coffee")):
        decoded = np.asarray(Image.open(out / "images" / rec[slot]), dtype=float)
        distance = {k: np.abs(decoded - photo).mean() for k, photo in photos.items()}
        assert min(distance, key=distance.get) == name and distance[name] < 20  # the right segment's frame


def test_the_face_detector_on_real_photographs():
    from skimage import data

    from spotdiff.synth.video.engine import FaceDetector

    detector = FaceDetector()
    found = {
        name: detector.has_face(Image.fromarray(getattr(data, name)())) for name in ("astronaut", "chelsea", "coffee")
    }
    assert found == {"astronaut": True, "chelsea": False, "coffee": False}
