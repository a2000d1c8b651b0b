"""Training throughput side by side in one run (issue 47): ``spotdiff train`` against a plain PyTorch loop over
the same model, batch, data and loss, and against open_clip's own training loop.

Three sides train a random CLIP on the same captioned photo-like JPEG files (``write_photos``, ``--photo-size``,
default COCO's 640 x 480), batches of ``--batch-size``, CLIP's contrastive loss, AdamW (betas 0.9 / 0.98, eps
1e-6, weight decay 0.1, lr 5e-5, a tenth of the steps of linear warm-up then cosine decay), gradients clipped at
norm 1, in ``--dtype`` (bf16: autocast to bfloat16 on every side, no gradient scaler; fp32: none):

* **spotdiff**: the ``spotdiff train --model hf-clip:DIR --captions JSONL --loss clip --batch-size B --steps N
  --mixed-precision bf16|no --device cpu|auto --out OUT`` path, in process: the :class:`TrainConfig` the command
  builds (its defaults for every other option: TensorBoard events, the JSON-lines log, a checkpoint and the model
  saved at the end), ``read_captions``, and :class:`Trainer` with the command's ``default_callbacks`` as
  ``spotdiff.optimize.loop.train`` runs it, plus one callback last in the list, the clock (:class:`StepClock`);
* **plain**: a loop a user writes over the same model (``CLIPModel.from_pretrained`` of the same folder): a
  ``DataLoader`` over the same JSONL (each item decoded with PIL and preprocessed by the folder's
  ``CLIPImageProcessor`` in ``--workers`` workers; the collate tokenises with the folder's tokenizer, padded to
  the batch's longest as spotdiff does), ``torch.autocast``, ``get_image_features`` / ``get_text_features``,
  :func:`~spotdiff.optimize.losses.clip_contrastive_loss` (spotdiff's, so the loss is the same operation), no
  ``.item()`` or other synchronisation in the loop: the limit spotdiff's figure is read against (goal >= 0.9);
* **open_clip**: ``open_clip_train.train.train_one_epoch`` of the installed open_clip_torch (3.3.0 from PyPI,
  github.com/mlfoundations/open_clip's ``src/open_clip_train/``: ``main.py``, ``train.py``, ``data.py``,
  ``params.py``, ``scheduler.py`` as that wheel installs them), set up as ``main.py``'s ``main`` sets it up
  (:func:`open_clip_loop`): its own ``params.parse_args`` on the command line a user gives (``--train-data CSV
  --dataset-type csv --model ARCH --batch-size B --workers W --epochs 1 --lr --wd --beta1 --beta2 --eps --warmup
  --grad-clip-norm 1 --precision amp_bf16|fp32 --device D``), ``init_distributed_device``, ``random_seed``,
  ``create_model_and_transforms(..., output_dict=True)``, main's AdamW (no decay on gains and biases), its
  ``get_data`` (``CsvDataset`` in a ``DataLoader`` with ``pin_memory``, shuffled, ``drop_last``) with
  ``get_tokenizer``, ``cosine_lr`` and ``create_loss`` (``ClipLoss``). The model is open_clip's ``CLIP`` of the
  same architecture (:func:`open_clip_config`, from the same ``CLIPConfig``: the same widths, layers, heads,
  patch, image size, projection, QuickGELU and vocabulary, the same tokenizer folder through open_clip's
  ``HFTokenizer``, pooled at the same end-of-text token), with random weights. What differs from ``main.py``:
  no logging set-up, TensorBoard, wandb, checkpoints or evaluation (``--report-to`` empty, one epoch); main's
  ``torch.backends.cuda.matmul.allow_tf32 = True`` and ``cudnn.benchmark`` are not set (process-wide switches
  would change the other sides too). Its own transform (``RandomResizedCrop`` of scale 0.9-1) and tokenizer
  settings (padded to the context length) are kept, as a user of its loop gets them. Where ``open_clip_train``
  does not import (its ``data`` module needs ``webdataset`` and ``braceexpand``, the ``open_clip_torch[training]``
  extra), its rows say "not installed" and why.

The plain loop's AdamW decays every parameter; spotdiff's and open_clip's exempt biases and gains (the same work
per step either way).

**What is timed**: every side trains ``--warmup`` + ``--steps`` steps on ``batch x (warmup + steps)`` rows (one
epoch of the DataLoader sides; distinct images unless ``--images`` is smaller, then they repeat and spotdiff's
pixel cache spares it their decoding); the clock (:class:`Clock`) runs from the end of the warm-up steps to the
end of the last, the device synchronised at both ends: each timed step includes fetching its batch (decoding,
preprocessing, tokenising, in the main process for spotdiff, in the workers for the others), the forward and
backward passes, the optimiser step and, for spotdiff, its callbacks (the log line, TensorBoard). Start-up,
model loading, worker start and spotdiff's saving at the end are outside. spotdiff's clock is a callback
(``on_step``), the DataLoader sides' an iterator around their loader (:meth:`Clock.iterate`). The sides run in
turn within each of ``--rounds`` rounds; each figure is the median over the rounds (steps/s, and images/s = the
images the timed steps trained on / their time). Where spotdiff's ratio to the plain loop is below 0.9 (or with
``--profile``), ``rows.profile_bound`` profiles its timed steps (:func:`spotdiff_bound`) and its ``bound`` goes
into the row (on the CPU it only says the CPU's).

Models: ``--model small`` (96-pixel ViT 4L-256, text 4L-256: the CPU default, what CI runs) or ``vit-b-32``
(CLIP ViT-B/32's architecture, transformers' ``CLIPConfig`` defaults with projection 512 and CLIP's 49,408-row
text vocabulary: for the GPU), built by ``eval_speed.make_clip`` with random weights, saved with
``save_pretrained`` beside a tiny tokenizer (whose ids use the first rows of the vocabulary).

Usage: ``python measurements/train_speed.py [--model small|vit-b-32] [--device cpu|cuda] [--dtype bf16|fp32]
[--batch-size B] [--warmup W] [--steps N] [--rounds R] [--workers K] [--images N] [--photo-size WxH]
[--profile] [--json FILE]``; on a GPU machine, from the repository root: ``PYTHONPATH=src python
measurements/train_speed.py --device cuda --model vit-b-32 --json train_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval_speed import CLIPS, make_clip, random_text, synchronize
from rows import GOAL, profile_bound, row, write_rows
from spotdiff.optimize.callbacks import Callback
from spotdiff.optimize.config import TrainConfig
from spotdiff.optimize.data import read_captions
from spotdiff.optimize.loop import Trainer, default_callbacks
from spotdiff.optimize.losses import clip_contrastive_loss
from spotdiff.optimize.models import pooled
from spotdiff.processes import thread_budget, usable_cores
from spotdiff.testing.tiny_models import write_photos

#: The optimiser every side uses (``spotdiff train``'s defaults: CLIP's AdamW, CLIP's clipping).
LR, WEIGHT_DECAY, BETAS, EPS, MAX_GRAD_NORM = 5e-5, 0.1, (0.9, 0.98), 1e-6, 1.0
#: Defaults by device: batch size, warm-up steps, timed steps, rounds.
SIZES = {"cpu": {"batch_size": 8, "warmup": 2, "steps": 4, "rounds": 3},
         "cuda": {"batch_size": 256, "warmup": 3, "steps": 10, "rounds": 2}}  # fmt: skip
#: The text vocabulary's rows: CLIP's BPE vocabulary for ViT-B/32 (its embedding table is a sixth of the
#: parameters AdamW updates), the tiny tokenizer's for the small CLIP.
VOCAB = {"small": None, "vit-b-32": 49_408}
SIDES = {
    "spotdiff": "spotdiff train",
    "plain": "plain PyTorch loop",
    "open_clip": "open_clip train_one_epoch",
}


@dataclass
class Clock:
    """The timed steps of one side: from the end of step ``warmup`` to the end of the last, ``device``
    synchronised at both ends; the steps and the images they trained on in between."""

    device: str
    warmup: int
    start: float | None = None
    stop: float | None = None
    steps: int = 0
    images: int = 0

    def now(self) -> float:
        synchronize(self.device)
        return time.perf_counter()

    def step(self, done: int, images: int) -> None:
        """Step ``done`` (counted from 1) finished, having trained on ``images`` images."""
        if done == self.warmup:
            self.start = self.now()
        elif done > self.warmup:
            self.steps += 1
            self.images += images

    def finish(self) -> None:
        self.stop = self.now()

    def iterate(self, loader: Iterable) -> Iterator:
        """``loader``'s batches (``batch[0]`` the images), each step finished when the loop asks for the next
        batch: the time of fetching a timed step's batch is in the timed step."""
        batches, done, size = iter(loader), 0, 0
        while True:
            if done:
                self.step(done, size)
            try:
                batch = next(batches)
            except StopIteration:
                break
            done, size = done + 1, len(batch[0])
            yield batch
        self.finish()

    def result(self) -> dict:
        if self.start is None or self.stop is None or not self.steps:
            raise RuntimeError(f"the clock did not see the warm-up's end and a step after it ({self.steps} timed)")
        seconds = self.stop - self.start
        return {"steps": self.steps, "images": self.images, "seconds": seconds}


