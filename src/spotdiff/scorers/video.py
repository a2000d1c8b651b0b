"""What scorers of videos share: a spec option naming the frame rule, image preprocessing that also takes
clips, and the frame-averaged embedding of an image encoder.

An image-text embedding model scores a clip by the mean of its frames' L2-normalised embeddings,
normalised again: CLIP4Clip's parameter-free ``meanP`` (Luo et al. 2022, ``_mean_pooling_for_similarity_visual``),
the common baseline of video-text benchmarks. The rules: docs/scorers.md, "Frame sampling".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from spotdiff.errors import ConfigError, DataError
from spotdiff.scorers.base import ImagePreprocessor, Prepared
from spotdiff.video.clips import Clip, FrameRule, parse_frame_rule

#: The frame rule of an image model given videos, unless its spec option ``frames`` names another.
DEFAULT_FRAMES = "uniform:8"


def frame_rule_option(
    options: dict[str, Any], default: str, *, sampler: Any = None, sampler_key: str = ""
) -> FrameRule:
    """The frame rule a spec's ``frames`` option names (:func:`~spotdiff.video.clips.parse_frame_rule`), else
    ``default``.

    Args:
        options: the spec's options.
        default: the family's rule.
        sampler: the model's video processor, for ``processor`` rules.
        sampler_key: what identifies its settings.
    """
    return parse_frame_rule(str(options.get("frames", default)), sampler=sampler, sampler_key=sampler_key)


def processor_frame_rule(processor: Any, options: dict[str, Any], model: str) -> FrameRule | None:
    """The frame rule of a chat model (spec option ``frames``, default: its video processor's own rule when its
    config sets ``num_frames`` or ``fps``, else that processor's rule for 8 frames); None when the processor
    takes no videos.

    Args:
        processor: the model's processor.
        options: the spec's options.
        model: the spec, named in errors.
    """
    sampler = getattr(processor, "video_processor", None)
    if sampler is None:
        if "frames" in options:
            raise ConfigError(f"{model}: the model's processor takes no videos, so option frames does not apply")
        return None
    own = any(getattr(sampler, name, None) is not None for name in ("num_frames", "fps"))
    settings = json.dumps(sampler.to_dict(), sort_keys=True, default=str).encode()
    key = f"{type(sampler).__name__}:{hashlib.sha256(settings).hexdigest()[:16]}"
    return frame_rule_option(options, "processor" if own else "processor:8", sampler=sampler, sampler_key=key)


def split_clips(items: Sequence[Any], model: str) -> bool:
    """Whether ``items`` are clips (True) or images (False); a batch holding both is an error."""
    clips = [isinstance(x, Clip) for x in items]
    if any(clips) and not all(clips):
        raise DataError(f"model {model}: one batch holds images and videos; a benchmark's cases hold one kind")
    return bool(clips) and clips[0]


class ClipPixels(ImagePreprocessor):
    """An image preprocessor that also takes clips: a batch of clips becomes its frames' pixels
    ``[sum of T, C, H, W]`` (``pixel_values``) and each clip's frame count (``frames``), for
    :func:`mean_of_frames` after the forward pass; a batch of images passes to ``inner`` as it is.

    Args:
        inner: the image preprocessor.
    """

    def __init__(self, inner: ImagePreprocessor) -> None:
        self.inner = inner

    def _staged(self, items: Sequence[Any], stage: Callable[[Sequence[Any]], Prepared], finish: Any) -> Prepared:
        if not split_clips(items, type(self.inner).__name__):
            return stage(items)
        import torch

        pixels = stage([frame for clip in items for frame in clip.frames])
        counts = torch.tensor([len(clip) for clip in items], dtype=torch.long)
        return Prepared({"pixel_values": pixels.data, "frames": counts}, len(items), finish)

    def __call__(self, items: Sequence[Any]) -> Prepared:
        return self._staged(items, self.inner, None)

    def on_tensors(self) -> bool:
        return self.inner.on_tensors()

    def from_uint8(self, images: Sequence[Any], device: str) -> Prepared:
        return self.inner.from_uint8(images, device)

    def splits(self) -> bool:
        return self.inner.splits()

    def resized(self, items: Sequence[Any]) -> Prepared:
        return self._staged(items, self.inner.resized, self.finish)

    def finish(self, pixels: Any) -> Any:
        if isinstance(pixels, dict):  # a batch of clips: their frames' pixels, and the frame counts as they are
            return {**pixels, "pixel_values": self.inner.finish(pixels["pixel_values"])}
        return self.inner.finish(pixels)


def mean_of_frames(rows: np.ndarray, counts: Any) -> np.ndarray:
    """Each clip's embedding from its frames' rows (consecutive, ``counts`` per clip): the mean of the
    L2-normalised rows, normalised again (CLIP4Clip ``meanP``).

    Args:
        rows: ``[sum of T, D]`` frame embeddings.
        counts: each clip's frame count.

    >>> mean_of_frames(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]]), [2, 1]).astype(float).round(4).tolist()
    [[0.7071, 0.7071], [1.0, 0.0]]
    """
    counts = np.asarray(counts.cpu() if hasattr(counts, "cpu") else counts, dtype=np.int64).reshape(-1)
    if counts.sum() != len(rows) or (counts < 1).any():
        raise ConfigError(f"{len(rows)} frame embeddings for clips of {counts.tolist()} frames")
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True).clip(min=1e-12)
    means = np.add.reduceat(unit, np.concatenate([[0], np.cumsum(counts)[:-1]]), axis=0) / counts[:, None]
    return (means / np.linalg.norm(means, axis=1, keepdims=True).clip(min=1e-12)).astype(np.float32)
