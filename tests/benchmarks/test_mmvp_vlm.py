"""MMVP-VLM: Questions.csv in the schema evaluate_vlm.py reads, the pattern of each pair, and pair
accuracy equal to a transcription of the authors' scoring on score matrices with ties."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.mmvp_vlm import SUBSETS
from spotdiff.errors import DataError
from spotdiff.protocols import get_protocol
from spotdiff.testing.formats import write_mmvp_vlm


def test_mmvp_vlm_reads_pairs_and_patterns(tmp_path: Path) -> None:
    bench = get_benchmark("mmvp-vlm")(write_mmvp_vlm(tmp_path))
    cases = bench.load()
    assert len(cases) == 16 and bench.report.records == 32
    first = cases[0]
    assert first.id == "orientation-direction/1" and first.tags == {"subset": SUBSETS[0], "type": "Orientation"}
    assert first.texts == ("a photo of the dog is facing left, pair 0", "a photo of the dog is facing right, pair 0")
    assert [im.path.name for im in first.images] == ["2.jpg", "1.jpg"]  # [even, odd]
    assert first.images[0].path.parent == tmp_path / "MLLM_VLM Images" / "Orientation"
    assert first.truth.tolist() == [[False, True], [True, False]]
    assert cases[15].id == "presence-of-specific-features/31"
    assert [c.id for c in get_benchmark("mmvp-vlm")(tmp_path, prefix="false").load(SUBSETS[1])] == [
        "presence-of-specific-features/31"
    ]
    assert get_benchmark("mmvp-vlm")(tmp_path, prefix="false").load()[0].texts[0] == "the dog is facing left, pair 0"


def test_mmvp_vlm_bad_rows(tmp_path: Path) -> None:
    write_mmvp_vlm(tmp_path, n_pairs=2)
    path = tmp_path / "Questions.csv"
    path.write_text(path.read_text(encoding="utf-8").replace("\n3,", "\n5,", 1), encoding="utf-8")
    with pytest.raises(DataError) as info:
        get_benchmark("mmvp-vlm")(tmp_path).load()
    assert info.value.record == "line 4" and info.value.field == "id"


def _official_pair_correct(s: np.ndarray) -> bool:
    """evaluate_vlm.py's decision (github.com/tsb0601/MMVP scripts/evaluate_vlm.py, commit 7635005) on one
    pair, from the logits on: ``s`` is our [image, text] matrix with images [even id, odd id]; the script's
    img1 is the odd id, its logits_per_text row is (img1, img2)."""
    logits_per_text1 = torch.tensor([[s[1, 0], s[0, 0]]])
    logits_per_text2 = torch.tensor([[s[1, 1], s[0, 1]]])
    probs1 = logits_per_text1.softmax(dim=-1).cpu().numpy()
    probs2 = logits_per_text2.softmax(dim=-1).cpu().numpy()
    img1_score1 = probs1[0][0]
    img1_score2 = probs2[0][0]
    pred1 = "img1" if img1_score1 > 0.5 else "img2"
    pred2 = "img1" if img1_score2 > 0.5 else "img2"
    gt1, gt2 = "img1", "img2"  # qid1 is odd, qid2 even
    return pred1 == gt1 and pred2 == gt2


def test_pair_accuracy_equals_the_authors_code_with_ties(tmp_path: Path) -> None:
    cases = get_benchmark("mmvp-vlm")(write_mmvp_vlm(tmp_path, n_pairs=15)).load()
    rng = np.random.default_rng(1)
    mats = rng.integers(0, 2, size=(15, 2, 2)).astype(float) * 3.0  # many ties
    mats[0] = [[1.0, 1.0], [2.0, 1.0]]  # statement 2 ties: the script gives it the even image, its own
    argmax = get_protocol("group", "argmax")
    ours = [argmax.outcomes(c, m)[0]["image"] for c, m in zip(cases, mats, strict=True)]
    assert ours == [float(_official_pair_correct(m)) for m in mats]
    assert ours[0] == 1.0 and get_protocol("group").outcomes(cases[0], mats[0])[0]["image"] == 0.0