class StepClock(Callback):
    """The clock as a callback of :class:`Trainer`, last in its list (the others' ``on_step`` are timed)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_step(self, trainer: Any, out: Any) -> None:
        self.clock.step(out.step - trainer.first_step, out.pairs)
        if out.step == trainer.end:
            self.clock.finish()


def write_data(folder: Path, opts: argparse.Namespace) -> tuple[Path, Path]:
    """``batch x (warmup + steps)`` captioned rows over ``--images`` JPEG files (default: one per row), as
    ``captions.jsonl`` (spotdiff, the plain loop) and the tab-separated ``captions.csv`` open_clip's
    ``CsvDataset`` reads (columns ``filepath``, ``title``)."""
    n_rows = opts.batch_size * (opts.warmup + opts.steps)
    photos = write_photos(folder / "photos", opts.images or n_rows, size=opts.photo_size, workers=usable_cores())
    rng = np.random.default_rng(4)
    rows = [(photos[i % len(photos)], f"{random_text(rng)} {i}") for i in range(n_rows)]
    jsonl, csv = folder / "captions.jsonl", folder / "captions.csv"
    jsonl.write_text("".join(json.dumps({"image": str(p), "caption": c}) + "\n" for p, c in rows), encoding="utf-8")
    csv.write_text("filepath\ttitle\n" + "".join(f"{p}\t{c}\n" for p, c in rows), encoding="utf-8")
    return jsonl, csv


# ------------------------------------------------------------------------------------------------ spotdiff


def spotdiff_trainer(model_dir: Path, captions: Path, out: Path, opts: argparse.Namespace) -> Trainer:
    """The :class:`Trainer` ``spotdiff train`` builds for this run, with the command's callbacks."""
    config = TrainConfig(out=out, model=f"hf-clip:{model_dir}", loss="clip", batch_size=opts.batch_size,
                         steps=opts.warmup + opts.steps, mixed_precision="bf16" if opts.dtype == "bf16" else "no",
                         device="cpu" if opts.device == "cpu" else "auto")  # fmt: skip
    config.validate()
    trainer = Trainer(config, read_captions(captions))
    trainer.callbacks = default_callbacks(trainer)
    return trainer


