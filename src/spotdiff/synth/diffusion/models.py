"""The diffusion engines' models: checked before anything heavy loads, loaded once, identified by content.

:func:`check_model` reads only a model's index or config file (a local folder, the local hub cache, or
one small file from the hub) and refuses, in one line, a path that does not exist, a folder that is
not the kind of model its option asks for (a Grounding DINO folder given as ``--segmenter``), or a hub
name that cannot be read offline. :func:`weights_identity` names the weights by content (the hub
snapshot's commit, else the SHA-256 of the weight files), so caches follow the weights, not the path
as typed. :class:`Models` loads each pipeline once per run, so text-to-image objects and backgrounds
share one pipeline in memory.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError
from spotdiff.provenance import snapshot_revision
from spotdiff.scorers.weights import hub_snapshot_dir, local_path, model_dir_digests
from spotdiff.synth.output import progress_enabled

EXTRA = "generate"
DEFAULT_T2I = "stabilityai/stable-diffusion-xl-base-1.0"
DEFAULT_INPAINT = "diffusers/stable-diffusion-xl-1.0-inpainting-0.1"
DEFAULT_DETECTOR = "IDEA-Research/grounding-dino-base"
DEFAULT_SEGMENTER = "facebook/sam-vit-base"
#: instances per class in the text-to-image library a case picks from (SPEC Sec. 3.2.1-3.2.2)
LIBRARY_SIZE = 16

#: what each kind of model is recognised by: the file read, and what it must say
KINDS: dict[str, dict[str, Any]] = {
    "text2image": {"file": "model_index.json", "what": "a diffusers text-to-image pipeline"},
    "inpainting": {"file": "model_index.json", "what": "a diffusers inpainting pipeline"},
    "detector": {"file": "config.json", "what": "a Grounding DINO model", "model_type": "grounding-dino"},
    "segmenter": {"file": "config.json", "what": "a SAM model", "model_type": "sam"},
}


def require(module: str, what: str) -> Any:
    """Import ``module`` or raise a ConfigError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"{what} needs the Python package '{module}', which is not installed; install the "
            f"'{EXTRA}' extra: pip install 'spotdiff[{EXTRA}]' (or use --backend procedural, the offline default)"
        ) from exc


def resolve_device(device: str) -> str:
    """``auto``: ``cuda`` when torch sees a GPU, else ``cpu``; any other name as given."""
    if device != "auto":
        return device
    torch = require("torch", "the diffusion models")
    return "cuda" if torch.cuda.is_available() else "cpu"


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _index_file(model: str, kind: str, option: str) -> tuple[Path, Path | None]:
    """The model's index or config file, read without loading anything; and its local folder, if any."""
    spec = KINDS[kind]
    folder = local_path(model, f"{option} {model}")  # a path that looks local but is missing: one line
    if folder is None:
        folder = hub_snapshot_dir(model)
    if folder is not None:
        if not folder.is_dir():
            raise ConfigError(f"{option} {model}: expected {spec['what']} folder, got a file")
        index = folder / spec["file"]
        if not index.is_file():
            raise ConfigError(f"{option} {model}: not {spec['what']} (no {spec['file']} in {folder})")
        return index, folder
    if _offline():
        raise ConfigError(
            f"{option} {model}: not in the local Hugging Face cache and HF_HUB_OFFLINE is set; download it "
            f"first (hf download {model}) or pass a local folder"
        )
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(model, spec["file"])), None
    except Exception as exc:  # the hub's errors are many (missing repo, gated, network): one line each
        raise ConfigError(f"{option} {model}: cannot read its {spec['file']} from the hub ({exc})") from None


def check_model(model: str, kind: str, option: str) -> Path | None:
    """Refuse, in one line, a model that ``option`` cannot load as ``kind``; return its local folder.

    Args:
        model: a hub name or a local folder.
        kind: one of :data:`KINDS` (``text2image``, ``inpainting``, ``detector``, ``segmenter``).
        option: the option that named it (``--t2i``), for the message.
    """
    spec = KINDS[kind]
    index, folder = _index_file(model, kind, option)
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{option} {model}: cannot read {index}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{option} {model}: {index} is not a JSON object")
    if "model_type" in spec and data.get("model_type") != spec["model_type"]:
        got = data.get("model_type") or data.get("_class_name") or "no model_type"
        raise ConfigError(f"{option} {model}: expected {spec['what']} (model_type {spec['model_type']!r}), got {got}")
    if spec["file"] == "model_index.json" and not str(data.get("_class_name", "")).endswith("Pipeline"):
        raise ConfigError(f"{option} {model}: {index} names no diffusers pipeline class (_class_name)")
    if spec["file"] == "model_index.json" and folder is not None and (_offline() or local_path(model) is not None):
        missing = _missing_component(folder, data)  # a hub snapshot online fetches what it lacks when loaded
        if missing:
            raise ConfigError(f"{option} {model}: not a complete diffusers pipeline: {missing}")
    return folder


def _missing_component(folder: Path, index: dict[str, Any]) -> str | None:
    """What a pipeline folder lacks of the components its ``model_index.json`` lists (``"unet": ["diffusers",
    "UNet2DConditionModel"]``), each loaded by ``from_pretrained`` from its sub-folder: the folder, its config
    (``scheduler_config.json``, ``tokenizer_config.json``, ``preprocessor_config.json`` or a model's
    ``config.json``) and a model's weights; None when it lacks nothing."""
    for name, entry in index.items():
        if name.startswith("_") or not isinstance(entry, list) or len(entry) != 2 or None in entry:
            continue  # a setting, or a component left out (safety_checker: [null, null])
        library, cls = entry
        what, sub = f"its component {name!r} ({library} {cls})", folder / name
        if not sub.is_dir():
            return f"{what} has no folder {name}/"
        config = _component_config(str(cls))
        if not (sub / config).is_file():
            return f"{what} has no {config} in {name}/"
        weights = [p for p in sub.iterdir() if p.name.endswith((".safetensors", ".bin", ".index.json"))]
        if config == "config.json" and not weights:
            return f"{what} has no weights in {name}/ (.safetensors or .bin)"
    return None


