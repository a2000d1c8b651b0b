"""The optional generative backend (SPEC Sec. 3.2.1-3.2.4).

Exercised here: Grounding DINO + SAM isolation with tiny randomly initialised ``transformers``
models built from configs (saved and reloaded through ``from_pretrained`` like a user's
checkpoint), the text-to-image source and the inpainting background with stand-ins for the
diffusers pipelines (diffusers is an optional extra), a whole SPEC case rendered through the
generative stages, and the clear error naming the extra when diffusers is missing.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.synth.backgrounds import ProceduralBackground
from spotdiff.synth.generative import (
    COCO_CLASSES,
    GroundingSamIsolator,
    InpaintBackground,
    TextToImageSource,
    require,
)
from spotdiff.synth.objects import ObjectInstance
from spotdiff.synth.pipeline import Pipeline, make_pipeline
from spotdiff.synth.spec import SpecBuilder, measured_label

HAS_DIFFUSERS = importlib.util.find_spec("diffusers") is not None


class FakeDiffusion:
    """Stands in for a diffusers pipeline: same call signature, deterministic pictures."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, prompt, height=64, width=64, generator=None, image=None, mask_image=None, **kw):
        self.calls.append({"prompt": prompt, "height": height, "width": width, "mask": mask_image is not None})
        seed = int(generator.initial_seed()) if generator is not None else 0
        rng = np.random.default_rng(seed)
        arr = np.full((height, width, 3), rng.integers(60, 200, 3), dtype=np.uint8)
        if image is None:  # a "single prominent object": a disc in the middle
            yy, xx = np.mgrid[0:height, 0:width]
            disc = (yy - height / 2) ** 2 + (xx - width / 2) ** 2 < (min(height, width) / 3) ** 2
            arr[disc] = (220, 40, 40)
        return SimpleNamespace(images=[Image.fromarray(arr)])


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
    assert image.size == (48, 48) and t2i.calls[0]["prompt"] == f"a photo of a single and fully visible {inst.category}"
    assert source.generate(inst).tobytes() == image.tobytes()  # deterministic per instance seed

    inpaint = FakeDiffusion()
    bg = InpaintBackground(FakeDiffusion(), inpaint, initial=0.5)
    out, scene = bg.fill(64, np.random.default_rng(1))
    assert out.size == (64, 64) and scene in bg.scenes
    assert inpaint.calls and inpaint.calls[0]["mask"]
    again, _ = bg.fill(64, np.random.default_rng(1))
    assert again.tobytes() == out.tobytes()


@pytest.fixture(scope="module")
def tiny_detector_and_segmenter(tmp_path_factory):
    import torch
    from transformers import (
        BertConfig,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SamConfig,
        SamImageProcessor,
        SamMaskDecoderConfig,
        SamModel,
        SamProcessor,
        SamPromptEncoderConfig,
        SamVisionConfig,
        SwinConfig,
    )

    from spotdiff.testing import tiny_models

    root = tmp_path_factory.mktemp("gen")
    tok = tiny_models.make_tiny_tokenizer(root / "tok")
    torch.manual_seed(0)
    swin = SwinConfig(
        image_size=64,
        patch_size=4,
        embed_dim=8,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        window_size=4,
        out_features=["stage2", "stage3", "stage4"],
    )
    bert = BertConfig(
        vocab_size=len(tok),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=64,
    )
    gd_config = GroundingDinoConfig(
        backbone_config=swin,
        text_config=bert,
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=8,
        num_feature_levels=3,
        encoder_n_points=2,
        decoder_n_points=2,
        max_text_len=32,
        use_timm_backbone=False,
    )
    gd_dir = root / "gdino"
    GroundingDinoForObjectDetection(gd_config).eval().save_pretrained(gd_dir)
    GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(size={"shortest_edge": 64, "longest_edge": 64}), tokenizer=tok
    ).save_pretrained(gd_dir)
    sam_config = SamConfig(
        vision_config=SamVisionConfig(
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            mlp_dim=16,
            image_size=64,
            patch_size=8,
            output_channels=16,
            global_attn_indexes=[0],
            window_size=0,
            num_pos_feats=8,
        ),
        prompt_encoder_config=SamPromptEncoderConfig(
            hidden_size=16, image_size=64, patch_size=8, mask_input_channels=4
        ),
        mask_decoder_config=SamMaskDecoderConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, mlp_dim=16, iou_head_hidden_dim=16
        ),
    )
    sam_dir = root / "sam"
    SamModel(sam_config).eval().save_pretrained(sam_dir)
    SamProcessor(
        image_processor=SamImageProcessor(size={"longest_edge": 64}, pad_size={"height": 64, "width": 64})
    ).save_pretrained(sam_dir)
    return str(gd_dir), str(sam_dir)


def test_grounding_dino_and_sam_isolate_and_feed_the_canvas(tiny_detector_and_segmenter):
    gd_dir, sam_dir = tiny_detector_and_segmenter
    isolator = GroundingSamIsolator(gd_dir, sam_dir)  # loaded with from_pretrained, like real weights
    photo = FakeDiffusion()(prompt="x", height=80, width=96).images[0]
    inst = ObjectInstance("cup", None, "plain", 2, source="text-to-image")
    box, score = isolator.detect(photo, "cup")
    assert 0 <= box[0] < box[2] <= 96 and 0 <= box[1] < box[3] <= 80 and np.isfinite(score)
    mask = isolator.segment(photo, box)
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
