"""Tiny random generative models for the synthesis engines, built offline from configs.

Stable Diffusion text-to-image and inpainting pipelines (the component sizes of diffusers' own
``tests/pipelines/stable_diffusion`` dummy components, with a CLIP tokenizer from a hand-written
vocabulary and merges file), Grounding DINO and SAM. Each ``make_tiny_*`` saves a folder with
``save_pretrained`` that loads back through ``from_pretrained`` like a real checkpoint; the same seed
gives the same weights. Each builds in about a second on a CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from spotdiff.testing.tiny_models import make_tiny_tokenizer

__all__ = [
    "TINY_SD_WORDS",
    "make_tiny_clip_tokenizer",
    "make_tiny_grounding_dino",
    "make_tiny_sam",
    "make_tiny_stable_diffusion",
]

#: words whose letters the tiny CLIP tokenizer's merges join (everything else stays byte by byte)
TINY_SD_WORDS = ("a", "photo", "of", "single", "and", "fully", "visible", "cat", "dog", "cup", "apple", "empty")
_SPECIAL = ("<|startoftext|>", "<|endoftext|>")


def _byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode table (CLIP's byte-level BPE alphabet), in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    symbols, extra = [], 0
    for b in range(256):
        if b in printable:
            symbols.append(chr(b))
        else:
            symbols.append(chr(256 + extra))
            extra += 1
    return symbols


def make_tiny_clip_tokenizer(out_dir: str | Path, *, max_length: int = 32):
    """A ``CLIPTokenizer`` from a hand-written ``vocab.json`` and ``merges.txt``.

    The vocabulary holds CLIP's 256 byte symbols (each also with the ``</w>`` word end), the
    pieces of :data:`TINY_SD_WORDS` built letter by letter through merges (a merge of an earlier word
    can pre-empt a later word's, as in any BPE), and the two special tokens.

    Args:
        out_dir: the folder the two files and the tokenizer are written to.
        max_length: the tokenizer's ``model_max_length`` (the text encoder's positions).
    """
    from transformers import CLIPTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    symbols = _byte_symbols()
    vocab = symbols + [s + "</w>" for s in symbols]
    merges = []
    for word in TINY_SD_WORDS:
        parts = [*word[:-1], word[-1] + "</w>"]
        while len(parts) > 1:
            merges.append(f"{parts[0]} {parts[1]}")
            parts = [parts[0] + parts[1], *parts[2:]]
            if parts[0] not in vocab:
                vocab.append(parts[0])
    vocab += list(_SPECIAL)
    (out / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}), encoding="utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(dict.fromkeys(merges)) + "\n", encoding="utf-8")
    tok = CLIPTokenizer(
        str(out / "vocab.json"), str(out / "merges.txt"), model_max_length=max_length, pad_token="<|endoftext|>"
    )
    tok.save_pretrained(out)
    return tok


def make_tiny_stable_diffusion(out_dir: str | Path, *, inpaint: bool = False, seed: int = 0) -> Path:
    """A tiny ``StableDiffusionPipeline`` (or ``StableDiffusionInpaintPipeline``) folder.

    Args:
        out_dir: the folder ``save_pretrained`` writes.
        inpaint: build the inpainting pipeline (a 9-channel UNet: latents, mask, masked image).
        seed: the seed of the random weights.
    """
    import torch
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
        StableDiffusionInpaintPipeline,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    out = Path(out_dir)
    tokenizer = make_tiny_clip_tokenizer(out / "_tokenizer")
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(4, 8),
        layers_per_block=1,
        sample_size=16,
        in_channels=9 if inpaint else 4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        norm_num_groups=2,
    )
    vae = AutoencoderKL(
        block_out_channels=[4, 8],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
        latent_channels=4,
        norm_num_groups=2,
        sample_size=32,
    )
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            vocab_size=len(tokenizer),
            max_position_embeddings=tokenizer.model_max_length,
        )
    )
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    cls = StableDiffusionInpaintPipeline if inpaint else StableDiffusionPipeline
    pipe = cls(
        unet=unet,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(out)
    return out


def make_tiny_grounding_dino(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny ``GroundingDinoForObjectDetection`` with its processor (a Swin backbone, a BERT text tower).

    Args:
        out_dir: the folder ``save_pretrained`` writes.
        seed: the seed of the random weights.
    """
    import torch
    from transformers import (
        BertConfig,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SwinConfig,
    )

    out = Path(out_dir)
    tok = make_tiny_tokenizer(out / "_tokenizer")
    torch.manual_seed(seed)
    swin = SwinConfig(
        image_size=64,
        patch_size=4,
        embed_dim=8,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        window_size=4,
        out_features=["stage2", "stage3", "stage4"],
    )
    bert = BertConfig(
        vocab_size=len(tok),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=64,
    )
    config = GroundingDinoConfig(
        backbone_config=swin,
        text_config=bert,
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=8,
        num_feature_levels=3,
        encoder_n_points=2,
        decoder_n_points=2,
        max_text_len=32,
        use_timm_backbone=False,
    )
    GroundingDinoForObjectDetection(config).eval().save_pretrained(out)
    processor = GroundingDinoImageProcessor(size={"shortest_edge": 64, "longest_edge": 64})
    GroundingDinoProcessor(image_processor=processor, tokenizer=tok).save_pretrained(out)
    return out


def make_tiny_sam(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny ``SamModel`` with its ``SamProcessor`` (64-pixel inputs).

    Args:
        out_dir: the folder ``save_pretrained`` writes.
        seed: the seed of the random weights.
    """
    import torch
    from transformers import (
        SamConfig,
        SamImageProcessor,
        SamMaskDecoderConfig,
        SamModel,
        SamProcessor,
        SamPromptEncoderConfig,
        SamVisionConfig,
    )

    out = Path(out_dir)
    torch.manual_seed(seed)
    config = SamConfig(
        vision_config=SamVisionConfig(
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            mlp_dim=16,
            image_size=64,
            patch_size=8,
            output_channels=16,
            global_attn_indexes=[0],
            window_size=0,
            num_pos_feats=8,
        ),
        prompt_encoder_config=SamPromptEncoderConfig(
            hidden_size=16, image_size=64, patch_size=8, mask_input_channels=4
        ),
        mask_decoder_config=SamMaskDecoderConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, mlp_dim=16, iou_head_hidden_dim=16
        ),
    )
    SamModel(config).eval().save_pretrained(out)
    processor = SamImageProcessor(size={"longest_edge": 64}, pad_size={"height": 64, "width": 64})
    SamProcessor(image_processor=processor).save_pretrained(out)
    return out
