"""VISLA Spatial from VSR (Sec. 3.3): positives with subject and object switched on the same image,
negatives ranked by Jaccard over VSR's unique captions (top 3), on hand-made records in VSR's
published JSON-lines schema whose right answer is worked out by hand; the output is scored by eval."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.cli import main
from spotdiff.errors import DataError
from spotdiff.synth.text.visla_vsr import mine_vsr, read_vsr

A, B, C, D = "000000000001.jpg", "000000000002.jpg", "000000000003.jpg", "000000000004.jpg"


def vsr_line(image, caption, label, relation, **roles):
    """One record as VSR's splits write it (vote ids as strings, reference_frame; the zero-shot splits
    add subj and obj)."""
    return {
        "image": image,
        "image_link": f"http://images.cocodataset.org/train2017/{image}",
        "caption": caption,
        "label": label,
        "relation": relation,
        **roles,
        "annotator_id": 1,
        "vote_true_validator_id": "[2, 7]",
        "vote_false_validator_id": "[]",
        "reference_frame": None,
    }


RECORDS = [
    vsr_line(A, "The cat is in the basket.", 1, "in"),
    vsr_line(A, "The basket contains the cat.", 1, "contains"),
    vsr_line(A, "The cat is on the basket.", 0, "on"),
    vsr_line(B, "The cat is outside the basket.", 1, "outside"),  # no switched partner; A's initial negative
    vsr_line(B, "The cat is under the basket.", 0, "under"),
    vsr_line(C, "The dog is left of the car.", 1, "left of", subj="dog", obj="car"),
    vsr_line(C, "The car is right of the dog.", 1, "right of", subj="car", obj="dog"),
    # VSR's zero-shot files drop a first letter of some subjects; the caption names the horse
    vsr_line(D, "The horse is next to the bus.", 1, "next to", subj="orse", obj="bus"),
    vsr_line(D, "The bus is next to the horse.", 1, "next to", subj="bus", obj="horse"),
    vsr_line(B, "A weird caption", 1, "near"),  # off the template, no subj/obj
]


@pytest.fixture
def vsr_file(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    return path


def test_mining_follows_the_paper_on_a_hand_worked_example(vsr_file):
    rows, skipped = mine_vsr(read_vsr(vsr_file))
    # "We utilized subject and object fields to identify the positive pair (P1, P2) for an image": each pair once
    assert [(r["p1"], r["p2"]) for r in rows] == [
        ("The cat is in the basket.", "The basket contains the cat."),
        ("The dog is left of the car.", "The car is right of the dog."),
        ("The horse is next to the bus.", "The bus is next to the horse."),
    ]
    # Jaccard of word sets to P1 over the unique captions other than the image's true ones: "on", "outside",
    # "under" the basket 4/6 (ties by text), the dog, horse and bus captions 2/9, the weird caption 0
    first = rows[0]
    assert [c["text"] for c in first["candidates"]] == [
        "The cat is on the basket.",
        "The cat is outside the basket.",
        "The cat is under the basket.",
    ]
    assert [c["jaccard"] for c in first["candidates"]] == [0.6667, 0.6667, 0.6667]
    # the initial negative: "a different image containing the same object" (B), its true caption
    assert first["n"] == "The cat is outside the basket." and first["irrelevant"] == "A weird caption"
    # no other image holds a dog and a car: N is the top candidate (2/9: the cat captions, by text)
    second = rows[1]
    assert second["n"] == "The cat is in the basket." and second["n_source"] == "top Jaccard candidate"
    assert [c["jaccard"] for c in second["candidates"]] == [0.2222, 0.2222, 0.2222]
    assert skipped == {
        "no subject/object (caption off the template, no subj/obj fields)": 1,
        "no true caption of the image with subject and object switched": 1,
        "no other image with the same objects (N: the top Jaccard candidate)": 2,
    }
    assert len(mine_vsr(read_vsr(vsr_file), n=1)[0]) == 1


def test_bad_vsr_records_name_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n" + json.dumps({**RECORDS[1], "label": "yes"}) + "\n")
    with pytest.raises(DataError) as err:
        read_vsr(path)
    assert (err.value.record, err.value.field) == ("line 2", "label")


def test_cli_writes_the_published_tsv_and_eval_scores_it(vsr_file, tmp_path):
    from spotdiff.testing import tiny_models

    images = tmp_path / "coco"
    images.mkdir()
    for k, name in enumerate((A, B, C, D)):
        Image.new("RGB", (32, 32), (60 * k, 80, 40)).save(images / name)
    out = tmp_path / "out"
    assert main(["synth", "visla-vsr", "--vsr", str(vsr_file), "--images", str(images), "--out", str(out)]) == 0
    cases = list(BENCHMARKS.get("visla-spatial")(out).cases())
    assert len(cases) == 3 and (out / "review.html").is_file() and (out / "candidates.jsonl").is_file()
    assert set(cases[0].texts) == {
        "The cat is in the basket.",
        "The basket contains the cat.",
        "The cat is outside the basket.",
    }
    clip = tiny_models.make_tiny_clip(tmp_path / "clip")
    res = tmp_path / "res"
    argv = ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "visla-spatial", "--data", str(out), "--out", str(res)]
    assert main([*argv, "--no-store", "--no-cache", "-q", "--n-boot", "10", "--device", "cpu"]) == 0
    assert json.loads((res / "metrics.json").read_text())["n_cases"] == 3


def test_experts_edit_the_review_sheet_and_get_the_spatial_tsv(vsr_file, tmp_path):
    import csv

    out = tmp_path / "mined"
    assert main(["synth", "visla-vsr", "--vsr", str(vsr_file), "--out", str(out)]) == 0
    sheet = out / "review.csv"
    rows = list(csv.reader(sheet.open(encoding="utf-8", newline="")))
    assert rows[0] == ["id", "decision", "image", "p1", "p2", "n", "irrelevant", "verdict", "details"]
    rows[2][1] = "reject"  # the experts drop one triplet and pick another candidate for another
    rows[1][5] = "The cat is under the basket."
    with sheet.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    final = tmp_path / "final"
    assert main(["synth", "visla", "--from-review", str(sheet), "--out", str(final)]) == 0
    assert json.loads((final / "synth.json").read_text())["summary"]["benchmark"] == "visla-spatial"
    cases = list(BENCHMARKS.get("visla-spatial")(final).cases())
    assert len(cases) == 2 and cases[0].texts[2] == "The cat is under the basket."
