"""EqBen's EQ-SD pairs: prompt-to-prompt word-swap editing on Stable Diffusion (EqBen App. B.5, Fig. 15).

Each caption pair (the Fig. 15 templates: :func:`spotdiff.synth.eqben.sd_caption_pair`) is rendered
from one seed, the target prompt's cross-attention maps replaced by the source prompt's for the first
``cross_replace`` fraction of the steps (Hertz et al., Prompt-to-Prompt, Sec. 3.2, word swap), through
diffusers attention processors. A scorer the user names then checks each image matches its own
caption better than the other; failures are set aside. Details: docs/synthesis.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError, DataError
from spotdiff.synth import ENGINES, SynthConfig, SynthEngine
from spotdiff.synth.eqben import _CODE, sd_caption_pair
from spotdiff.synth.generative import load_diffusion, require, resolve_device
from spotdiff.synth.output import case_rng, save_png, write_json
from spotdiff.synth.review import ReviewItem, copy_images, read_review, write_review

#: Stable Diffusion v1.4, the model EqBen rendered EQ-SD with (App. B.5)
DEFAULT_EQSD_T2I = "CompVis/stable-diffusion-v1-4"
SUBSET = "eqbensd"


def token_mapper(source_ids: list[int], target_ids: list[int]) -> list[int]:
    """For each target token position, the source position whose cross-attention map it takes.

    The common prefix and suffix map one to one; the swapped span maps onto the source's swapped
    span (its last token repeated when the target's is longer), as in Prompt-to-Prompt's word swap.

    Args:
        source_ids: the source prompt's token ids (padded to the encoder length).
        target_ids: the target prompt's token ids (the same length).

    >>> token_mapper([0, 5, 6, 9, 1, 1], [0, 5, 7, 8, 9, 1])
    [0, 1, 2, 2, 3, 4]
    """
    n = len(target_ids)
    prefix = 0
    while prefix < min(len(source_ids), n) and source_ids[prefix] == target_ids[prefix]:
        prefix += 1
    src_end, tgt_end = _content_end(source_ids), _content_end(target_ids)
    suffix = 0
    while (
        suffix < min(src_end, tgt_end) - prefix and source_ids[src_end - 1 - suffix] == target_ids[tgt_end - 1 - suffix]
    ):
        suffix += 1
    span = max(1, src_end - suffix - prefix)
    mapper = []
    for j in range(n):
        if j < prefix:
            mapper.append(j)
        elif j < tgt_end - suffix:
            mapper.append(prefix + min(j - prefix, span - 1))
        else:
            mapper.append(min(len(source_ids) - 1, j - tgt_end + src_end))
    return mapper


def _content_end(ids: list[int]) -> int:
    """One past the last token that differs from the padding (the repeated final id)."""
    end = len(ids)
    while end > 1 and ids[end - 1] == ids[end - 2]:
        end -= 1
    return end


class PromptToPrompt:
    """The attention controller: counts steps and swaps the target's cross-attention maps.

    Args:
        mapper: :func:`token_mapper` of the pair, or None: no injection (the plain rendering).
        replace_steps: the first steps whose cross-attention maps are injected.
    """

    def __init__(self, mapper: list[int] | None, replace_steps: int) -> None:
        self.mapper = mapper
        self.replace_steps = int(replace_steps)
        self.step = 0

    def inject(self, probs, batch: int):
        """Source maps into the target rows of ``probs`` (``batch * heads, queries, keys``)."""
        if self.mapper is None or self.step >= self.replace_steps:
            return probs
        heads = probs.shape[0] // batch
        p = probs.reshape(batch, heads, *probs.shape[1:]).clone()
        # the batch ends with the conditional [source, target] (after the unconditional pair under guidance)
        p[batch - 1] = p[batch - 2][..., self.mapper]
        return p.reshape(probs.shape)

    def on_step_end(self, pipeline, step, timestep, callback_kwargs):
        """diffusers' ``callback_on_step_end``: one denoising step done."""
        self.step = step + 1
        return callback_kwargs


class P2PAttnProcessor:
    """diffusers' plain attention (``AttnProcessor``) with the controller's cross-attention injection."""

    def __init__(self, controller: PromptToPrompt) -> None:
        self.controller = controller

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, **kwargs):
        torch = require("torch", "prompt-to-prompt editing")
        residual = hidden_states
        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)
        shape = hidden_states.shape
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.view(shape[0], shape[1], -1).transpose(1, 2)
        is_cross = encoder_hidden_states is not None
        batch = hidden_states.shape[0]
        context = encoder_hidden_states if is_cross else hidden_states
        attention_mask = attn.prepare_attention_mask(attention_mask, context.shape[1], batch)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        if is_cross and attn.norm_cross:
            context = attn.norm_encoder_hidden_states(context)
        query = attn.head_to_batch_dim(attn.to_q(hidden_states))
        key = attn.head_to_batch_dim(attn.to_k(context))
        value = attn.head_to_batch_dim(attn.to_v(context))
        probs = attn.get_attention_scores(query, key, attention_mask)
        if is_cross:
            probs = self.controller.inject(probs, batch)
        out = attn.batch_to_head_dim(torch.bmm(probs, value))
        out = attn.to_out[1](attn.to_out[0](out))
        if len(shape) == 4:
            out = out.transpose(-1, -2).reshape(shape)
        if attn.residual_connection:
            out = out + residual
        return out / attn.rescale_output_factor


