"""What'sUp: the six published JSON files in their schema, the official preposition grouping, and
accuracy equal to a transcription of the authors' evaluate_scores on score matrices with ties."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.whatsup import FILES
from spotdiff.errors import DataError
from spotdiff.protocols import get_protocol
from spotdiff.protocols.stats import evaluate
from spotdiff.testing.formats import write_whatsup


def test_whatsup_reads_the_published_schema(tmp_path: Path) -> None:
    bench = get_benchmark("whatsup")(write_whatsup(tmp_path))
    cases = bench.load()
    assert len(cases) == bench.report.records == 16
    by_id = {c.id: c for c in cases}
    a = by_id["controlled-a/2"]
    assert a.texts[0] == "A beer bottle to the left of a armchair" and a.truth.tolist() == [[True, False, False, False]]
    assert a.images[0].path == tmp_path / "controlled_images" / "beer-bottle_left_of_armchair.jpeg"
    assert a.tags == {"subset": "controlled-a", "preposition": "left_of", "set": "beer-bottle|armchair",
                      "set_preposition": "left"}  # fmt: skip
    assert by_id["controlled-a/0"].tags["preposition"] == "on"
    b = by_id["controlled-b/0"]
    assert b.tags["preposition"] == "in-front_of" and b.tags["set_preposition"] == "in-front"
    assert b.tags["set"] == "cube|sphere"
    assert by_id["coco-qa-one/0"].images[0].path == tmp_path / "val2017" / "000000397133.jpg"
    assert by_id["coco-qa-one/0"].tags == {"subset": "coco-qa-one", "preposition": "left"}  # in no set
    assert [by_id[f"coco-qa-two/{k}"].tags["preposition"] for k in (0, 1)] == ["above", "left"]
    assert by_id["vg-qa-one/0"].tags["preposition"] == "top"
    vg = by_id["vg-qa-two/0"]
    assert vg.images[0].path == tmp_path / "vg_images" / "2344765.jpg" and vg.tags["preposition"] == "behind"
    assert vg.texts == ("A car behind a bus", "A car in front of a bus")
    assert [c.id for c in get_benchmark("whatsup")(tmp_path).load("vg-qa-one")] == ["vg-qa-one/0"]
    assert bench.metadata.subset_groups["gqa"] == ("vg-qa-one", "vg-qa-two")


@pytest.mark.parametrize(
    ("file", "data", "field"),
    [
        ("coco_qa_one_obj.json", [[1, "a"]], None),
        ("vg_qa_two_obj.json", [[1, "", "b"]], "captions"),
        ("controlled_images_dataset.json", [{"image_path": "x.jpeg"}], "caption_options"),
        ("controlled_clevr_dataset.json", [{"caption_options": ["a", "b"]}], "image_path"),
        (
            "controlled_images_dataset.json",
            [{"image_path": "data/controlled_images/mug_behind_table.jpeg", "caption_options": ["a", "b"]}],
            "image_path",
        ),  # not an A preposition
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


def _official_sets(dataset: list[dict], correct_mask: np.ndarray, subset: str) -> tuple[float, float]:
    """The pair and set accuracy of What'sUp's Controlled_Images.evaluate_scores (dataset_zoo/aro_datasets.py,
    commit 7c1f255), transcribed from the eval_dict it fills to the two ratios it prints."""

    def key(d):
        return (d["image_path"].split("/")[-1].split("_")[0], d["image_path"].split("/")[-1].split("_")[-1][:-5])

    slots = ("on", "under") if subset == "A" else ("in-front", "behind")
    eval_dict = {key(d): {"left": 0, "right": 0, slots[0]: 0, slots[1]: 0} for d in dataset}
    for d, correct in zip(dataset, correct_mask, strict=True):
        eval_dict[key(d)][d["image_path"].split("/")[-1].split("_")[1]] = correct
    pair_correct = 0
    set_correct = 0
    for _obj_pair, correct_dict in eval_dict.items():
        if correct_dict["left"] and correct_dict["right"]:
            pair_correct += 1
        if correct_dict[slots[0]] and correct_dict[slots[1]]:
            pair_correct += 1
        if sum(correct_dict.values()) == 4:
            set_correct += 1
    return pair_correct * 100 / (len(dataset) / 2), set_correct * 100 / (len(dataset) / 4)


def _random_controlled(rng: np.random.Generator, subset: str) -> list[dict]:
    """Controlled records in the published schema: whole sets, a set missing an image, and an image listed
    twice (the authors' dict keeps the later), in a shuffled order."""
    preps = ("on", "under", "left_of", "right_of") if subset == "A" else ("in-front_of", "behind", "left_of",
                                                                          "right_of")  # fmt: skip
    folder = "controlled_images" if subset == "A" else "controlled_clevr"
    records = []
    for k in range(12):
        kept = preps if k % 4 else preps[: 1 + k % 3]
        for prep in kept:
            captions = [f"A thing {k} {p.replace('_', ' ')} a table" for p in (prep, *(q for q in preps if q != prep))]
            path = f"data/{folder}/thing-{k}_{prep}_table-{k}.jpeg"
            records.append({"image_path": path, "caption_options": captions})
    records.append(dict(records[5]))  # a duplicate of one image
    return [records[i] for i in rng.permutation(len(records))]


@pytest.mark.parametrize("ties", ["argmax", "strict"])
@pytest.mark.parametrize("subset", ["A", "B"])
def test_pair_and_set_accuracy_equal_the_authors_code_with_ties(tmp_path: Path, subset: str, ties: str) -> None:
    rng = np.random.default_rng(1 if subset == "A" else 2)
    dataset = _random_controlled(rng, subset)
    name = {"A": "controlled-a", "B": "controlled-b"}[subset]
    write_whatsup(tmp_path)
    (tmp_path / FILES[name][0]).write_text(json.dumps(dataset), encoding="utf-8")
    cases = get_benchmark("whatsup")(tmp_path).load(name)
    for trial in range(20):
        scores = rng.integers(0, 3, size=(len(cases), 1, 4)).astype(float)  # many ties
        scores[trial % len(cases), 0] = [2.0, 2.0, 0.0, 0.0]  # a tie for the top, the true caption first
        preds = np.argmax(np.squeeze(scores, axis=1), axis=-1)
        mask = preds == 0 if ties == "argmax" else scores[:, 0, 0] > scores[:, 0, 1:].max(axis=1)
        result = evaluate(get_protocol("whatsup", ties), cases, list(scores), n_boot=0).metrics[name]
        assert result["accuracy"] == pytest.approx(100 * mask.mean())
        pair, set_ = _official_sets(dataset, mask, subset)
        assert (result["pair_accuracy"], result["set_accuracy"]) == (pytest.approx(pair), pytest.approx(set_))


def test_table_1_macro_averages_and_sets_only_where_there_are_sets(tmp_path: Path) -> None:
    cases = get_benchmark("whatsup")(write_whatsup(tmp_path)).load()
    scores = [np.array([[1.0] + [0.0] * (len(c.texts) - 1)]) for c in cases]  # every image right
    scores[0] = np.array([[0.0, 1.0, 0.0, 0.0]])  # but beer-bottle "on": its pair and its set fail
    groups = get_benchmark("whatsup").metadata.subset_groups
    metrics = evaluate(get_protocol("whatsup"), cases, scores, n_boot=0, groups=groups).metrics
    # controlled-a: 7 images; pairs right: beer-bottle left/right, mug left/right: 2 / (7 / 2); sets: none
    assert metrics["controlled-a"]["pair_accuracy"] == pytest.approx(400 / 7)
    assert metrics["controlled-a"]["set_accuracy"] == 0.0 and metrics["controlled-b"]["set_accuracy"] == 100.0
    assert metrics["controlled"]["accuracy"] == pytest.approx((600 / 7 + 100) / 2)  # Table 1: the macro average
    assert metrics["controlled"]["pair_accuracy"] == pytest.approx((400 / 7 + 100) / 2)
    assert metrics["coco-qa"]["accuracy"] == 100.0 and np.isnan(metrics["coco-qa-one"]["pair_accuracy"])
    assert metrics["all"]["pair_accuracy"] == pytest.approx(100 * (4 + 4) / 11)  # over the controlled images
