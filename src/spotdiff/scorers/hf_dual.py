"""Hugging Face dual encoders: ``hf-clip:``, ``hf-siglip:`` and the generic ``hf-dual:``.

Images and texts are embedded separately and L2-normalised, so similarities are cosines; SigLIP's
texts are padded to max_length, as trained. Spec forms: docs/scorers.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.scorers.base import SCORERS, EmbeddingScorer, ImagePreprocessor, Prepared, ScorerOptions, staged
from spotdiff.scorers.factory import parse_spec_options
from spotdiff.scorers.runtime import resolve_device, resolve_dtype
from spotdiff.scorers.video import DEFAULT_FRAMES, ClipPixels, frame_rule_option, mean_of_frames
from spotdiff.scorers.weights import (
    hub_snapshot_dir,
    local_path,
    model_dir_digests,
    model_sources,
    naming_damaged_weights,
    state_dict_digest,
)
from spotdiff.video.clips import FrameRule


def rgb(image: Image.Image) -> Image.Image:
    """The image in RGB mode (processors expect three channels)."""
    return image if image.mode == "RGB" else image.convert("RGB")


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """Consecutive slices of at most ``size`` items."""
    size = max(1, int(size))
    return [items[i : i + size] for i in range(0, len(items), size)]


def to_unit_numpy(features: Any) -> np.ndarray:
    """Rows of a torch tensor, L2-normalised in float32, as a numpy array."""
    x = features.float()
    x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return x.cpu().numpy().astype(np.float32, copy=False)


def pooled(output: Any) -> Any:
    """The projected embeddings of ``get_*_features`` (a tensor, or an output whose pooler holds them)."""
    if hasattr(output, "pooler_output"):
        return output.pooler_output
    if isinstance(output, tuple):
        return output[0]
    return output


def load_hf(family: str, name_or_path: str, loader: Any, **kwargs: Any) -> Any:
    """``loader.from_pretrained(name_or_path)``, turning load failures into :class:`ConfigError` (a damaged
    or refused weights file named: :func:`~spotdiff.scorers.weights.naming_damaged_weights`).

    Args:
        family: the scorer family, named in errors.
        name_or_path: a hub name or a local folder.
        loader: a transformers class with ``from_pretrained``.
        **kwargs: passed to ``from_pretrained``.
    """
    with naming_damaged_weights(family, name_or_path):
        try:
            return loader.from_pretrained(name_or_path, **kwargs)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{family}: cannot load {name_or_path!r} ({type(exc).__name__}: {exc})") from exc


def hf_digests(name_or_path: str, directory: Path | None, model: Any) -> tuple[str | None, str]:
    """(config digest, weights digest) from the model files on disk (a local folder or the cached hub
    snapshot); the weights digest falls back to the in-memory state_dict.

    Args:
        name_or_path: the hub name or path the model was loaded from.
        directory: its local folder, None for a hub name (the cached snapshot is read).
        model: the loaded model, for the fallback digest.
    """
    folder = directory if directory is not None else hub_snapshot_dir(name_or_path)
    config_sha, weights_sha = (None, None)
    if folder is not None and folder.is_dir():
        config_sha, weights_sha = model_dir_digests(folder)
    return config_sha, weights_sha or state_dict_digest(model)


class HFImagePreprocessor(ImagePreprocessor):
    """A Hugging Face image processor as the CPU stage: decoded images -> ``pixel_values``.

    Processors of the torchvision backend (every processor transformers 5 loads when torchvision is
    installed) are tensor operations that also run on the GPU, which :meth:`from_uint8` uses.
    """

    def __init__(self, processor: Any) -> None:
        self.processor = processor

    def __call__(self, images: Sequence[Image.Image]) -> Prepared:
        pixels = self.processor(images=[rgb(im) for im in images], return_tensors="pt")["pixel_values"]
        return Prepared(pixels, len(images))

    def on_tensors(self) -> bool:
        from transformers.image_processing_backends import TorchvisionBackend

        return isinstance(self.processor, TorchvisionBackend)

    def from_uint8(self, images: Sequence[Any], device: str) -> Prepared:
        pixels = self.processor(images=list(images), device=device, return_tensors="pt")["pixel_values"]
        return Prepared(pixels, len(images))

    def splits(self) -> bool:
        """Whether the processor runs the torchvision backend's own chain (resize, centre crop, then its fused
        rescale and normalise; no padding), which stops before the arithmetic when told not to rescale."""
        from transformers.image_processing_backends import TorchvisionBackend

        p = self.processor
        standard = type(p)._preprocess is TorchvisionBackend._preprocess
        return self.on_tensors() and standard and not getattr(p, "do_pad", False)

    def resized(self, images: Sequence[Image.Image]) -> Prepared:
        images = [rgb(im) for im in images]
        out = self.processor(images=images, do_rescale=False, do_normalize=False, return_tensors="pt")
        return Prepared(out["pixel_values"], len(images), self.finish)

    def finish(self, pixels: Any) -> Any:
        p = self.processor
        rescale, normalize = (p.do_rescale, p.rescale_factor), (p.do_normalize, p.image_mean, p.image_std)
        return p.rescale_and_normalize(pixels, *rescale, *normalize)


class HFTokenize:
    """A Hugging Face tokenizer as the text stage: texts -> padded ``input_ids`` and ``attention_mask``.

    Args:
        tokenizer: the Hugging Face tokenizer.
        padding: its ``padding`` argument (``"max_length"`` pads every text to ``max_length``).
        max_length: truncate to this length, None for no truncation.
    """

    def __init__(self, tokenizer: Any, *, padding: str | bool, max_length: int | None) -> None:
        self.tokenizer = tokenizer
        self.padding = padding
        self.max_length = max_length

    def __call__(self, texts: Sequence[str]) -> Prepared:
        enc = self.tokenizer(
            list(texts),
            padding=self.padding,
            truncation=self.max_length is not None,
            max_length=self.max_length,
            return_tensors="pt",
        )
        keep = {k: enc[k] for k in ("input_ids", "attention_mask") if k in enc}
        return Prepared(keep, len(texts))


class TorchScorerMixin(ABC):
    """Device, dtype, seed and identity bookkeeping shared by the torch-backed scorers."""

    family: str = ""
    spec: str
    options: ScorerOptions
    name_or_path: str
    model: Any

    def _setup(self, options: ScorerOptions) -> None:
        import torch

        self.device = resolve_device(options.device)
        self.dtype = resolve_dtype(options.dtype, self.device)
        torch.manual_seed(options.seed)
        self._identity: dict[str, Any] | None = None

    @property
    def batch_size(self) -> int:
        """``options.batch_size`` (``--batch-size auto`` sets it once the model is loaded)."""
        return max(1, int(self.options.batch_size))

    @abstractmethod
    def _digests(self) -> tuple[str | None, str]:
        """Implemented by each subclass."""

    def sources(self) -> list[Path]:
        """The model's folder (or cached hub snapshot), which its digests are read from."""
        return model_sources(self.name_or_path, getattr(self, "_dir", None))

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            config_sha, weights_sha = self._digests()
            self._identity = {
                "spec": self.spec,
                "family": self.family,
                "class": type(self.model).__name__,
                "name_or_path": self.name_or_path,
                "config_sha256": config_sha,
                "weights_sha256": weights_sha,
                "dtype": str(self.dtype).replace("torch.", ""),
                "device": self.device,
            }
        return dict(self._identity)


