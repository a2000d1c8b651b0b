"""ColorSwap: the README's JSON layout and the hub parquet layout give the same cases, and the group
protocol equals Winoground's score definitions (which the paper follows) on score matrices with ties."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import FileImage, ParquetImage
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import get_protocol
from spotdiff.testing.hub_repos import colorswap_repo


def _hub(root: Path) -> Path:
    for rel, data in colorswap_repo().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _json(root: Path) -> Path:
    records = [
        {"id": 0, "caption_1": "someone holding a yellow umbrella wearing a white dress",
         "caption_2": "someone holding a white umbrella wearing a yellow dress", "image_1": "images/img_0_1.png",
         "image_2": "images/img_0_2.png", "image_source": "midjourney", "caption_source": "human"},
    ]  # fmt: skip
    (root / "data").mkdir(parents=True)
    (root / "data" / "test.json").write_text(json.dumps(records), encoding="utf-8")
    return root


def test_colorswap_hub_and_readme_layouts(tmp_path: Path) -> None:
    bench = get_benchmark("colorswap")(_hub(tmp_path / "hub"))
    cases = bench.load()
    assert len(cases) == 4 == bench.report.records and cases[1].tags["image_source"] == "midjourney"
    assert [c.id for c in cases] == ["9", "11", "18", "23"]  # the test split's ids, as the vlm_results list them
    assert isinstance(cases[0].images[0], ParquetImage) and cases[0].images[0].load().size == (40, 32)
    assert cases[0].truth.tolist() == [[True, False], [False, True]] and cases[0].subset == "test"
    (case,) = get_benchmark("colorswap")(_json(tmp_path / "gh")).load()
    assert case.id == "0" and case.texts[0] == "someone holding a yellow umbrella wearing a white dress"
    assert isinstance(case.images[1], FileImage) and case.images[1].path == tmp_path / "gh/data/images/img_0_2.png"
    with pytest.raises(ConfigError):
        get_benchmark("colorswap")(tmp_path / "gh").load("train")
    with pytest.raises(DataError, match="train"):
        get_benchmark("colorswap")(tmp_path / "gh", split="train").load()


def _winoground_scores(s: np.ndarray) -> tuple[bool, bool, bool]:
    """Winoground's text / image / group score as its paper defines them (Thrush et al., CVPR 2022,
    Sec. 3.2, strict >), from c_j_i = the score of caption j with image i."""
    c0_i0, c1_i0, c0_i1, c1_i1 = s[0, 0], s[0, 1], s[1, 0], s[1, 1]
    text = c0_i0 > c1_i0 and c1_i1 > c0_i1
    image = c0_i0 > c0_i1 and c1_i1 > c1_i0
    return bool(text), bool(image), bool(text and image)


def test_group_scores_equal_winogrounds_with_ties(tmp_path: Path) -> None:
    case = get_benchmark("colorswap")(_hub(tmp_path)).load()[0]
    group = get_protocol("group")
    rng = np.random.default_rng(4)
    for _ in range(200):
        s = rng.integers(0, 3, size=(2, 2)).astype(float)
        out = group.outcomes(case, s)[0]
        assert (out["text"], out["image"], out["group"]) == tuple(float(x) for x in _winoground_scores(s))