def spotdiff_run(model_dir: Path, captions: Path, out: Path, opts: argparse.Namespace, clock: Clock) -> None:
    """One ``spotdiff train`` run (``loop.train``: the trainer, its callbacks, ``run``) with the clock last."""
    trainer = spotdiff_trainer(model_dir, captions, out, opts)
    trainer.callbacks.append(StepClock(clock))
    trainer.run()


def spotdiff_bound(model_dir: Path, captions: Path, out: Path, opts: argparse.Namespace) -> dict:
    """``profile_bound`` on spotdiff's timed steps: a trainer built as for the rounds runs its warm-up steps,
    then, profiled, its timed steps, each as ``Trainer.train_to_end`` runs one (``train_step``, then the
    callbacks' ``on_step``); the trackers are closed and the folder's lock released after, without saving."""
    trainer = spotdiff_trainer(model_dir, captions, out, opts)

    def steps(n: int) -> None:
        for _ in range(n):
            output = trainer.train_step()
            trainer.losses.append(output.loss)
            trainer.emit("on_step", trainer, output)

    try:
        trainer.emit("on_start", trainer)
        trainer.model.train()
        steps(opts.warmup)
        return profile_bound(lambda: steps(opts.steps), opts.device)
    finally:
        trainer.emit("on_abort", trainer)
        if trainer.lock is not None:
            trainer.lock.release()


