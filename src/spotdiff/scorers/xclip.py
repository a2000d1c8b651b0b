"""``xclip:NAME_OR_PATH``: X-CLIP video-text models (Ni et al., ECCV 2022; transformers' ``XCLIPModel``).

X-CLIP's text embedding depends on the video (its video-specific prompt generator adds the video's frame
features to each text's), so a (video, text) score cannot be a product of embeddings computed apart: the
scorer scores pairs jointly, each batch of videos against the union of their texts in one forward pass.
The score is the cosine of the video embedding and the video-conditioned text embedding
(``logits_per_video`` divided by the logit scale). Frames: X-CLIP's own test sampling, the centre frame of
``num_frames`` equal segments (spec option ``frames`` names another rule of the same number of frames).
Not the X-CLIP of Ma et al. (ACM MM 2022) that VITATECS evaluates, a different model of the same name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spotdiff.errors import ConfigError, DataError
from spotdiff.scorers.base import SCORERS, ImagePreprocessor, PairScorer, Prepared, ScorerOptions
from spotdiff.scorers.factory import parse_spec_options
from spotdiff.scorers.hf_dual import TorchScorerMixin, hf_digests, load_hf
from spotdiff.scorers.video import frame_rule_option, split_clips
from spotdiff.scorers.weights import local_path
from spotdiff.video.clips import FrameRule


class XClipPixels(ImagePreprocessor):
    """X-CLIP's image processor as the CPU stage: clips of T frames -> ``pixel_values`` ``[n, T, C, H, W]``.

    Args:
        processor: the model's image processor (``VideoMAEImageProcessor``).
        model: the spec, named in errors.
    """

    def __init__(self, processor: Any, model: str) -> None:
        self.processor, self.model = processor, model

    def __call__(self, clips: Sequence[Any]) -> Prepared:
        if clips and not split_clips(clips, self.model):
            raise DataError(f"model {self.model} scores videos; an image model (hf-clip:, ...) scores images")
        videos = [[frame.convert("RGB") for frame in clip.frames] for clip in clips]
        return Prepared(self.processor(videos, return_tensors="pt")["pixel_values"], len(clips))


@SCORERS.register("xclip")
class XCLIPScorer(TorchScorerMixin, PairScorer):
    """X-CLIP (Ni et al., ECCV 2022): (video, text) pairs scored jointly, its text embeddings conditioned on the
    video; frames: the centres of ``num_frames`` segments (see the module docstring)."""

    capabilities = frozenset({"image-text"})
    family = "xclip"

    def __init__(self, rest: str, options: ScorerOptions) -> None:
        super().__init__(f"xclip:{rest}", options)
        from transformers import AutoProcessor, XCLIPModel

        self.name_or_path, opts = parse_spec_options(rest, options, ("frames",))
        self._dir = local_path(self.name_or_path, "xclip model")
        self._setup(options)
        self.model = load_hf("xclip", self.name_or_path, XCLIPModel, dtype=self.dtype)
        self.model.to(self.device).eval()
        processor = load_hf("xclip", self.name_or_path, AutoProcessor)
        self.tokenizer, self.image_processor = processor.tokenizer, processor.image_processor
        self.n_frames = int(self.model.config.vision_config.num_frames)
        self.rule = frame_rule_option(opts, f"segments:{self.n_frames}")
        if self.rule.frames != self.n_frames:
            raise ConfigError(
                f"xclip: {self.name_or_path} takes {self.n_frames} frames a video (config num_frames); frame rule "
                f"{self.rule.text} gives {self.rule.frames or 'a variable number'}"
            )
        limit = self.model.config.text_config.max_position_embeddings
        self.max_length = min(limit, getattr(self.tokenizer, "model_max_length", limit) or limit)

    def _digests(self) -> tuple[str | None, str]:
        return hf_digests(self.name_or_path, self._dir, self.model)

    def frame_rule(self) -> FrameRule:
        """X-CLIP's test sampling: the centre frame of ``num_frames`` equal segments (spec option ``frames``)."""
        return self.rule

    def image_preprocessor(self) -> XClipPixels:
        return XClipPixels(self.image_processor, self.spec)

    def score_pairs(self, images: Sequence[Any] | Prepared, texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Each video's texts' cosines with it, the text embeddings conditioned on that video.

        Args:
            images: the clips (or their prepared pixels).
            texts: each clip's texts.
        """
        import torch

        pixels = images if isinstance(images, Prepared) else self.image_preprocessor()(images)
        union = list(dict.fromkeys(t for ts in texts for t in ts))
        column = {t: k for k, t in enumerate(union)}
        tokens = self.tokenizer(union, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with torch.inference_mode():
            out = self.model(
                input_ids=tokens["input_ids"].to(self.device),
                attention_mask=tokens["attention_mask"].to(self.device),
                pixel_values=pixels.to(self.device, self.dtype),
            )
            cosines = (out.logits_per_video.float() / self.model.logit_scale.exp().float()).cpu().numpy()
        return [cosines[b, [column[t] for t in ts]].astype(np.float64) for b, ts in enumerate(texts)]
