"""Lazy parquet image references and the hub-layout loaders that make them."""

from __future__ import annotations

import hashlib
import io
import pickle

import pyarrow.parquet as pq
import pytest
from PIL import Image

import spotdiff.cases as cases_module
from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import FileImage, ParquetImage, parquet_image_bytes
from spotdiff.errors import DataError
from spotdiff.testing.hub_repos import mteb_vg_repo, winoground_repo

PARQUET = "data/test-00000-of-00001.parquet"


@pytest.fixture
def wino_dir(tmp_path):
    for path, data in winoground_repo(n=6).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    return tmp_path


def test_winoground_parquet_loads_as_cases_with_lazy_images(wino_dir):
    bench = get_benchmark("winoground")(wino_dir)
    cases = bench.load()
    assert [c.id for c in cases] == [str(i) for i in range(6)]
    assert [c.subset for c in cases] == ["Object", "Relation", "Both"] * 2
    assert bench.data_files() == [wino_dir / PARQUET]
    table = pq.read_table(wino_dir / PARQUET)
    for case, row in zip(cases, table.to_pylist(), strict=True):
        assert case.texts == (row["caption_0"], row["caption_1"])
        for ref, column in zip(case.images, ("image_0", "image_1"), strict=True):
            raw = row[column]["bytes"]
            assert isinstance(ref, ParquetImage)
            assert ref.key == f"file:{hashlib.sha256(raw).hexdigest()}"
            expected = Image.open(io.BytesIO(raw)).convert("RGB")
            assert ref.load().tobytes() == expected.tobytes()
    assert bench.report.records == 6


def test_a_parquet_image_has_the_key_of_the_same_bytes_in_a_file(wino_dir, tmp_path):
    ref = get_benchmark("winoground")(wino_dir).load()[0].images[0]
    raw = parquet_image_bytes(ref.path, ref.row, ref.column)
    (tmp_path / "same.png").write_bytes(raw)
    assert FileImage(tmp_path / "same.png").key == ref.key
    box = (1.0, 2.0, 10.0, 8.0)
    cropped = ParquetImage(ref.path, ref.row, ref.column, ref.sha256, box)
    assert FileImage(tmp_path / "same.png", bbox=box).key == cropped.key
    assert cropped.load().size == (10, 8)


def test_loading_reads_one_row_group_at_a_time(wino_dir, monkeypatch):
    refs = [r for c in get_benchmark("winoground")(wino_dir).load() for r in c.images]
    reads = []
    original = pq.ParquetFile.read_row_group

    def counting(self, i, *args, **kwargs):
        reads.append(i)
        return original(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    monkeypatch.setattr(cases_module, "_ROW_GROUPS", type(cases_module._ROW_GROUPS)())
    for ref in refs:  # file order, as the engine scores them
        ref.load()
    # 6 rows in row groups of 2, two image columns: each (row group, column) is read once
    assert sorted(reads) == [0, 0, 1, 1, 2, 2]
    assert len(cases_module._ROW_GROUPS) <= cases_module._ROW_GROUP_CACHE


def test_a_parquet_image_survives_pickling(wino_dir):
    ref = get_benchmark("winoground")(wino_dir).load()[3].images[1]
    again = pickle.loads(pickle.dumps(ref))
    assert again.key == ref.key and again.load().tobytes() == ref.load().tobytes()


def test_bad_parquet_records_name_the_file_the_row_and_the_field(tmp_path):
    import pyarrow as pa

    table = pq.read_table(io.BytesIO(winoground_repo(n=3)[PARQUET]))
    tags = table.column("collapsed_tag").to_pylist()
    tags[2] = "Series"
    (tmp_path / "data").mkdir()
    pq.write_table(table.set_column(table.schema.get_field_index("collapsed_tag"), "collapsed_tag",
                                    pa.array(tags)), tmp_path / PARQUET)
    with pytest.raises(DataError) as info:
        get_benchmark("winoground")(tmp_path).load()
    assert info.value.file.endswith(PARQUET) and "row 2" in info.value.record
    assert info.value.field == "collapsed_tag"
    pq.write_table(table.drop_columns(["caption_1"]), tmp_path / PARQUET)
    with pytest.raises(DataError, match="missing column") as info:
        get_benchmark("winoground")(tmp_path).load()
    assert info.value.field == "caption_1"


def test_mteb_vg_attribution_mirror_groups_by_attribute_pair(tmp_path):
    for path, data in mteb_vg_repo("attribution", n=4).items():
        (tmp_path / "mieb" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "mieb" / path).write_bytes(data)
    bench = get_benchmark("aro-vg-attribution")(tmp_path)
    cases = bench.load()
    assert len(cases) == 4
    assert {c.tags["attributes"] for c in cases} == {"red_white"}
    assert cases[0].roles == ("false_caption", "true_caption") and cases[0].truth.tolist() == [[False, True]]
    assert cases[0].images[0].bbox == (2.0, 3.0, 20.0, 16.0)
    assert get_benchmark("aro-vg-attribution")(tmp_path, crop="false").load()[0].images[0].bbox is None
    with pytest.raises(DataError, match=r"visual_genome_attribution\.json"):
        get_benchmark("aro-vg-attribution")(tmp_path, source="official").load()
