"""Prompt-to-prompt word swap on a diffusers Stable Diffusion pipeline (Hertz et al., Prompt-to-Prompt).

Two prompts are rendered from one seed in one batch; for the first ``cross_replace`` fraction of the
steps the target prompt's cross-attention maps are the source prompt's (Sec. 3.2, word swap), and for
the first ``self_replace`` fraction its self-attention maps of 16 x 16 or fewer positions are too (the
authors' code, ``AttentionReplace(..., self_replace_steps)``), through diffusers attention processors.
"""

from __future__ import annotations

from typing import Any

from PIL import Image

from spotdiff.synth.diffusion.models import require

#: self-attention maps with at most this many query positions are injected (the authors' ``16 ** 2``)
SELF_INJECT_MAX_POSITIONS = 16**2


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
    """The attention controller: counts steps and injects the source's attention maps into the target's.

    Args:
        mapper: :func:`token_mapper` of the pair, or None: no injection (the plain rendering).
        replace_steps: the first steps whose cross-attention maps are injected.
        self_replace_steps: the first steps whose self-attention maps (of at most
            :data:`SELF_INJECT_MAX_POSITIONS` positions) are injected; 0: none.
    """

    def __init__(self, mapper: list[int] | None, replace_steps: int, self_replace_steps: int = 0) -> None:
        self.mapper = mapper
        self.replace_steps = int(replace_steps)
        self.self_replace_steps = int(self_replace_steps)
        self.step = 0

    def inject(self, probs, batch: int):
        """Source cross-attention maps into the target rows of ``probs`` (``batch * heads, queries, keys``)."""
        if self.mapper is None or self.step >= self.replace_steps:
            return probs
        return self._replace(probs, batch, lambda source: source[..., self.mapper])

    def inject_self(self, probs, batch: int):
        """Source self-attention maps into the target rows, at low resolution and in the first steps only."""
        if self.mapper is None or self.step >= self.self_replace_steps or probs.shape[1] > SELF_INJECT_MAX_POSITIONS:
            return probs
        return self._replace(probs, batch, lambda source: source)

    @staticmethod
    def _replace(probs, batch: int, take):
        heads = probs.shape[0] // batch
        p = probs.reshape(batch, heads, *probs.shape[1:]).clone()
        # the batch ends with the conditional [source, target] (after the unconditional pair under guidance)
        p[batch - 1] = take(p[batch - 2])
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
        probs = self.controller.inject(probs, batch) if is_cross else self.controller.inject_self(probs, batch)
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
    self_replace: float = 0.0,
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
        self_replace: the fraction of the steps whose self-attention maps are injected.
        inject: False: the same seed and prompts without injection (the baseline).
    """
    torch = require("torch", "prompt-to-prompt editing")
    tok = pipeline.tokenizer
    ids = [tok(c, padding="max_length", max_length=tok.model_max_length, truncation=True).input_ids for c in captions]
    controller = PromptToPrompt(
        token_mapper(*ids) if inject else None, round(cross_replace * steps), round(self_replace * steps)
    )
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
