"""A small BLIP captioner trained from a config on image-caption pairs (the demo's VisualGPTScore model)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from spotdiff.errors import writing

MAX_LEN = 40


def _blip(tok: Any, image_size: int, patch_size: int, width: int, layers: int, heads: int) -> Any:
    """A fresh ``BlipForConditionalGeneration`` of the given size for the vocabulary of ``tok``."""
    from transformers import BlipConfig, BlipForConditionalGeneration

    tower = {"hidden_size": width, "intermediate_size": 4 * width, "num_hidden_layers": layers,
             "num_attention_heads": heads}  # fmt: skip
    config = BlipConfig(
        text_config={
            **tower,
            "vocab_size": len(tok),
            "max_position_embeddings": 64,
            "encoder_hidden_size": width,
            "pad_token_id": tok.pad_token_id,
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.sep_token_id,
            "sep_token_id": tok.sep_token_id,
        },
        # BlipVisionConfig's default initializer_range (1e-10) would make every image embed alike
        vision_config={**tower, "image_size": image_size, "patch_size": patch_size, "initializer_range": 0.02},
        projection_dim=width,
    )
    return BlipForConditionalGeneration(config)


def _caption_loss(model: Any, pixel_values: Any, ids: Any, attention: Any) -> Any:
    """The teacher-forced next-token loss of every token after ``[DEC]``, padding ignored."""
    import torch

    enc = model.vision_model(pixel_values=pixel_values).last_hidden_state
    logits = model.text_decoder(
        input_ids=ids,
        attention_mask=attention,
        encoder_hidden_states=enc,
        encoder_attention_mask=torch.ones(enc.shape[:-1], dtype=torch.long),
        use_cache=False,
    ).logits
    target = ids[:, 1:].masked_fill(attention[:, 1:] == 0, -100)
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), target.reshape(-1))


def train_captioner(
    captions: Path,
    tokenizer: Path,
    out: Path,
    *,
    steps: int = 800,
    batch_size: int = 64,
    lr: float = 1e-3,
    image_size: int = 64,
    patch_size: int = 16,
    width: int = 128,
    layers: int = 2,
    heads: int = 4,
    seed: int = 0,
    log_every: int = 50,
) -> dict:
    """Train a small ``BlipForConditionalGeneration`` captioner from a config on image-caption pairs.

    The sequence is the one the ``vgpt:`` scorer scores, ``[DEC] caption [SEP]``, with the
    teacher-forced next-token loss on every token after ``[DEC]`` (no label smoothing). AdamW
    (weight decay 0.05), linear warm-up over 5% of the steps then cosine decay, gradient clipping
    at 1. Batches are a pure function of ``(seed, step)``. Saved with its ``BlipProcessor`` so
    ``vgpt:OUT`` loads it; ``OUT/captioner_train.json`` records the options and the losses.

    Args:
        captions: the ``captions.jsonl`` of image-caption pairs.
        tokenizer: the tokenizer folder (``[DEC]`` is added as its BOS token when it has none).
        out: the output folder.
        steps, batch_size, lr, seed: the optimisation.
        image_size, patch_size, width, layers, heads: the model's size (both towers alike).
        log_every: print the loss every N steps (0: never).
    """
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BlipImageProcessor, BlipProcessor

    from spotdiff.optimize.data import pad_rows, read_captions
    from spotdiff.optimize.optim import adamw_cosine, clipped_step

    t0, c0 = time.perf_counter(), time.process_time()
    pairs = read_captions(captions)
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    if tok.bos_token_id is None:
        tok.add_special_tokens({"bos_token": "[DEC]"})
    torch.manual_seed(seed)
    model = _blip(tok, image_size, patch_size, width, layers, heads)
    processor = BlipImageProcessor(size={"height": image_size, "width": image_size})
    images = {}
    ids = [[tok.bos_token_id, *tok(p.text, add_special_tokens=False)["input_ids"][: MAX_LEN - 2], tok.sep_token_id]
           for p in pairs]  # fmt: skip
    opt, sched = adamw_cosine(model, lr=lr, weight_decay=0.05, warmup=max(1, steps // 20), steps=steps, eps=1e-8)
    rng = np.random.default_rng(seed)
    order: list[int] = []
    losses: list[float] = []
    model.train()
    for step in range(steps):
        if len(order) < batch_size:
            order += rng.permutation(len(pairs)).tolist()
        batch, order = order[:batch_size], order[batch_size:]
        for i in batch:
            if i not in images:
                images[i] = pairs[i].image.load()
        pv = processor(images=[images[i] for i in batch], return_tensors="pt")["pixel_values"]
        x, mask = pad_rows([ids[i] for i in batch], tok.pad_token_id)
        loss = _caption_loss(model, pv, x, mask.long())
        clipped_step(loss, model, opt, sched, 1.0)
        losses.append(float(loss.item()))
        if log_every and ((step + 1) % log_every == 0 or step + 1 == steps):
            print(f"step {step + 1}/{steps} loss {losses[-1]:.4f} lr {sched.get_last_lr()[0]:.3g}", flush=True)
    model.eval()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with writing(out):
        model.save_pretrained(out)
        BlipProcessor(image_processor=processor, tokenizer=tok).save_pretrained(out)
    summary = {
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "pairs": len(pairs),
        "parameters": sum(q.numel() for q in model.parameters()),
        "first_loss": losses[0] if losses else None,
        "final_loss": float(np.mean(losses[-10:])) if losses else None,
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(time.process_time() - c0, 1),
        "losses": [round(v, 4) for v in losses],
    }
    (out / "captioner_train.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary
