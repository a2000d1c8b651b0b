"""ARO COCO-Order under ``--ties argmax`` reproduces ARO's own number on a fixture.

ARO's ``COCO_Order.evaluate_scores`` takes ``np.argmax`` over ``[true caption, 4 perturbations]`` and
counts ``argmax == 0``, with every perturbation kept even when it equals the caption (short captions
make trigram shuffles the identity). The test scores the same candidates with the model directly
(normalised CLIP features, as ARO's CLIP wrapper; each distinct text encoded on its own, so a
perturbation equal to the caption ties with it exactly rather than by batch rounding) and applies
ARO's rule; spotdiff's ``eval --ties
argmax`` must give the same accuracy on the same number of cases, while the strict default drops the
identical perturbations and reports them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.testing.tiny_models import make_tiny_clip

CAPTIONS = [
    ["a dog.", "two cats.", "a red bus on the street.", "cars.", "a man riding a horse near a tree."],
    ["the sky.", "a bowl of soup on a table.", "green grass.", "a cup.", "people walking in the park."],
    ["a train.", "birds.", "a small boat on a lake.", "snow.", "a woman holding an umbrella."],
]
OPTIONS = ["-o", "pos_tagger=heuristic", "-o", "tokenizer=regex"]


def write_coco_order(root: Path) -> Path:
    """A BLIP Karpathy test file with three images and short captions."""
    rng = np.random.default_rng(0)
    records = []
    for i, captions in enumerate(CAPTIONS):
        image = f"val2014/COCO_val2014_{391895 + i:012d}.jpg"
        (root / image).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (32, 40, 3), dtype=np.uint8)).save(root / image)
        records.append({"image": image, "caption": captions})
    (root / "coco_karpathy_test.json").write_text(json.dumps(records), encoding="utf-8")
    return root


def aro_precision_at_1(model_dir: Path, cases) -> float:
    """ARO's rule on the model's own outputs: ``mean(argmax(scores) == 0)`` over every caption."""
    import torch
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    model = CLIPModel.from_pretrained(model_dir).eval()
    tok, proc = AutoTokenizer.from_pretrained(model_dir), AutoImageProcessor.from_pretrained(model_dir)
    correct = []
    with torch.no_grad():
        for case in cases:
            pixels = proc(images=[case.images[0].load()], return_tensors="pt")["pixel_values"]
            image = model.get_image_features(pixel_values=pixels)
            image = getattr(image, "pooler_output", image)
            unique = list(dict.fromkeys(case.texts))  # each distinct text encoded alone: equal texts tie exactly
            feats = []
            for t in unique:
                out = model.get_text_features(**tok([t], return_tensors="pt"))
                feats.append(getattr(out, "pooler_output", out)[0])
            text = torch.stack([feats[unique.index(t)] for t in case.texts])
            image, text = image / image.norm(dim=-1, keepdim=True), text / text.norm(dim=-1, keepdim=True)
            scores = np.array([float(image[0] @ t) for t in text])  # one dot product per candidate
            correct.append(np.argmax(scores) == 0)
    return 100.0 * float(np.mean(correct))


def test_argmax_ties_reproduce_aro_coco_order(tmp_path: Path) -> None:
    data = write_coco_order(tmp_path / "coco")
    model_dir = make_tiny_clip(tmp_path / "clip")
    loader = get_benchmark("aro-coco-order")
    aro_cases = loader(data, ties="argmax", pos_tagger="heuristic", tokenizer="regex").load()
    assert len(aro_cases) == 15 and all(len(c.texts) == 5 for c in aro_cases)  # ARO: every caption, 5 options
    assert any(t == c.texts[0] for c in aro_cases for t in c.texts[1:])  # some perturbations equal the caption
    aro = aro_precision_at_1(model_dir, aro_cases)

    def run(ties: str) -> dict:
        out = tmp_path / f"out-{ties}"
        argv = ["eval", "--model", f"hf-clip:{model_dir}", "--benchmark", "aro-coco-order", "--data", str(data),
                "--ties", ties, *OPTIONS, "--out", str(out), "--no-store", "--no-cache", "--n-boot", "50",
                "--quiet"]  # fmt: skip
        assert main(argv) == 0
        return json.loads((out / "metrics.json").read_text())

    argmax = run("argmax")
    assert argmax["n_cases"] == 15 and argmax["ties"] == "argmax"
    assert argmax["metrics"]["all"]["accuracy"] == pytest.approx(aro, abs=1e-9)
    assert not argmax["load_report"]["skipped"]
    strict = run("strict")
    skipped = strict["load_report"]["skipped"]
    assert skipped and sum(skipped.values()) > 0  # identical perturbations dropped, and reported
    assert strict["n_cases"] <= 15
