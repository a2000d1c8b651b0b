"""SugarCrepe++: the published JSON schema, and ITT / TOT equal to a transcription of the authors'
decision (VLMs/test_*.py) on similarities with ties."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.errors import DataError
from spotdiff.protocols import get_protocol
from spotdiff.testing.formats import write_sugarcrepe_pp


def test_sugarcrepe_pp_reads_the_published_schema(tmp_path: Path) -> None:
    bench = get_benchmark("sugarcrepe-pp")(write_sugarcrepe_pp(tmp_path))
    cases = bench.load()
    assert [c.id for c in cases] == ["replace_att/0", "replace_att/1", "swap_obj/0", "swap_obj/1"]
    case = cases[1]
    assert case.texts == ("Blue bathroom with 3 white towels.", "The bathroom is blue and has 3 white towels.",
                          "White bathroom with 3 blue towels.")  # fmt: skip
    assert case.roles == ("p1", "p2", "n") and case.truth.tolist() == [[True, True, False]]
    assert case.images[0].path == tmp_path / "images" / "000000565046.jpg"
    assert case.tags == {"subset": "replace_att", "operation": "replace", "target": "att"}
    assert bench.report.records == 4
    with pytest.raises(DataError, match="subset file missing"):
        get_benchmark("sugarcrepe-pp")(tmp_path).load("swap_att")
    (tmp_path / "swap_obj.json").write_text(json.dumps([{"id": 0, "filename": "a.jpg", "caption": "x"}]))
    with pytest.raises(DataError) as info:
        get_benchmark("sugarcrepe-pp")(tmp_path).load("swap_obj")
    assert info.value.field == "caption2" and info.value.record == "0"


def _official(cos_p1, cos_p2, cos_neg, cos_p1p2, cos_p1_neg, cos_p2_neg) -> tuple[bool, bool]:
    """The decisions of the authors' VLMs/test_ALIGN.py (github.com/Sri-Harsha/scpp, commit c083bbf):
    image-to-text (ITT) and text-only (TOT) correct."""
    itt = bool(cos_p1 > cos_neg and cos_p2 > cos_neg)
    tot = bool(cos_p1p2 > cos_p1_neg and cos_p1p2 > cos_p2_neg)
    return itt, tot


def test_itt_and_tot_equal_the_authors_code_with_ties(tmp_path: Path) -> None:
    case = get_benchmark("sugarcrepe-pp")(write_sugarcrepe_pp(tmp_path)).load()[0]
    itt, tot = get_protocol("visla-i2t"), get_protocol("visla-t2t")
    rng = np.random.default_rng(2)
    for _ in range(200):
        img = rng.integers(0, 3, size=3).astype(float)  # P1, P2, N against the image: many ties
        p1p2, p1n, p2n = rng.integers(0, 3, size=3).astype(float)
        text = np.array([[1.0, p1p2, p1n], [p1p2, 1.0, p2n], [p1n, p2n, 1.0]])
        expected = _official(img[0], img[1], img[2], p1p2, p1n, p2n)
        got = (itt.outcomes(case, img[None, :])[0]["accuracy"], tot.outcomes(case, text)[0]["accuracy"])
        assert got == (float(expected[0]), float(expected[1]))
