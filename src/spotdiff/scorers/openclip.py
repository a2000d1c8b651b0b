"""open_clip models: ``open-clip:ARCH@PRETRAINED``, and open_clip's local and hub layouts.

Images use open_clip's evaluation transform, texts its tokenizer; embeddings are L2-normalised.
Spec forms and the weights digest: docs/scorers.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.scorers.base import SCORERS, EmbeddingScorer, ImagePreprocessor, Prepared, ScorerOptions, StagedEncoder
from spotdiff.scorers.factory import OPEN_CLIP_SCHEMAS, parse_open_clip_spec
from spotdiff.scorers.hf_dual import TorchScorerMixin, rgb, to_unit_numpy
from spotdiff.scorers.weights import digest_files, local_path, naming_damaged_weights, state_dict_digest

_WEIGHT_NAMES = ("*.safetensors", "*.bin", "*.pth", "*.pt")


class OpenClipScorer(StagedEncoder, TorchScorerMixin, EmbeddingScorer):
    """An open_clip ``CLIP`` / ``CustomTextCLIP`` model."""

    capabilities = frozenset({"image-text", "text-text"})

    def __init__(self, rest: str, options: ScorerOptions) -> None:
        super().__init__(f"open-clip:{rest}", options)
        self.family = "open-clip"
        self.name_or_path = rest
        arch, pretrained = parse_open_clip_spec(rest)
        # Check every local path before any work.
        self._config_file: Path | None = None
        self._checkpoint: Path | None = None
        if arch.startswith("local-dir:"):
            folder = local_path(arch[len("local-dir:") :], "open-clip model folder")
            if folder is None or not folder.is_dir():
                raise ConfigError(f"open-clip: local-dir {arch[len('local-dir:') :]} is not a folder")
            arch = f"local-dir:{folder}"
            self._config_file = folder / "open_clip_config.json"
            if not self._config_file.is_file():
                raise ConfigError(f"open-clip: {self._config_file} does not exist")
            found = sorted(p for pattern in _WEIGHT_NAMES for p in folder.glob(pattern))
            self._checkpoint = _preferred_checkpoint(found)
        elif arch.endswith(".json") or local_path(arch, "open-clip architecture config") is not None:
            cfg = local_path(arch, "open-clip architecture config")
            if cfg is None or not cfg.is_file():
                raise ConfigError(f"open-clip: architecture config {arch} does not exist")
            self._config_file = cfg
        if pretrained is not None:
            ckpt = local_path(pretrained, "open-clip checkpoint")
            if ckpt is not None:
                if not ckpt.is_file():
                    raise ConfigError(f"open-clip: checkpoint {pretrained} is not a file")
                self._checkpoint = ckpt
                pretrained = str(ckpt)
        self._setup(options)

        import open_clip

        if self._config_file is not None and not arch.startswith("local-dir:"):
            arch = _register_config(open_clip, self._config_file)
        if not arch.startswith(OPEN_CLIP_SCHEMAS):
            if arch not in open_clip.list_models():
                raise ConfigError(
                    f"open-clip: unknown architecture {arch!r} (see open_clip.list_models(), or give "
                    "a path to an open_clip model-config JSON)"
                )
            if pretrained is None:
                tags = open_clip.list_pretrained_tags_by_model(arch)
                raise ConfigError(
                    f"open-clip: {arch!r} needs weights: open-clip:{arch}@TAG "
                    f"(tags: {', '.join(tags) or 'none'}) or open-clip:{arch}@/path/to/checkpoint.pt"
                )
            if self._checkpoint is None and pretrained not in open_clip.list_pretrained_tags_by_model(arch):
                tags = open_clip.list_pretrained_tags_by_model(arch)
                raise ConfigError(
                    f"open-clip: {pretrained!r} is neither a checkpoint file nor a pretrained tag of "
                    f"{arch!r} (tags: {', '.join(tags) or 'none'})"
                )
        with naming_damaged_weights("open-clip", self._checkpoint or rest):
            try:
                model, _, preprocess = open_clip.create_model_and_transforms(
                    arch, pretrained=pretrained, device="cpu", require_pretrained=True
                )
                tokenizer = open_clip.get_tokenizer(arch)
            except (OSError, RuntimeError, ValueError, KeyError) as exc:
                raise ConfigError(f"open-clip: cannot load {rest!r} ({type(exc).__name__}: {exc})") from exc
        self._arch = arch
        self._state_digest = None if self._checkpoint is not None else state_dict_digest(model)
        self.model = model.to(self.device, self.dtype).eval()
        self.preprocess = preprocess
        self.tokenizer = tokenizer

    def sources(self) -> list[Path]:
        """A local checkpoint and config file (a pretrained tag's download is open_clip's: none)."""
        if self._checkpoint is None:
            return []
        return [p for p in (self._config_file, self._checkpoint) if p is not None]

    def _digests(self) -> tuple[str | None, str]:
        if self._config_file is not None:
            config_sha = digest_files([self._config_file])
        else:
            import open_clip

            cfg = open_clip.get_model_config(self._arch)
            blob = json.dumps(cfg, sort_keys=True).encode()
            config_sha = hashlib.sha256(blob).hexdigest() if cfg is not None else None
        weights_sha = digest_files([self._checkpoint]) if self._checkpoint is not None else self._state_digest
        return config_sha, weights_sha or state_dict_digest(self.model)

    def _dim(self) -> int:
        proj = getattr(self.model, "text_projection", None)
        if proj is not None and hasattr(proj, "shape"):
            return int(proj.shape[-1])
        return int(self.encode_texts([""]).shape[1])

    def image_preprocessor(self) -> OpenClipImagePreprocessor:
        return OpenClipImagePreprocessor(self.preprocess)

    def text_preprocessor(self) -> OpenClipTokenize:
        return OpenClipTokenize(self.tokenizer)

    def _forward_pixels(self, pixels: Prepared) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return to_unit_numpy(self.model.encode_image(pixels.to(self.device, self.dtype)))

    def _forward_tokens(self, tokens: Prepared) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return to_unit_numpy(self.model.encode_text(tokens.to(self.device)))


class OpenClipImagePreprocessor(ImagePreprocessor):
    """open_clip's evaluation transform as the CPU stage: decoded images -> stacked pixels.

    :meth:`from_uint8` runs the same transform as tensor operations on any device when it is the
    standard resize / centre-crop / to-tensor / normalise chain (open_clip's ``image_transform``
    for evaluation); resizing works on ``uint8`` pixels, rounded as PIL rounds.
    """

    #: Transforms that leave a 3-channel tensor unchanged (RGB conversion of PIL images).
    _NO_OPS = ("MaybeConvertMode", "_convert_to_rgb")

    def __init__(self, transform: Any) -> None:
        self.transform = transform

    def __call__(self, images: Sequence[Image.Image]) -> Prepared:
        import torch

        return Prepared(torch.stack([self.transform(rgb(im)) for im in images]), len(images))

    def _steps(self) -> list | None:
        """The transform's steps when each is a resize, centre crop, to-tensor, normalise or RGB no-op."""
        from torchvision import transforms as T

        steps = list(getattr(self.transform, "transforms", None) or [])
        known = (T.Resize, T.CenterCrop, T.ToTensor, T.Normalize)  # open_clip's MaybeToTensor is a ToTensor
        for step in steps:
            name = getattr(step, "__name__", type(step).__name__)
            if not isinstance(step, known) and name not in self._NO_OPS:
                return None
        return steps or None

    def on_tensors(self) -> bool:
        return self._steps() is not None

    def splits(self) -> bool:
        """Whether the standard chain's resizing and cropping all come before its to-tensor step."""
        from torchvision import transforms as T

        steps = self._steps() or []
        kinds = [isinstance(step, T.Resize | T.CenterCrop) for step in steps if not isinstance(step, T.Normalize)]
        return any(isinstance(step, T.ToTensor) for step in steps) and kinds == sorted(kinds, reverse=True)

    def resized(self, images: Sequence[Image.Image]) -> Prepared:
        import torch
        from torchvision import transforms as T
        from torchvision.transforms.functional import pil_to_tensor

        geometry = [step for step in self._steps() or [] if isinstance(step, T.Resize | T.CenterCrop)]
        out = []
        for image in images:
            x = rgb(image)
            for step in geometry:
                x = step(x)
            out.append(pil_to_tensor(x))
        return Prepared(torch.stack(out), len(images), self.finish)

    def finish(self, pixels: Any) -> Any:
        from torchvision import transforms as T

        x = pixels
        for step in self._steps() or []:
            if not isinstance(step, T.Resize | T.CenterCrop):  # done by resized
                x = _on_tensor(step, x)
        return x

    def from_uint8(self, images: Sequence[Any], device: str) -> Prepared:
        import torch

        steps = self._steps() or []
        out = []
        for image in images:
            x = image.to(device)
            for step in steps:
                x = _on_tensor(step, x)
            out.append(x)
        return Prepared(torch.stack(out), len(images))