def render_pair(
    pipeline: Any,
    captions: tuple[str, str],
    seed: int,
    *,
    steps: int = 50,
    size: int = 512,
    cross_replace: float = 0.8,
    inject: bool = True,
) -> tuple[Image.Image, Image.Image]:
    """Render a caption pair from one seed; with ``inject``, by prompt-to-prompt word swap.

    Args:
        pipeline: a diffusers text-to-image pipeline (its UNet's attention processors are replaced).
        captions: the source and the target caption.
        seed: the seed of both images' initial latents.
        steps: denoising steps.
        size: the image side in pixels.
        cross_replace: the fraction of the steps whose cross-attention maps are injected.
        inject: False: the same seed and prompts without injection (the baseline).
    """
    torch = require("torch", "prompt-to-prompt editing")
    tok = pipeline.tokenizer
    ids = [tok(c, padding="max_length", max_length=tok.model_max_length, truncation=True).input_ids for c in captions]
    controller = PromptToPrompt(token_mapper(*ids) if inject else None, round(cross_replace * steps))
    pipeline.unet.set_attn_processor(P2PAttnProcessor(controller))
    generators = [torch.Generator(device="cpu").manual_seed(int(seed)) for _ in captions]
    out = pipeline(
        prompt=list(captions),
        height=size,
        width=size,
        num_inference_steps=steps,
        generator=generators,
        callback_on_step_end=controller.on_step_end,
    )
    first, second = (im.convert("RGB") for im in out.images)
    return first, second


def check_pair(scorer: Any, images: tuple[Image.Image, Image.Image], captions: tuple[str, str]) -> dict:
    """EqBen's automatic check: each image scores its own caption above the other caption.

    Args:
        scorer: a :class:`spotdiff.scorers.base.Scorer` (called as ``scorer(images, texts)``).
        images: the two images.
        captions: their two captions.
    """
    s = np.asarray(scorer(list(images), list(captions)), dtype=float)
    passed = bool(s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0])
    return {"passed": passed, "scores": s.round(6).tolist()}


@dataclass(frozen=True)
class EqsdConfig(SynthConfig):
    """The options of the ``eqsd`` engine (``n``: caption pairs)."""

    t2i: str = DEFAULT_EQSD_T2I
    steps: int = 50
    #: the fraction of the steps whose cross-attention maps come from the source caption
    cross_replace: float = 0.8
    #: the scorer (a ``spotdiff eval --model`` spec) of the automatic check; None: no check
    check: str | None = None
    #: an edited review sheet: write the accepted pairs from it instead of generating
    from_review: Path | None = None


