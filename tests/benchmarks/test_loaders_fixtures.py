"""Loaders of benchmarks whose real files are unavailable here, tested on fixtures written in their
published schemas (``tests/fixtures_formats.py``): EqBen, Winoground, SPEC, ARO, CREPE, and the
COCO / Flickr30K Karpathy retrieval splits."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spotdiff.benchmarks import BENCHMARKS, get_benchmark
from spotdiff.benchmarks._io import first_true
from spotdiff.benchmarks.aro import MIEB_HARD_TEXTS, SKIP_IDENTICAL, SKIP_NO_NEGATIVE
from spotdiff.benchmarks.crepe import SKIP_EMPTY
from spotdiff.benchmarks.retrieval import pre_caption
from spotdiff.benchmarks.word_order import (
    HEURISTIC_TAGGER,
    REGEX_TOKENIZER,
    TextShuffler,
    heuristic_pos,
    regex_tokenize,
)
from spotdiff.cases import FileImage, NpyImage
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols.top1 import ImageToTextTop1
from spotdiff.testing.formats import (
    ARO_FIXTURE_ATTRIBUTES,
    ARO_FIXTURE_RELATIONS,
    EQBEN_SUBSETS,
    SPEC_K,
    write_aro_vg_attribution,
    write_aro_vg_relation,
    write_crepe,
    write_eqben,
    write_eqben_full,
    write_karpathy,
    write_spec,
    write_winoground,
)
from spotdiff.testing.hub_repos import mteb_order_repo

NAMES = (
    "eqben",
    "winoground",
    "spec",
    "aro-vg-relation",
    "aro-vg-attribution",
    "aro-coco-order",
    "aro-flickr-order",
    "crepe",
    "coco-retrieval",
    "flickr-retrieval",
)


def load(name: str, root: Path, subset: str | None = None, **options: object):
    bench = get_benchmark(name)(root, **options)
    return bench, bench.load(subset)


def heuristic_tagger(name: str) -> dict[str, str]:
    """The offline POS tagger for the ARO-Order loaders; nothing for the others, which take no such option."""
    return {"pos_tagger": "heuristic"} if "pos_tagger" in get_benchmark(name).known_options() else {}


def raises_data_error(name: str, root: Path, *, file: str | None = None, record=None, field=None, **options):
    with pytest.raises(DataError) as info:
        load(name, root, **options)
    err = info.value
    if file is not None:
        assert err.file is not None and err.file.endswith(file), err
    if record is not None:
        assert err.record is not None and str(record) in err.record, err
    if field is not None:
        assert err.field == field, err
    return err


def edit_json(path: Path, fn) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    fn(data)
    path.write_text(json.dumps(data), encoding="utf-8")


# ------------------------------------------------------------------------------------------ registry
@pytest.mark.parametrize("name", NAMES)
def test_registered_with_metadata(name):
    assert name in BENCHMARKS
    cls = get_benchmark(name)
    assert cls.name == name
    assert cls.protocols and cls.layout.strip() and cls.description.strip()
    assert "(" in cls.description  # a paper reference


def test_default_protocols():
    assert get_benchmark("eqben").protocols[0] == "group"
    assert get_benchmark("winoground").protocols[0] == "group"
    assert get_benchmark("spec").protocols[0] == "spec"
    assert get_benchmark("aro-vg-relation").protocols == ("aro-macro", "i2t-top1")
    assert get_benchmark("aro-vg-attribution").protocols == ("aro-macro", "i2t-top1")
    for name in ("aro-coco-order", "aro-flickr-order", "crepe"):
        assert get_benchmark(name).protocols[0] == "i2t-top1"
    for name in ("coco-retrieval", "flickr-retrieval"):
        assert get_benchmark(name).protocols[0] == "retrieval"


def test_loading_never_decodes_images(tmp_path, monkeypatch):
    roots = {
        "eqben": write_eqben(tmp_path / "eqben"),
        "winoground": write_winoground(tmp_path / "wino"),
        "spec": write_spec(tmp_path / "spec", n=1),
        "aro-vg-relation": write_aro_vg_relation(tmp_path / "vgr"),
        "aro-coco-order": write_karpathy(tmp_path / "coco"),
        "coco-retrieval": tmp_path / "coco",
        "crepe": write_crepe(tmp_path / "crepe", n=1),
    }

    def boom(*args, **kwargs):
        raise AssertionError("an image was decoded at load time")

    monkeypatch.setattr("PIL.Image.open", boom)
    monkeypatch.setattr("numpy.load", boom)
    for name, root in roots.items():
        _, cases = load(name, root)
        assert cases, name


# ------------------------------------------------------------------------------------------ EqBen
def test_eqben_round_trip(tmp_path):
    root = write_eqben(tmp_path, n=9)
    bench, cases = load("eqben", root)
    records = json.loads((root / "all_select.json").read_text())
    assert len(cases) == 9 and bench.report.records == 9
    for i, (case, record) in enumerate(zip(cases, records, strict=True)):
        assert case.id == str(i)
        assert case.texts == (record["caption0"], record["caption1"])
        assert case.truth.tolist() == [[True, False], [False, True]]
        assert case.subset == EQBEN_SUBSETS[i % 7] == record["image0"].split("/")[0]
        assert case.tags["kind"] in ("natural", "synthetic")
        assert [im.path for im in case.images] == [
            root / "images" / record["image0"],
            root / "images" / record["image1"],
        ]
        if case.subset == "eqbenyoucook2":
            assert all(isinstance(im, NpyImage) and im.bgr for im in case.images)
            stored = np.load(case.images[0].path)
            assert np.array_equal(np.asarray(case.images[0].load()), stored[..., ::-1])
        else:
            assert all(isinstance(im, FileImage) for im in case.images)
            assert case.images[0].load().size == (40, 30)
    kubric = [c for c in cases if c.subset.startswith("eqbenkubric")]
    assert {c.tags["family"] for c in kubric} == {"eqbenkubric"}
    assert bench.data_files() == [root / "all_select.json"]
    assert len(bench.data_digest()) == 64


def test_eqben_subset_filter_and_file_root(tmp_path):
    root = write_eqben(tmp_path, n=14, filename="eqben_subset_10percent_final.json")
    _, cases = load("eqben", root, subset="eqbenkubric_loc")
    assert [c.id for c in cases] == ["4", "11"]
    _, cases = load("eqben", root / "eqben_subset_10percent_final.json")
    assert len(cases) == 14
    with pytest.raises(ConfigError):
        load("eqben", root, subset="eqbenfoo")


def test_eqben_vllm_layout(tmp_path):
    write_eqben(tmp_path / "eqben_vllm", n=3)
    _, cases = load("eqben", tmp_path)
    assert len(cases) == 3
    assert cases[0].images[0].path.parent.parent.parent == tmp_path / "eqben_vllm" / "images"


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d[2].update(image0="eqbenfoo/a.png"), "image0"),
        (lambda d: d[2].pop("caption1"), "caption1"),
        (lambda d: d[2].update(caption0=7), "caption0"),
        (lambda d: d[2].update(caption0="  "), "caption0"),
        (lambda d: d[2].update(image1="eqbensd/x.png"), "image1"),
    ],
)
def test_eqben_bad_records(tmp_path, edit, field):
    root = write_eqben(tmp_path, n=4)
    edit_json(root / "all_select.json", edit)
    raises_data_error("eqben", root, file="all_select.json", record=2, field=field)


def test_eqben_full_set_rebuilds_the_samples(tmp_path):
    paired = write_eqben(tmp_path / "paired", n=9, seed=3)
    full = write_eqben_full(tmp_path / "full", n=9, seed=3)
    bench, cases = load("eqben", full)
    _, expected = load("eqben", paired)
    assert bench.report.records == 36
    assert [c.id for c in cases] == [c.id for c in expected]
    for got, want in zip(cases, expected, strict=True):
        assert got.texts == want.texts and got.subset == want.subset
        assert [im.path.relative_to(full) for im in got.images] == [im.path.relative_to(paired) for im in want.images]
        assert got.tags["format"] == "full"
    assert {p.name for p in bench.data_files()} == {
        "ann_json_finegrained_random.json",
        "private_random_idx.json",
        "private_info.json",
    }


def test_eqben_full_set_needs_ground_truth(tmp_path):
    root = write_eqben_full(tmp_path, n=2)
    (root / "src_file" / "private_info.json").unlink()
    err = raises_data_error("eqben", root, file="ann_json_finegrained_random.json")
    assert "no ground truth" in str(err)


def test_eqben_full_set_inconsistent(tmp_path):
    root = write_eqben_full(tmp_path, n=2)
    info = root / "src_file" / "private_info.json"
    # swap the slot names of two entries of sample 0: the rebuilt images/captions no longer agree
    edit_json(info, lambda d: (d[1].update(name="c1i0"), d[2].update(name="c0i1")))
    raises_data_error("eqben", root)
    edit_json(info, lambda d: d[3].update(name="c0i0"))
    raises_data_error("eqben", root, file="private_info.json", field="name")


# ------------------------------------------------------------------------------------------ Winoground
def test_winoground_round_trip(tmp_path):
    root = write_winoground(tmp_path, n=6)
    bench, cases = load("winoground", root)
    assert [c.id for c in cases] == [str(i) for i in range(6)]
    first = cases[0]
    assert first.subset == "Object" and first.tags["secondary_tag"] == "" and first.tags["tag"] == "Noun"
    assert cases[1].tags == {
        "subset": "Relation",
        "tag": "Verb",
        "secondary_tag": "Symbolic",
        "collapsed_tag": "Relation",
        "num_main_preds": "2",
    }
    assert first.truth.tolist() == [[True, False], [False, True]]
    assert [im.path.name for im in first.images] == ["ex_0_img_0.png", "ex_0_img_1.png"]
    assert first.images[1].load().size == (40, 30)
    _, both = load("winoground", root, subset="Both")
    assert [c.id for c in both] == ["2", "5"]
    assert bench.data_files() == [root / "examples.jsonl"]


def _rewrite_jsonl(path: Path, fn) -> None:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    fn(records)
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r[3].update(id=1), "id"),
        (lambda r: r[3].update(id="3"), "id"),
        (lambda r: r[3].update(collapsed_tag="Series"), "collapsed_tag"),
        (lambda r: r[3].pop("caption_1"), "caption_1"),
        (lambda r: r[3].update(num_main_preds=True), "num_main_preds"),
        (lambda r: r[3].update(secondary_tag=3), "secondary_tag"),
    ],
)
def test_winoground_bad_records(tmp_path, edit, field):
    root = write_winoground(tmp_path, n=5)
    _rewrite_jsonl(root / "examples.jsonl", edit)
    raises_data_error("winoground", root, file="examples.jsonl", record="line 4", field=field)


def test_winoground_truncated_line(tmp_path):
    root = write_winoground(tmp_path, n=3)
    path = root / "examples.jsonl"
    path.write_text(path.read_text()[:-20])
    raises_data_error("winoground", root, file="examples.jsonl", record="line 3")


# ------------------------------------------------------------------------------------------ SPEC
def test_spec_round_trip(tmp_path):
    root = write_spec(tmp_path, n=2, seed=1)
    bench, cases = load("spec", root)
    assert len(cases) == 12
    assert bench.report.records == sum(4 * k for k in SPEC_K.values())
    for subset, k in SPEC_K.items():
        folder = root / subset
        i2t = json.loads((folder / "image2text.json").read_text())
        t2i = json.loads((folder / "text2image.json").read_text())
        mine = [c for c in cases if c.subset == subset]
        assert [c.id for c in mine] == [f"{subset}/set0", f"{subset}/set1"]
        for c in mine:
            assert c.shape == (k, k) and c.tags["k"] == str(k) and c.tags["form"] == "set"
            assert np.array_equal(c.truth, np.eye(k, dtype=bool))
            paths = [im.path.relative_to(folder).as_posix() for im in c.images]
            for rec in i2t:  # every image2text record: its query image's true caption is on the diagonal
                if rec["query"] in paths:
                    assert c.texts[paths.index(rec["query"])] == rec["keys"][rec["label"]]
            for rec in t2i:
                if rec["keys"][rec["label"]] in paths:
                    assert c.texts[paths.index(rec["keys"][rec["label"]])] == rec["query"]
        # the two sets share their caption set, so only the image sets tell them apart
        assert set(mine[0].texts) == set(mine[1].texts)
        assert not {im.path for im in mine[0].images} & {im.path for im in mine[1].images}
    assert cases[0].images[0].load().size == (32, 24)
    assert len(bench.data_files()) == 12


def test_spec_protocol_counts_exactly_the_released_queries(tmp_path):
    from spotdiff.protocols import get_protocol

    protocol = get_protocol("spec")
    root = write_spec(tmp_path / "both", n=1, subsets=("count",))
    _, cases = load("spec", root)
    (case,) = cases
    outcomes = protocol.outcomes(case, np.eye(9))
    assert len(outcomes) == 18 and all(v in (1.0,) for o in outcomes for v in o.values() if not np.isnan(v))

    root = write_spec(tmp_path / "i2t", n=2, subsets=("relative_spatial",), files=("image2text",))
    _, cases = load("spec", root)
    assert len(cases) == 8 and all(c.shape == (1, 4) and c.tags["form"] == "i2t" for c in cases)
    units = [o for c in cases for o in protocol.outcomes(c, c.truth.astype(float))]
    assert len(units) == 8 and all(o["i2t"] == 1.0 and np.isnan(o["t2i"]) for o in units)

    root = write_spec(tmp_path / "t2i", n=1, subsets=("existence",), files=("text2image",))
    _, cases = load("spec", root)
    assert [c.shape for c in cases] == [(2, 1), (2, 1)] and cases[0].id == "existence/t2i/0"
    units = [o for c in cases for o in protocol.outcomes(c, c.truth.astype(float))]
    assert len(units) == 2 and all(o["t2i"] == 1.0 for o in units)


def test_spec_partial_set_falls_back_to_records(tmp_path):
    root = write_spec(tmp_path, n=1, subsets=("absolute_size",))
    edit_json(root / "absolute_size" / "image2text.json", lambda d: d.pop(0))
    bench, cases = load("spec", root)
    assert sorted(c.tags["form"] for c in cases) == ["i2t", "i2t", "t2i", "t2i", "t2i"]
    assert bench.report.records == 5


def test_spec_subset_filter_and_single_folder(tmp_path):
    root = write_spec(tmp_path, n=1, subsets=("count", "existence"))
    _, cases = load("spec", root, subset="existence")
    assert [c.id for c in cases] == ["existence/set0"]
    with pytest.raises(DataError):
        load("spec", root, subset="relative_size")
    _, cases = load("spec", root / "count")
    assert [c.subset for c in cases] == ["count"]


@pytest.mark.parametrize(
    ("file", "edit", "field"),
    [
        ("image2text.json", lambda d: d[1].update(label=3), "label"),
        ("image2text.json", lambda d: d[1].update(label=-1), "label"),
        ("text2image.json", lambda d: d[1].update(label="0"), "label"),
        ("image2text.json", lambda d: d[1]["keys"].__setitem__(0, d[1]["keys"][1]), "keys"),
        ("text2image.json", lambda d: d[1].pop("query"), "query"),
        ("image2text.json", lambda d: d[1].update(keys="a b c"), "keys"),
    ],
)
def test_spec_bad_records(tmp_path, file, edit, field):
    root = write_spec(tmp_path, n=1, subsets=("absolute_size",))
    edit_json(root / "absolute_size" / file, edit)
    raises_data_error("spec", root, file=file, record=1, field=field)


def test_spec_inconsistent_grouping(tmp_path):
    root = write_spec(tmp_path, n=2, subsets=("absolute_size",))
    t2i = root / "absolute_size" / "text2image.json"
    i2t = root / "absolute_size" / "image2text.json"
    original_t2i, original_i2t = t2i.read_text(), i2t.read_text()

    # labels disagree between the two files
    edit_json(t2i, lambda d: d[0].update(label=(d[0]["label"] + 1) % 3))
    err = raises_data_error("spec", root, file="text2image.json", field="label")
    assert "disagree" in str(err)

    # an image2text record of one set lists another caption set
    t2i.write_text(original_t2i)
    edit_json(i2t, lambda d: d[1]["keys"].__setitem__(0, "a caption from nowhere"))
    raises_data_error("spec", root, file="image2text.json", record=1, field="keys")

    # an image shared by two different candidate image sets
    i2t.write_text(original_i2t)
    edit_json(t2i, lambda d: d[4]["keys"].__setitem__(0, d[0]["keys"][0]))
    raises_data_error("spec", root, file="text2image.json", field="keys")


# ------------------------------------------------------------------------------------------ ARO VG
def test_aro_vg_relation_round_trip(tmp_path):
    root = write_aro_vg_relation(tmp_path, n=6)
    bench, cases = load("aro-vg-relation", root)
    records = json.loads((root / "visual_genome_relation.json").read_text())
    assert len(cases) == 6
    for case, rec in zip(cases, records, strict=True):
        assert case.texts == (rec["false_caption"], rec["true_caption"])
        assert case.roles == ("false_caption", "true_caption")
        assert case.truth.tolist() == [[False, True]]
        (image,) = case.images
        assert image.path == root / "images" / rec["image_path"]
        assert image.bbox == (rec["bbox_x"], rec["bbox_y"], rec["bbox_w"], rec["bbox_h"])
        assert image.load().size == (rec["bbox_w"], rec["bbox_h"])
        assert case.tags == {"subset": "vg-relation", "relation": rec["relation_name"]}
    assert set(ARO_FIXTURE_RELATIONS) == {c.tags["relation"] for c in cases}
    assert bench.data_files() == [root / "visual_genome_relation.json"]


def test_aro_vg_relation_macro_protocol(tmp_path):
    from spotdiff.protocols import get_protocol

    root = write_aro_vg_relation(tmp_path, n=12)
    _, cases = load("aro-vg-relation", root)
    protocol = get_protocol("aro-macro")
    # a scorer right on every case except the "on" relation
    values = np.array(
        [
            protocol.outcomes(c, np.array([[0.0, 1.0 if c.tags["relation"] != "on" else -1.0]]))[0]["accuracy"]
            for c in cases
        ]
    )
    groups = {"relation": np.array([c.tags["relation"] for c in cases]), "case": np.array([c.id for c in cases])}
    metrics = protocol.aggregate({"accuracy": values}, groups)
    # "next to" and "near" are ARO's symmetric relations: macro over on, behind, holding, wearing
    assert metrics["macro_accuracy"] == pytest.approx(75.0)
    assert metrics["accuracy"] == pytest.approx(100 * 10 / 12)


def test_aro_vg_attribution_round_trip(tmp_path):
    root = write_aro_vg_attribution(tmp_path, n=6)
    _, cases = load("aro-vg-attribution", root / "visual_genome_attribution.json")
    assert [c.tags["attributes"] for c in cases[:3]] == [f"{a}_{b}" for a, b in ARO_FIXTURE_ATTRIBUTES]
    assert all(set(c.tags) == {"subset", "attributes"} and c.subset == "vg-attribution" for c in cases)
    assert cases[0].images[0].load().size == cases[0].images[0].bbox[2:]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d[2].update(bbox_w=0), "bbox_w"),
        (lambda d: d[2].update(bbox_h=-3), "bbox_h"),
        (lambda d: d[2].update(bbox_x=True), "bbox_x"),
        (lambda d: d[2].update(bbox_y="4"), "bbox_y"),
        (lambda d: d[2].pop("relation_name"), "relation_name"),
        (lambda d: d[2].pop("true_caption"), "true_caption"),
        (lambda d: d[2].update(image_path=None), "image_path"),
    ],
)
def test_aro_vg_bad_records(tmp_path, edit, field):
    root = write_aro_vg_relation(tmp_path, n=4)
    edit_json(root / "visual_genome_relation.json", edit)
    raises_data_error("aro-vg-relation", root, file="visual_genome_relation.json", record=2, field=field)


def test_aro_vg_attribution_bad_attributes(tmp_path):
    root = write_aro_vg_attribution(tmp_path, n=3)
    edit_json(root / "visual_genome_attribution.json", lambda d: d[1].update(attributes=["red"]))
    raises_data_error("aro-vg-attribution", root, record=1, field="attributes")


# ------------------------------------------------------------------------------------------ ARO order
def _words(text: str) -> Counter:
    return Counter(text.split())


@pytest.mark.parametrize(("name", "dataset"), [("aro-coco-order", "coco"), ("aro-flickr-order", "flickr")])
def test_aro_order_round_trip(tmp_path, name, dataset):
    root = write_karpathy(tmp_path, dataset, n_images=3)
    bench, cases = load(name, root, pos_tagger="heuristic", tokenizer="regex")
    records = json.loads(next(root.glob("*.json")).read_text())
    assert len(cases) + bench.report.skipped[SKIP_NO_NEGATIVE] == 15 == bench.report.records
    by_id = {c.id: c for c in cases}
    for rec in records:
        for j, caption in enumerate(rec["caption"]):
            case = by_id[f"{rec['image']}#{j}"]
            true = pre_caption(caption, 30)
            assert case.texts[0] == true and case.roles[0] == "true"
            assert case.truth.tolist() == [[True] + [False] * (len(case.texts) - 1)]
            assert case.images[0].path == root / rec["image"]
            for text in case.texts[1:]:
                assert text != true
                assert _words(text) == _words(true)  # a permutation of the caption's words
            assert set(case.roles[1:]) <= set(TextShuffler.PERTURBATIONS)
    dropped = sum(5 - len(c.texts) for c in cases)
    assert dropped == bench.report.skipped[SKIP_IDENTICAL]
    assert cases[0].tags["pos_tagger"] == HEURISTIC_TAGGER and cases[0].tags["tokenizer"] == REGEX_TOKENIZER
    assert cases[0].subset == "test" and cases[0].images[0].load().size == (40, 30)


def test_aro_order_is_seeded_and_deterministic(tmp_path):
    root = write_karpathy(tmp_path, "coco", n_images=4, seed=5)
    opts = {"pos_tagger": "heuristic", "tokenizer": "regex"}
    _, a = load("aro-coco-order", root, seed=0, **opts)
    _, b = load("aro-coco-order", root, seed="0", **opts)
    _, c = load("aro-coco-order", root, seed=1, **opts)
    assert [x.texts for x in a] == [x.texts for x in b]
    assert [x.texts for x in a] != [x.texts for x in c]
    # a case does not depend on which other cases are loaded
    first = get_benchmark("aro-coco-order")(root, seed=0, **opts).load(limit=1)
    assert first[0].texts == a[0].texts


def test_aro_order_drops_identical_perturbations(tmp_path):
    path = tmp_path / "coco_karpathy_test.json"
    path.write_text(json.dumps([{"image": "val2014/x.jpg", "caption": ["Dog.", "a dog on a red mat"]}]))
    bench, cases = load("aro-coco-order", tmp_path, pos_tagger="heuristic", tokenizer="regex")
    assert bench.report.skipped[SKIP_NO_NEGATIVE] == 1  # "dog": every shuffle is the identity
    assert [c.id for c in cases] == ["val2014/x.jpg#1"]


def test_aro_order_mieb_rows_without_a_negative_are_counted_and_the_ids_stay_row_numbers(tmp_path):
    ((name, data),) = mteb_order_repo(n=4).items()
    path = tmp_path / "mieb" / name
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    table = pq.read_table(path)
    columns = table.to_pydict()
    for j in range(1, 5):  # row 1: every hard text is its true caption
        columns[f"hard_text_{j}"][1] = columns["correct_caption"][1]
    pq.write_table(pa.table(columns, schema=table.schema), path)
    bench, cases = load("aro-coco-order", tmp_path, perturbations="mieb")
    assert [c.id for c in cases] == ["mieb/0", "mieb/2", "mieb/3"]
    assert [len(c.texts) for c in cases] == [4, 5, 5]  # row 0's first hard text is its true caption (the fixture)
    assert bench.report.records == 4
    assert bench.report.skipped == {SKIP_IDENTICAL: 1 + 4, SKIP_NO_NEGATIVE: 1}
    assert cases[1].roles == ("true", *MIEB_HARD_TEXTS) and cases[1].truth.tolist() == [[True] + [False] * 4]


def test_first_true_marks_the_first_of_k_texts_in_one_shared_read_only_array():
    assert first_true(1).tolist() == [[True]]
    assert first_true(4).tolist() == [[True, False, False, False]]
    assert first_true(4) is first_true(4)  # one array per size, shared by the cases of that size
    with pytest.raises(ValueError, match="read-only"):
        first_true(4)[0, 1] = True


def test_aro_order_options(tmp_path):
    root = write_karpathy(tmp_path, "coco", n_images=1)
    with pytest.raises(ConfigError):
        load("aro-coco-order", root, pos_tagger="nltk")
    with pytest.raises(ConfigError):
        load("aro-coco-order", root, seed="x")
    with pytest.raises(ConfigError):
        load("aro-coco-order", root, subset="val")
    with pytest.raises(DataError):
        load("aro-coco-order", root, split="val")  # no coco_karpathy_val.json
    try:
        import spacy  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError):
            load("aro-coco-order", root, pos_tagger="spacy")


def test_heuristic_pos_tags():
    tokens = regex_tokenize("A man riding a brown horse on the beach, next to two parked cars.")
    tags = dict(zip(tokens, heuristic_pos(tokens), strict=True))
    assert tags["man"] == tags["horse"] == tags["beach"] == tags["cars"] == "NOUN"
    assert tags["brown"] == tags["parked"] == "ADJ"
    assert tags["riding"] not in ("NOUN", "ADJ") and tags["two"] not in ("NOUN", "ADJ")
    assert regex_tokenize("the dog's bowl isn't full.") == [
        "the",
        "dog",
        "'s",
        "bowl",
        "is",
        "n't",
        "full",
        ".",
    ]


_VOCAB = st.sampled_from(
    [
        "a",
        "the",
        "man",
        "red",
        "dog",
        "on",
        "riding",
        "two",
        "large",
        "table",
        "is",
        "with",
        "tall",
        "'s",
        ",",
    ]
)


@settings(max_examples=60, deadline=None)
@given(words=st.lists(_VOCAB, min_size=1, max_size=14), seed=st.integers(0, 2**16))
def test_each_perturbation_permutes_the_tokens(words, seed):
    shuffler = TextShuffler("heuristic", "regex")
    text = " ".join(words)
    tokens = Counter(regex_tokenize(text))
    outs = shuffler.perturb(text, np.random.default_rng(seed))
    again = shuffler.perturb(text, np.random.default_rng(seed))
    assert outs == again
    for out in outs:
        assert Counter(regex_tokenize(out)) == tokens
    # the noun/adjective shuffle keeps every other token in place, and vice versa
    toks, nouns, adjs = shuffler.tag(text)
    moved = regex_tokenize(outs[0])
    assert all(moved[i] == toks[i] for i in range(len(toks)) if not (nouns[i] or adjs[i]))
    kept = regex_tokenize(outs[1])
    assert all(kept[i] == toks[i] for i in range(len(toks)) if nouns[i] or adjs[i])


# ------------------------------------------------------------------------------------------ retrieval
@pytest.mark.parametrize(("name", "dataset"), [("coco-retrieval", "coco"), ("flickr-retrieval", "flickr")])
def test_retrieval_round_trip(tmp_path, name, dataset):
    root = write_karpathy(tmp_path, dataset, n_images=4)
    bench, cases = load(name, root)
    records = json.loads(next(root.glob("*.json")).read_text())
    (case,) = cases
    assert case.shape == (4, 20) and case.subset == "test" and case.id == f"{dataset}-test"
    # ARO's COCO_Retrieval applies pre_caption(caption, 30) by default (ARO Table 6)
    assert case.texts == tuple(_aro_pre_caption(c, 30) for r in records for c in r["caption"])
    expected = np.zeros((4, 20), dtype=bool)
    for i in range(4):
        expected[i, 5 * i : 5 * i + 5] = True
    assert np.array_equal(case.truth, expected)
    assert [im.path for im in case.images] == [root / r["image"] for r in records]
    assert case.images[2].load().size == (40, 30)
    assert bench.report.records == 4
    _, (verbatim,) = load(name, root, pre_caption="false")
    assert verbatim.texts == tuple(c for r in records for c in r["caption"])


def _aro_pre_caption(caption, max_words=50):
    """ARO's ``pre_caption``, copied from dataset_zoo/retrieval.py lines 15-34 at commit
    81fdd20dc5b6f434aa5a4a971717bc80d1cedb0d (github.com/mertyg/vision-language-models-are-bows)."""
    import re

    caption = re.sub(
        r"([.!\"()*#:;~])",
        " ",
        caption.lower(),
    )
    caption = re.sub(
        r"\s{2,}",
        " ",
        caption,
    )
    caption = caption.rstrip("\n")
    caption = caption.strip(" ")

    # truncate caption
    caption_words = caption.split(" ")
    if len(caption_words) > max_words:
        caption = " ".join(caption_words[:max_words])

    return caption


@pytest.mark.parametrize(
    "caption",
    [
        "A Man (left) rides a horse.",
        ' "Two" dogs:  play; ~ fetch*#!\n',
        "tab\tseparated\t\ttext \n\n",
        " ".join(f"w{k}." for k in range(45)),
        "...",
        "Ünïcode CAFÉ  :)",
    ],
)
def test_pre_caption_equals_aros(caption):
    for max_words in (30, 50, 3):
        assert pre_caption(caption, max_words) == _aro_pre_caption(caption, max_words)


def test_retrieval_uneven_caption_counts(tmp_path):
    path = tmp_path / "flickr30k_test.json"
    path.write_text(json.dumps([{"image": "a.jpg", "caption": ["x y", "z"]}, {"image": "b.jpg", "caption": "w"}]))
    _, (case,) = load("flickr-retrieval", path)
    assert case.truth.tolist() == [[True, True, False], [False, False, True]]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d[2].update(image=d[0]["image"]), "image"),
        (lambda d: d[2].pop("caption"), "caption"),
        (lambda d: d[2].update(caption=[]), "caption"),
        (lambda d: d[2].update(caption=["ok", 3]), "caption"),
        (lambda d: d[2].update(image=""), "image"),
    ],
)
def test_karpathy_bad_records(tmp_path, edit, field):
    root = write_karpathy(tmp_path, "coco", n_images=3)
    edit_json(root / "coco_karpathy_test.json", edit)
    for name in ("coco-retrieval", "aro-coco-order"):
        raises_data_error(name, root, file="coco_karpathy_test.json", record=2, field=field, **heuristic_tagger(name))


# ------------------------------------------------------------------------------------------ CREPE
def test_crepe_round_trip(tmp_path):
    root = write_crepe(tmp_path, n=3)
    bench, cases = load("crepe", root)
    assert len(cases) == 3 * 2 * 3 + 2 * 3
    prod = [c for c in cases if c.tags["split"] == "productivity"]
    syst = [c for c in cases if c.tags["split"] == "systematicity"]
    assert {c.subset for c in prod} == {f"prod/{t}/complexity_{k}" for t in ("atom", "swap", "negate") for k in (4, 5)}
    assert all(c.shape == (1, 6) and c.truth.tolist() == [[True] + [False] * 5] for c in prod)
    assert {c.subset for c in syst} == {
        "syst/atom/seen_compounds_in_cc12m",
        "syst/comp/seen_compounds_in_cc12m",
    }
    assert sorted(c.shape for c in syst) == [(1, 3)] * 3 + [(1, 4)] * 3
    case = prod[0]
    assert case.id == "prod/atom/complexity_4/0" and case.tags["complexity"] == "4" and case.tags["neg_type"] == "atom"
    (image,) = case.images
    assert image.path == root / "images" / "VG_100K" / "107900.jpg"
    assert image.load().size == (int(image.bbox[2]), int(image.bbox[3]))
    assert cases[1].images[0].path == root / "images" / "107901.jpg"
    assert len(bench.data_files()) == 7


def test_crepe_subset_filter(tmp_path):
    root = write_crepe(tmp_path, n=2)
    _, cases = load("crepe", root, subset="prod/swap/complexity_5")
    assert [c.id for c in cases] == ["prod/swap/complexity_5/0", "prod/swap/complexity_5/1"]
    _, cases = load("crepe", root, subset="prod/atom")
    assert len(cases) == 4
    _, cases = load("crepe", root, subset="syst/comp")
    assert {c.subset for c in cases} == {"syst/comp/seen_compounds_in_cc12m"}
    with pytest.raises(ConfigError):
        load("crepe", root, subset="prod/atomic")
    path = root / "prod_hard_negatives" / "negate" / "prod_vg_hard_negs_negate_complexity_4.csv"
    _, cases = load("crepe", path, images=str(root / "images"))
    assert len(cases) == 2 and cases[0].subset == "prod/negate/complexity_4"


def _edit_csv_cell(path: Path, row: int, column: str, value: str) -> None:
    import csv
    import io

    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    rows[row + 1][rows[0].index(column)] = value
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("hard_negs", "['a dog', 'a cat'"),
        ("hard_negs", "{'a': 1}"),
        ("hard_negs", "['a dog', 3]"),
        ("hard_negs", "not a list"),
        ("x", "left"),
        ("width", "0"),
        ("caption", " "),
        ("image_id", ""),
    ],
)
def test_crepe_bad_cells(tmp_path, column, value):
    root = write_crepe(tmp_path, n=3, prod_types=("atom",), complexities=(4,), systematicity=False)
    path = root / "prod_hard_negatives" / "atom" / "prod_vg_hard_negs_atom_complexity_4.csv"
    _edit_csv_cell(path, 1, column, value)
    raises_data_error("crepe", root, file=path.name, record="line 3", field=column)


def test_crepe_missing_column_and_empty_negatives(tmp_path):
    root = write_crepe(tmp_path, n=3, prod_types=("atom",), complexities=(4,), systematicity=False)
    path = root / "prod_hard_negatives" / "atom" / "prod_vg_hard_negs_atom_complexity_4.csv"
    _edit_csv_cell(path, 0, "hard_negs", "[]")
    bench, cases = load("crepe", root)  # CREPE's code scores the caption alone: rank 0, a success
    assert len(cases) == 3 and not bench.report.skipped and cases[0].shape == (1, 1)
    assert ImageToTextTop1().outcomes(cases[0], np.array([[0.2]])) == [{"accuracy": 1.0}]
    assert _crepe_rank(torch.tensor([[0.2]])).tolist() == [0]
    bench, cases = load("crepe", root, empty_negatives="skip")
    assert len(cases) == 2 and bench.report.skipped[SKIP_EMPTY] == 1
    path.write_text(path.read_text(encoding="utf-8").replace("hard_negs", "negatives", 1), encoding="utf-8")
    raises_data_error("crepe", root, file=path.name, field="hard_negs")


def _crepe_rank(logits_per_image):
    """CREPE's ``get_one2many_rank`` (crepe_eval_utils.py, github.com/RAIVNLab/CREPE commit 1fa81c4),
    from the logits on: the rank of the true caption, listed first."""
    ground_truth = 0
    ranking = torch.argsort(logits_per_image, descending=True)
    return torch.where(ranking == ground_truth)[1].detach().cpu().numpy()


def test_crepe_top1_equals_crepes_rank_below_one(tmp_path):
    rng = np.random.default_rng(3)
    root = write_crepe(tmp_path, n=3, prod_types=("atom",), complexities=(4,))
    for case in load("crepe", root)[1]:
        scores = rng.normal(size=case.shape)  # no ties: CREPE's argsort order among equal scores is undefined
        expected = float(_crepe_rank(torch.tensor(scores))[0] < 1)  # get_one2many_metrics' R@1: preds < 1
        assert ImageToTextTop1().outcomes(case, scores) == [{"accuracy": expected}]


def test_crepe_combined_negatives_are_offered(tmp_path):
    root = write_crepe(tmp_path, n=2, prod_types=(), complexities=())
    subsets = {c.subset for c in load("crepe", root)[1]}
    assert subsets == {"syst/atom/seen_compounds_in_cc12m", "syst/comp/seen_compounds_in_cc12m"}
    _, cases = load("crepe", root, combined="true")
    combined = [c for c in cases if c.tags["neg_type"] == "combined"]
    assert len(combined) == 2 and all(len(c.texts) == 1 + 3 + 2 for c in combined)
    _, only = load("crepe", root, "syst/combined")
    assert [c.id for c in only] == [c.id for c in combined] == ["syst/combined/seen_compounds_in_cc12m/0",
                                                                "syst/combined/seen_compounds_in_cc12m/1"]


# ------------------------------------------------------------------------------ generic file errors
ANNOTATIONS = {
    "eqben": (write_eqben, "all_select.json"),
    "winoground": (write_winoground, "examples.jsonl"),
    "spec": (lambda p: write_spec(p, n=1, subsets=("count",)), "count/image2text.json"),
    "aro-vg-relation": (write_aro_vg_relation, "visual_genome_relation.json"),
    "aro-vg-attribution": (write_aro_vg_attribution, "visual_genome_attribution.json"),
    "aro-coco-order": (lambda p: write_karpathy(p, "coco"), "coco_karpathy_test.json"),
    "aro-flickr-order": (lambda p: write_karpathy(p, "flickr"), "flickr30k_test.json"),
    "coco-retrieval": (lambda p: write_karpathy(p, "coco"), "coco_karpathy_test.json"),
    "flickr-retrieval": (lambda p: write_karpathy(p, "flickr"), "flickr30k_test.json"),
    "crepe": (
        lambda p: write_crepe(p, n=2, prod_types=("swap",), complexities=(6,), systematicity=False),
        "prod_hard_negatives/swap/prod_vg_hard_negs_swap_complexity_6.csv",
    ),
}


@pytest.mark.parametrize("name", sorted(ANNOTATIONS))
def test_truncated_file(tmp_path, name):
    writer, rel = ANNOTATIONS[name]
    root = writer(tmp_path)
    path = root / rel
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        path.write_text(text[: text.index("['") + 5], encoding="utf-8")  # cut inside a quoted cell
    else:
        path.write_text(text[: len(text) // 2], encoding="utf-8")
    raises_data_error(name, root, file=path.name, **heuristic_tagger(name))


@pytest.mark.parametrize("name", sorted(ANNOTATIONS))
def test_non_utf8_file(tmp_path, name):
    writer, rel = ANNOTATIONS[name]
    root = writer(tmp_path)
    path = root / rel
    raw = path.read_bytes()
    cut = raw.index(b"a", len(raw) // 2)
    path.write_bytes(raw[:cut] + b"\xff\xfe" + raw[cut:])
    err = raises_data_error(name, root, file=path.name, **heuristic_tagger(name))
    assert "UTF-8" in str(err)


@pytest.mark.parametrize("name", sorted(ANNOTATIONS))
def test_missing_data_raises(tmp_path, name):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError):
        load(name, tmp_path / "empty")


# ------------------------------------------------------------------------------ default protocols accept the cases
PROTOCOL_FIXTURES = {
    "eqben": write_eqben,
    "winoground": write_winoground,
    "spec": lambda p: write_spec(p, n=1),
    "aro-vg-relation": write_aro_vg_relation,
    "aro-vg-attribution": write_aro_vg_attribution,
    "aro-coco-order": lambda p: write_karpathy(p, "coco"),
    "aro-flickr-order": lambda p: write_karpathy(p, "flickr"),
    "coco-retrieval": lambda p: write_karpathy(p, "coco"),
    "flickr-retrieval": lambda p: write_karpathy(p, "flickr"),
    "crepe": lambda p: write_crepe(p, n=2),
}


@pytest.mark.parametrize("name", sorted(PROTOCOL_FIXTURES))
def test_protocols_score_the_cases(tmp_path, name):
    """Every listed protocol takes the cases: the truth as scores wins everything, a constant loses."""
    from spotdiff.protocols import get_protocol

    root = PROTOCOL_FIXTURES[name](tmp_path)
    _, cases = load(name, root, **heuristic_tagger(name))
    for protocol_name in get_benchmark(name).protocols:
        protocol = get_protocol(protocol_name)
        for case in cases:
            best, worst = case.truth.astype(float), np.zeros(case.truth.shape)
            if protocol.needs.startswith("choice"):  # answers, not scores: the true ones vs always "A"
                t_of = case.truth.argmax(axis=1)
                rows = np.concatenate([t_of, np.argsort(t_of)]) if protocol.needs == "choice" else t_of
                best = np.repeat(rows[:, None], 2, axis=1)[..., None].astype(float)
                worst = np.tile([0.0, len(case.texts) - 1.0], (len(rows), 1))[..., None]
            perfect = [
                v for o in protocol.outcomes(case, best) for k, v in o.items() if k not in ("no_answer", "unparsed")
            ]
            # (R@5 / R@10 of a 3-image gallery are met even by a constant: only R@1 must fail)
            flat = [
                v
                for o in protocol.outcomes(case, worst)
                for k, v in o.items()
                if protocol_name != "retrieval" or k.endswith("r1")
            ]
            assert perfect and all(v == 1.0 for v in perfect if not np.isnan(v)), (protocol_name, case.id)
            assert all(v == 0.0 for v in flat if not np.isnan(v)), (protocol_name, case.id)
