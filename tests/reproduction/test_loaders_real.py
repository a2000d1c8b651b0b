"""Loaders of VISLA, SugarCrepe, VALSE and VL-CheckList: exact counts and spot checks on the real
files in ../shared/data, and every class of bad input on small fixture files written to tmp_path.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from spotdiff.benchmarks import BENCHMARKS, Benchmark, get_benchmark
from spotdiff.benchmarks.visla import order_positives
from spotdiff.cases import Case, FileImage
from spotdiff.errors import ConfigError, DataError

NAMES = ("visla-generic", "visla-spatial", "sugarcrepe", "valse", "vl-checklist")


def load(name: str, root: Path, subset: str | None = None, **options: object) -> tuple[Benchmark, list[Case]]:
    bench = get_benchmark(name)(root, **options)
    return bench, bench.load(subset)


def by_id(cases: list[Case]) -> dict[str, Case]:
    return {c.id: c for c in cases}


# ------------------------------------------------------------------------------------------------
# registry


def test_registry_lookup_and_metadata() -> None:
    for name in NAMES:
        assert name in BENCHMARKS
        cls = get_benchmark(name)
        assert issubclass(cls, Benchmark)
        assert cls.name == name
        assert cls.protocols and cls.layout and cls.description and cls.subsets
    assert get_benchmark("visla-generic").protocols == ("visla-i2t", "visla-t2t")
    assert get_benchmark("visla-spatial").protocols == ("visla-i2t", "visla-t2t")
    assert get_benchmark("sugarcrepe").protocols == ("i2t-top1",)
    assert get_benchmark("valse").protocols == ("valse-pairwise", "valse-prob")
    assert get_benchmark("vl-checklist").protocols == ("i2t-top1",)
    with pytest.raises(ConfigError):
        get_benchmark("visla")


def test_missing_root_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError):
        get_benchmark("valse")(tmp_path / "nope")


# ------------------------------------------------------------------------------------------------
# VISLA


def test_order_positives_rule() -> None:
    n = "The cat is outside the backpack."
    # the second positive is lexically closer to N: it becomes P1
    p1, p2, swapped, d1, d2 = order_positives(
        "The backpack contains the cat.", "The cat is in the backpack.", n
    )
    assert (p1, p2, swapped) == ("The cat is in the backpack.", "The backpack contains the cat.", True)
    assert (d1, d2) == (6, 18)
    # ties keep the file order
    assert order_positives("ab", "ba", "aa")[:3] == ("ab", "ba", False)


@given(st.text(max_size=12), st.text(max_size=12), st.text(max_size=12))
def test_order_positives_property(a: str, b: str, n: str) -> None:
    p1, p2, swapped, d1, d2 = order_positives(a, b, n)
    assert {p1, p2} == {a, b} and (p1, p2) == ((b, a) if swapped else (a, b))
    assert d1 == Levenshtein.distance(p1, n) <= d2 == Levenshtein.distance(p2, n)
    assert swapped == (Levenshtein.distance(b, n) < Levenshtein.distance(a, n))


def test_visla_generic_real(shared_data: Path) -> None:
    bench, cases = load("visla-generic", shared_data / "visla")
    assert len(cases) == 973
    assert bench.report.records == 973 and not bench.report.skipped
    cases_by_id = by_id(cases)
    # the SOURCE.md example, data row 1: already in order (d = 10 vs 25)
    first = cases_by_id["generic/1"]
    assert first.texts == (
        "A white with red striped bus drives down the slow lane on a freeway surrounded by several "
        "other cars.",
        "A white bus with red stripes drives in the slow lane on the freeway surrounded by various "
        "other cars.",
        "A white with red striped bus is stuck in the slow lane on a freeway surrounded by several "
        "other cars.",
    )
    assert first.roles == ("p1", "p2", "n")
    assert first.truth.tolist() == [[True, True, False]]
    assert first.tags == {"subset": "generic", "swapped": "0", "d_p1_n": "10", "d_p2_n": "25"}
    assert first.images[0].path == shared_data / "visla" / "images" / "000000460347.jpg"
    # data row 69, hand-checked: the file's P2 is closer to N (17 < 36), so it becomes P1
    row69 = cases_by_id["generic/69"]
    assert row69.texts == (
        "The person on the court is playing a game of tennis.",
        "The person is playing a game of tennis on the court.",
        "The person is next to the court, watching a game of tennis.",
    )
    assert row69.tags["swapped"] == "1" and (row69.tags["d_p1_n"], row69.tags["d_p2_n"]) == ("17", "36")
    # data row 198: a tie (13 = 13) keeps the file order
    row198 = cases_by_id["generic/198"]
    assert row198.texts[0] == "A small boat is beached on the shore."
    assert row198.tags["swapped"] == "0" and row198.tags["d_p1_n"] == row198.tags["d_p2_n"] == "13"
    assert sum(c.tags["swapped"] == "1" for c in cases) == 17
    assert all(int(c.tags["d_p1_n"]) <= int(c.tags["d_p2_n"]) for c in cases)
    assert len({c.images[0].path for c in cases}) == 643


def test_visla_spatial_real(shared_data: Path) -> None:
    bench, cases = load("visla-spatial", shared_data / "visla")
    assert len(cases) == 640
    assert bench.report.records == 652
    assert bench.report.skipped == {"spatial row without a negative caption": 12}
    cases_by_id = by_id(cases)
    assert "spatial/110" not in cases_by_id  # 000000439364.jpg, both reference columns empty
    row1 = cases_by_id["spatial/1"]  # the SOURCE.md example: sent2 is closer to N (6 < 18)
    assert row1.texts == (
        "The cat is in the backpack.",
        "The backpack contains the cat.",
        "The cat is outside the backpack.",
    )
    assert row1.tags["swapped"] == "1"
    assert "The oven contains the pizza" not in row1.texts  # the irrelevant reference is not used
    assert sum(c.tags["swapped"] == "1" for c in cases) == 219
    # trailing spaces in cells are stripped (data row 128 ends its negative in a space)
    assert all(t == t.strip() for c in cases for t in c.texts)


def test_visla_options_and_file_root(shared_data: Path, tmp_path: Path) -> None:
    bench, cases = load(
        "visla-generic", shared_data / "visla" / "Generic_VISLA.tsv", images=tmp_path / "coco"
    )
    assert len(cases) == 973
    assert cases[0].images[0].path == tmp_path / "coco" / "000000460347.jpg"
    assert bench.data_files() == [shared_data / "visla" / "Generic_VISLA.tsv"]
    assert len(bench.data_digest()) == 64
    with pytest.raises(ConfigError):
        get_benchmark("visla-generic")(shared_data / "visla").load(subset="spatial")
    assert len(get_benchmark("visla-spatial")(shared_data / "visla").load(subset="spatial")) == 640


GENERIC_HEADER = "filename\tcaption\tsecond positive\tnegative_caption"
GENERIC_ROW = "000000460347.jpg\tA white bus drives.\tA white bus is driving.\tA white bus is parked."


def write_tsv(path: Path, lines: list[str], encoding: str = "utf-8") -> Path:
    path.write_bytes("\r\n".join(lines).encode(encoding))
    return path


@pytest.mark.parametrize(
    ("lines", "record", "field", "message"),
    [
        ([GENERIC_HEADER, GENERIC_ROW, GENERIC_ROW + "\textra"], "data row 2 (line 3)", None, "columns"),
        ([GENERIC_HEADER, "000000460347.jpg\tA bus.\tA bus."], "data row 1 (line 2)", None, "columns"),
        ([GENERIC_HEADER, "000000460347.jpg\t \tA bus.\tNo bus."], "data row 1 (line 2)", "caption", "empty"),
        (
            [GENERIC_HEADER, "000000460347.jpg\tA bus.\tA bus!\t"],
            "data row 1 (line 2)",
            "negative_caption",
            "empty",
        ),
        (["image\tsent1\tsent2\tnegative", GENERIC_ROW], "line 1", None, "header"),
    ],
)
def test_visla_bad_rows(
    tmp_path: Path, lines: list[str], record: str, field: str | None, message: str
) -> None:
    path = write_tsv(tmp_path / "Generic_VISLA.tsv", lines)
    with pytest.raises(DataError, match=message) as info:
        get_benchmark("visla-generic")(tmp_path).load()
    assert info.value.file == str(path) and info.value.record == record and info.value.field == field


def test_visla_quotes_are_plain_characters_and_bad_encoding(tmp_path: Path) -> None:
    row = '000000460347.jpg\t"A bus\tA "quoted" bus.\tNo "bus"'
    write_tsv(tmp_path / "Generic_VISLA.tsv", [GENERIC_HEADER, row])
    (case,) = get_benchmark("visla-generic")(tmp_path).load()
    assert set(case.texts) == {'"A bus', 'A "quoted" bus.', 'No "bus"'}
    path = tmp_path / "Generic_VISLA.tsv"
    path.write_bytes(GENERIC_HEADER.encode() + b"\r\n000000460347.jpg\tcaf\xe9\tb\tc")
    with pytest.raises(DataError, match="UTF-8") as info:
        get_benchmark("visla-generic")(tmp_path).load()
    assert info.value.file == str(path)
    with pytest.raises(DataError, match="not found"):
        get_benchmark("visla-spatial")(tmp_path).load()


def test_visla_spatial_fixture_skips_only_empty_negatives(tmp_path: Path) -> None:
    header = "image\tsent1\tsent2\tBest reference (Semantically close)\tReference-2 (Completely irrelevant)"
    rows = [
        "000000318723.jpg\tThe backpack contains the cat.\tThe cat is in the backpack.\tIt is outside.\tX",
        "000000439364.jpg\tThe cat is into the toilet.\tThe toilet is surrounding the cat.\t\t",
        "000000318723.jpg\tThe cat is on the bed.\tThe bed is beneath the cat.\tThe cat is under the bed.\t",
    ]
    write_tsv(tmp_path / "Spatial_VISLA.tsv", [header, *rows])
    bench, cases = load("visla-spatial", tmp_path)
    assert [c.id for c in cases] == ["spatial/1", "spatial/3"]
    assert bench.report.skipped == {"spatial row without a negative caption": 1}


# ------------------------------------------------------------------------------------------------
# SugarCrepe

SUGARCREPE_COUNTS = {
    "add_att": 692,
    "add_obj": 2062,
    "replace_att": 788,
    "replace_obj": 1652,
    "replace_rel": 1406,
    "swap_att": 666,
    "swap_obj": 245,
}


def test_sugarcrepe_real(shared_data: Path) -> None:
    bench, cases = load("sugarcrepe", shared_data / "sugarcrepe")
    assert len(cases) == 7511 == bench.report.records
    assert Counter(c.subset for c in cases) == SUGARCREPE_COUNTS
    cases_by_id = by_id(cases)
    case = cases_by_id["add_att/0"]
    assert case.texts == (
        "A drawing of a young woman with many facial piercings.",
        "A drawing of a tattooed young woman with many facial piercings.",
    )
    assert case.truth.tolist() == [[True, False]] and case.roles == ("positive", "negative")
    assert case.tags == {"subset": "add_att", "operation": "add", "target": "att"}
    assert case.images[0].path == shared_data / "sugarcrepe" / "images" / "000000085329.jpg"
    assert cases_by_id["add_att/3"].texts[0] == "The man is sitting on the park bench using his laptop."
    assert "swap_obj/108" not in cases_by_id and "swap_obj/245" in cases_by_id  # ids are not contiguous
    assert [p.name for p in bench.data_files()] == [f"{s}.json" for s in SUGARCREPE_COUNTS]


def test_sugarcrepe_subset_and_real_image(shared_data: Path) -> None:
    bench, cases = load(
        "sugarcrepe", shared_data / "sugarcrepe", "replace_rel", images=shared_data / "coco_val2017"
    )
    assert len(cases) == 1406 and {c.subset for c in cases} == {"replace_rel"}
    case = by_id(cases)["replace_rel/46"]
    assert case.texts[0] == "A man is in a kitchen making pizzas."
    image = case.images[0]
    assert isinstance(image, FileImage) and image.path == shared_data / "coco_val2017" / "000000397133.jpg"
    assert image.load().mode == "RGB"  # the one real COCO image resolves and decodes
    assert case.images[0] is by_id(cases)["replace_rel/1243"].images[0]  # one reference per file
    with pytest.raises(ConfigError):
        bench.load("swap_rel")


def write_json(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def sugarcrepe_fixture(root: Path) -> dict:
    records = {
        "0": {
            "filename": "000000085329.jpg",
            "caption": "A drawing of a young woman with many facial piercings.",
            "negative_caption": "A drawing of a tattooed young woman with many facial piercings.",
        },
        "1": {
            "filename": "000000397133.jpg",
            "caption": "A baker is working in the kitchen rolling dough.",
            "negative_caption": "A baker is working in the tiled kitchen rolling dough.",
        },
    }
    for subset in SUGARCREPE_COUNTS:
        write_json(root / "data" / f"{subset}.json", records)
    return records


def test_sugarcrepe_fixture_checkout_layout(tmp_path: Path) -> None:
    sugarcrepe_fixture(tmp_path)  # a sugar-crepe checkout: files under data/
    _, cases = load("sugarcrepe", tmp_path)
    assert len(cases) == 14 and cases[0].images[0].path == tmp_path / "images" / "000000085329.jpg"
    assert not (tmp_path / "images").exists()  # laziness: no image needs to exist


@pytest.mark.parametrize(
    ("corrupt", "record", "field", "message"),
    [
        (lambda r: r["1"].pop("negative_caption"), "1", "negative_caption", "missing"),
        (lambda r: r["1"].update(caption=["a list"]), "1", "caption", "expected str"),
        (lambda r: r["1"].update(caption="   "), "1", "caption", "empty"),
        (lambda r: r["0"].update(filename=7), "0", "filename", "expected str"),
        (lambda r: r.update({"2": "not an object"}), "2", None, "expected an object"),
    ],
)
def test_sugarcrepe_bad_records(
    tmp_path: Path, corrupt, record: str, field: str | None, message: str
) -> None:
    records = sugarcrepe_fixture(tmp_path)
    corrupt(records)
    path = write_json(tmp_path / "data" / "swap_att.json", records)
    with pytest.raises(DataError, match=message) as info:
        get_benchmark("sugarcrepe")(tmp_path).load()
    assert (info.value.file, info.value.record, info.value.field) == (str(path), record, field)


def test_sugarcrepe_bad_files(tmp_path: Path) -> None:
    sugarcrepe_fixture(tmp_path)
    path = tmp_path / "data" / "add_obj.json"
    text = path.read_text()
    bench = get_benchmark("sugarcrepe")(tmp_path)
    path.write_text(text[: len(text) // 2])  # truncated
    with pytest.raises(DataError, match="invalid JSON") as info:
        bench.load()
    assert info.value.file == str(path)
    # a duplicated id would silently drop a record with json.loads
    path.write_text(text.replace('"1": {', '"0": {'))
    with pytest.raises(DataError, match="duplicate key") as info:
        bench.load()
    assert (info.value.file, info.value.record) == (str(path), "0")
    path.write_bytes(text.encode().replace(b"baker", b"b\xe4ker"))
    with pytest.raises(DataError, match="UTF-8"):
        bench.load()
    write_json(path, [1, 2])
    with pytest.raises(DataError, match="JSON object"):
        bench.load()
    path.unlink()
    with pytest.raises(DataError, match="missing"):
        bench.load()
    assert len(bench.load("add_att")) == 2  # other subsets still load
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no SugarCrepe"):
        get_benchmark("sugarcrepe")(tmp_path / "empty").load()


# ------------------------------------------------------------------------------------------------
# VALSE

VALSE_COUNTS = {  # records, then records with mturk.caption >= 2 (SOURCE.md)
    "actant-swap": (1042, 949),
    "action-replacement": (779, 648),
    "coreference-hard": (141, 104),
    "coreference-standard": (916, 708),
    "counting-adversarial": (756, 691),
    "counting-hard": (1000, 868),
    "counting-small-quant": (1000, 900),
    "existence": (534, 505),
    "foil-it": (1000, 943),
    "plurals": (1000, 851),
    "relations": (614, 535),
}


def test_valse_real_counts(shared_data: Path) -> None:
    bench, cases = load("valse", shared_data / "valse")
    assert len(cases) == 7702
    assert bench.report.records == 8782
    assert bench.report.skipped == {"mturk caption < 2 (VALSE validity rule)": 1080}
    assert Counter(c.subset for c in cases) == {k: v[1] for k, v in VALSE_COUNTS.items()}
    assert all(c.texts[0] != c.texts[1] for c in cases)  # the 24 caption == foil samples are all invalid
    bench, everything = load("valse", shared_data / "valse", all_records="true")
    assert len(everything) == 8782 and not bench.report.skipped
    assert Counter(c.subset for c in everything) == {k: v[0] for k, v in VALSE_COUNTS.items()}
    assert Counter(c.tags["valid"] for c in everything) == {"1": 7702, "0": 1080}
    assert {c.id for c in cases} == {c.id for c in everything if c.tags["valid"] == "1"}


@pytest.mark.parametrize("subset", sorted(VALSE_COUNTS))
def test_valse_each_subset(shared_data: Path, subset: str) -> None:
    bench, cases = load("valse", shared_data / "valse", subset)
    assert len(cases) == VALSE_COUNTS[subset][1] and bench.report.records == VALSE_COUNTS[subset][0]
    assert {c.subset for c in cases} == {subset}


def test_valse_spot_checks(shared_data: Path, tmp_path: Path) -> None:
    _, cases = load("valse", shared_data / "valse", "actant-swap", images=tmp_path)
    case = by_id(cases)["actant-swap/actions_test_0"]
    assert case.texts == ("A man exercises his torso.", "A torso exercises for a man.")
    assert case.roles == ("caption", "foil") and case.truth.tolist() == [[True, False]]
    assert case.tags == {"subset": "actant-swap", "linguistic_phenomena": "actions", "dataset": "SWiG"}
    assert case.images[0].path == tmp_path / "exercising_255.jpg"
    _, cases = load("valse", shared_data / "valse", "foil-it")
    case = by_id(cases)["foil-it/1283539"]
    assert case.tags["linguistic_phenomena"] == "noun phrases" and case.tags["dataset"] == "FOIL dataset"
    assert case.images[0].path == shared_data / "valse" / "images" / "COCO_val2014_000000165831.jpg"
    assert case.texts[1] == "a giant bottle of food, with broccoli and other food on it."
    with pytest.raises(ConfigError):
        get_benchmark("valse")(shared_data / "valse", all_records="maybe").load()


VALSE_RECORD = {
    "dataset": "SWiG",
    "original_split": "test",
    "dataset_idx": "exercising_255.jpg",
    "linguistic_phenomena": "actions",
    "image_file": "exercising_255.jpg",
    "caption": "A man exercises his torso.",
    "classes": "man",
    "classes_foil": "torso",
    "mturk": {"foil": 0, "caption": 3, "other": 0},
    "foil": "A torso exercises for a man.",
}


def valse_fixture(root: Path) -> dict:
    records = {
        "actions_test_0": json.loads(json.dumps(VALSE_RECORD)),
        "actions_test_1": {
            **json.loads(json.dumps(VALSE_RECORD)),
            "mturk": {"foil": 2, "caption": 1, "other": 0},
        },
    }
    for subset in VALSE_COUNTS:
        write_json(root / f"{subset}.json", records)
    return records


def test_valse_fixture_rule(tmp_path: Path) -> None:
    valse_fixture(tmp_path)
    bench, cases = load("valse", tmp_path, "existence")
    assert [c.id for c in cases] == ["existence/actions_test_0"]
    assert bench.report.skipped == {"mturk caption < 2 (VALSE validity rule)": 1}
    assert len(load("valse", tmp_path, all_records=True)[1]) == 22


@pytest.mark.parametrize(
    ("corrupt", "record", "field", "message"),
    [
        (lambda r: r["actions_test_1"].pop("mturk"), "actions_test_1", "mturk", "missing"),
        (lambda r: r["actions_test_1"]["mturk"].pop("caption"), "actions_test_1", "mturk.caption", "missing"),
        (
            lambda r: r["actions_test_0"]["mturk"].update(caption="3"),
            "actions_test_0",
            "mturk.caption",
            "int",
        ),
        (
            lambda r: r["actions_test_0"]["mturk"].update(caption=True),
            "actions_test_0",
            "mturk.caption",
            "int",
        ),
        (lambda r: r["actions_test_0"].update(foil=""), "actions_test_0", "foil", "empty"),
        (
            lambda r: r["actions_test_0"].update(image_file=None),
            "actions_test_0",
            "image_file",
            "expected str",
        ),
        (
            lambda r: r["actions_test_1"].pop("linguistic_phenomena"),
            "actions_test_1",
            "linguistic_phenomena",
            "missing",
        ),
    ],
)
def test_valse_bad_records(tmp_path: Path, corrupt, record: str, field: str, message: str) -> None:
    records = valse_fixture(tmp_path)
    corrupt(records)
    path = write_json(tmp_path / "plurals.json", records)
    with pytest.raises(DataError, match=message) as info:
        get_benchmark("valse")(tmp_path).load()
    assert (info.value.file, info.value.record, info.value.field) == (str(path), record, field)


def test_valse_bad_files(tmp_path: Path) -> None:
    valse_fixture(tmp_path)
    path = tmp_path / "relations.json"
    text = path.read_text()
    bench = get_benchmark("valse")(tmp_path)
    path.write_text(text[:-10])
    with pytest.raises(DataError, match="invalid JSON") as info:
        bench.load()
    assert info.value.file == str(path)
    path.write_text(text.replace('"actions_test_1"', '"actions_test_0"'))
    with pytest.raises(DataError, match="duplicate key") as info:
        bench.load()
    assert info.value.record == "actions_test_0"
    path.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    with pytest.raises(DataError, match="UTF-8"):
        bench.load()
    path.unlink()
    with pytest.raises(DataError, match="missing"):
        bench.load()
    with pytest.raises(ConfigError):
        bench.load("counting")


# ------------------------------------------------------------------------------------------------
# VL-CheckList

VLC_COUNTS = {  # annotation file -> records (SOURCE.md); the three swig_place files have no yaml
    "data/Attribute/vaw/action.json": 3039,
    "data/Attribute/vaw/material.json": 11835,
    "data/Attribute/vaw/size.json": 15321,
    "data/Attribute/vaw/state.json": 4939,
    "data/Attribute/vg/action.json": 1892,
    "data/Attribute/vg/color.json": 11569,
    "data/Attribute/vg/material.json": 2470,
    "data/Attribute/vg/size.json": 2695,
    "data/Attribute/vg/state.json": 941,
    "data/Object/Location/hake_location/hake_obj_margin.json": 10062,
    "data/Object/Location/swig_location/swig_agent/swig_agent_margin.json": 260,
    "data/Object/Location/swig_location/swig_agent/swig_agent_mid.json": 5074,
    "data/Object/Location/swig_location/swig_destination/swig_destination_center.json": 1063,
    "data/Object/Location/swig_location/swig_destination/swig_destination_margin.json": 45,
    "data/Object/Location/swig_location/swig_destination/swig_destination_mid.json": 530,
    "data/Object/Location/swig_location/swig_item/swig_item_center.json": 4163,
    "data/Object/Location/swig_location/swig_item/swig_item_margin.json": 88,
    "data/Object/Location/swig_location/swig_item/swig_item_mid.json": 1715,
    "data/Object/Location/swig_location/swig_tool/swig_tool_center.json": 4056,
    "data/Object/Location/swig_location/swig_tool/swig_tool_margin.json": 121,
    "data/Object/Location/swig_location/swig_tool/swig_tool_mid.json": 2226,
    "data/Object/Location/vg_location/vg_obj_margin.json": 8291,
    "data/Object/Location/vg_location/vg_subj_center.json": 25383,
    "data/Object/Location/vg_location/vg_subj_margin.json": 5974,
    "data/Object/Location/vg_location/vg_subj_mid.json": 26294,
    "data/Object/Size/hake_size/hake_obj_medium.json": 30910,
    "data/Object/Size/hake_size/hake_obj_small.json": 6210,
    "data/Object/Size/swig_size/swig_agent/swig_agent_medium.json": 442,
    "data/Object/Size/swig_size/swig_agent/swig_agent_small.json": 48,
    "data/Object/Size/swig_size/swig_destination/swig_destination_large.json": 1520,
    "data/Object/Size/swig_size/swig_destination/swig_destination_medium.json": 109,
    "data/Object/Size/swig_size/swig_destination/swig_destination_small.json": 9,
    "data/Object/Size/swig_size/swig_item/swig_item_large.json": 5070,
    "data/Object/Size/swig_size/swig_item/swig_item_medium.json": 742,
    "data/Object/Size/swig_size/swig_item/swig_item_small.json": 154,
    "data/Object/Size/swig_size/swig_tool/swig_tool_large.json": 4643,
    "data/Object/Size/swig_size/swig_tool/swig_tool_medium.json": 1452,
    "data/Object/Size/swig_size/swig_tool/swig_tool_small.json": 308,
    "data/Object/Size/vg_size/vg_obj_medium.json": 30725,
    "data/Object/Size/vg_size/vg_obj_small.json": 13702,
    "data/Object/Size/vg_size/vg_subj_large.json": 26167,
    "data/Object/Size/vg_size/vg_subj_medium.json": 20930,
    "data/Object/Size/vg_size/vg_subj_small.json": 10554,
    "data/Relation/swig_action.json": 25150,
    "data/Relation/vg/action.json": 12733,
    "data/Relation/vg/spatial.json": 30650,
}
VLC_MISSING = {
    "data/Attribute/vaw/color.json",
    "data/Object/Location/hake_location/hake_obj_center.json",
    "data/Object/Location/hake_location/hake_obj_mid.json",
    "data/Object/Location/swig_location/swig_agent/swig_agent_center.json",
    "data/Object/Location/vg_location/vg_obj_center.json",
    "data/Object/Location/vg_location/vg_obj_mid.json",
    "data/Object/Size/hake_size/hake_obj_large.json",
    "data/Object/Size/swig_size/swig_agent/swig_agent_large.json",
    "data/Object/Size/vg_size/vg_obj_large.json",
    "data/Relation/hake_action.json",
}


@pytest.fixture(scope="module")
def vlc_full(shared_data: Path) -> tuple[Benchmark, list[Case], float]:
    # the annotations-only snapshot holds no images: keep the records whose image is absent
    bench = get_benchmark("vl-checklist")(shared_data / "vl_checklist", missing_images="keep")
    # CPU time of this process, so that other jobs on a shared machine do not make the check flaky
    start = time.process_time()
    cases = bench.load()
    return bench, cases, time.process_time() - start


def test_vl_checklist_full_load(vlc_full, shared_data: Path) -> None:
    bench, cases, seconds = vlc_full
    root = shared_data / "vl_checklist"
    assert seconds < 20, f"loading all of VL-CheckList took {seconds:.1f} CPU s"
    assert len(cases) == 372_274 == bench.report.records == sum(VLC_COUNTS.values())
    assert bench.report.skipped == {"annotation file missing": 10}
    assert {p.relative_to(root).as_posix() for p in bench.missing} == VLC_MISSING
    corpus_to_file = {e.corpus: e.anno_path.relative_to(root).as_posix() for e in bench.entries()}
    per_file = Counter(corpus_to_file[c.tags["corpus"]] for c in cases)
    assert per_file == VLC_COUNTS
    assert Counter(c.subset for c in cases) == {
        "Attribute/action": 4931,
        "Attribute/color": 11569,
        "Attribute/material": 14305,
        "Attribute/size": 18016,
        "Attribute/state": 5880,
        "Object/Location": 95345,
        "Object/Size": 153695,
        "Relation/action": 37883,
        "Relation/spatial": 30650,
    }
    assert Counter(c.tags["source"] for c in cases) == {
        "vg": 230970,
        "vaw": 35134,
        "swig": 58988,
        "hake": 47182,
    }
    assert all(c.truth.shape == (1, 2) and not c.truth.flags.writeable for c in cases[:1000])
    assert len({c.id for c in cases}) == len(cases)


def test_vl_checklist_spot_checks(vlc_full, shared_data: Path) -> None:
    _, cases, _ = vlc_full
    cases_by_id = by_id(cases)
    images = shared_data / "vl_checklist" / "images"
    color = cases_by_id["Attribute_color_vg/0/0"]  # SOURCE.md example
    assert color.texts == ("brown knob", "teal knob") and color.roles == ("pos", "neg")
    assert color.images[0].path == images / "vg" / "VG_100K" / "2376832.jpg"
    assert color.tags == {
        "subset": "Attribute/color",
        "category": "Attribute",
        "source": "vg",
        "corpus": "Attribute_color_vg",
    }
    small = cases_by_id[
        "Object_Size_small_swig_agent/0/0"
    ]  # first of three pairs: official ITC scores POS[0]/NEG[0]
    assert small.texts == ("an people balloons at a sky", "an President balloons at a sky")
    assert small.images[0].path == images / "swig" / "ballooning_212.jpg"
    assert small.tags["variant"] == "small" and small.tags["subset"] == "Object/Size"
    assert "Object_Size_small_swig_agent/0/1" not in cases_by_id


def test_vl_checklist_all_pairs_and_filters(shared_data: Path, tmp_path: Path) -> None:
    root = shared_data / "vl_checklist"
    bench, cases = load("vl-checklist", root, "Object_Size_small_swig_agent", pairs="all", images=tmp_path,
                        missing_images="keep")
    assert len(cases) == 3 * 48 and bench.report.records == 48
    assert [c.texts for c in cases[:3]] == [
        ("an people balloons at a sky", "an President balloons at a sky"),
        ("an person balloons at a sky", "an panther balloons at a sky"),
        ("an soul balloons at a sky", "an jack of all trades balloons at a sky"),
    ]
    assert (
        cases[0].images[0] is cases[2].images[0]
        and cases[0].images[0].path == tmp_path / "swig/ballooning_212.jpg"
    )
    # a yaml folder, a corpus.json key and a category all select the expected corpora
    bench, cases = load("vl-checklist", root, "Object/Size/small", missing_images="keep")
    assert len(cases) == 48 + 9 + 154 + 308 + 13702 + 10554 + 6210
    assert bench.report.skipped == {} and {c.tags["variant"] for c in cases} == {"small"}
    bench, cases = load("vl-checklist", root, "spatial", missing_images="keep")  # corpus.json key
    assert len(cases) == 30650 and {c.subset for c in cases} == {"Relation/spatial"}
    bench, cases = load("vl-checklist", root, "Relation/action", missing_images="keep")
    assert len(cases) == 25150 + 12733 and bench.report.skipped == {"annotation file missing": 1}
    # only missing files selected: nothing could be read, which is an error naming the file
    with pytest.raises(DataError, match="missing") as info:
        get_benchmark("vl-checklist")(root).load("Attribute_color_vaw")
    assert info.value.file.endswith("data/Attribute/vaw/color.json")
    with pytest.raises(DataError, match="strict"):
        get_benchmark("vl-checklist")(root, strict=True).load("Relation/action")
    with pytest.raises(ConfigError):
        get_benchmark("vl-checklist")(root).load("Object/Colour")
    with pytest.raises(ConfigError):
        get_benchmark("vl-checklist")(root, pairs="some").load("spatial")


def test_vl_checklist_without_images_keeps_no_record(shared_data: Path) -> None:
    """The official loader keeps a record only if its image exists: without images, none, all counted."""
    bench, cases = load("vl-checklist", shared_data / "vl_checklist", "spatial")
    assert cases == [] and bench.report.skipped == {"image missing": 30650}


def test_vl_checklist_data_files(shared_data: Path) -> None:
    root = shared_data / "vl_checklist"
    files = get_benchmark("vl-checklist")(root).data_files()
    rel = {p.relative_to(root).as_posix() for p in files}
    assert sum(r.endswith(".yaml") for r in rel) == 56
    assert {r for r in rel if r.startswith("data/")} == set(VLC_COUNTS)
    assert "corpus.json" in rel and all(p.is_file() for p in files)


REAL_COLOR = [
    ["VG_100K/2376832.jpg", {"POS": ["brown knob"], "NEG": ["teal knob"]}],
    ["VG_100K_2/2385955.jpg", {"POS": ["brown face"], "NEG": ["green face"]}],
]
REAL_SWIG = [
    [
        "ballooning_212.jpg",
        {
            "POS": [
                "an people balloons at a sky",
                "an person balloons at a sky",
                "an soul balloons at a sky",
            ],
            "NEG": [
                "an President balloons at a sky",
                "an panther balloons at a sky",
                "an jack of all trades balloons at a sky",
            ],
        },
    ]
]


def vlc_fixture(root: Path) -> None:
    def yaml_file(rel: str, anno: str, img_root: str) -> None:
        path = root / "corpus" / "v1" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'ANNO_PATH: "{anno}"\nIMG_ROOT: "{img_root}"\nTYPE: "TUPLE_JSON"')

    yaml_file("Attribute/color/vg.yaml", "data/Attribute/vg/color.json", "vg/")
    yaml_file("Attribute/color/vaw.yaml", "data/Attribute/vaw/color.json", "vg")  # missing file
    yaml_file("Object/Size/small/swig_agent.yaml", "data/Object/Size/swig_agent_small.json", "swig/")
    write_json(root / "data/Attribute/vg/color.json", REAL_COLOR)
    write_json(root / "data/Object/Size/swig_agent_small.json", REAL_SWIG)
    for folder, records in (("vg", REAL_COLOR), ("swig", REAL_SWIG)):  # records are kept if their image exists
        for image, _ in records:
            (root / "images" / folder / image).parent.mkdir(parents=True, exist_ok=True)
            (root / "images" / folder / image).write_bytes(b"")
    write_json(
        root / "corpus.json", {"color": {"vg": ["Attribute_color_vg"], "vaw": ["Attribute_color_vaw"]}}
    )


def test_vl_checklist_fixture(tmp_path: Path) -> None:
    vlc_fixture(tmp_path)
    bench, cases = load("vl-checklist", tmp_path)
    assert [c.id for c in cases] == [
        "Attribute_color_vg/0/0",
        "Attribute_color_vg/1/0",
        "Object_Size_small_swig_agent/0/0",
    ]
    assert bench.report.as_dict() == {"records": 3, "cases": 3, "skipped": {"annotation file missing": 1}}
    assert cases[1].images[0].path == tmp_path / "images" / "vg" / "VG_100K_2" / "2385955.jpg"
    assert len(load("vl-checklist", tmp_path, "color")[1]) == 2
    write_json(tmp_path / "data/Attribute/vg/color.json", [])  # an empty list is fine
    assert len(load("vl-checklist", tmp_path, "Attribute/color")[1]) == 0


@pytest.mark.parametrize(
    ("corrupt", "record", "field", "message"),
    [
        (lambda d: d.__setitem__(1, ["VG_100K_2/2385955.jpg"]), "#1", None, "2-element list"),
        (lambda d: d.__setitem__(0, {"path": "x.jpg"}), "#0", None, "2-element list"),
        (lambda d: d[1].__setitem__(0, ""), "#1", "image_path", "image path"),
        (lambda d: d[1].__setitem__(0, "/abs/x.jpg"), "#1", "image_path", "relative"),
        (lambda d: d[0].__setitem__(1, ["brown knob"]), "#0", None, "POS and NEG"),
        (lambda d: d[1][1].pop("POS"), "#1", "POS", "missing"),
        (lambda d: d[1][1].__setitem__("NEG", []), "#1", "NEG", "non-empty list"),
        (lambda d: d[1][1].__setitem__("NEG", "green face"), "#1", "NEG", "non-empty list"),
        (lambda d: d[1][1]["POS"].__setitem__(0, "  "), "#1", "POS[0]", "empty"),
        (lambda d: d[0][1]["NEG"].append("red knob"), "#0", "NEG", "paired"),
    ],
)
def test_vl_checklist_bad_records(
    tmp_path: Path, corrupt, record: str, field: str | None, message: str
) -> None:
    vlc_fixture(tmp_path)
    data = json.loads(json.dumps(REAL_COLOR))
    corrupt(data)
    path = write_json(tmp_path / "data/Attribute/vg/color.json", data)
    with pytest.raises(DataError, match=message) as info:
        get_benchmark("vl-checklist")(tmp_path).load()
    assert (info.value.file, info.value.record, info.value.field) == (str(path), record, field)


def test_vl_checklist_bad_files(tmp_path: Path) -> None:
    vlc_fixture(tmp_path)
    bench = get_benchmark("vl-checklist")(tmp_path)
    anno = tmp_path / "data/Attribute/vg/color.json"
    text = anno.read_text()
    anno.write_text(text[:-5])
    with pytest.raises(DataError, match="invalid JSON") as info:
        bench.load()
    assert info.value.file == str(anno)
    anno.write_bytes(text.encode().replace(b"knob", b"kn\xf6b"))
    with pytest.raises(DataError, match="UTF-8"):
        bench.load()
    write_json(anno, {"0": REAL_COLOR[0]})
    with pytest.raises(DataError, match="JSON list"):
        bench.load()
    write_json(anno, REAL_COLOR)
    # yaml problems
    yaml_path = tmp_path / "corpus/v1/Attribute/color/vg.yaml"
    yaml_path.write_text('IMG_ROOT: "vg"\nTYPE: "TUPLE_JSON"')
    with pytest.raises(DataError, match="missing") as info:
        bench.load()
    assert (info.value.file, info.value.field) == (str(yaml_path), "ANNO_PATH")
    yaml_path.write_text('ANNO_PATH: "data/Attribute/vg/color.json"\nIMG_ROOT: "vg"\nTYPE: "CSV"')
    with pytest.raises(DataError, match="TYPE"):
        bench.load()
    yaml_path.write_text("ANNO_PATH: [unclosed")
    with pytest.raises(DataError, match="YAML"):
        bench.load()
    yaml_path.write_text('ANNO_PATH: "data/Attribute/vg/color.json"\nIMG_ROOT: "vg"')
    assert len(bench.load("Attribute_color_vg")) == 2  # TYPE may be left out
    # an unknown subset, in a folder name or in corpus.json
    odd = tmp_path / "corpus/v1/Attribute/texture/vg.yaml"
    odd.parent.mkdir()
    odd.write_text('ANNO_PATH: "data/Attribute/vg/color.json"\nIMG_ROOT: "vg"')
    with pytest.raises(DataError, match="unknown subset") as info:
        bench.load()
    assert info.value.file == str(odd)
    odd.unlink()
    write_json(tmp_path / "corpus.json", {"color": {"vg": ["Attribute_colour_vg"]}})
    with pytest.raises(DataError, match="unknown subset") as info:
        bench.load()
    assert (info.value.record, info.value.field) == ("color", "vg")
    (tmp_path / "corpus.json").unlink()  # optional
    assert len(bench.load()) == 3


# ------------------------------------------------------------------------------------------------
# laziness


def test_cases_are_lazy(tmp_path: Path) -> None:
    """Nothing is read before iteration, and no image file is touched at load time."""
    sugarcrepe_fixture(tmp_path)
    (tmp_path / "data" / "swap_obj.json").write_text("{broken")
    bench = get_benchmark("sugarcrepe")(tmp_path)
    iterator = bench.cases()  # no error yet: a generator
    first = next(iterator)
    assert first.id == "add_att/0" and not first.images[0].path.exists()
    assert len(bench.load(limit=3)) == 3  # stops inside the first file, never reaches the broken one
    with pytest.raises(DataError):
        bench.load()
    assert np.array_equal(first.truth, [[True, False]])
