"""Where a declared benchmark's rows come from (item 2 of issue 46): a local CSV, TSV, JSON, JSON-lines, parquet or
Arrow file, a folder of images, several files or splits, a hub dataset at a pinned revision (by config and split),
a file at a URL; the remote ones fetched by `spotdiff data fetch FILE` into the data home with the fetch code of
every benchmark (checked, offline once fetched)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from spotdiff.api import load_benchmark
from spotdiff.cli import main
from spotdiff.data import benchmark_dir

ROWS = [{"id": f"p{i}", "image": f"{i}.png", "caption": f"a cat left of dog {i}", "negative": f"a dog left of cat {i}",
         "kind": ("swap", "count", "colour")[i % 3]} for i in range(6)]  # fmt: skip


def _summary(cases) -> list[tuple]:
    return [(c.id, c.subset, c.texts, c.truth.tolist(), [Path(r.path).name for r in c.images]) for c in cases]


def _table(rows: list[dict]) -> pa.Table:
    return pa.table({k: [r[k] for r in rows] for k in rows[0]})


def _write(pairs: Path, fmt: str) -> dict:
    """The pairs of ``pairs.csv`` written in ``fmt``; the data entry that reads them."""
    if fmt == "tsv":
        lines = ["\t".join(ROWS[0])] + ["\t".join(r.values()) for r in ROWS]
        (pairs / "pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return {"path": "pairs.tsv"}
    if fmt == "json":
        (pairs / "pairs.json").write_text(json.dumps(ROWS), encoding="utf-8")
        return {"path": "pairs.json"}
    if fmt == "json-records":
        (pairs / "pairs.json").write_text(json.dumps({"version": 1, "data": ROWS}), encoding="utf-8")
        return {"path": "pairs.json", "records": "data"}
    if fmt == "jsonl":
        (pairs / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
        return {"path": "pairs.jsonl"}
    if fmt == "parquet":
        pq.write_table(_table(ROWS), pairs / "pairs.parquet", row_group_size=2)
        return {"path": "pairs.parquet"}
    if fmt == "arrow":
        feather.write_feather(_table(ROWS), pairs / "pairs.arrow")
        return {"path": "pairs.arrow"}
    (pairs / "images" / "metadata.jsonl").write_text(
        "".join(json.dumps({**r, "file_name": r["image"]}) + "\n" for r in ROWS), encoding="utf-8")
    return {"folder": "images"}


@pytest.mark.parametrize("fmt", ["tsv", "json", "json-records", "jsonl", "parquet", "arrow", "folder"])
def test_every_format_gives_the_cases_of_the_csv(declare, fmt: str) -> None:
    expected = _summary(load_benchmark(str(declare())))
    entry = _write(declare().parent, fmt)
    cases = {"images": ["{{ file_name }}"]} if fmt == "folder" else {}
    assert _summary(load_benchmark(str(declare(data=[entry], cases=cases)))) == expected


def test_a_keyed_json_object_gives_each_record_its_key(declare, pairs) -> None:
    (pairs / "pairs.json").write_text(json.dumps({r["id"]: r for r in ROWS}), encoding="utf-8")
    cases = load_benchmark(str(declare(data=[{"path": "pairs.json"}], cases={"id": "{{ _stem }}/{{ _key }}"})))
    assert [c.id for c in cases] == [f"pairs/p{i}" for i in range(6)]


def test_a_folder_without_metadata_is_one_row_per_image(declare, pairs) -> None:
    """As datasets' imagefolder: file_name and label (the folder holding the file); here a retrieval gallery of
    each image against its label's text."""
    for i, row in enumerate(ROWS):
        folder = pairs / "classes" / row["kind"]
        folder.mkdir(parents=True, exist_ok=True)
        (pairs / "images" / f"{i}.png").rename(folder / f"{i}.png")
    path = declare(images="classes", data=[{"folder": "classes"}], protocols=["retrieval"],
                   main_score=["retrieval", "i2t_r1"],
                   cases={"images": ["{{ file_name }}"], "texts": ["a photo of {{ label }}"], "truth": None,
                          "id": None, "subset": "all-of-them", "gallery": True})  # fmt: skip
    (case,) = load_benchmark(str(path))
    assert len(case.images) == 6 and len(case.texts) == 6
    assert case.texts[0] == "a photo of colour" and case.truth.sum(axis=1).tolist() == [1] * 6


def test_several_files_each_a_split(declare, pairs) -> None:
    """Two entries, each its own subset (as a dataset's splits), read in the declaration's order."""
    with (pairs / "test.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, list(ROWS[0]))
        writer.writeheader()
        writer.writerows(ROWS[:2])
    path = declare(data=[{"path": "test.csv", "subset": "test"}, {"path": "pairs.csv", "subset": "train"}],
                   cases={"subset": None, "id": "{{ _subset }}/{{ id }}"})  # fmt: skip
    cases = load_benchmark(str(path))
    assert [c.subset for c in cases] == ["test"] * 2 + ["train"] * 6 and cases[0].id == "test/p0"
    assert [c.id for c in load_benchmark(str(path), subset="test")] == ["test/p0", "test/p1"]


def _parquet(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(_table(rows), buf)
    return buf.getvalue()


def test_a_hub_dataset_by_config_and_split_is_fetched_once(declare, pairs, hub, capsys, monkeypatch) -> None:
    """`spotdiff data fetch FILE` brings datasets' layout of a config and split (counting/test-*) at the pinned
    commit, nothing else of the repository; a second fetch offline finds it in place, and the run reads it
    offline, recording the revision."""
    commit = "a" * 40
    files = {"counting/test-00000-of-00001.parquet": _parquet(ROWS[:3]), "data/test-00000-of-00001.parquet":
             _parquet(ROWS), "README.md": b"---\nconfigs: []\n---\n"}  # fmt: skip
    hub.add_repo("me/pairs", files, revision=commit)
    path = declare(data=[{"hub": "me/pairs", "revision": commit, "config": "counting", "split": "test"}])
    assert main(["data", "fetch", str(path), "-q"]) == 0
    folder = benchmark_dir("my-pairs")
    assert (folder / "counting" / "test-00000-of-00001.parquet").is_file() and not (folder / "data").exists()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["data", "fetch", str(path)]) == 0
    assert "my-pairs/data-0: present" in capsys.readouterr().out
    cases = load_benchmark(str(path), images=str(pairs / "images"), image_root=[str(pairs)])
    assert [c.id for c in cases] == ["p0", "p1", "p2"]
    manifest = json.loads((folder / "spotdiff-manifest.json").read_text())
    assert manifest["parts"]["data-0"]["revision"] == commit


def test_a_url_source_is_checked_against_its_sha256(declare, pairs, files, capsys) -> None:
    data = (pairs / "pairs.csv").read_bytes()
    url = "https://example.org/sets/pairs.csv"
    files.add_url(url, data)
    bad = declare(data=[{"url": url, "sha256": "0" * 64}])
    assert main(["data", "fetch", str(bad), "-q"]) == 2
    assert "checksum mismatch" in capsys.readouterr().err
    assert not (benchmark_dir("my-pairs") / "pairs.csv").exists()  # nothing installed
    good = declare(data=[{"url": url, "sha256": hashlib.sha256(data).hexdigest()}])
    assert main(["data", "fetch", str(good), "-q"]) == 0
    assert (benchmark_dir("my-pairs") / "pairs.csv").read_bytes() == data
    cases = load_benchmark(str(good), images=str(pairs / "images"), image_root=[str(pairs)])
    assert len(cases) == 6
