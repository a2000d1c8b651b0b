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
    assert [c.id for c in cases] == [f"{s}/{k}" for s in ("replace_att", "swap_obj") for k in range(4)]
    case = cases[1]
    assert case.texts == ("Blue bathroom with 3 white towels.", "The bathroom is blue and has 3 white towels.",
                          "White bathroom with 3 blue towels.")  # fmt: skip
    assert case.roles == ("p1", "p2", "n") and case.truth.tolist() == [[True, True, False]]
    assert case.images[0].path == tmp_path / "images" / "000000565046.jpg"
    assert case.tags == {"subset": "replace_att", "operation": "replace", "target": "att"}
    assert bench.report.records == 8
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


def test_the_real_files_quirks(tmp_path: Path) -> None:
    """As in the real files (commit c083bbf): captions ending or opening with white space are read stripped,
    the records of one image share its reference, and a negative equal to the caption fails both ITT and
    TOT, as the authors' strict comparisons fail it, for any embedding."""
    cases = get_benchmark("sugarcrepe-pp")(write_sugarcrepe_pp(tmp_path)).load("swap_obj")
    same_neg, other = cases[2], cases[3]
    assert same_neg.texts[0] == same_neg.texts[2] == "A person prepares a pizza while a person watches."
    assert same_neg.texts[1] == "A person watches as another person is preparing a pizza."
    assert other.texts[1].endswith("motorcycle.") and same_neg.images[0] is other.images[0]
    itt, tot = get_protocol("visla-i2t"), get_protocol("visla-t2t")
    rng = np.random.default_rng(3)
    for _ in range(50):
        vectors = {t: v / np.linalg.norm(v) for t in same_neg.texts for v in [rng.normal(size=8)]}  # unit, per text
        image = rng.normal(size=8)
        # each distinct text scored once, as the engine does: equal texts get bitwise equal scores
        sims = np.array([float(vectors[t] @ image) for t in same_neg.texts])
        text = np.array([[float(vectors[a] @ vectors[b]) for b in same_neg.texts] for a in same_neg.texts])
        want = _official(sims[0], sims[1], sims[2], text[0, 1], text[0, 2], text[1, 2])
        assert want == (False, False)
        assert (itt.outcomes(same_neg, sims[None, :])[0]["accuracy"], tot.outcomes(same_neg, text)[0]["accuracy"]) == (
            0.0, 0.0)  # fmt: skip