class HFDualScorer(TorchScorerMixin, EmbeddingScorer):
    """A Hugging Face model with ``get_image_features`` and ``get_text_features``.

    Args:
        family: the spec's family (``hf-clip``, ``hf-siglip``, ``hf-dual``).
        name_or_path: a hub name or a local ``save_pretrained`` folder.
        options: the scorer options.
        model_class: the transformers class that loads it.
        pad_to_max_length: pad texts to the model's max length (always for SigLIP).
    """

    capabilities = frozenset({"image-text", "text-text"})

    def __init__(
        self,
        family: str,
        name_or_path: str,
        options: ScorerOptions,
        *,
        model_class: str = "AutoModel",
        pad_to_max_length: bool = False,
    ) -> None:
        super().__init__(f"{family}:{name_or_path}", options)
        self.family = family
        name_or_path, opts = parse_spec_options(name_or_path, options, ("frames",))
        self.name_or_path = name_or_path
        self.rule = frame_rule_option(opts, DEFAULT_FRAMES)  # videos: the mean of these frames' embeddings
        self._dir = local_path(name_or_path, f"{family} model")  # ConfigError before any work
        self._setup(options)

        import transformers
        from transformers import AutoImageProcessor, AutoTokenizer

        cls = getattr(transformers, model_class)
        self.model = load_hf(family, name_or_path, cls, dtype=self.dtype)
        for needed in ("get_image_features", "get_text_features"):
            if not hasattr(self.model, needed):
                raise ConfigError(
                    f"{family}: {type(self.model).__name__} from {name_or_path!r} has no {needed}(); "
                    "it is not a dual encoder"
                )
        self.model.to(self.device).eval()
        self.tokenizer = load_hf(family, name_or_path, AutoTokenizer)
        self.image_processor = load_hf(family, name_or_path, AutoImageProcessor)
        # SigLIP pools the last position, so it must see texts padded as in training
        model_type = str(getattr(self.model.config, "model_type", ""))
        self.pad_to_max_length = pad_to_max_length or "siglip" in model_type
        self.max_length = self._max_text_length()
        self._dim: int | None = None

    def _max_text_length(self) -> int | None:
        text_config = getattr(self.model.config, "text_config", None)
        limit = getattr(text_config, "max_position_embeddings", None)
        tok_limit = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_limit, int) and tok_limit < 100_000:
            limit = min(limit, tok_limit) if limit else tok_limit
        return limit

    def _digests(self) -> tuple[str | None, str]:
        return hf_digests(self.name_or_path, self._dir, self.model)

    def _empty(self) -> np.ndarray:
        if self._dim is None:
            self._dim = self.encode_texts([""]).shape[1]
        return np.zeros((0, self._dim), dtype=np.float32)

    def frame_rule(self) -> FrameRule:
        """Videos are scored by the mean of the embeddings of these frames (spec option ``frames``)."""
        return self.rule

    def image_preprocessor(self) -> ClipPixels:
        return ClipPixels(HFImagePreprocessor(self.image_processor))

    def text_preprocessor(self) -> HFTokenize:
        padding: str | bool = "max_length" if self.pad_to_max_length else True
        return HFTokenize(self.tokenizer, padding=padding, max_length=self.max_length)

    def encode_images(self, images: Sequence[Image.Image] | Prepared) -> np.ndarray:
        if len(images) == 0:
            return self._empty()
        return staged(images, self.image_preprocessor(), self._forward_pixels, self.batch_size)

    def encode_texts(self, texts: Sequence[str] | Prepared) -> np.ndarray:
        if len(texts) == 0:
            return self._empty()
        rows = staged(texts, self.text_preprocessor(), self._forward_tokens, self.batch_size)
        self._dim = rows.shape[1]
        return rows

    def _forward_pixels(self, pixels: Prepared) -> np.ndarray:
        import torch

        data = pixels.to(self.device, self.dtype)
        clips = isinstance(data, dict)  # the frames of clips (ClipPixels), averaged per clip
        with torch.inference_mode():
            features = self.model.get_image_features(pixel_values=data["pixel_values"] if clips else data)
            rows = to_unit_numpy(pooled(features))
        return mean_of_frames(rows, data["frames"]) if clips else rows

    def _forward_tokens(self, tokens: Prepared) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return to_unit_numpy(pooled(self.model.get_text_features(**tokens.to(self.device))))


@SCORERS.register("hf-clip")
def hf_clip(rest: str, options: ScorerOptions) -> HFDualScorer:
    """``hf-clip:NAME_OR_PATH``: a Hugging Face ``CLIPModel``."""
    return HFDualScorer("hf-clip", rest, options, model_class="CLIPModel")


@SCORERS.register("hf-siglip")
def hf_siglip(rest: str, options: ScorerOptions) -> HFDualScorer:
    """``hf-siglip:NAME_OR_PATH``: a Hugging Face ``SiglipModel``; texts padded to max_length."""
    return HFDualScorer("hf-siglip", rest, options, model_class="SiglipModel", pad_to_max_length=True)


@SCORERS.register("hf-dual")
def hf_dual(rest: str, options: ScorerOptions) -> HFDualScorer:
    """``hf-dual:NAME_OR_PATH``: any ``AutoModel`` exposing get_image_features/get_text_features."""
    return HFDualScorer("hf-dual", rest, options, model_class="AutoModel")
