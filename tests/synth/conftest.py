"""Fixtures of the synthesis tests: the tiny generative models, built once per test session."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest


@pytest.fixture(scope="session")
def tiny_generative(tmp_path_factory) -> SimpleNamespace:
    """Folders of tiny Stable Diffusion (text-to-image, inpainting), Grounding DINO and SAM models."""
    if importlib.util.find_spec("diffusers") is None:
        pytest.skip("the generate extra (diffusers) is not installed")
    from spotdiff.testing import tiny_diffusion

    root = tmp_path_factory.mktemp("tiny-generative")
    return SimpleNamespace(
        t2i=str(tiny_diffusion.make_tiny_stable_diffusion(root / "sd")),
        inpaint=str(tiny_diffusion.make_tiny_stable_diffusion(root / "sd-inpaint", inpaint=True)),
        detector=str(tiny_diffusion.make_tiny_grounding_dino(root / "gdino")),
        segmenter=str(tiny_diffusion.make_tiny_sam(root / "sam")),
    )
