"""What'sUp: the six published JSON files in their schema, the official preposition grouping, and
accuracy equal to a transcription of the authors' evaluate_scores on score matrices with ties."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.errors import DataError
from spotdiff.protocols import get_protocol
from spotdiff.testing.formats import write_whatsup


def test_whatsup_reads_the_published_schema(tmp_path: Path) -> None:
    bench = get_benchmark("whatsup")(write_whatsup(tmp_path))
    cases = bench.load()
    assert len(cases) == bench.report.records == 8
    by_id = {c.id: c for c in cases}
    a = by_id["controlled-a/1"]
    assert a.texts[0] == "A beer bottle to the left of a armchair" and a.truth.tolist() == [[True, False, False, False]]
    assert a.images[0].path == tmp_path / "controlled_images" / "beer-bottle_left_of_armchair.jpeg"
    assert a.tags == {"subset": "controlled-a", "preposition": "left_of"}
    assert by_id["controlled-a/0"].tags["preposition"] == "on"
    assert by_id["controlled-b/0"].tags["preposition"] == "in-front_of"
    assert by_id["coco-qa-one/0"].images[0].path == tmp_path / "val2017" / "000000397133.jpg"
    assert by_id["coco-qa-one/0"].tags["preposition"] == "left"
    assert [by_id[f"coco-qa-two/{k}"].tags["preposition"] for k in (0, 1)] == ["above", "left"]
    assert by_id["vg-qa-one/0"].tags["preposition"] == "top"
    vg = by_id["vg-qa-two/0"]
    assert vg.images[0].path == tmp_path / "vg_images" / "2344765.jpg" and vg.tags["preposition"] == "behind"
    assert vg.texts == ("A car behind a bus", "A car in front of a bus")
    assert [c.id for c in get_benchmark("whatsup")(tmp_path).load("vg-qa-one")] == ["vg-qa-one/0"]


@pytest.mark.parametrize(
    ("file", "data", "field"),
    [
        ("coco_qa_one_obj.json", [[1, "a"]], None),
        ("vg_qa_two_obj.json", [[1, "", "b"]], "captions"),
        ("controlled_images_dataset.json", [{"image_path": "x.jpeg"}], "caption_options"),
        ("controlled_clevr_dataset.json", [{"caption_options": ["a", "b"]}], "image_path"),
    ],
)
def test_whatsup_bad_records_name_the_file_and_field(tmp_path: Path, file: str, data: list, field: str) -> None:
    write_whatsup(tmp_path)
    (tmp_path / file).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError) as info:
        get_benchmark("whatsup")(tmp_path).load()
    assert info.value.file.endswith(file) and info.value.record == "0" and info.value.field == field


def _official_accuracy(scores: np.ndarray) -> float:
    """What'sUp's evaluate_scores (dataset_zoo/aro_datasets.py, Controlled_Images / COCO_QA / VG_QA,
    commit 7c1f255), from the scores on: ``scores`` is N x 1 x K, the first caption right."""
    scores_i2t = scores
    preds = np.argmax(np.squeeze(scores_i2t, axis=1), axis=-1)
    correct_mask = preds == 0
    return float(np.mean(correct_mask))


def test_accuracy_equals_the_authors_code_with_ties(tmp_path: Path) -> None:
    cases = get_benchmark("whatsup")(write_whatsup(tmp_path)).load("controlled-a") * 3
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 3, size=(len(cases), 1, 4)).astype(float)  # coarse: many ties
    scores[0, 0] = [1.0, 1.0, 0.0, 0.0]  # a tie for the top, the true caption first
    argmax = get_protocol("i2t-top1", "argmax")
    strict = get_protocol("i2t-top1", "strict")
    ours = np.mean([argmax.outcomes(c, s)[0]["accuracy"] for c, s in zip(cases, scores, strict=True)])
    assert ours == _official_accuracy(scores)
    assert strict.outcomes(cases[0], scores[0])[0]["accuracy"] == 0.0  # strict: the tie fails
