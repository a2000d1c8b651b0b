"""VQAScore prefix reuse: speed-up over scoring each (image, text) pair as its own sequence.

t2v_metrics scores every (image, text) pair as one whole sequence (system turn, image tokens,
question, answer), so the vision tower and the shared prompt run once per pair. ``vqa:`` encodes the
image and the prompt's common prefix once per unique image (the KV cache) and batches that image's
texts against it (``spotdiff.scorers.chat``). This script times both through the same engine, on the
same cases, side by side in one process (alternating, best of ``--repeats``), for the tiny random
chat VLMs of ``spotdiff.testing.tiny_vlms`` loaded by path, on 2 x 2 cases (Winoground / EqBen
shape: 2 texts per image) and 9 x 9 cases (SPEC shape: 9 texts per image), and checks that both give
the same scores (max |difference| of log VQAScore). Usage: ``python benchmarks/vqa_prefix_speed.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from spotdiff.cases import Case, PILImage
from spotdiff.diagnose.engine import Engine
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.tiny_models import tiny_images
from spotdiff.testing.tiny_vlms import TINY_VLMS, make_tiny_vlm

NOUNS = "cat dog cup bowl horse car tree chair table ball".split()
WHERE = "left of|right of|above|below|next to|behind|in front of|on top of|under".split("|")


def cases(k: int, n: int, seed: int = 0) -> list[Case]:
    """``n`` K x K cases with distinct images and texts (permutation truth)."""
    images = tiny_images(k * n, seed=seed)
    out = []
    for c in range(n):
        refs = tuple(PILImage(images[c * k + i], name=f"c{c}i{i}") for i in range(k))
        texts = tuple(
            f"the {NOUNS[(c + i) % 10]} is {WHERE[i % 9]} the {NOUNS[(c + 2 * i + 1) % 10]} ({c})" for i in range(k)
        )
        out.append(Case(f"c{c}", texts, np.eye(k, dtype=bool), refs, {"subset": f"{k}x{k}"}))
    return out


def timed(spec: str, batch: list[Case], batch_size: int) -> tuple[float, list[np.ndarray]]:
    scorer = load_scorer(spec, ScorerOptions(device="cpu", batch_size=batch_size))
    start = time.perf_counter()
    with Engine(scorer, progress=False) as engine:
        mats = list(engine.case_matrices(batch, "image-text"))
    return time.perf_counter() - start, mats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16, help="texts per forward pass, both sides")
    args = parser.parse_args()
    shapes = {"2 x 2": cases(2, 12), "9 x 9": cases(9, 2)}
    head = ("model", "cases", "pairs", "whole (s)", "reuse (s)", "speed-up", "max |dlog|")
    print(f"{head[0]:<10} {head[1]:<14} {head[2]:>5} {head[3]:>10} {head[4]:>10} {head[5]:>9} {head[6]:>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for arch in TINY_VLMS:
            path = make_tiny_vlm(arch, Path(tmp) / arch)
            for name, batch in shapes.items():
                best = {"whole": np.inf, "reuse": np.inf}
                mats = {}
                for _ in range(args.repeats):
                    for side, option in (("whole", "?reuse=no"), ("reuse", "")):
                        seconds, mats[side] = timed(f"vqa:{path}{option}", batch, args.batch_size)
                        best[side] = min(best[side], seconds)
                pairs_of = zip(mats["whole"], mats["reuse"], strict=True)
                diff = max(float(np.abs(np.log(a) - np.log(b)).max()) for a, b in pairs_of)
                pairs = sum(len(c.images) * len(c.texts) for c in batch)
                label = f"{len(batch)} of {name}"
                print(
                    f"{arch:<10} {label:<14} {pairs:>5} {best['whole']:>10.3f} {best['reuse']:>10.3f} "
                    f"{best['whole'] / best['reuse']:>8.2f}x {diff:>11.1e}"
                )


if __name__ == "__main__":
    main()