def _on_tensor(step: Any, x: Any) -> Any:
    """One step of the standard chain (:meth:`OpenClipImagePreprocessor._steps`) on a ``[3, H, W]`` or
    ``[n, 3, H, W]`` tensor: a resize or crop as it is, to-tensor's own ``/ 255`` of ``uint8`` pixels, a
    normalise; an RGB no-op leaves it."""
    from torchvision import transforms as T
    from torchvision.transforms import functional as F

    if isinstance(step, T.Resize | T.CenterCrop):
        return step(x)
    if isinstance(step, T.ToTensor):
        return x.float().div(255)
    if isinstance(step, T.Normalize):
        return F.normalize(x, step.mean, step.std)
    return x


class OpenClipTokenize:
    """open_clip's tokenizer as the text stage: texts -> a ``[n, context_length]`` token tensor."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, texts: Sequence[str]) -> Prepared:
        return Prepared(self.tokenizer(list(texts)), len(texts))


def _preferred_checkpoint(found: list[Path]) -> Path | None:
    order = [
        "open_clip_model.safetensors",
        "open_clip_pytorch_model.safetensors",
        "open_clip_pytorch_model.bin",
        "open_clip_pytorch_model.pth",
        "model.safetensors",
        "pytorch_model.bin",
    ]
    for name in order:
        for p in found:
            if p.name == name:
                return p
    return found[0] if found else None


def _register_config(open_clip: Any, config_file: Path) -> str:
    """Register an open_clip model-config JSON (its stem becomes the architecture name)."""
    try:
        cfg = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"open-clip: cannot read architecture config {config_file}: {exc}") from exc
    cfg = cfg.get("model_cfg", cfg) if isinstance(cfg, dict) else cfg
    if not (isinstance(cfg, dict) and all(k in cfg for k in ("embed_dim", "vision_cfg", "text_cfg"))):
        raise ConfigError(
            f"open-clip: {config_file} is not an open_clip model config "
            "(needs embed_dim, vision_cfg, text_cfg)"
        )
    open_clip.add_model_config(config_file)
    from open_clip import factory

    factory._MODEL_CONFIGS[config_file.stem] = cfg  # also accepts {"model_cfg": ...} files
    return config_file.stem


@SCORERS.register("open-clip")
def open_clip_scorer(rest: str, options: ScorerOptions) -> OpenClipScorer:
    """``open-clip:ARCH@PRETRAINED`` (tag or checkpoint path), ``open-clip:CONFIG.json@CKPT``,
    ``open-clip:local-dir:PATH`` or ``open-clip:hf-hub:ORG/REPO``."""
    return OpenClipScorer(rest, options)
