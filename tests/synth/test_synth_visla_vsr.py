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

A, B = "000000000001.jpg", "000000000002.jpg"


def vsr_line(image, caption, label, relation, **roles):
    """One record as VSR's splits write it (vote ids as strings, reference_frame)."""
    return {
        "image": image,
        "image_link": f"http://images.cocodataset.org/train2017/{image}",
        "caption": caption,
        "label": label,
        "relation": relation,
        "annotator_id": 1,
        "vote_true_validator_id": "[2, 7]",
        "vote_false_validator_id": "[]",
        "reference_frame": None,
        **roles,
    }


RECORDS = [
    vsr_line(A, "The cat is in the basket.", 1, "in"),
    vsr_line(A, "The basket contains the cat.", 1, "contains"),
    vsr_line(A, "The cat is on the basket.", 0, "on"),
    vsr_line(B, "The cat is outside the basket.", 1, "outside"),  # no switched partner
    vsr_line(B, "The dog is left of the car.", 1, "left of", subj="dog", obj="car"),
    vsr_line(B, "The car is right of the dog.", 1, "right of", subj="car", obj="dog"),
    vsr_line(B, "A weird caption", 1, "near"),  # off the template, no subj/obj
]


@pytest.fixture
def vsr_file(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    return path


def test_mining_follows_the_paper_on_a_hand_worked_example(vsr_file):
    rows, skipped = mine_vsr(read_vsr(vsr_file))
    assert [(r["p1"], r["p2"]) for r in rows] == [
        ("The cat is in the basket.", "The basket contains the cat."),
        ("The basket contains the cat.", "The cat is in the basket."),
        ("The dog is left of the car.", "The car is right of the dog."),
        ("The car is right of the dog.", "The dog is left of the car."),
    ]
    # J(P1, .) over the unique captions not true of image A: "on" and "outside" 4/6 (tie: by text),
    # then the two dog/car captions 2/9; the weird caption 0 is the irrelevant reference
    first = rows[0]
    assert [c["text"] for c in first["candidates"]] == [
        "The cat is on the basket.",
        "The cat is outside the basket.",
        "The car is right of the dog.",
    ]
    assert [c["jaccard"] for c in first["candidates"]] == [0.6667, 0.6667, 0.2222]
    assert first["n"] == "The cat is on the basket." and first["irrelevant"] == "A weird caption"
    assert skipped == {
        "no subject/object (caption off the template, no subj/obj fields)": 1,
        "no true caption of the image with subject and object switched": 1,
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
    for k, name in enumerate((A, B)):
        Image.new("RGB", (32, 32), (200 * k, 80, 40)).save(images / name)
    out = tmp_path / "out"
    assert main(["synth", "visla-vsr", "--vsr", str(vsr_file), "--images", str(images), "--out", str(out)]) == 0
    cases = list(BENCHMARKS.get("visla-spatial")(out).cases())
    assert len(cases) == 4 and (out / "review.html").is_file() and (out / "candidates.jsonl").is_file()
    assert set(cases[0].texts) == {
        "The cat is in the basket.",
        "The basket contains the cat.",
        "The cat is on the basket.",
    }
    clip = tiny_models.make_tiny_clip(tmp_path / "clip")
    res = tmp_path / "res"
    argv = ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "visla-spatial", "--data", str(out), "--out", str(res)]
    assert main([*argv, "--no-store", "--no-cache", "-q", "--n-boot", "10", "--device", "cpu"]) == 0
    assert json.loads((res / "metrics.json").read_text())["n_cases"] == 4


def test_experts_edit_the_review_sheet_and_get_the_spatial_tsv(vsr_file, tmp_path):
    import csv

    out = tmp_path / "mined"
    assert main(["synth", "visla-vsr", "--vsr", str(vsr_file), "--out", str(out)]) == 0
    sheet = out / "review.csv"
    rows = list(csv.reader(sheet.open(encoding="utf-8", newline="")))
    assert rows[0] == ["id", "decision", "image", "p1", "p2", "n", "irrelevant", "verdict", "details"]
    rows[2][1] = "reject"  # the experts drop one triplet and pick the second candidate for another
    rows[1][5] = "The cat is outside the basket."
    with sheet.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    final = tmp_path / "final"
    assert main(["synth", "visla", "--from-review", str(sheet), "--out", str(final)]) == 0
    assert json.loads((final / "synth.json").read_text())["summary"]["benchmark"] == "visla-spatial"
    cases = list(BENCHMARKS.get("visla-spatial")(final).cases())
    assert len(cases) == 3 and cases[0].texts[2] == "The cat is outside the basket."