def write_eqsd(out: Path, config: EqsdConfig, pipeline: Any = None, scorer: Any = None) -> dict:
    """Write EQ-SD pairs in the EqBen format (``all_select.json``, ``images/eqbensd/``).

    Pairs failing the check go to ``set_aside.json`` (with their scores), not ``all_select.json``;
    ``review.csv`` and ``review.html`` list every pair with the check's verdict, for the final cut the
    paper made by hand (:func:`write_from_review`).

    Args:
        out: the output folder.
        config: the engine's options.
        pipeline: a built text-to-image pipeline; None: loaded from ``config.t2i``.
        scorer: the check's scorer; None: loaded from ``config.check`` when given.
    """
    if not 0.0 <= config.cross_replace <= 1.0:
        raise ConfigError(f"--cross-replace must be within [0, 1], got {config.cross_replace}")
    pipeline = pipeline or load_diffusion("text2image", config.t2i, resolve_device(config.device))
    if scorer is None and config.check:
        from spotdiff.scorers.factory import load_scorer

        scorer = load_scorer(config.check)
    kept, aside, items = [], [], []
    for i in range(config.n):
        pair = sd_caption_pair(case_rng(config.seed, _CODE["eqbensd"], i))
        captions = (pair["caption0"], pair["caption1"])
        seed = int(case_rng(config.seed, _CODE["eqbensd"], i, 1).integers(0, 2**31))
        images = render_pair(
            pipeline,
            captions,
            seed,
            steps=config.steps,
            size=config.image_size,
            cross_replace=config.cross_replace,
        )
        paths = [f"{SUBSET}/{i:05d}_{k}.png" for k in range(2)]
        for image, rel in zip(images, paths, strict=True):
            save_png(image, out / "images" / rel)
        record = {"image0": paths[0], "image1": paths[1], "caption0": captions[0], "caption1": captions[1]}
        verdict = check_pair(scorer, images, captions) if scorer is not None else None
        meta = {**record, "aspect": pair["aspect"], "changed": pair["changed"], "seed": seed, "check": verdict}
        (kept if verdict is None or verdict["passed"] else aside).append((record, meta))
        items.append(_review_item(i, record, verdict))
    write_json(out / "all_select.json", [r for r, _ in kept])
    write_json(out / "metadata.json", {"pairs": [m for _, m in kept]})
    write_json(out / "set_aside.json", [m for _, m in aside])
    write_review(out, items, image_fields=IMAGE_FIELDS, text_fields=TEXT_FIELDS, title=REVIEW_TITLE)
    return {
        "engine": "eqsd",
        "seed": config.seed,
        "image_size": config.image_size,
        "t2i": config.t2i,
        "check": config.check,
        "pairs": len(kept),
        "set_aside": len(aside),
    }


#: the review sheet's columns
IMAGE_FIELDS = ("image0", "image1")
TEXT_FIELDS = ("caption0", "caption1")
REVIEW_TITLE = "EQ-SD: review the edited pairs (accept the pairs whose images show their own captions)"


def _review_item(i: int, record: dict[str, str], verdict: dict | None) -> ReviewItem:
    said = "unchecked" if verdict is None else ("passed" if verdict["passed"] else "failed") + " the check"
    return ReviewItem(
        id=f"{i:05d}",
        images={f: f"images/{record[f]}" for f in IMAGE_FIELDS},
        texts={f: record[f] for f in TEXT_FIELDS},
        verdict=said,
        accept=verdict is None or verdict["passed"],
        details="" if verdict is None else f"scores (rows: images, columns: captions): {verdict['scores']}",
    )


def write_from_review(out: Path, review: Path) -> dict:
    """Write ``all_select.json`` and the images of the accepted pairs of an edited review sheet.

    Args:
        out: the output folder.
        review: the edited ``review.csv`` (the images are read from beside it).
    """
    review = Path(review)
    result = read_review(review, image_fields=IMAGE_FIELDS, text_fields=TEXT_FIELDS)
    records = []
    for k, item in enumerate(result.accepted, start=1):
        record = {}
        for f in IMAGE_FIELDS:
            rel = Path(item.images[f])
            if rel.is_absolute() or rel.parts[0] != "images" or len(rel.parts) < 2:
                where = f"accepted row {k} ({item.id})"
                raise DataError("expected images/<subset>/<file name>", file=review, record=where, field=f)
            record[f] = str(Path(*rel.parts[1:]))
        records.append({**record, **{f: item.texts[f] for f in TEXT_FIELDS}})
    copy_images([r[f] for r in records for f in IMAGE_FIELDS], review.parent / "images", out)
    write_json(Path(out) / "all_select.json", records)
    return {"engine": "eqsd", "mode": "from a review sheet", "review": str(review), "pairs": len(records),
            "rejected": result.rejected}  # fmt: skip


@ENGINES.register("eqsd")
class EqsdEngine(SynthEngine):
    benchmark = "eqben"
    generative = True
    description = "EqBen EQ-SD pairs by prompt-to-prompt word swap on Stable Diffusion (EqBen App. B.5, Fig. 15)"
    config_class = EqsdConfig

    def write(self, out: Path) -> dict:
        if self.config.from_review is not None:
            return write_from_review(out, self.config.from_review)
        return write_eqsd(out, self.config)


__all__ = [
    "DEFAULT_EQSD_T2I",
    "EqsdConfig",
    "EqsdEngine",
    "P2PAttnProcessor",
    "PromptToPrompt",
    "check_pair",
    "render_pair",
    "token_mapper",
    "write_eqsd",
    "write_from_review",
]
