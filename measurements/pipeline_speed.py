"""Input-pipeline speed, each ratio measured side by side in one run (issue 17).

Every measurement uses the same JPEG files (synthetic photographs at COCO's 640 x 480, quality 90),
the same batches of 32 (as many as the engine hands the pipeline at once: 32 batches per worker;
32 batches with ``--quick``), the same worker processes and the model's own preprocessing (a CLIP image processor
at 224 px). Each round measures both sides of each ratio one after the other, so that a change of
load on a shared machine hits both alike; the ratios reported are the medians over the rounds:

1. decode-bound ratio = images/s of the harness (``Engine.embed_images``: content keys, cache
   lookups and stores, the input pipeline) with an instant model / images/s of decoding and
   preprocessing alone (``InputPipeline.images``) with the same workers (goal >= 0.9);
2. overlap ratio = max(decode-only time, model-only time) / harness time with a model that takes a
   fixed time per batch. The model sleeps, leaving the cores to the workers as a GPU would, for as
   long per batch as decoding took per batch in that round: the balanced case, where overlap
   matters most and serial work would give 0.5 (goal >= 0.85);
3. scaling: harness images/s with the instant model and 0 (decoding in the calling process), 1, 2,
   4, ... workers, up to the cores present.

It prints the load average with the figures and ends with ``decode-bound ratio R1; overlap ratio
R2``. ``--quick`` is the same measurement on fewer images and rounds (under 3 minutes on 2 cores).
Decoding and the model overlap except while the first batch is decoded and the last one encoded, so
the overlap ratio of ``B`` balanced batches is at most ``B / (B + 1)``: 0.97 for 32 batches.
Usage: ``python measurements/pipeline_speed.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from spotdiff.cases import FileImage
from spotdiff.diagnose.engine import PIPELINE_BATCHES, Engine
from spotdiff.diagnose.pipeline import InputPipeline, default_workers
from spotdiff.scorers import EmbeddingScorer, ScorerOptions
from spotdiff.scorers.base import Prepared
from spotdiff.scorers.hf_dual import HFImagePreprocessor
from spotdiff.testing.tiny_models import make_tiny_image_processor, write_photos

BATCH = 32


class TimedModel(EmbeddingScorer):
    """A stand-in model: the CLIP image processor as its CPU stage, then ``seconds`` per batch."""

    capabilities = frozenset({"image-text"})

    def __init__(self, processor, seconds: float) -> None:
        super().__init__(f"timed-model:{seconds}", ScorerOptions(device="cpu", batch_size=BATCH))
        self.processor = processor
        self.seconds = seconds

    def identity(self) -> dict:
        return {"spec": self.spec}

    def image_preprocessor(self) -> HFImagePreprocessor:
        return HFImagePreprocessor(self.processor)

    def encode_images(self, images: Sequence | Prepared) -> np.ndarray:
        if self.seconds:
            time.sleep(self.seconds)
        return np.zeros((len(images), 8), np.float32)

    def encode_texts(self, texts: Sequence | Prepared) -> np.ndarray:
        return np.zeros((len(texts), 8), np.float32)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def batches_of(n: int) -> list[list[int]]:
    return [list(range(s, min(n, s + BATCH))) for s in range(0, n, BATCH)]


def decode_only(paths: list[Path], processor, workers: int) -> float:
    refs = [FileImage(p) for p in paths]
    prepare = HFImagePreprocessor(processor)
    return timed(lambda: [None for _ in InputPipeline(workers).images(refs, batches_of(len(refs)), prepare)])


def harness(paths: list[Path], model: TimedModel, workers: int) -> float:
    refs = [FileImage(p) for p in paths]  # fresh references: content keys are computed each time
    with Engine(model, progress=False, workers=workers) as engine:
        return timed(lambda: engine.embed_images(refs))


def model_only(paths: list[Path], model: TimedModel) -> float:
    batch = model.image_preprocessor()([Image.new("RGB", (640, 480))] * BATCH)
    return timed(lambda: [model.encode_images(batch) for _ in batches_of(len(paths))])


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer images and rounds (under 3 minutes on 2 cores)")
    args = parser.parse_args()
    workers = default_workers()
    # what the engine gives the pipeline per chunk (PIPELINE_BATCHES per worker); 32 batches when quick
    n_images, rounds = (32 * BATCH, 3) if args.quick else (PIPELINE_BATCHES * max(1, workers) * BATCH, 5)
    scaling = sorted({w for w in (0, 1, 2, 4, 8, 16, 32, 64, 128) if w <= workers} | {workers})
    processor = make_tiny_image_processor(kind="clip", size=224)
    instant = TimedModel(processor, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_photos(Path(tmp) / "photos", n_images, workers=workers)
        size = sum(p.stat().st_size for p in paths) / len(paths) / 1024
        print(json.dumps({"images": n_images, "jpeg_kib": round(size, 1), "batch": BATCH, "workers": workers,
                          "cores": os.cpu_count(), "preprocessing": "CLIPImageProcessor 224 px", "rounds": rounds}))
        print(load())
        decode_only(paths[: BATCH * 2], processor, workers)  # warm-up: imports, page cache
        n_batches = len(batches_of(n_images))
        r1s, r2s = [], []
        for k in range(rounds):
            decode = decode_only(paths, processor, workers)
            inst = harness(paths, instant, workers)
            sleeper = TimedModel(processor, decode / n_batches)  # the model takes as long as decoding
            slept = harness(paths, sleeper, workers)
            model = model_only(paths, sleeper)
            r1s.append(decode / inst)
            r2s.append(max(decode, model) / slept)
            print(f"round {k + 1}: decode alone {decode:.2f}s ({n_images / decode:.1f} images/s), harness with an "
                  f"instant model {inst:.2f}s ({n_images / inst:.1f} images/s); model alone {model:.2f}s "
                  f"({1000 * decode / n_batches:.0f} ms a batch), harness with that model {slept:.2f}s (serial: "
                  f"{decode + model:.2f}s); ratios {r1s[-1]:.2f}, {r2s[-1]:.2f}; {load()}")  # fmt: skip
        times: dict[int, list[float]] = {w: [] for w in scaling}
        for _ in range(rounds):  # interleaved, so load changes hit every worker count
            for w in scaling:
                times[w].append(harness(paths, instant, w))
        print("scaling of harness images/s with the instant model (median of rounds):")
        for w in scaling:
            label = "0 (in the calling process)" if w == 0 else str(w)
            print(f"  workers {label}: {n_images / float(np.median(times[w])):.1f} images/s")
        r1, r2 = float(np.median(r1s)), float(np.median(r2s))
        print(load())
    print(f"decode-bound ratio {r1:.2f}; overlap ratio {r2:.2f}")


if __name__ == "__main__":
    main()
