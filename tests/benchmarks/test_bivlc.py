"""BiVLC: the hub parquet layout, and I2T / T2I / group equal to a transcription of the authors'
evaluate_BiVLC on score matrices with ties."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import ParquetImage
from spotdiff.protocols import get_protocol
from spotdiff.testing.hub_repos import bivlc_repo


def _hub(root: Path) -> Path:
    for rel, data in bivlc_repo().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_bivlc_reads_the_hub_layout(tmp_path: Path) -> None:
    bench = get_benchmark("bivlc")(_hub(tmp_path))
    cases = bench.load()
    assert len(cases) == 6 == bench.report.records
    assert [c.subset for c in cases[:3]] == ["replace", "swap", "add"] and cases[1].tags["subtype"] == "att"
    case = cases[0]
    assert case.id == "test-00000-of-00001/0" and case.truth.tolist() == [[True, False], [False, True]]
    assert isinstance(case.images[1], ParquetImage) and case.images[1].load().size == (48, 48)
    assert [c.id for c in get_benchmark("bivlc")(tmp_path).load("add")] == [
        "test-00000-of-00001/2", "test-00000-of-00001/5"]  # fmt: skip


def test_the_real_splits_quirks(tmp_path: Path) -> None:
    """Rows without an id (the case id is the file and row), one COCO image and caption serving several
    rows (equal image keys: encoded once), a caption's trailing space stripped, JPEG images."""
    cases = get_benchmark("bivlc")(_hub(tmp_path)).load()
    assert len({c.id for c in cases}) == 6
    assert cases[0].images[0].key == cases[1].images[0].key != cases[2].images[0].key
    assert cases[0].texts[0] == cases[1].texts[0] == "a dog next to a cat"  # row 1's caption ends in a space
    assert cases[0].images[0].load().size == (40, 32) and cases[2].images[0].load().size == (48, 32)


def _official(s_C0_I0, s_C0_I1, s_C1_I0, s_C1_I1) -> tuple[bool, bool, bool]:
    """BiVLC's evaluate_BiVLC loop body (src/CLIP_fine_tuning/CLIP_utils.py, github.com/IMirandaM/BiVLC)."""
    Ipos_2T = s_C0_I0 > s_C1_I0
    Ineg_2T = s_C1_I1 > s_C0_I1
    Tpos_2I = s_C0_I0 > s_C0_I1
    Tneg_2I = s_C1_I1 > s_C1_I0
    I2T = Ipos_2T and Ineg_2T
    T2I = Tpos_2I and Tneg_2I
    group_score = I2T and T2I
    return bool(I2T), bool(T2I), bool(group_score)


def test_scores_equal_the_authors_code_with_ties(tmp_path: Path) -> None:
    case = get_benchmark("bivlc")(_hub(tmp_path)).load()[0]
    group = get_protocol("group")
    rng = np.random.default_rng(5)
    for _ in range(200):
        s = rng.integers(0, 3, size=(2, 2)).astype(float)  # s[image, caption]
        out = group.outcomes(case, s)[0]
        expected = _official(s[0, 0], s[1, 0], s[0, 1], s[1, 1])
        assert (out["text"], out["image"], out["group"]) == tuple(float(x) for x in expected)
