"""Null images in the model's normalised input space (the default) or in [0, 1] pixel units
(VisualGPTScore App. 8: mean 1.0, std 0.25): what the model receives in each reading."""

from __future__ import annotations

import numpy as np
import pytest

from spotdiff.errors import ConfigError
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.null_prior import NULL_DEFAULTS, null_images, null_normalization
from spotdiff.testing.tiny_models import make_tiny_image_processor
from spotdiff.testing.tiny_vgpt import make_tiny_blip_captioner


def model_input(processor, refs) -> np.ndarray:
    return processor(images=[r.load() for r in refs], return_tensors="np")["pixel_values"]


def test_normalized_space_gives_the_model_mean_1_std_025_and_pixel_space_saturates():
    processor = make_tiny_image_processor(kind="blip", size=64)  # BLIP/CLIP normalisation constants
    assert NULL_DEFAULTS["space"] == "normalized"
    norm = null_normalization("normalized", processor)
    assert norm == (tuple(processor.image_mean), tuple(processor.image_std))
    x = model_input(processor, null_images(4, size=(64, 64), normalization=norm))
    assert x.mean() == pytest.approx(1.0, abs=0.02) and x.std() == pytest.approx(0.25, abs=0.02)
    pixels = np.stack([np.asarray(r.load()) for r in null_images(4, size=(64, 64), normalization=norm)])
    assert (pixels == 255).mean() < 0.001  # nothing clips in normalised space
    raw = np.stack([np.asarray(r.load()) for r in null_images(4, size=(64, 64), normalization=None)])
    assert (raw == 255).mean() == pytest.approx(0.5, abs=0.03)  # N(1.0, 0.25) in [0, 1] units: half white
    assert null_normalization("pixel", processor) is None
    with pytest.raises(ConfigError, match="normalized, pixel"):
        null_normalization("rgb", processor)
    keys = {r.key for r in null_images(2, normalization=norm)} & {r.key for r in null_images(2)}
    assert not keys  # the two readings never share a cache entry


def test_vgpt_null_space_option(tmp_path):
    path = make_tiny_blip_captioner(tmp_path / "blip")
    normalized = load_scorer(f"vgpt:{path}", ScorerOptions(device="cpu"))
    pixel = load_scorer(f"vgpt:{path}?null_space=pixel&null_n=2", ScorerOptions(device="cpu"))
    assert normalized.null_normalization is not None and pixel.null_normalization is None
    assert normalized.identity_digest() != load_scorer(f"vgpt:{path}?null_space=pixel").identity_digest()
    texts = ["a cat on a table", "two dogs"]
    two = load_scorer(f"vgpt:{path}?null_n=2", ScorerOptions(device="cpu"))
    assert np.abs(two.text_logprob(texts) - pixel.text_logprob(texts)).max() > 1e-6
    with pytest.raises(ConfigError, match="null-image space"):
        load_scorer(f"vgpt:{path}?null_space=rgb")
