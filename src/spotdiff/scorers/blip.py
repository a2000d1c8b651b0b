"""BLIP image-text retrieval models: ``blip-itc:`` (embeddings) and ``blip-itm:`` (match probability).

Both load a ``BlipForImageTextRetrieval`` checkpoint and call its pieces directly, as its ``forward``
does; ``blip-itm`` runs the vision encoder once per image. Details: docs/scorers.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.scorers.base import SCORERS, EmbeddingScorer, PairScorer, Prepared, ScorerOptions, StagedEncoder
from spotdiff.scorers.hf_dual import (
    HFImagePreprocessor,
    HFTokenize,
    TorchScorerMixin,
    batches,
    hf_digests,
    load_hf,
    to_unit_numpy,
)
from spotdiff.scorers.weights import local_path


class _BlipBase(TorchScorerMixin):
    """Loading, preprocessing and the vision pass shared by the two BLIP heads."""

    def _load(self, family: str, name_or_path: str, options: ScorerOptions) -> None:
        self.family = family
        self.name_or_path = name_or_path
        self._dir = local_path(name_or_path, f"{family} model")
        self._setup(options)

        from transformers import AutoImageProcessor, AutoTokenizer, BlipForImageTextRetrieval

        self.model = load_hf(family, name_or_path, BlipForImageTextRetrieval, dtype=self.dtype)
        self.model.to(self.device).eval()
        self.tokenizer = load_hf(family, name_or_path, AutoTokenizer)
        self.image_processor = load_hf(family, name_or_path, AutoImageProcessor)
        text_config = self.model.config.text_config
        limit = getattr(text_config, "max_position_embeddings", None)
        tok_limit = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_limit, int) and tok_limit < 100_000:
            limit = min(limit, tok_limit) if limit else tok_limit
        self.max_length = limit

    def _digests(self) -> tuple[str | None, str]:
        return hf_digests(self.name_or_path, self._dir, self.model)

    def image_preprocessor(self) -> HFImagePreprocessor:
        return HFImagePreprocessor(self.image_processor)

    def text_preprocessor(self) -> HFTokenize:
        return HFTokenize(self.tokenizer, padding=True, max_length=self.max_length)

    def _pixels(self, images: Sequence[Image.Image] | Prepared) -> Prepared:
        return images if isinstance(images, Prepared) else self.image_preprocessor()(images)

    def _tokens(self, texts: Sequence[str]) -> tuple[Any, Any]:
        tokens = self.text_preprocessor()(texts).to(self.device)
        return tokens["input_ids"], tokens["attention_mask"]

    def _image_states(self, pixels: Any) -> Any:
        """The vision encoder's last hidden states for a batch of pixels (prepared, or a tensor on the device)."""
        if isinstance(pixels, Prepared):
            pixels = pixels.to(self.device, self.dtype)
        return self.model.vision_model(pixel_values=pixels).last_hidden_state


class BlipITCScorer(StagedEncoder, _BlipBase, EmbeddingScorer):
    """``blip-itc:``: BLIP's contrastive (ITC) embeddings; cosine similarities."""

    capabilities = frozenset({"image-text", "text-text"})

    def __init__(self, name_or_path: str, options: ScorerOptions) -> None:
        EmbeddingScorer.__init__(self, f"blip-itc:{name_or_path}", options)
        self._load("blip-itc", name_or_path, options)

    def _dim(self) -> int:
        return int(self.model.vision_proj.out_features)

    def _forward_pixels(self, pixels: Prepared) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return to_unit_numpy(self.model.vision_proj(self._image_states(pixels)[:, 0, :]))

    def _forward_tokens(self, tokens: Prepared) -> np.ndarray:
        import torch

        with torch.inference_mode():
            states = self.model.text_encoder(**tokens.to(self.device)).last_hidden_state
            return to_unit_numpy(self.model.text_proj(states[:, 0, :]))


class BlipITMScorer(_BlipBase, PairScorer):
    """``blip-itm:``: BLIP's image-text matching head; scores are match probabilities in [0, 1]."""

    capabilities = frozenset({"image-text", "match-prob", "itm-logits"})

    def __init__(self, name_or_path: str, options: ScorerOptions) -> None:
        PairScorer.__init__(self, f"blip-itm:{name_or_path}", options)
        self._load("blip-itm", name_or_path, options)

    def score_pairs(
        self, images: Sequence[Image.Image] | Prepared, texts: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        import torch

        return [torch.softmax(torch.from_numpy(lg), dim=-1)[:, 1].numpy() for lg in self.itm_logits(images, texts)]

    def itm_logits(
        self, images: Sequence[Image.Image] | Prepared, texts: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        """Each image's ``[len(texts[i]), 2]`` ITM logits (no-match, match)."""
        import torch

        if len(images) != len(texts):
            raise ValueError(f"itm_logits: {len(images)} images but {len(texts)} text lists")
        results: list[np.ndarray] = [np.zeros((0, 2), dtype=np.float32) for _ in range(len(images))]
        if not any(len(t) for t in texts):
            return results
        pixels = self._pixels(images).to(self.device, self.dtype)
        # Vision once per image, a batch of images at a time; then all (image, text) pairs of those
        # images in text batches, each pair attending to its image's cached states.
        for start in range(0, len(images), self.batch_size):
            idx = [i for i in range(start, min(start + self.batch_size, len(images))) if len(texts[i])]
            if not idx:
                continue
            with torch.inference_mode():
                states = self._image_states(pixels[torch.tensor(idx, device=pixels.device)])
                pairs = [(row, t) for row, i in enumerate(idx) for t in texts[i]]
                logits = []
                for chunk in batches(pairs, self.batch_size):
                    rows = torch.tensor([row for row, _ in chunk], device=states.device)
                    logits.append(self._itm_head(states[rows], [t for _, t in chunk]))
            flat = np.concatenate(logits)
            pos = 0
            for i in idx:
                results[i] = flat[pos : pos + len(texts[i])]
                pos += len(texts[i])
        return results

    def _itm_head(self, image_states: Any, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), 2]`` ITM logits (no-match, match) of texts against their image states."""
        import torch

        input_ids, mask = self._tokens(texts)
        image_atts = torch.ones(image_states.shape[:-1], dtype=torch.long, device=image_states.device)
        hidden = self.model.text_encoder(
            input_ids=input_ids,
            attention_mask=mask,
            encoder_hidden_states=image_states,
            encoder_attention_mask=image_atts,
        ).last_hidden_state
        return self.model.itm_head(hidden[:, 0, :]).float().cpu().numpy()


@SCORERS.register("blip-itc")
def blip_itc(rest: str, options: ScorerOptions) -> BlipITCScorer:
    """``blip-itc:NAME_OR_PATH``: BLIP retrieval model, contrastive embeddings."""
    return BlipITCScorer(rest, options)


@SCORERS.register("blip-itm")
def blip_itm(rest: str, options: ScorerOptions) -> BlipITMScorer:
    """``blip-itm:NAME_OR_PATH``: BLIP retrieval model, image-text matching probability."""
    return BlipITMScorer(rest, options)
