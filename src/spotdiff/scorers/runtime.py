"""Where and how a torch-backed scorer runs: its device, its dtype, and the model libraries' own
progress bars (torch and transformers are imported lazily)."""

from __future__ import annotations

from typing import Any

from spotdiff.errors import ConfigError

_DTYPES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
}  # fmt: skip


def resolve_device(name: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available (else ``"mps"``, else ``"cpu"``); checks the others."""
    import torch

    name = (name or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} requested but CUDA is not available")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError("device 'mps' requested but MPS is not available")
    if not (name == "cpu" or name == "mps" or name.startswith("cuda")):
        raise ConfigError(f"unknown device {name!r}; expected auto, cpu, cuda, cuda:N or mps")
    return name


def resolve_dtype(name: str, device: str, *, generative: bool = False) -> Any:
    """The torch dtype an options string names. ``"auto"`` is float32 off CUDA; on CUDA, bfloat16 for a
    ``generative`` model (language models and chat VLMs, trained in bfloat16, whose activations can overflow
    float16's range into NaN scores) where the GPU supports it, else float16 (dual encoders: CLIP_benchmark's
    mixed precision, and three more mantissa bits than bfloat16 for the similarities a tie is read from)."""
    import torch

    name = (name or "auto").strip().lower()
    if name == "auto":
        if not device.startswith("cuda"):
            return torch.float32
        bf16 = generative and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if bf16 else torch.float16
    if name not in _DTYPES:
        raise ConfigError(f"unknown dtype {name!r}; expected auto, float32, float16 or bfloat16")
    return getattr(torch, _DTYPES[name])


def quiet_progress() -> None:
    """Silence the model libraries' own progress bars (``--quiet``): transformers' (weight loading)
    and huggingface_hub's (downloads, cache scans), through each library's own switch."""
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    disable_progress_bars()
