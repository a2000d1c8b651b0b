"""EQ-SD by prompt-to-prompt word swap (EqBen App. B.5; Hertz et al.) on a tiny real Stable Diffusion.

Checked: the token mapper on a hand-worked pair, that injecting the source's cross-attention maps
brings an edited pair's two images closer than the same prompts from the same seed without it, the
automatic check with a scorer, and ``spotdiff synth eqsd`` output scored by ``spotdiff eval``.
"""

from __future__ import annotations

import csv
import json

import numpy as np
from PIL import Image

from spotdiff.commands import main
from spotdiff.synth.diffusion.eqsd import check_pair
from spotdiff.synth.diffusion.models import load_diffusion
from spotdiff.synth.diffusion.p2p import render_pair, token_mapper

CAPTIONS = ("a photo of a cat and a cup.", "a photo of a dog and a cup.")


def test_token_mapper_aligns_prefix_swapped_word_and_suffix():
    # source: <s> a cat </s> pad pad ; target: <s> a big dog </s> pad
    assert token_mapper([0, 3, 4, 1, 1, 1], [0, 3, 5, 6, 1, 1]) == [0, 1, 2, 2, 3, 4]
    assert token_mapper([0, 3, 4, 1], [0, 3, 4, 1]) == [0, 1, 2, 3]


def _distance(images) -> float:
    a, b = (np.asarray(im, dtype=float) for im in images)
    return float(np.abs(a - b).mean())


def test_injected_pairs_are_closer_than_plain_renderings(tiny_generative):
    pipe = load_diffusion("text2image", tiny_generative.t2i, "cpu")
    edited, plain = [], []
    for seed in range(3):
        edited.append(_distance(render_pair(pipe, CAPTIONS, seed, steps=3, size=32, cross_replace=1.0)))
        plain.append(_distance(render_pair(pipe, CAPTIONS, seed, steps=3, size=32, inject=False)))
    assert np.mean(edited) < np.mean(plain)
    same = render_pair(pipe, (CAPTIONS[0], CAPTIONS[0]), 0, steps=2, size=32)
    assert _distance(same) == 0.0  # one seed: the same caption twice gives the same image


class _Scorer:
    """Scores an image against a caption by whether the caption names the image's brighter half."""

    def __call__(self, images, texts):
        return np.array([[float(("cat" in t) == (np.asarray(im).mean() > 100)) for t in texts] for im in images])


def test_check_pair_accepts_only_images_matching_their_own_captions():
    dark, bright = Image.new("RGB", (8, 8), (10, 10, 10)), Image.new("RGB", (8, 8), (200, 200, 200))
    assert check_pair(_Scorer(), (bright, dark), CAPTIONS)["passed"]
    verdict = check_pair(_Scorer(), (dark, bright), CAPTIONS)
    assert not verdict["passed"] and verdict["scores"] == [[0.0, 1.0], [1.0, 0.0]]


def _synth_eqsd(models, out, n, *extra):
    argv = ["synth", "eqsd", "--out", str(out), "--n", str(n), "--image-size", "32", "--steps", "3"]
    return main([*argv, "--t2i", models.t2i, "--device", "cpu", *extra])


def test_synth_eqsd_writes_eqben_pairs_scored_by_eval(tiny_generative, tmp_path):
    from spotdiff.testing import tiny_models

    clip = tiny_models.make_tiny_clip(tmp_path / "clip")
    out = tmp_path / "eqsd"
    assert _synth_eqsd(tiny_generative, out, 2) == 0  # no --check: every pair kept
    kept = json.loads((out / "all_select.json").read_text())
    assert len(kept) == 2 and json.loads((out / "set_aside.json").read_text()) == []
    assert all(r["image0"].startswith("eqbensd/") and (out / "images" / r["image1"]).is_file() for r in kept)
    assert [r["caption0"] != r["caption1"] for r in kept] == [True, True]
    res = tmp_path / "res"
    argv = ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "eqben", "--data", str(out), "--out", str(res)]
    assert main([*argv, "--no-store", "--no-cache", "-q", "--n-boot", "10", "--device", "cpu"]) == 0
    assert "eqbensd" in json.dumps(json.loads((res / "metrics.json").read_text())["metrics"])

    checked = tmp_path / "checked"
    assert _synth_eqsd(tiny_generative, checked, 1, "--check", f"hf-clip:{clip}") == 0
    summary = json.loads((checked / "synth.json").read_text())["summary"]
    kept = json.loads((checked / "all_select.json").read_text())
    aside = json.loads((checked / "set_aside.json").read_text())
    assert summary["pairs"] == len(kept) and summary["set_aside"] == len(aside) and len(kept) + len(aside) == 1
    for pair in aside:  # set aside only when an image prefers the other caption
        s = pair["check"]["scores"]
        assert not (s[0][0] > s[0][1] and s[1][1] > s[1][0])


def test_review_sheet_then_from_review_writes_the_accepted_pairs(tiny_generative, tmp_path):
    """The paper's final cut was by hand: every pair is in review.csv with its verdict; the person
    rejects one, edits a caption of another, and ``--from-review`` writes only what they accepted."""
    out = tmp_path / "eqsd"
    assert _synth_eqsd(tiny_generative, out, 2) == 0
    rows = list(csv.DictReader((out / "review.csv").open(encoding="utf-8")))
    assert [r["decision"] for r in rows] == ["accept", "accept"] and rows[0]["verdict"] == "unchecked"
    assert "images/eqbensd/" in (out / "review.html").read_text() and "http" not in (out / "review.html").read_text()
    rows[0]["decision"] = "reject"
    rows[1]["caption1"] = "a photo of an edited caption."
    with (out / "review.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    final = tmp_path / "final"
    assert main(["synth", "eqsd", "--from-review", str(out / "review.csv"), "--out", str(final)]) == 0
    (pair,) = json.loads((final / "all_select.json").read_text())
    assert pair["caption1"] == "a photo of an edited caption." and pair["image0"] == rows[1]["image0"][len("images/") :]
    assert (final / "images" / pair["image0"]).read_bytes() == (out / "images" / pair["image0"]).read_bytes()
    assert json.loads((final / "synth.json").read_text())["summary"]["rejected"] == 1