# --------------------------------------------------------------------------------------------------- plain


class PlainPairs:
    """The plain loop's dataset: item ``i`` of the JSONL, its image decoded with PIL and preprocessed by the
    image processor, and its caption."""

    def __init__(self, captions: Path, processor: Any) -> None:
        lines = captions.read_text(encoding="utf-8").splitlines()
        self.records, self.processor = [json.loads(line) for line in lines], processor

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[Any, str]:
        from PIL import Image

        with Image.open(self.records[i]["image"]) as image:
            pixels = self.processor(images=[image.convert("RGB")], return_tensors="pt")["pixel_values"][0]
        return pixels, self.records[i]["caption"]


class PlainCollate:
    """The plain loop's collate: the pixels stacked, the captions tokenised, padded to the batch's longest."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, items: list[tuple[Any, str]]) -> tuple[Any, dict]:
        import torch

        tok = self.tokenizer
        tokens = tok([c for _, c in items], padding=True, truncation=True, max_length=tok.model_max_length,
                     return_tensors="pt")  # fmt: skip
        return torch.stack([p for p, _ in items]), {"input_ids": tokens["input_ids"],
                                                     "attention_mask": tokens["attention_mask"]}  # fmt: skip


def plain_loop(model_dir: Path, captions: Path, opts: argparse.Namespace, clock: Clock) -> None:
    """The plain PyTorch loop (module docstring) for one epoch of ``captions``."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer, CLIPImageProcessor, CLIPModel, get_cosine_schedule_with_warmup

    device, total = torch.device(opts.device), opts.warmup + opts.steps
    torch.manual_seed(0)
    model = CLIPModel.from_pretrained(model_dir).to(device).train()
    dataset = PlainPairs(captions, CLIPImageProcessor.from_pretrained(model_dir))
    loader = DataLoader(dataset, batch_size=opts.batch_size, shuffle=True, num_workers=opts.workers, drop_last=True,
                        collate_fn=PlainCollate(AutoTokenizer.from_pretrained(model_dir)),
                        pin_memory=device.type == "cuda")  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    schedule = get_cosine_schedule_with_warmup(optimizer, total // 10, total)
    for pixels, tokens in clock.iterate(loader):
        pixels = pixels.to(device, non_blocking=True)
        tokens = {name: t.to(device, non_blocking=True) for name, t in tokens.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=opts.dtype == "bf16"):
            image = pooled(model.get_image_features(pixel_values=pixels))
            text = pooled(model.get_text_features(**tokens))
        image, text = F.normalize(image.float(), dim=-1), F.normalize(text.float(), dim=-1)
        loss = clip_contrastive_loss(image @ text.t(), model.logit_scale.exp().clamp(max=100.0))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
        schedule.step()


# ----------------------------------------------------------------------------------------------- open_clip


def open_clip_missing() -> str | None:
    """Why open_clip's training loop cannot run here (``not installed (...)``), or None."""
    try:
        import open_clip_train.data
        import open_clip_train.main
        import open_clip_train.train  # noqa: F401
    except ImportError as exc:
        return f"not installed ({exc}; open_clip_train's data module needs the open_clip_torch[training] extra)"
    return None


def open_clip_config(config: Any, tokenizer_dir: Path) -> dict:
    """open_clip's model config of the architecture of the transformers ``CLIPConfig`` ``config``, with the
    tokenizer of ``tokenizer_dir`` (open_clip's ``HFTokenizer``), pooled at its end-of-text token as CLIP's text
    tower pools at the first ``eos_token_id``."""
    v, t = config.vision_config, config.text_config
    return {
        "embed_dim": config.projection_dim,
        "quick_gelu": v.hidden_act == "quick_gelu",
        "vision_cfg": {"image_size": v.image_size, "patch_size": v.patch_size, "layers": v.num_hidden_layers,
                       "width": v.hidden_size, "head_width": v.hidden_size // v.num_attention_heads,
                       "mlp_ratio": v.intermediate_size / v.hidden_size},
        "text_cfg": {"context_length": t.max_position_embeddings, "vocab_size": t.vocab_size, "width": t.hidden_size,
                     "heads": t.num_attention_heads, "layers": t.num_hidden_layers,
                     "mlp_ratio": t.intermediate_size / t.hidden_size, "hf_tokenizer_name": str(tokenizer_dir),
                     "pool_type": "eos", "eos_id": t.eos_token_id, "pad_id": t.pad_token_id},
    }  # fmt: skip


def register_open_clip(folder: Path, model_dir: Path) -> str:
    """Register :func:`open_clip_config` of the CLIP saved in ``model_dir`` (and its tokenizer) with open_clip
    (``add_model_config``); return its architecture name."""
    import open_clip
    from transformers import CLIPConfig

    arch = "spotdiff-train-speed"
    path = folder / f"{arch}.json"
    config = open_clip_config(CLIPConfig.from_pretrained(model_dir), model_dir)
    path.write_text(json.dumps(config, indent=1), encoding="utf-8")
    open_clip.add_model_config(path)
    return arch


class ClockedLoader:
    """open_clip's DataLoader as ``train_one_epoch`` reads it (``num_batches``, ``num_samples``, iteration),
    its batches through :meth:`Clock.iterate`."""

    def __init__(self, loader: Any, clock: Clock) -> None:
        self.loader, self.clock = loader, clock
        self.num_batches, self.num_samples = loader.num_batches, loader.num_samples

    def __iter__(self) -> Iterator:
        return self.clock.iterate(self.loader)


def open_clip_loop(arch: str, csv: Path, opts: argparse.Namespace, clock: Clock) -> None:
    """``train_one_epoch`` for one epoch of ``csv``, set up as open_clip_train's ``main`` sets it up (module
    docstring; the optimiser is main's ``adamw`` branch, the scaler main's, for ``--precision amp`` alone)."""
    import open_clip
    import torch
    from open_clip_train.data import get_data
    from open_clip_train.distributed import init_distributed_device
    from open_clip_train.main import random_seed
    from open_clip_train.params import parse_args
    from open_clip_train.scheduler import cosine_lr
    from open_clip_train.train import train_one_epoch

    total = opts.warmup + opts.steps
    args = parse_args(["--train-data", str(csv), "--dataset-type", "csv", "--model", arch,
                       "--batch-size", str(opts.batch_size), "--workers", str(opts.workers), "--epochs", "1",
                       "--lr", str(LR), "--wd", str(WEIGHT_DECAY), "--beta1", str(BETAS[0]), "--beta2", str(BETAS[1]),
                       "--eps", str(EPS), "--warmup", str(total // 10), "--grad-clip-norm", str(MAX_GRAD_NORM),
                       "--precision", "amp_bf16" if opts.dtype == "bf16" else "fp32",
                       "--device", opts.device])  # fmt: skip
    device = init_distributed_device(args)
    args.distill = args.distill_model is not None and args.distill_pretrained is not None
    args.wandb = "wandb" in args.report_to or "all" in args.report_to
    random_seed(args.seed, 0)
    model, preprocess_train, preprocess_val = open_clip.create_model_and_transforms(
        args.model, args.pretrained, precision=args.precision, device=device, jit=args.torchscript,
        force_quick_gelu=args.force_quick_gelu, force_custom_text=args.force_custom_text,
        force_patch_dropout=args.force_patch_dropout, force_image_size=args.force_image_size,
        force_context_length=args.force_context_length, image_mean=args.image_mean, image_std=args.image_std,
        image_interpolation=args.image_interpolation, image_resize_mode=args.image_resize_mode, aug_cfg=args.aug_cfg,
        pretrained_image=args.pretrained_image, output_dict=True, cache_dir=args.cache_dir)  # fmt: skip

    def exclude(n: str, p: Any) -> bool:
        return p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n

    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in named if exclude(n, p) and p.requires_grad], "weight_decay": 0.0},
         {"params": [p for n, p in named if not exclude(n, p) and p.requires_grad], "weight_decay": args.wd}],
        lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)  # fmt: skip
    scaler = torch.amp.GradScaler(device=device) if args.precision == "amp" else None
    tokenizer = open_clip.get_tokenizer(args.model, cache_dir=args.cache_dir, context_length=args.force_context_length)
    data = get_data(args, (preprocess_train, preprocess_val), epoch=0, tokenizer=tokenizer)
    total_steps = (data["train"].dataloader.num_batches // args.accum_freq) * args.epochs
    scheduler = cosine_lr(optimizer, args.lr, args.warmup, total_steps)
    data["train"].dataloader = ClockedLoader(data["train"].dataloader, clock)
    train_one_epoch(model, data, open_clip.create_loss(args), 0, optimizer, scaler, scheduler, None, args)


# ------------------------------------------------------------------------------------------------ the run


@dataclass
class Side:
    """One side's rounds: each round's timed steps, images and seconds."""

    name: str
    rounds: list[dict] = field(default_factory=list)

    def median(self, what: str) -> float:
        """The median over the rounds of ``steps`` or ``images`` per second."""
        return statistics.median(r[what] / r["seconds"] for r in self.rounds)


def run_rounds(model_dir: Path, captions: Path, csv: Path, arch: str | None, opts: argparse.Namespace,
               out: Path) -> dict[str, Side]:  # fmt: skip
    """The sides in turn, ``--rounds`` times (open_clip's only with ``arch``), each on a fresh model."""
    runs = {
        "spotdiff": lambda clock, r: spotdiff_run(model_dir, captions, out / f"spotdiff-{r}", opts, clock),
        "plain": lambda clock, r: plain_loop(model_dir, captions, opts, clock),
    }
    if arch is not None:
        runs["open_clip"] = lambda clock, r: open_clip_loop(arch, csv, opts, clock)
    sides = {name: Side(name) for name in runs}
    for r in range(opts.rounds):
        for name, run in runs.items():
            clock = Clock(opts.device, opts.warmup)
            run(clock, r)
            result = clock.result()
            sides[name].rounds.append(result)
            print(f"  round {r + 1}, {SIDES[name]}: {result['steps'] / result['seconds']:.3f} steps/s",
                  file=sys.stderr, flush=True)  # fmt: skip
    return sides


def side_row(side: Side, model: str, opts: argparse.Namespace, *, limit: Side | None = None, goal: float | None = None,
             bound: str = "", figure: str = "train steps/s") -> dict:  # fmt: skip
    """The row of ``side``'s median steps/s, against ``limit``'s (the same unit) where given."""
    return row(figure, model, SIDES[side.name], side.median("steps"), "steps/s",
               limit=None if limit is None else limit.median("steps"),
               limit_side="" if limit is None else SIDES[limit.name], goal=goal, bound=bound,
               images_per_s=side.median("images"), batch_size=opts.batch_size, warmup_steps=opts.warmup,
               dtype=opts.dtype, rounds=side.rounds, status="measured")  # fmt: skip


def figures(sides: dict[str, Side], missing: str | None, bound: dict | None, model: str,
            opts: argparse.Namespace) -> list[dict]:  # fmt: skip
    """The rows: spotdiff against the plain loop (goal 0.9) and against open_clip's loop, each side's own."""
    spotdiff, plain = sides["spotdiff"], sides["plain"]
    rows = [side_row(spotdiff, model, opts, limit=plain, goal=GOAL, bound=(bound or {}).get("bound", "")),
            side_row(plain, model, opts)]  # fmt: skip
    if "open_clip" in sides:
        rows.append(side_row(sides["open_clip"], model, opts, limit=plain))
        against = "train steps/s, against open_clip"
        rows.append(side_row(spotdiff, model, opts, limit=sides["open_clip"], figure=against))
    else:
        rows.append(row("train steps/s", model, SIDES["open_clip"], None, "steps/s", status=missing))
        rows.append(row("train steps/s, against open_clip", model, SIDES["spotdiff"], None, "steps/s",
                        limit_side=SIDES["open_clip"], status=missing))  # fmt: skip
    if bound is not None:
        rows[0]["profile"] = bound
    return rows


def report(rows: list[dict], opts: argparse.Namespace) -> None:
    """Each row as a line."""
    print(f"training on {opts.device}, {opts.dtype}, batch {opts.batch_size}, {opts.steps} timed steps after "
          f"{opts.warmup} of warm-up, medians of {opts.rounds} rounds:")  # fmt: skip
    for r in rows:
        if r["status"] != "measured":
            print(f"  {r['figure']}: {r['side']}: {r['status']}")
            continue
        line = f"  {r['figure']}: {r['side']} {r['value']:.3f} steps/s, {r['images_per_s']:.1f} images/s"
        if r["limit"] is not None:
            line += f"; {r['ratio']:.2f} of {r['limit_side']}'s {r['limit']:.3f} steps/s"
            line += f" (goal >= {r['goal']})" if r["goal"] is not None else ""
        print(line + (f"; bound: {r['bound']}" if r["bound"] else ""))


def header(opts: argparse.Namespace, missing: str | None) -> dict:
    """The run's identity: device, versions, sizes."""
    import open_clip
    import torch
    import transformers

    gpu = torch.cuda.get_device_name(opts.device) if opts.device.startswith("cuda") else None
    return {"device": opts.device, "gpu": gpu, "dtype": opts.dtype, "model": CLIPS[opts.model]["about"],
            "batch_size": opts.batch_size, "warmup_steps": opts.warmup, "steps": opts.steps, "rounds": opts.rounds,
            "workers": opts.workers, "photo_size": list(opts.photo_size), "images": opts.images,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "open_clip": getattr(open_clip, "__version__", "?"), "open_clip_train": missing or "installed"}  # fmt: skip


def photo_size(text: str) -> tuple[int, int]:
    width, _, height = text.partition("x")
    return int(width), int(height)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("small", "vit-b-32"), default="small")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), help="default: bf16 on CUDA, fp32 on the CPU")
    parser.add_argument("--batch-size", type=int, help="images per step (default 8 on the CPU, 256 on CUDA)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (default 2 on the CPU, 3 on CUDA)")
    parser.add_argument("--steps", type=int, help="timed steps (default 4 on the CPU, 10 on CUDA)")
    parser.add_argument("--rounds", type=int, help="rounds, the sides in turn (default 3 on the CPU, 2 on CUDA)")
    parser.add_argument("--workers", type=int, help="DataLoader workers (default: spotdiff eval's, thread_budget)")
    parser.add_argument("--images", type=int, help="distinct JPEG files (default: one per row, none repeats)")
    parser.add_argument("--photo-size", type=photo_size, default=(640, 480), help="JPEG size WxH (default 640x480)")
    parser.add_argument("--profile", action="store_true", help="profile spotdiff's steps even at the goal or above")
    parser.add_argument("--json", type=Path, help="write the rows (measurements/rows.py) there")
    opts = parser.parse_args(argv)
    kind = "cpu" if opts.device == "cpu" else "cuda"
    for name, value in SIZES[kind].items():
        if getattr(opts, name) is None:
            setattr(opts, name, value)
    opts.dtype = opts.dtype or ("fp32" if kind == "cpu" else "bf16")
    opts.workers = thread_budget(device=opts.device).workers if opts.workers is None else opts.workers
    if opts.warmup < 1 or opts.steps < 1 or opts.rounds < 1:
        parser.error("--warmup, --steps and --rounds must be at least 1")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the tokenizer is used before the workers fork
    missing = open_clip_missing()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = make_clip(root / "model", opts.model, vocab_size=VOCAB[opts.model])
        captions, csv = write_data(root / "data", opts)
        arch = None if missing else register_open_clip(root, model_dir)
        about = header(opts, missing)
        print(json.dumps(about), flush=True)
        sides = run_rounds(model_dir, captions, csv, arch, opts, root / "runs")
        spotdiff, plain = sides["spotdiff"].median("steps"), sides["plain"].median("steps")
        bound = None
        if opts.profile or spotdiff / plain < GOAL:
            bound = spotdiff_bound(model_dir, captions, root / "runs" / "profile", opts)
    rows = figures(sides, missing, bound, opts.model, opts)
    report(rows, opts)
    write_rows(opts.json, "train_speed", rows, **about)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
