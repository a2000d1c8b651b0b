"""Evaluation-engine speed and memory, measured side by side in one run (issue "Diagnose").

Without ``--device``, prints four CPU figures, each a ratio of two measurements taken in this process on the
same model and the same items, the sides interleaved round by round so machine noise affects both alike; every
side is sized (the item count grows) until the side a ratio is read against takes ``--seconds``,
and each figure is the median of ``--rounds`` rounds:

1. harness throughput / the model's forward pass alone on the same unique items, already
   preprocessed and tokenised (the limit: what the harness adds is decoding, hashing, the input
   pipeline, the cache);
2. the peer: speed-up over SPEC's own evaluation loop with SPEC's own worker count (``spec/eval.py``
   with ``spec/dataset.py`` and ``spec/models/clip_wrapper.py`` of github.com/wjpoom/SPEC, reimplemented in
   :func:`spec_published_loop`: DataLoader batches of 64 records, each image->text record encoding its
   query image and its K candidate captions, each text->image record its query caption and its K
   candidate images; goal >= 5x), and over a per-case loop (each K x K case encodes its own K images
   and K texts once, one case at a time), on the same SPEC-format files on disk (9 x 9 sets);
3. a warm-cache re-run against a cold run (goal >= 20x; the cold run is the sized side), and the
   share of either that the cached values' checksums take (goal < 2%);
4. peak resident memory of text-only runs of 10k and 100k cases (goal: it streams, memory does
   not grow with the number of cases).

With ``--device D`` (``cuda`` on a GPU machine; ``cpu`` runs the same code on the CPU, as a smoke test), figure
1 only, on that device, in ``--dtype`` (``auto``: float16 on CUDA, float32 elsewhere) with batches of
``--batch-size`` (default 256, as ``spotdiff eval --batch-size 256``: its own default is 32, ``auto`` the
largest that fits) on every side, as images/s (and texts/s) and each side's ratio to the forward's (goal for
images >= 0.9), decomposed so that it says what bounds the figure on JPEG files:

* the limit (forward): the model's forward pass alone (``get_image_features`` / ``get_text_features``) on as
  many batches of the same sizes, already preprocessed by the engine's own input pipeline and already on the
  device in the model's dtype (taken in turn from the first ``FORWARD_POOL`` batches, so memory stays bounded):
  no decoding, no host-to-device copy, the clock stopped after ``torch.cuda.synchronize()``;
* the harness on JPEG files: ``Engine.embed_images`` on ``FileImage`` references to photo-like JPEG files of
  640 x 480 on disk (written beforehand, so read from the page cache) and ``Engine.embed_texts`` on four texts
  per image, with the defaults ``spotdiff eval`` gives on that machine (:func:`spotdiff.processes.thread_budget`:
  on a GPU one torch thread and every usable core a decode worker; decoding on the CPU, pinned memory, four
  batches in flight), each round hashing every file (content keys), decoding, preprocessing, tokenising,
  running the model and storing the rows in a fresh cache; and the same images with ``--gpu-decode`` (JPEGs
  decoded and preprocessed on the model's device);
* the peer on the same files: CLIP_benchmark's loop (:func:`clip_benchmark_images`: a DataLoader with as many
  workers, PIL decoding and the same preprocessing per image, the same model under ``torch.no_grad()``), what a
  CPU-decoding pipeline reaches on that machine;
* the harness on arrays: ``Engine.embed_images`` on in-memory random ``uint8`` arrays (``ArrayImage``) already
  at the model's input size, so nothing to decode or resize: the harness's own cost (hashing, batching, the
  pipeline's inter-process copies, host-to-device copies, the cache), against the forward on those arrays; and
  the same with the workers handing over the processor's float32 pixels instead of resized ``uint8`` ones
  finished on the device (the pipeline before issue 34's hand-over), the hand-over's gain side by side.

A last line reads the ratios: the harness on arrays against the forward, and on the files against the peer.
Each group (the files, the arrays) has its own count, grown until its harness side takes ``--seconds`` (default
10, quick 6, medians of 2 rounds: the start-up of every core's worker process is amortised), and capped
(``MAX_PHOTOS``, ``MAX_ARRAYS``). Figures 2-4 are CPU figures and are not run with ``--device``.

The model is a small random CLIP (96-pixel ViT, 4 layers, width 256) or, with ``--model vit-b-32``, a random
CLIP of ViT-B/32's architecture (transformers' ``CLIPConfig`` defaults: 224 pixels, patch 32, 12 layers of
width 768; text 12 layers of width 512) or, with ``--model vit-l-14``, of ViT-L/14's (patch 14, 24 layers of
width 1024; text 12 layers of width 768; openai/clip-vit-large-patch14's sizes): about 19 times ViT-B/32's
image compute (162 against 8.6 GFLOPs counting 2 per multiply-add: 257 tokens against 50), so that the
device figure on JPEG files weighs the harness against a forward that CPU decoding can feed, where ViT-B/32's
measures the decoding. Each is built from a config and saved with ``save_pretrained``, loaded through
``hf-clip:PATH`` like any user checkpoint (a tiny tokenizer: the vocabulary is small); the memory runs use a
tiny sentence-transformer.
Usage: ``python measurements/eval_speed.py [--quick] [--seconds S] [--rounds R] [--model small|vit-b-32|vit-l-14]
[--device D [--dtype T] [--batch-size B]]``; on a GPU machine, from the repository root:
``PYTHONPATH=src python measurements/eval_speed.py --device cuda --dtype fp16 --model vit-b-32 --quick``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from rows import GOAL, profile_bound, row, write_rows  # noqa: E402
from spotdiff.cases import ArrayImage, Case, FileImage  # noqa: E402
from spotdiff.diagnose.cache import CACHE_FILE, batch_positions  # noqa: E402
from spotdiff.diagnose.engine import Engine  # noqa: E402
from spotdiff.diagnose.pipeline import InputPipeline  # noqa: E402
from spotdiff.errors import ConfigError  # noqa: E402
from spotdiff.processes import pin_threads, thread_budget, torch_threads, usable_cores  # noqa: E402
from spotdiff.protocols import get_protocol  # noqa: E402
from spotdiff.scorers import ScorerOptions, load_scorer  # noqa: E402
from spotdiff.scorers.hf_dual import pooled  # noqa: E402
from spotdiff.scorers.runtime import resolve_device, resolve_dtype  # noqa: E402
from spotdiff.testing.tiny_models import (  # noqa: E402
    make_tiny_image_processor,
    make_tiny_sentence_transformer,
    make_tiny_tokenizer,
    write_photos,
)

WORDS = (
    "a the red blue green small large cat dog cup bowl left right above below two three four on of"
).split()


_SMALL_TOWER = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 4}
_SO400M_TOWER = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "num_attention_heads": 16}
#: The random dual encoders the script builds: the transformers family (``CLIPConfig``, ``SiglipConfig``), the tower
#: settings (``vit-b-32``: CLIPConfig's defaults, ViT-B/32's architecture; ``vit-l-14``: openai/clip-vit-large-patch14's
#: config.json; ``siglip-so400m``: google/siglip-so400m-patch14-384's, as open_clip's ViT-SO400M-14-SigLIP-384), the
#: texts' maximum length, and how the output names them.
CLIPS = {
    "small": {"family": "clip", "text": _SMALL_TOWER, "vision": {**_SMALL_TOWER, "image_size": 96, "patch_size": 16},
              "projection_dim": 128, "max_length": 32, "about": "small random CLIP (96px ViT-4L-256, text 4L-256)"},
    "vit-b-32": {"family": "clip", "text": {}, "vision": {}, "projection_dim": 512, "max_length": 77,
                 "about": "random CLIP of ViT-B/32's architecture (224px, patch 32, ViT 12L-768, text 12L-512)"},
    "vit-l-14": {"family": "clip", "text": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12},
                 "vision": {"hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16,
                            "num_hidden_layers": 24, "patch_size": 14},
                 "projection_dim": 768, "max_length": 77,
                 "about": "random CLIP of ViT-L/14's architecture (224px, patch 14, ViT 24L-1024, text 12L-768)"},
    "siglip-so400m": {"family": "siglip", "text": _SO400M_TOWER,
                      "vision": {**_SO400M_TOWER, "patch_size": 14, "image_size": 384}, "max_length": 64,
                      "about": "random SigLIP of so400m-patch14-384's architecture (384px, patch 14, ViT 27L-1152, "
                               "text 27L-1152)"},
}  # fmt: skip
#: The JPEG files of the device figure: COCO's size.
PHOTO_SIZE = (640, 480)
#: Texts per image, in figure 1 on either path.
TEXTS_PER_IMAGE = 4
#: The device figure's counts stop there whatever ``--seconds`` asks: JPEG files written (about 15 ms each per
#: core), in-memory arrays (host memory: 6 GB at 224 x 224).
MAX_PHOTOS, MAX_ARRAYS = 20_000, 40_000
#: Batches the device figure's forward sides take in turn (device memory and their preprocessing stay bounded).
FORWARD_POOL = 8
#: The issue's goal: the harness's images/s at least this share of the forward pass's.
IMAGE_GOAL = GOAL
#: A side below its goal is profiled once more on at most this many batches (:func:`rows.profile_bound`).
PROFILE_BATCHES = 8


def clip_config(name: str, vocab_size: int) -> Any:
    """The transformers config (``CLIPConfig`` or ``SiglipConfig``) of ``CLIPS[name]`` with a text vocabulary of
    ``vocab_size`` (the tiny tokenizer's ids: [PAD] 0, [CLS] 2, [SEP] 3)."""
    from transformers import CLIPConfig, SiglipConfig

    clip = CLIPS[name]
    text = {**clip["text"], "vocab_size": vocab_size, "max_position_embeddings": clip["max_length"],
            "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}  # fmt: skip
    if clip["family"] == "siglip":
        return SiglipConfig(text_config=text, vision_config=clip["vision"])
    return CLIPConfig(text_config=text, vision_config=clip["vision"], projection_dim=clip["projection_dim"])


def make_clip(out: Path, name: str, dtype: Any = None, vocab_size: int | None = None) -> Path:
    """The random model ``CLIPS[name]`` saved in ``out`` with ``save_pretrained`` (in ``dtype``, by default float32),
    a tiny tokenizer and the family's image processor at its image size beside it, as a user's checkpoint folder
    (load it with :func:`spec`). Its text vocabulary has ``vocab_size`` rows (default: the tiny tokenizer's, whose
    ids are all below it either way)."""
    import torch
    from transformers import CLIPModel, SiglipModel

    family = CLIPS[name]["family"]
    tok = make_tiny_tokenizer(out, max_length=CLIPS[name]["max_length"])
    config = clip_config(name, vocab_size or len(tok))
    torch.manual_seed(0)
    model = (SiglipModel if family == "siglip" else CLIPModel)(config).eval()
    model.to(dtype or torch.float32).save_pretrained(out)
    make_tiny_image_processor(out, kind=family, size=config.vision_config.image_size)
    return out


def spec(name: str, folder: Path) -> str:
    """The model spec that loads ``CLIPS[name]`` saved in ``folder``: ``hf-clip:PATH`` or ``hf-siglip:PATH``."""
    return f"hf-{CLIPS[name]['family']}:{folder}"


def random_text(rng: np.random.Generator, n_words: int = 8) -> str:
    return " ".join(rng.choice(WORDS, size=n_words))


def spec_cases(n_cases: int, k: int, seed: int) -> list[Case]:
    """K x K cases with distinct images and captions (diagonal truth), as SPEC's sets are."""
    rng = np.random.default_rng(seed)
    cases = []
    for c in range(n_cases):
        images = tuple(
            ArrayImage(rng.integers(0, 256, (96, 96, 3), dtype=np.uint8), name=f"c{c}i{i}") for i in range(k)
        )
        texts = tuple(f"{random_text(rng)} {c} {i}" for i in range(k))
        cases.append(Case(f"c{c}", texts, np.eye(k, dtype=bool), images, {"subset": "s"}))
    return cases


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(setup, n: int, seconds: float, rounds: int, gauge: int | None = None, *, cap: int | None = None,
            trial_all: bool = True) -> tuple[int, list[float]]:  # fmt: skip
    """Median times of the sides ``setup(n)`` returns, interleaved over ``rounds`` rounds, with ``n``
    grown until side ``gauge`` (default: the fastest) takes ``seconds`` in a trial round, or ``n`` reaches
    ``cap``; with ``trial_all`` False a trial round times the gauge alone."""
    while True:
        sides = setup(n)
        if gauge is None:
            t = min(timed(fn) for fn in sides)
        else:
            t = [timed(fn) for fn in sides][gauge] if trial_all else timed(sides[gauge])
        if t >= seconds or (cap is not None and n >= cap):
            break
        n = int(n * min(8.0, 1.25 * seconds / max(t, 1e-3))) + 1
        n = n if cap is None else min(n, cap)
    times = [[timed(fn) for fn in sides] for _ in range(rounds)]
    return n, [statistics.median(col) for col in zip(*times, strict=True)]


def harness_vs_forward(model: str, n_images: int, seconds: float, rounds: int) -> None:
    scorer = load_scorer(model, ScorerOptions(device="cpu", batch_size=64))
    prepare_images, prepare_texts = scorer.image_preprocessor(), scorer.text_preprocessor()
    sizes: dict[str, int] = {}

    def setup(n: int) -> list:
        refs = [r for c in spec_cases(max(1, n // 8), 8, seed=1) for r in c.images]
        rng = np.random.default_rng(2)
        texts = [f"{random_text(rng)} {i}" for i in range(TEXTS_PER_IMAGE * len(refs))]
        pil = [r.load() for r in refs]
        pixels = [prepare_images(pil[s : s + 64]) for s in range(0, len(pil), 64)]
        tokens = [prepare_texts(texts[s : s + 64]) for s in range(0, len(texts), 64)]
        scorer.encode_images(pixels[0]), scorer.encode_texts(tokens[0])  # warm-up

        def forward() -> None:
            for batch in pixels:
                scorer.encode_images(batch)
            for batch in tokens:
                scorer.encode_texts(batch)

        def harness() -> None:
            with Engine(scorer, None, progress=False) as engine:
                engine.embed_images(refs)
                engine.embed_texts(texts)

        sizes.update(images=len(refs), texts=len(texts))
        return [forward, harness]

    _, (t_forward, t_harness) = measure(setup, n_images, seconds, rounds)
    print(f"1. the limit: harness vs the model's forward pass on preprocessed tensors ({sizes['images']} images + "
          f"{sizes['texts']} texts; the harness also decodes, hashes, preprocesses and tokenises them): forward "
          f"{t_forward:.2f}s, harness {t_harness:.2f}s, throughput ratio {t_forward / t_harness:.2f} "
          f"(the limit is 1; medians of {rounds})")  # fmt: skip


def synchronize(device: str) -> None:
    """Wait for the work queued on ``device`` (CUDA computes asynchronously; elsewhere a call returns when done)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def batch_sizes(n: int, batch: int) -> list[int]:
    """The sizes of the batches ``n`` items make, as the engine cuts them."""
    return [len(positions) for positions in batch_positions(range(n), batch)]


def device_inputs(scorer, refs: list, texts: list[str], workers: int) -> tuple[list, list]:
    """The pixels of ``refs`` (through the engine's own input pipeline with ``workers`` decode workers) and the
    tokens of ``texts``, in the scorer's batches, on its device in its dtype, the copies finished."""
    device, batch = scorer.device, scorer.batch_size
    pipeline = InputPipeline(workers, device=device)
    images = pipeline.images(refs, batch_positions(range(len(refs)), batch), scorer.image_preprocessor())
    pixels = [prepared.to(device, scorer.dtype) for prepared in images]
    tokens = pipeline.texts(texts, batch_positions(range(len(texts)), batch), scorer.text_preprocessor())
    tokens = [prepared.to(device) for prepared in tokens]
    synchronize(device)
    return pixels, tokens


def forward_side(scorer, pool: list, n: int, threads: int):
    """The side that runs the model's forward pass alone (``get_image_features``, or ``get_text_features`` for
    token batches) on the batches ``n`` items make, taken in turn from ``pool`` (batches already on the device,
    the first ones of those items: the same shapes, with bounded memory), synchronised before it returns."""
    import torch

    device, model, sizes = scorer.device, scorer.model, batch_sizes(n, scorer.batch_size)

    def run(sizes: list[int]) -> None:
        synchronize(device)
        with torch.inference_mode(), torch_threads(threads):
            for i, size in enumerate(sizes):
                batch = pool[i % len(pool)]
                if isinstance(batch, dict):
                    pooled(model.get_text_features(**{name: t[:size] for name, t in batch.items()}))
                else:
                    pooled(model.get_image_features(pixel_values=batch[:size]))
            synchronize(device)

    run(sizes[: len(pool)])  # warm-up (CUDA kernels, allocator)
    return lambda: run(sizes)


class _PeerImages:
    """CLIP_benchmark's retrieval dataset (``clip_benchmark/datasets/flickr.py``, ``Flickr.__getitem__``): item
    ``i`` is ``transform(Image.open(path).convert("RGB"))``, here with the scorer's image preprocessor on that one
    image as the transform (the captions are left out: the texts are measured on their own)."""

    def __init__(self, paths: list[Path], prepare) -> None:
        self.paths, self.prepare = paths, prepare

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        from PIL import Image

        return self.prepare([Image.open(self.paths[i]).convert("RGB")]).data[0]


def clip_benchmark_images(scorer, paths: list[Path], workers: int):
    """The image embeddings of ``paths`` as CLIP_benchmark computes them (github.com/LAION-AI/CLIP_benchmark at
    48de38c): ``clip_benchmark/cli.py`` ``run`` wraps the dataset (:class:`_PeerImages`) in ``DataLoader(dataset,
    batch_size=args.batch_size, shuffle=False, num_workers=args.num_workers, collate_fn=...)`` (the collate
    ``default_collate`` of the images), and ``clip_benchmark/metrics/zeroshot_retrieval.py`` ``evaluate`` runs,
    per batch, ``batch_images.to(device)``, under ``torch.no_grad()`` ``F.normalize(model.encode_image(...),
    dim=-1)``, keeps its ``.cpu()``, and concatenates them at the end. Copied as it is, with the scorer's batch
    size, ``workers`` and model (``get_image_features`` in its dtype, where CLIP_benchmark runs an fp32 model under
    ``torch.autocast``), so that only the loop differs from the harness."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader

    dataset = _PeerImages(paths, scorer.image_preprocessor())
    loader = DataLoader(dataset, batch_size=scorer.batch_size, shuffle=False, num_workers=workers)
    rows = []
    for batch_images in loader:
        batch_images = batch_images.to(scorer.device, scorer.dtype)
        with torch.no_grad():
            rows.append(F.normalize(pooled(scorer.model.get_image_features(pixel_values=batch_images)), dim=-1).cpu())
    return torch.cat(rows)


def harness_images(scorer, paths: list[Path], threads: int | None, decode_device: str | None) -> None:
    """``Engine.embed_images`` on fresh references to ``paths`` (each file's content key is hashed, as in a run),
    decoding on ``decode_device`` (None: the CPU workers)."""
    with Engine(scorer, None, progress=False, threads=threads, decode_device=decode_device) as engine:
        engine.embed_images([FileImage(p) for p in paths])


def harness_texts(scorer, texts: list[str], threads: int | None) -> None:
    """``Engine.embed_texts`` on ``texts``."""
    with Engine(scorer, None, progress=False, threads=threads) as engine:
        engine.embed_texts(texts)


def harness_arrays(scorer, arrays: list[np.ndarray], threads: int | None, uint8: bool | None) -> None:
    """``Engine.embed_images`` on fresh references to ``arrays`` (each array's content key is hashed, as in a run),
    the workers' hand-over as ``uint8`` asks (None: the engine's default, uint8 on CUDA)."""
    with Engine(scorer, None, progress=False, threads=threads) as engine:
        if uint8 is not None:
            budget = thread_budget(threads, device=scorer.device)
            engine.pipeline = InputPipeline(budget.workers, device=scorer.device, uint8=uint8)
        engine.embed_images([ArrayImage(a, name=f"array {i}") for i, a in enumerate(arrays)])


def texts_for(n_images: int) -> list[str]:
    """The texts of figure 1: ``TEXTS_PER_IMAGE`` per image, the same for the same count."""
    rng = np.random.default_rng(2)
    return [f"{random_text(rng)} {i}" for i in range(TEXTS_PER_IMAGE * n_images)]


def file_sides(scorer, paths: list[Path], threads: int | None, gpu_decode: bool) -> dict:
    """The sides on the JPEG files at ``paths`` and four texts per file (module docstring), by name, the gauge
    (the harness's images) first."""
    device, batch = scorer.device, scorer.batch_size
    budget = thread_budget(threads, device=device)  # what each Engine below chooses too
    texts = texts_for(len(paths))
    pool = FORWARD_POOL * batch
    pixels, tokens = device_inputs(scorer, [FileImage(p) for p in paths[:pool]], texts[:pool], budget.workers)

    sides = {
        "harness images": lambda: harness_images(scorer, paths, threads, None),
        "forward images": forward_side(scorer, pixels, len(paths), budget.threads),
    }
    if gpu_decode:  # the device's JPEG decoder and the preprocessing on tensors there, started before the clock
        prepare = scorer.image_preprocessor()
        list(InputPipeline(0, device=device, decode_device=device).images([FileImage(paths[0])], [[0]], prepare))
        sides["harness images, --gpu-decode"] = lambda: harness_images(scorer, paths, threads, device)
    sides["peer images"] = lambda: clip_benchmark_images(scorer, paths, budget.workers)
    sides["forward texts"] = forward_side(scorer, tokens, len(texts), budget.threads)
    sides["harness texts"] = lambda: harness_texts(scorer, texts, threads)
    return sides


def array_sides(scorer, arrays: list[np.ndarray], threads: int | None) -> dict:
    """The sides on in-memory ``uint8`` arrays already at the model's input size, by name, the gauge (the
    harness) first: what the harness adds without decoding or resizing."""
    budget = thread_budget(threads, device=scorer.device)
    refs = [ArrayImage(a, name=f"array {i}") for i, a in enumerate(arrays[: FORWARD_POOL * scorer.batch_size])]
    pixels, _ = device_inputs(scorer, refs, [], budget.workers)
    return {
        "harness arrays": lambda: harness_arrays(scorer, arrays, threads, None),
        "forward arrays": forward_side(scorer, pixels, len(arrays), budget.threads),
        "harness arrays, float32 hand-over": lambda: harness_arrays(scorer, arrays, threads, False),
    }


def sized(make_sides, start: int, cap: int, seconds: float, rounds: int) -> tuple[int, dict[str, float]]:
    """:func:`measure` on the sides ``make_sides(n)`` gives by name, the first the gauge (alone in the trial
    rounds), ``n`` at most ``cap``: the count and each side's median time by name."""
    names: list[str] = []

    def setup(n: int) -> list:
        sides = make_sides(n)
        names[:] = list(sides)
        return list(sides.values())

    n, times = measure(setup, start, seconds, rounds, gauge=0, cap=cap, trial_all=False)
    return n, dict(zip(names, times, strict=True))


def device_limit(model: str, options: ScorerOptions, tmp: Path, threads: int | None, seconds: float, rounds: int,
                 header: dict) -> list[dict]:  # fmt: skip
    """Figure 1 on ``options.device`` (module docstring), after a header line naming the device and the budget: its
    rows (:func:`rows.row`), each harness side below the goal profiled once more on at most ``PROFILE_BATCHES``
    batches (:func:`rows.profile_bound`) for what bounds it."""
    import torch
    import transformers

    scorer = load_scorer(model, options)
    device, batch = scorer.device, scorer.batch_size
    budget = thread_budget(threads, device=device)
    gpu_decode = scorer.image_preprocessor().on_tensors()
    gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else None
    side = scorer.model.config.vision_config.image_size
    header.update(device=device, gpu=gpu, dtype=str(scorer.dtype).removeprefix("torch."), batch_size=batch,
                  images="JPEG {}x{}".format(*PHOTO_SIZE), arrays=f"{side}x{side}", texts_per_image=TEXTS_PER_IMAGE,
                  **budget.as_dict(), torch=torch.__version__, transformers=transformers.__version__)  # fmt: skip
    print(json.dumps(header), flush=True)
    folder, written, rng, blocks = tmp / "photos", 0, np.random.default_rng(3), []

    def files(n: int) -> dict:
        nonlocal written
        paths = write_photos(folder, n, start=written, size=PHOTO_SIZE, workers=usable_cores())
        written = max(written, n)
        return file_sides(scorer, paths, threads, gpu_decode)

    def arrays(n: int) -> dict:
        have = sum(len(block) for block in blocks)
        if n > have:
            blocks.append(rng.integers(0, 256, (n - have, side, side, 3), dtype=np.uint8))
        return array_sides(scorer, [a for block in blocks for a in block][:n], threads)

    counts, times = {}, {}
    for group, make_sides, cap in (("files", files, MAX_PHOTOS), ("arrays", arrays, MAX_ARRAYS)):
        counts[group], t = sized(make_sides, 4 * batch, cap, seconds, rounds)
        times.update(t)
    rows = report_device(device, budget, batch, side, rounds, counts, times, gpu_decode, header["model"])
    paths = write_photos(folder, min(counts["files"], PROFILE_BATCHES * batch), start=written)
    few = [a for block in blocks for a in block][: PROFILE_BATCHES * batch]
    harness = {"harness images": lambda: harness_images(scorer, paths, threads, None),
               "harness images, --gpu-decode": lambda: harness_images(scorer, paths, threads, device),
               "harness arrays": lambda: harness_arrays(scorer, few, threads, None),
               "harness texts": lambda: harness_texts(scorer, texts_for(len(paths)), threads)}  # fmt: skip
    blocks.clear()
    for r in rows:
        if r["ratio"] is not None and r["goal"] is not None and r["ratio"] < r["goal"] and r["side"] in harness:
            r["profile"] = profile_bound(harness[r["side"]], device)
            r["bound"] = r["profile"]["bound"]
            print(f"   {r['side']}: {r['bound']} (torch.profiler, {r['profile']['wall_s']:.2f}s pass)")
    return rows


def report_device(device: str, budget, batch: int, side: int, rounds: int, counts: dict, t: dict,
                  gpu_decode: bool, model: str) -> list[dict]:  # fmt: skip
    """Figure 1's lines on a device: each side's items/s and the ratio of the harness's (or the peer's) to the
    forward's, then what bounds the images/s on JPEG files; the same as rows."""
    n, n_arrays, n_texts = counts["files"], counts["arrays"], TEXTS_PER_IMAGE * counts["files"]
    rows = device_rows(model, t, counts, gpu_decode)

    def rate(items: int, name: str) -> str:
        return f"{items / t[name]:,.0f}/s ({t[name]:.2f}s)"

    def count(items: int, cap: int) -> str:
        return f"{items:,}" + (" (the cap)" if items >= cap else "")

    def ratio(name: str, forward: str) -> float:
        return t[forward] / t[name]  # the same items on both sides

    print(f"1. the limit on {device}: the harness as `spotdiff eval` runs by default here ({budget.workers} decode "
          f"worker(s), {budget.threads} torch thread(s); it hashes, decodes, preprocesses, tokenises, runs the model "
          f"and caches) against the model's forward pass alone on batches of {batch} already preprocessed on the "
          f"device, as items/s and the ratio to the forward's; medians of {rounds}:")  # fmt: skip
    line = (f"   images, {count(n, MAX_PHOTOS)} JPEG files of {PHOTO_SIZE[0]} x {PHOTO_SIZE[1]}: forward "
            f"{rate(n, 'forward images')}, harness {rate(n, 'harness images')}, ratio "
            f"{ratio('harness images', 'forward images'):.2f} (goal >= {IMAGE_GOAL})")  # fmt: skip
    if gpu_decode:
        gpu = "harness images, --gpu-decode"
        line += f"; with --gpu-decode {rate(n, gpu)}, ratio {ratio(gpu, 'forward images'):.2f}"
    else:
        line += "; --gpu-decode not measured: this image processor does not run on tensors (no torchvision?)"
    print(line)
    print(f"   the peer on the same files, CLIP_benchmark's loop ({budget.workers} DataLoader worker(s) decoding with "
          f"PIL and preprocessing, the same model): {rate(n, 'peer images')}, ratio "
          f"{ratio('peer images', 'forward images'):.2f}")  # fmt: skip
    print(f"   images, {count(n_arrays, MAX_ARRAYS)} in-memory uint8 arrays of {side} x {side}, the model's input "
          f"size (nothing to decode or resize): forward {rate(n_arrays, 'forward arrays')}, harness "
          f"{rate(n_arrays, 'harness arrays')}, ratio {ratio('harness arrays', 'forward arrays'):.2f}; with the "
          f"workers handing over float32 pixels (normalised in the workers, not on the device) "
          f"{rate(n_arrays, 'harness arrays, float32 hand-over')}, ratio "
          f"{ratio('harness arrays, float32 hand-over', 'forward arrays'):.2f}")  # fmt: skip
    print(f"   texts, {n_texts:,}: forward {rate(n_texts, 'forward texts')}, harness {rate(n_texts, 'harness texts')}, "
          f"ratio {ratio('harness texts', 'forward texts'):.2f}")  # fmt: skip
    arrays, files = ratio("harness arrays", "forward arrays"), ratio("harness images", "forward images")
    peer = ratio("peer images", "forward images")
    print(f"   what bounds the JPEG figure: {bound(arrays, files, peer)}")
    print("figures 2-4 (the peer, the warm re-run, streaming memory) are CPU figures: run without --device for them")
    return rows


def device_rows(model: str, t: dict, counts: dict, gpu_decode: bool) -> list[dict]:
    """Figure 1's sides as rows: items/s of each harness side (and the peer's) against the forward's on the same
    items. The float32 hand-over and the peer are read against the forward too, with no goal of their own."""
    n = {"files": counts["files"], "arrays": counts["arrays"], "texts": TEXTS_PER_IMAGE * counts["files"]}
    sides = [("images/s, JPEG files", "harness images", "forward images", "files", IMAGE_GOAL),
             ("images/s, JPEG files", "harness images, --gpu-decode", "forward images", "files", IMAGE_GOAL),
             ("images/s, JPEG files", "peer images", "forward images", "files", None),
             ("images/s, arrays at input size", "harness arrays", "forward arrays", "arrays", IMAGE_GOAL),
             ("images/s, arrays at input size", "harness arrays, float32 hand-over", "forward arrays", "arrays", None),
             ("texts/s", "harness texts", "forward texts", "texts", None)]  # fmt: skip
    out = []
    for figure, name, limit, group, goal in sides:
        if name in t:
            unit = figure.split(",")[0]
            out.append(row(f"eval {figure}", model, name, n[group] / t[name], unit, limit=n[group] / t[limit],
                           limit_side=limit, goal=goal, items=n[group], seconds=t[name]))  # fmt: skip
    return out


def bound(arrays: float, files: float, peer: float) -> str:
    """What bounds the harness's images/s on JPEG files, from its ratios to the forward on arrays (``arrays``) and
    on the files (``files``), and the peer's on the files (``peer``)."""
    own = f"on arrays, with nothing to decode or resize, the harness reaches {arrays:.2f} of the forward"
    versus = f"on the files {files:.2f}, {files / peer:.2f}x the peer's images/s ({peer:.2f} of the forward)"
    if files >= IMAGE_GOAL:
        return f"nothing below the goal ({own}; {versus})"
    if arrays < IMAGE_GOAL and files >= 0.8 * arrays:
        return f"the harness's own machinery (hashing, batching, IPC, copies): {own}; {versus}"
    if files >= 0.9 * peer:
        then = "" if arrays >= IMAGE_GOAL else ", so its machinery bounds it next"
        return f"decoding and resizing the JPEGs on the CPU, as for the peer: {versus}; {own}{then}"
    return f"the harness's decoding path, slower than the peer's loop on the same files and cores: {versus}; {own}"


class _Image2Text:
    """``spec/dataset.py`` ``Image2TextDataset``: one record = a query image path, K candidate captions
    and the label; ``__getitem__`` opens and preprocesses the query image (in the DataLoader workers)."""

    def __init__(self, subset_root: Path, preprocess) -> None:
        self.root, self.preprocess = subset_root, preprocess
        self.records = json.loads((subset_root / "image2text.json").read_text(encoding="utf-8"))

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, idx: int) -> dict:
        from PIL import Image

        rec = self.records[idx]
        image = self.preprocess(Image.open(self.root / rec["query"]).convert("RGB"))
        return {"query_image": image, "candidate_texts": rec["keys"], "label": rec["label"]}

    @staticmethod
    def collate_fn(batch: list[dict]) -> dict:
        import torch

        return {
            "query_image": torch.stack([b["query_image"] for b in batch]),
            "candidate_texts": [b["candidate_texts"] for b in batch],
            "label": torch.tensor([b["label"] for b in batch]),
        }


class _Text2Image(_Image2Text):
    """``Text2ImageDataset``: a query caption and K candidate image paths, each image opened and
    preprocessed in ``__getitem__``."""

    def __init__(self, subset_root: Path, preprocess) -> None:
        self.root, self.preprocess = subset_root, preprocess
        self.records = json.loads((subset_root / "text2image.json").read_text(encoding="utf-8"))

    def __getitem__(self, idx: int) -> dict:
        import torch
        from PIL import Image

        rec = self.records[idx]
        images = [self.preprocess(Image.open(self.root / k).convert("RGB")) for k in rec["keys"]]
        return {"query_text": rec["query"], "candidate_images": torch.stack(images), "label": rec["label"]}

    @staticmethod
    def collate_fn(batch: list[dict]) -> dict:
        import torch

        return {
            "query_text": [b["query_text"] for b in batch],
            "candidate_images": torch.stack([b["candidate_images"] for b in batch]),
            "label": torch.tensor([b["label"] for b in batch]),
        }


def spec_published_loop(scorer, subset_root: Path, batch_size: int = 64, workers: int = 2) -> tuple[float, float]:
    """SPEC's evaluation of one subset, ``(i2t accuracy, t2i accuracy)`` in %.

    Follows ``spec/eval.py`` (``main``: ``get_data`` then ``model.evaluate`` per subset),
    ``spec/dataset.py`` (``Image2TextDataset`` / ``Text2ImageDataset`` and their ``collate_fn``;
    ``get_data``: ``DataLoader(batch_size=64, shuffle=False, drop_last=False)``) and
    ``spec/models/clip_wrapper.py`` (``i2t_evaluate``: encode the batch's B query images, tokenize
    and encode its B x K candidate captions in one call, normalise, ``einsum('BD,BLD->BL')``,
    ``argmax == label``; ``t2i_evaluate``: encode the B query captions and the B x K candidate images).
    The model calls are the same model's (``get_image_features`` / ``get_text_features`` with the
    harness's own image processor and tokenizer settings, so only the loop differs); ``workers`` is SPEC's
    ``--num-workers``, by default SPEC's own default, 8, as a user running SPEC's script gets it.
    """
    import torch
    from torch.utils.data import DataLoader

    model, tok, proc = scorer.model, scorer.tokenizer, scorer.image_processor

    def preprocess(image):
        return proc(images=[image], return_tensors="pt")["pixel_values"][0]

    def encode_texts(texts: list[str]):
        enc = tok(texts, padding=True, truncation=True, max_length=scorer.max_length, return_tensors="pt")
        out = model.get_text_features(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
        out = getattr(out, "pooler_output", out)
        return out / out.norm(dim=-1, keepdim=True)

    def encode_images(pixels):
        out = model.get_image_features(pixel_values=pixels)
        out = getattr(out, "pooler_output", out)
        return out / out.norm(dim=-1, keepdim=True)

    accs = []
    with torch.inference_mode():
        datasets = ((_Image2Text(subset_root, preprocess), "image"), (_Text2Image(subset_root, preprocess), "text"))
        for dataset, query in datasets:
            loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, shuffle=False, drop_last=False,
                                collate_fn=dataset.collate_fn)  # fmt: skip
            correct = total = 0
            for batch in loader:
                bs = len(batch["label"])
                if query == "image":
                    q = encode_images(batch["query_image"])
                    texts = [t for candidates in batch["candidate_texts"] for t in candidates]
                    keys = encode_texts(texts).view(bs, -1, q.shape[-1])
                else:
                    q = encode_texts(batch["query_text"])
                    images = batch["candidate_images"]
                    keys = encode_images(images.flatten(0, 1)).view(bs, images.shape[1], -1)
                pred = torch.einsum("BD,BLD->BL", q, keys).argmax(dim=-1)
                correct += int((pred == batch["label"]).sum())
                total += bs
            accs.append(100.0 * correct / total)
    return accs[0], accs[1]


def per_case_loop(scorer, cases: list[Case]) -> None:
    """Each K x K case on its own: its K images and K texts encoded once, one case at a time."""
    for case in cases:
        scorer.encode_images([r.load() for r in case.images])
        scorer.encode_texts(list(case.texts))


def speedup_over_loops(model: str, n_sets: int, tmp: Path, workers: int, seconds: float, rounds: int) -> None:
    from spotdiff.benchmarks import get_benchmark
    from spotdiff.protocols import evaluate
    from spotdiff.testing.formats import write_spec

    scorer = load_scorer(model, ScorerOptions(device="cpu", batch_size=64))
    data = tmp / "spec-speed"

    def setup(n: int) -> list:
        shutil.rmtree(data, ignore_errors=True)
        write_spec(data, n=n, subsets=("count",), shared_captions=False)
        return [
            lambda: spec_published_loop(scorer, data / "count", workers=workers),
            lambda: per_case_loop(scorer, get_benchmark("spec")(data).load()),
            lambda: engine(data),
        ]

    def engine(data: Path) -> list:
        cases = get_benchmark("spec")(data).load()
        return list(Engine(scorer, None, progress=False).case_matrices(cases, "image-text"))

    n_sets, (t_spec, t_case, t_engine) = measure(setup, n_sets, seconds, rounds)
    # the same numbers: SPEC's argmax accuracy equals spotdiff's under --ties argmax
    i2t, t2i = spec_published_loop(scorer, data / "count", workers=workers)
    cases = get_benchmark("spec")(data).load()
    ev = evaluate(get_protocol("spec", "argmax"), cases, engine(data), n_boot=0).metrics["all"]
    agree = abs(ev["i2t"] - i2t) < 1e-9 and abs(ev["t2i"] - t2i) < 1e-9
    print(f"2. the peer: {n_sets} SPEC sets of 9 x 9 ({n_sets * 18} records, {n_sets * 9} images): SPEC's own loop "
          f"(batches of 64 records, {workers} loader workers) {t_spec:.2f}s, per-case loop {t_case:.2f}s, "
          f"engine {t_engine:.2f}s; "
          f"speed-up {t_spec / t_engine:.1f}x over SPEC's loop (goal >= 5x), {t_case / t_engine:.1f}x over the "
          f"per-case loop (medians of {rounds}); accuracies agree with SPEC's argmax: {agree} "
          f"(i2t {i2t:.2f}, t2i {t2i:.2f})")  # fmt: skip


def warm_vs_cold(model: str, n_cases: int, tmp: Path, seconds: float, rounds: int) -> None:
    scorer = load_scorer(model, ScorerOptions(device="cpu", batch_size=64))
    cache = tmp / "cache"

    def setup(n: int) -> list:
        cases = spec_cases(n, 9, seed=3)

        def run() -> None:
            with Engine(scorer, cache, progress=False) as engine:
                list(engine.case_matrices(cases, "image-text"))

        def cold() -> None:
            shutil.rmtree(cache, ignore_errors=True)
            run()

        return [cold, run]

    n_cases, (t_cold, t_warm) = measure(setup, n_cases, seconds, rounds, gauge=0)
    print(f"3. cold run {t_cold:.2f}s, warm-cache re-run {t_warm:.3f}s, speed-up {t_cold / t_warm:.0f}x "
          f"(goal >= 20x; {n_cases} 9x9 cases; medians of {rounds})")  # fmt: skip
    n_values, t_crc = checksum_seconds(cache / CACHE_FILE, rounds)
    print(f"   value checksums (CRC-32 of every cached value, computed once on write and once on read): "
          f"{t_crc * 1e3:.2f} ms for {n_values} values = {100 * t_crc / t_warm:.2f}% of the warm re-run, "
          f"{100 * t_crc / t_cold:.3f}% of the cold run (goal < 2%; median of {rounds})")  # fmt: skip


def checksum_seconds(path: Path, rounds: int) -> tuple[int, float]:
    """The values of a cache file and the median time to checksum them all as the cache does (``zlib.crc32``)."""
    with sqlite3.connect(path) as db:
        blobs = [blob for (blob,) in db.execute("SELECT value FROM items")]
    times = []
    for _ in range(max(3, rounds)):
        t0 = time.perf_counter()
        for blob in blobs:
            zlib.crc32(blob)
        times.append(time.perf_counter() - t0)
    return len(blobs), statistics.median(times)


_MEMORY_CHILD = """
import resource, sys
from pathlib import Path
from spotdiff.diagnose.runner import EvalConfig, run_eval
config = EvalConfig(model=sys.argv[1], benchmark="visla-generic", data=Path(sys.argv[2]), protocol="t2t",
                    use_store=True, store=Path(sys.argv[3]), out=Path(sys.argv[4]), progress=False, n_boot=200,
                    batch_size=256)
result = run_eval(config)
print(result.n_cases, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def write_visla_tsv(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = ["filename\tcaption\tsecond positive\tnegative_caption"]
    for i in range(n):
        p1 = f"{random_text(rng)} {i}"
        rows.append(f"{i:012d}.jpg\t{p1}\t{random_text(rng)} {i}\t{p1} not")
    path.write_text("\r\n".join(rows) + "\r\n", encoding="utf-8")


def memory_streaming(sizes: list[int], tmp: Path) -> None:
    model = "sentence-transformers:" + str(make_tiny_sentence_transformer(tmp / "st"))
    peaks = []
    for n in sizes:
        data = tmp / f"visla{n}"
        data.mkdir()
        write_visla_tsv(data / "Generic_VISLA.tsv", n, seed=n)
        out = subprocess.run(
            [sys.executable, "-c", _MEMORY_CHILD, model, str(data), str(tmp / f"runs{n}.sqlite"), str(tmp / f"o{n}")],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        cases, peak = out.stdout.split()[-2:]
        peaks.append(int(peak))
        print(f"4. text-only run, {int(cases):,} cases: peak RSS {int(peak)} MiB")
    print(f"   peak memory ratio {sizes[-1] // sizes[0]}x cases -> {peaks[-1] / peaks[0]:.2f}x memory")


def fail(message: str) -> None:
    """End the script with one line on stderr and exit status 2 (as ``spotdiff`` reports a bad option)."""
    print(f"{Path(__file__).name}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def device_options(args: argparse.Namespace) -> ScorerOptions | None:
    """The scorer options of the device figure (None without ``--device``); a device or dtype the scorers refuse
    (CUDA asked for and not available) ends the script at once, in one line."""
    if args.device is None:
        if args.dtype is not None or args.batch_size is not None:
            fail("--dtype and --batch-size go with --device (the CPU figures run in float32, in batches of 64)")
        return None
    try:
        resolve_dtype(args.dtype or "auto", resolve_device(args.device))
    except ConfigError as exc:
        fail(str(exc))
    return ScorerOptions(device=args.device, dtype=args.dtype or "auto", batch_size=args.batch_size or 256)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter sides (3 s; with --device 6 s), smaller "
                        "memory runs")  # fmt: skip
    parser.add_argument("--seconds", type=float, help="the time each ratio's sized side takes (default 10, quick 3; "
                        "with --device 10, quick 6)")  # fmt: skip
    parser.add_argument("--rounds", type=int, help="rounds per figure, medians reported (default 5, quick 3; with "
                        "--device 2)")  # fmt: skip
    parser.add_argument("--threads", type=int, help="torch threads of every side (default: the thread budget's)")
    parser.add_argument("--workers", type=int, default=8, help="DataLoader workers of SPEC's loop (SPEC's default: 8)")
    parser.add_argument("--model", choices=sorted(CLIPS), default="small", help="the random CLIP (default small)")
    parser.add_argument("--device", help="figure 1 only, on this device (cuda, cuda:N, cpu; default: figures 1-4 on "
                        "the CPU)")  # fmt: skip
    parser.add_argument("--dtype", help="with --device: the model's dtype (fp16, bf16, fp32; default auto: fp16 on "
                        "CUDA)")  # fmt: skip
    parser.add_argument("--batch-size", type=int, help="with --device: the batch size of every side (default 256)")
    parser.add_argument("--json", type=Path, help="with --device: also write figure 1's rows there (rows.py)")
    args = parser.parse_args()
    options = device_options(args)  # before anything is built: CUDA asked for and missing fails at once
    q = args.quick
    if options is None:
        seconds, rounds = args.seconds or (3.0 if q else 10.0), args.rounds or (3 if q else 5)
    else:  # longer sides, fewer rounds: the start-up of every core's worker is amortised in the same time
        seconds, rounds = args.seconds or (6.0 if q else 10.0), args.rounds or 2
    header = {"model": args.model, "about": CLIPS[args.model]["about"], "quick": q, "seconds": seconds,
              "rounds": rounds}
    threads = pin_threads(args.threads) if options is None else None  # with --device: the budget a user gets
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        start = time.perf_counter()
        dtype = None if options is None else resolve_dtype(options.dtype, resolve_device(options.device))
        model = spec(args.model, make_clip(tmp / "clip", args.model, dtype))  # saved in the dtype it runs in
        header["build_s"] = time.perf_counter() - start
        if options is not None:
            rows = device_limit(model, options, tmp, args.threads, seconds, rounds, header)
            write_rows(args.json, "eval_speed.py", rows, **header)
            return
        print(json.dumps({**header, "torch_threads": threads}))
        harness_vs_forward(model, 128, seconds, rounds)
        speedup_over_loops(model, 8, tmp, args.workers, seconds, rounds)
        warm_vs_cold(model, 8, tmp, seconds, rounds)
        memory_streaming([2_000, 20_000] if q else [10_000, 100_000], tmp)


if __name__ == "__main__":
    main()
