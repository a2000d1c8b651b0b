"""The diffusion engines' models on tiny real folders: a wrong folder is one line before anything loads, the
instance cache follows the weights' content, one text-to-image pipeline serves objects and backgrounds,
and ``synth eqsd`` shows and records only the options it reads (EqBen App. B.5; Hertz et al.)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from spotdiff.commands import main
from spotdiff.synth.canvas.eqben import sd_caption_pairs, sd_pair_space
from spotdiff.synth.canvas.objects import ObjectInstance
from spotdiff.synth.diffusion.p2p import PromptToPrompt
from spotdiff.synth.diffusion.stages import TextToImageSource, make_generative_stages


def _spec(models, out, **override):
    options = {"t2i": models.t2i, "inpaint": models.inpaint, "detector": models.detector, "segmenter": models.segmenter}
    options.update(override)
    argv = ["synth", "spec", "--backend", "generative", "--out", str(out), "--n", "1", "--subsets", "count"]
    argv += ["--no-cls", "--image-size", "64", "--steps", "2", "--object-size", "32", "--device", "cpu", "-q"]
    for name, value in options.items():
        argv += [f"--{name}", value]
    return main(argv)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("t2i", "/no/such/sdxl", "--t2i /no/such/sdxl: path /no/such/sdxl does not exist"),
        ("t2i", "{segmenter}", "not a diffusers text-to-image pipeline (no model_index.json in"),
        (
            "segmenter",
            "{detector}",
            "--segmenter {detector}: expected a SAM model (model_type 'sam'), got grounding-dino",
        ),
        ("detector", "{segmenter}", "expected a Grounding DINO model (model_type 'grounding-dino'), got sam"),
        ("inpaint", "acme/not-cached", "not in the local Hugging Face cache and HF_HUB_OFFLINE is set"),
    ],
)
def test_a_wrong_model_is_one_line_before_anything_loads(
    tiny_generative, tmp_path, capsys, monkeypatch, option, value, message
):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    value = value.format(**vars(tiny_generative))
    out = tmp_path / "out"
    started = time.perf_counter()
    assert _spec(tiny_generative, out, **{option: value}) == 2
    assert time.perf_counter() - started < 5  # refused before any model loads, rendering none
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message.format(**vars(tiny_generative)) in err[0]
    assert "network" not in err[0] and not out.exists()  # nothing claimed, no traceback


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        ((), "its component 'scheduler' (diffusers DDIMScheduler) has no folder scheduler/"),
        (("scheduler", "text_encoder", "tokenizer", "vae", "unet/config.json"),
         "its component 'unet' (diffusers UNet2DConditionModel) has no weights in unet/"),
        (("scheduler", "text_encoder", "tokenizer", "unet", "vae/diffusion_pytorch_model.safetensors"),
         "its component 'vae' (diffusers AutoencoderKL) has no config.json in vae/"),
    ],
)  # fmt: skip
def test_a_pipeline_folder_missing_what_it_loads_is_one_line_before_out_is_claimed(
    tiny_t2i, tmp_path, capsys, keep, message
):
    """Issue 44: ``synth eqsd --t2i DIR`` with only a model_index.json passed the check and ended in a
    diffusers traceback after claiming --out: the check reads what the pipeline will load, its components'
    folders, configs and weights."""
    folder = tmp_path / "sd"
    folder.mkdir()
    shutil.copy(f"{tiny_t2i}/model_index.json", folder)
    for part in keep:
        source, dest = Path(tiny_t2i) / part, folder / part
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, dest)
    out = tmp_path / "out"
    argv = ["synth", "eqsd", "--out", str(out), "--n", "1", "--image-size", "32", "--steps", "2", "-q"]
    assert main([*argv, "--t2i", str(folder), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--t2i {folder}: not a complete diffusers pipeline: {message}" in err[0], err
    assert not out.exists()


def test_the_instance_cache_follows_the_weights_not_the_path(tiny_generative, tmp_path):
    from spotdiff.testing import tiny_diffusion

    folder = tmp_path / "sd"
    shutil.copytree(tiny_generative.t2i, folder)
    cache = tmp_path / "cache"
    cat = ObjectInstance("cat", None, "plain", 4, source="text-to-image")

    def source(model):
        return TextToImageSource(model=model, size=32, steps=2, cache_dir=cache, library_size=2, batch_size=1)

    first = source(str(folder)).generate(cat)
    slash = source(f"{folder}/")  # the same weights named another way: the same photo, from the cache
    assert slash.generate(cat).tobytes() == first.tobytes() and slash.cache_hits == 1 and slash._pipeline is None
    tiny_diffusion.make_tiny_stable_diffusion(folder, seed=7)  # other weights saved into the same folder
    again = source(str(folder))
    photo = again.generate(cat)
    assert again.cache_hits == 0 and again.rendered == 1 and photo.tobytes() != first.tobytes()
    assert len(list(cache.glob("*.png"))) == 2


def test_objects_and_backgrounds_share_one_text_to_image_pipeline(tiny_generative):
    source, _isolator, background = make_generative_stages(
        t2i_model=tiny_generative.t2i,
        inpaint_model=tiny_generative.inpaint,
        detector=tiny_generative.detector,
        segmenter=tiny_generative.segmenter,
        device="cpu",
        object_size=32,
        steps=2,
        library_size=1,
    )
    source.generate(source.sample(np.random.default_rng(0)))
    background.fill(32, np.random.default_rng(0))
    assert source.pipeline is background.text_to_image
    assert sorted(task for task, _model in source.models._loaded) == ["inpainting", "text2image"]
    assert source.weights.startswith("sha256:")


def test_each_eqsd_caption_pair_once_per_run():
    pairs = sd_caption_pairs(0, 100)
    assert len({frozenset((p["caption0"], p["caption1"])) for p in pairs}) == 100
    three = sd_caption_pairs(0, 3)
    assert len({frozenset((p["caption0"], p["caption1"])) for p in three}) == 3
    assert len(sd_caption_pairs(5, sd_pair_space())) == 686  # every pair Fig. 15's templates give
    with pytest.raises(Exception, match=r"Fig\. 15's templates give 686 distinct pairs"):
        sd_caption_pairs(0, 687)


def test_self_attention_injection_for_the_first_steps_only():
    probs = torch.arange(2 * 2 * 4 * 3, dtype=torch.float32).reshape(4, 4, 3)  # batch 2 x heads 2, 4 positions
    controller = PromptToPrompt([0, 1, 2], replace_steps=1, self_replace_steps=2)
    injected = controller.inject_self(probs, batch=2).reshape(2, 2, 4, 3)
    assert torch.equal(injected[1], probs.reshape(2, 2, 4, 3)[0])  # the target takes the source's maps
    controller.step = 2
    assert torch.equal(controller.inject_self(probs, batch=2), probs)  # past the fraction: untouched
    big = torch.zeros(4, 16**2 + 1, 3)
    controller.step = 0
    assert torch.equal(controller.inject_self(big, batch=2), big)  # above 16 x 16 positions: untouched
    assert torch.equal(PromptToPrompt(None, 5, 5).inject_self(probs, batch=2), probs)  # no mapper: plain


def test_eqsd_shows_and_records_only_the_options_it_reads(tiny_generative, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["synth", "eqsd", "--help"])
    shown = capsys.readouterr().out
    for absent in ("--backend", "--objects", "--inpaint", "--detector", "--segmenter", "--library-size", "--scenes"):
        assert absent not in shown
    assert "--self-replace" in shown and "AttentionReplace" in shown
    out = tmp_path / "eqsd"
    argv = ["synth", "eqsd", "--out", str(out), "--n", "3", "--image-size", "32", "--steps", "2", "-q"]
    assert main([*argv, "--t2i", tiny_generative.t2i, "--device", "cpu", "--self-replace", "0.5"]) == 0
    record = json.loads((out / "synth.json").read_text())
    assert sorted(record["options"]) == sorted(
        ["n", "seed", "image_size", "t2i", "steps", "cross_replace", "self_replace", "check", "from_review",
         "review_rule", "device", "dtype"]
    )
    summary = record["summary"]
    assert summary["t2i_weights"].startswith("sha256:") and summary["prompt_to_prompt"]["self_replace"] == 0.5
    assert summary["models"]["dtype"] == "fp32" and summary["models"]["attention"].startswith("prompt-to-prompt")
    pairs = json.loads((out / "all_select.json").read_text())
    assert len({frozenset((p["caption0"], p["caption1"])) for p in pairs}) == 3


def test_half_precision_needs_cuda_and_the_precision_is_recorded(tiny_generative, tmp_path, capsys):
    out = tmp_path / "spec"
    assert _spec(tiny_generative, out, dtype="bf16") == 2  # --device cpu
    assert "--dtype bf16 needs a CUDA device" in capsys.readouterr().err and not out.exists()
    assert _spec(tiny_generative, out) == 0
    models = json.loads((out / "synth.json").read_text())["summary"]["pipeline"]["models"]
    assert models["dtype"] == "fp32" and models["attention"].startswith("sdpa")
