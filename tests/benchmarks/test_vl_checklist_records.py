"""VL-CheckList as the official loader and evaluate.py select records: a record is kept only if its
image exists (counted otherwise), and max_per_corpus=1000 is the released sample configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.vl_checklist import OFFICIAL_MAX_PER_CORPUS, SKIP_NO_IMAGE, SKIP_PAST_MAX
from spotdiff.errors import ConfigError


def _corpus(root: Path, folder: str, source: str, images: list[str], present: set[str]) -> None:
    anno = f"data/{folder.replace('/', '_')}_{source}.json"
    yaml = root / "corpus" / "v1" / folder / f"{source}.yaml"
    yaml.parent.mkdir(parents=True, exist_ok=True)
    yaml.write_text(f"ANNO_PATH: {anno}\nIMG_ROOT: {source}/\nTYPE: TUPLE_JSON\n", encoding="utf-8")
    (root / anno).parent.mkdir(parents=True, exist_ok=True)
    records = [[img, {"POS": [f"pos {k}"], "NEG": [f"neg {k}"]}] for k, img in enumerate(images)]
    (root / anno).write_text(json.dumps(records), encoding="utf-8")
    for img in present:
        (root / "images" / source / img).parent.mkdir(parents=True, exist_ok=True)
        (root / "images" / source / img).write_bytes(b"")


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "vlc"
    _corpus(root, "Attribute/color", "vg", ["a.jpg", "b.jpg", "c.jpg", "d.jpg"], {"a.jpg", "c.jpg", "d.jpg"})
    _corpus(root, "Relation/action", "hake", ["h1.jpg", "h2.jpg"], set())  # HAKE: a manual part, absent
    return root


def test_records_without_their_image_are_skipped_and_counted(tmp_path: Path) -> None:
    bench = get_benchmark("vl-checklist")(_root(tmp_path))
    cases = bench.load()
    assert [c.id for c in cases] == ["Attribute_color_vg/0/0", "Attribute_color_vg/2/0", "Attribute_color_vg/3/0"]
    assert bench.report.records == 6 and bench.report.skipped == {SKIP_NO_IMAGE: 3}
    kept = get_benchmark("vl-checklist")(_root(tmp_path), missing_images="keep")
    assert len(kept.load()) == 6 and not kept.report.skipped


def test_max_per_corpus_counts_records_with_an_image(tmp_path: Path) -> None:
    assert OFFICIAL_MAX_PER_CORPUS == 2000 // 2  # configs/sample.yaml MAX_NUM, halved for itc
    bench = get_benchmark("vl-checklist")(_root(tmp_path), max_per_corpus=2)
    assert [c.id for c in bench.load()] == ["Attribute_color_vg/0/0", "Attribute_color_vg/2/0"]
    assert bench.report.skipped == {SKIP_NO_IMAGE: 3, SKIP_PAST_MAX: 1}
    with pytest.raises(ConfigError, match="max_per_corpus"):
        get_benchmark("vl-checklist")(_root(tmp_path), max_per_corpus=-1).load()
