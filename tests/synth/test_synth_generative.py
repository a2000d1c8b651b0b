"""The optional generative backend (SPEC Sec. 3.2.1-3.2.4).

Exercised here, on tiny random models built from configs by :mod:`spotdiff.testing.tiny_diffusion`
(saved and reloaded through ``from_pretrained`` like a user's checkpoint): the real diffusers
text-to-image and inpainting pipelines, Grounding DINO + SAM isolation, a SPEC set written by
``spotdiff synth spec --backend generative`` and scored by ``spotdiff eval``; and, with stand-ins,
the call signatures, a whole SPEC case checked label by label, and the clear error naming the extra
when diffusers is missing.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.synth.canvas.backgrounds import ProceduralBackground
from spotdiff.synth.canvas.objects import ObjectInstance
from spotdiff.synth.canvas.pipeline import Pipeline, make_pipeline
from spotdiff.synth.canvas.spec import SpecBuilder, measured_label
from spotdiff.synth.diffusion.stages import (
    COCO_CLASSES,
    GroundingSamIsolator,
    InpaintBackground,
    TextToImageSource,
    require,
)

HAS_DIFFUSERS = importlib.util.find_spec("diffusers") is not None


class FakeDiffusion:
    """Stands in for a diffusers pipeline: same call signature (a prompt or a list of prompts, with a
    generator or a list of them, one per image), deterministic pictures."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, prompt, height=64, width=64, generator=None, image=None, mask_image=None, **kw):
        self.calls.append({"prompt": prompt, "height": height, "width": width, "mask": mask_image is not None})
        generators = (
            generator if isinstance(generator, list) else [generator] * (len(prompt) if isinstance(prompt, list) else 1)
        )
        return SimpleNamespace(images=[self._picture(g, height, width, image is None) for g in generators])

    @staticmethod
    def _picture(generator, height, width, single_object):
        rng = np.random.default_rng(int(generator.initial_seed()) if generator is not None else 0)
        arr = np.full((height, width, 3), rng.integers(60, 200, 3), dtype=np.uint8)
        if single_object:  # a "single prominent object": a disc in the middle
            yy, xx = np.mgrid[0:height, 0:width]
            disc = (yy - height / 2) ** 2 + (xx - width / 2) ** 2 < (min(height, width) / 3) ** 2
            arr[disc] = (220, 40, 40)
        return Image.fromarray(arr)


@pytest.mark.skipif(HAS_DIFFUSERS, reason="diffusers is installed")
def test_missing_diffusers_names_the_extra():
    with pytest.raises(ConfigError, match=r"spotdiff\[generate\]"):
        make_pipeline(64, backend="generative")
    with pytest.raises(ConfigError, match="diffusers"):
        require("diffusers", "x")
    with pytest.raises(ConfigError, match="generate"):
        TextToImageSource().pipeline  # noqa: B018 - the lazy load is what is tested


def test_text_to_image_source_and_inpaint_background_with_stand_ins():
    t2i = FakeDiffusion()
    source = TextToImageSource(t2i, size=48)
    rng = np.random.default_rng(0)
    inst = source.sample(rng)
    assert inst.category in COCO_CLASSES and inst.seed % 2 == 0
    image = source.generate(inst)
    assert image.size == (48, 48) and t2i.calls[0]["prompt"] == [
        f"a photo of a single and fully visible {inst.category}"
    ]
    assert source.generate(inst).tobytes() == image.tobytes()  # deterministic per instance seed

    inpaint = FakeDiffusion()
    bg = InpaintBackground(FakeDiffusion(), inpaint, initial=0.5)
    out, scene = bg.fill(64, np.random.default_rng(1))
    assert out.size == (64, 64) and scene in bg.scenes
    assert inpaint.calls and inpaint.calls[0]["mask"]
    again, _ = bg.fill(64, np.random.default_rng(1))
    assert again.tobytes() == out.tobytes()


def test_grounding_dino_and_sam_isolate_and_feed_the_canvas(tiny_generative):
    # loaded with from_pretrained, like real weights
    isolator = GroundingSamIsolator(tiny_generative.detector, tiny_generative.segmenter)
    photo = FakeDiffusion()(prompt="x", height=80, width=96).images[0]
    inst = ObjectInstance("cup", None, "plain", 2, source="text-to-image")
    ((box, score),) = isolator.detect([photo], ["cup"])
    assert 0 <= box[0] < box[2] <= 96 and 0 <= box[1] < box[3] <= 80 and np.isfinite(score)
    (mask,) = isolator.segment([photo], [box])
    assert mask.shape == (80, 96) and mask.dtype == bool
    if not mask.any():
        pytest.skip("the random SAM produced an empty mask for this image")
    cut = isolator.isolate(photo, inst)
    alpha = np.asarray(cut.getchannel("A"))
    assert cut.mode == "RGBA" and set(np.unique(alpha)) <= {0, 255} and alpha.max() == 255

    # the whole SPEC path on generative stages: text-to-image -> GD + SAM -> canvas -> background
    source = TextToImageSource(FakeDiffusion(), classes=("cup", "apple"), size=64)
    p = Pipeline(source, isolator, ProceduralBackground(), 64)
    case = SpecBuilder(p, 0).build("absolute_spatial", 0)
    for label, r in zip(case.labels, case.renders, strict=True):
        assert measured_label("absolute_spatial", r, 64) == label


def test_real_text_to_image_with_the_paper_prompt_and_the_instance_cache(tiny_generative, tmp_path):
    source = TextToImageSource(model=tiny_generative.t2i, size=32, steps=2, cache_dir=tmp_path / "cache")
    inst = ObjectInstance("cat", None, "plain", 4, source="text-to-image")
    image = source.generate(inst)
    assert image.size == (32, 32) and np.asarray(image).std() > 0
    assert type(source.pipeline).__name__ == "StableDiffusionPipeline"
    tokenizer, prompt = source.pipeline.tokenizer, "a photo of a single and fully visible cat"
    ids = tokenizer(prompt).input_ids  # the hand-written merges join letters: fewer tokens than letters
    assert tokenizer.decode(ids, skip_special_tokens=True) == prompt and len(ids) < len(prompt.replace(" ", ""))
    assert len(list((tmp_path / "cache").glob("*.png"))) == 1 and source.cache_hits == 0

    again = TextToImageSource(model=tiny_generative.t2i, size=32, steps=2, cache_dir=tmp_path / "cache")
    assert again.generate(inst).tobytes() == image.tobytes()
    assert again.cache_hits == 1 and again._pipeline is None  # served from disk, no model loaded
    other = ObjectInstance("cat", None, "plain", 6, source="text-to-image")
    assert again.generate(other).tobytes() != image.tobytes()


def test_real_inpainting_expands_the_initial_background(tiny_generative):
    bg = InpaintBackground(t2i_model=tiny_generative.t2i, inpaint_model=tiny_generative.inpaint, steps=2)
    out, scene = bg.fill(64, np.random.default_rng(3))
    assert type(bg.inpaint).__name__ == "StableDiffusionInpaintPipeline"
    arr = np.asarray(out)
    assert out.size == (64, 64) and scene in bg.scenes
    assert arr[:16].std() > 0 and not np.array_equal(arr[:16, :16], np.full((16, 16, 3), 127))
    again, _ = bg.fill(64, np.random.default_rng(3))
    assert again.tobytes() == out.tobytes()  # the same case seed gives the same shared background
