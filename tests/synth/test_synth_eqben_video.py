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
from spotdiff.synth.eqben_video import frame_at, read_action_genome

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