def _component_config(cls: str) -> str:
    """The file ``from_pretrained`` reads first for a pipeline component of class ``cls``."""
    if cls.endswith("Scheduler"):
        return "scheduler_config.json"
    if "Tokenizer" in cls:
        return "tokenizer_config.json"
    if cls.endswith(("ImageProcessor", "FeatureExtractor", "Processor")):
        return "preprocessor_config.json"
    return "config.json"


def check_stage_models(t2i: str, inpaint: str, detector: Any, segmenter: Any) -> Path | None:
    """SPEC's generative stages' models checked (a detector or segmenter already built is taken as it is);
    the text-to-image model's local folder returned."""
    require("diffusers", "the generative backend (--backend generative)")
    folder = check_model(t2i, "text2image", "--t2i")
    check_model(inpaint, "inpainting", "--inpaint")
    for spec, kind in ((detector, "detector"), (segmenter, "segmenter")):
        if isinstance(spec, str):
            check_model(spec, kind, f"--{kind}")
    return folder


def weights_identity(model: str, folder: Path | None) -> str:
    """What identifies a model's weights: ``<repo>@<commit>`` for a hub snapshot, else ``sha256:<digest>``
    of its weight files (a local folder); a hub name not cached locally is named as given."""
    if folder is None:
        return model
    snapshot = snapshot_revision(folder)
    if snapshot is not None:
        return f"{snapshot['repo']}@{snapshot['revision']}"
    _config, weights = model_dir_digests(folder)
    if weights is None:
        raise ConfigError(f"{model}: no weight files (*.safetensors, *.bin, ...) in {folder}")
    return f"sha256:{weights}"


#: the weights' precision on the device: ``auto`` is fp16 on CUDA (the papers' setting), fp32 elsewhere
DTYPES = ("auto", "fp32", "fp16", "bf16")


def resolve_dtype(dtype: str, device: str) -> str:
    """The precision a pipeline runs in: ``auto`` resolved for ``device``; half precision refused on the CPU.

    >>> resolve_dtype("auto", "cuda:1"), resolve_dtype("auto", "cpu"), resolve_dtype("bf16", "cuda")
    ('fp16', 'fp32', 'bf16')
    """
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype == "auto":
        return "fp16" if device.startswith("cuda") else "fp32"
    if dtype != "fp32" and not device.startswith("cuda"):
        raise ConfigError(
            f"--dtype {dtype} needs a CUDA device (the CPU runs diffusion in fp32); got --device {device}"
        )
    return dtype


def attention_kernel() -> str:
    """The attention diffusers' default processor runs: PyTorch's fused ``scaled_dot_product_attention``
    (``AttnProcessor2_0``) where torch has it, else the explicit softmax of ``AttnProcessor``."""
    import torch.nn.functional as F

    return (
        "sdpa (torch.nn.functional.scaled_dot_product_attention)"
        if hasattr(F, "scaled_dot_product_attention")
        else "eager"
    )


class Models:
    """The run's diffusion pipelines, each loaded once (by task and model) and shared.

    Args:
        device: the device the pipelines run on.
        dtype: their precision (:data:`DTYPES`; ``auto``: fp16 on CUDA, fp32 elsewhere).
    """

    def __init__(self, device: str, dtype: str = "auto") -> None:
        self.device = device
        self.dtype = resolve_dtype(dtype, device)
        self._loaded: dict[tuple[str, str], Any] = {}

    def pipeline(self, task: str, model: str) -> Any:
        """The diffusers pipeline of ``task`` (``text2image`` or ``inpainting``) for ``model``."""
        if (task, model) not in self._loaded:
            self._loaded[(task, model)] = load_diffusion(task, model, self.device, self.dtype)
        return self._loaded[(task, model)]

    def describe(self) -> dict[str, str]:
        """The device, precision and attention kernel, as ``synth.json`` records them."""
        return {"device": self.device, "dtype": self.dtype, "attention": attention_kernel()}


def load_diffusion(task: str, model: str, device: str, dtype: str = "auto") -> Any:
    """A diffusers pipeline for ``task`` (``text2image`` or ``inpainting``) from a hub name or folder.

    Args:
        task: ``text2image`` or ``inpainting`` (diffusers' AutoPipeline picks the class).
        model: a hub model id or a local folder written by ``save_pretrained``.
        device: the device the pipeline runs on.
        dtype: the weights' precision (:func:`resolve_dtype`: ``auto`` is fp16 on CUDA, fp32 elsewhere).
    """
    diffusers = require("diffusers", f"{task} with diffusion")
    torch = require("torch", "the diffusion models")
    auto = {"text2image": diffusers.AutoPipelineForText2Image, "inpainting": diffusers.AutoPipelineForInpainting}
    precision = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    dtype = precision[resolve_dtype(dtype, device)]
    with quiet_loading():
        pipeline = auto[task].from_pretrained(model, dtype=dtype).to(device)
    pipeline.set_progress_bar_config(disable=True)
    return pipeline


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """diffusers' and transformers' loading bars hidden inside the block when the run is quiet (``-q``)."""
    if progress_enabled():
        yield
        return
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    diffusers_logging.disable_progress_bar()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        diffusers_logging.enable_progress_bar()
        transformers_logging.enable_progress_bar()
