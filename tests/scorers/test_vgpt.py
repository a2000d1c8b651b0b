"""VisualGPTScore (``vgpt:``) and text-prior (``lm:``) scorers on tiny models built from configs.

Checks Eq. 2 against a hand computation through the model's own forward pass, that batching and
image reuse change nothing, that the vision tower runs once per unique image, the per-token
log-probabilities, the null-image prior, and the engine integration (alpha = 0 / 1 rankings).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from spotdiff.cases import Case, PILImage
from spotdiff.diagnose.debias import DebiasConfig, debias, debias_variants, log_prior_from_scores, null_images
from spotdiff.diagnose.engine import Engine
from spotdiff.errors import ConfigError
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.tiny_models import make_tiny_blip_retrieval, tiny_images
from spotdiff.testing.tiny_vgpt import make_tiny_blip2, make_tiny_blip_captioner, make_tiny_causal_lm

TEXTS = ["a cat on a table", "two dogs", "red car", "the sky is blue", "a man riding a horse"]


@pytest.fixture(scope="module")
def blip_dir(tmp_path_factory):
    return make_tiny_blip_captioner(tmp_path_factory.mktemp("blip-cap"))


@pytest.fixture(scope="module")
def blip(blip_dir):
    return load_scorer(f"vgpt:{blip_dir}", ScorerOptions(device="cpu", batch_size=4))


@pytest.fixture(scope="module")
def images():
    return tiny_images(4)


def hand_blip_score(scorer, image, text: str, prompt: str = "") -> float:
    """Eq. 2 through BlipForConditionalGeneration.forward: mean log P of text tokens and [SEP]."""
    model, tok = scorer.model, scorer.tokenizer
    bos = model.config.text_config.bos_token_id
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"] if prompt else []
    text_ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.sep_token_id]
    ids = torch.tensor([[bos, *prompt_ids, *text_ids]])
    pixels = scorer.processor(images=[image], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        logits = model(pixel_values=pixels, input_ids=ids).logits[0]
    logp = torch.log_softmax(logits, dim=-1)
    start = 1 + len(prompt_ids)
    terms = [logp[k - 1, ids[0, k]].item() for k in range(start, ids.shape[1])]
    assert len(terms) == len(text_ids)
    return sum(terms) / len(terms)


def test_vgpt_score_is_the_mean_token_logprob(blip, images):
    got = blip.score_pairs(images[:2], [TEXTS[:3], TEXTS[2:4]])
    for i, texts in enumerate([TEXTS[:3], TEXTS[2:4]]):
        for j, text in enumerate(texts):
            assert got[i][j] == pytest.approx(hand_blip_score(blip, images[i], text), abs=1e-5)
    assert blip.capabilities == {"image-text", "text-prior"}


def test_vgpt_prompt_conditions_but_is_not_scored(blip_dir, images):
    scorer = load_scorer(f"vgpt:{blip_dir}?prompt=a%20picture%20of%20", ScorerOptions(device="cpu"))
    assert scorer.prompt == "a picture of "
    ts = scorer.token_logprobs(images[0], "two dogs")
    assert ts.tokens == ("two", "dogs", "[SEP]")
    want = hand_blip_score(scorer, images[0], "two dogs", prompt="a picture of ")
    assert ts.score == pytest.approx(want, abs=1e-5)
    plain = load_scorer(f"vgpt:{blip_dir}", ScorerOptions(device="cpu"))
    assert plain.token_logprobs(images[0], "two dogs").score != pytest.approx(ts.score, abs=1e-6)


def test_vgpt_token_logprobs(blip, images):
    ts = blip.token_logprobs(PILImage(images[1]), "a cat on a table")
    assert ts.tokens == ("a", "cat", "on", "a", "table", "[SEP]")
    assert ts.logprobs.shape == (6,)
    assert np.all(ts.logprobs < 0)
    assert ts.score == pytest.approx(float(ts.logprobs.mean()))
    assert blip.score_pairs([images[1]], [["a cat on a table"]])[0][0] == pytest.approx(ts.score, abs=1e-6)


def test_vgpt_batching_and_image_reuse_match_one_by_one(blip_dir, images):
    batched = load_scorer(f"vgpt:{blip_dir}", ScorerOptions(device="cpu", batch_size=3))
    single = load_scorer(f"vgpt:{blip_dir}", ScorerOptions(device="cpu", batch_size=1))
    texts = [TEXTS, TEXTS[1:3], TEXTS[::-1], TEXTS[:1]]
    got = batched.score_pairs(images, texts)
    for i, ts in enumerate(texts):
        for j, t in enumerate(ts):
            one = single.score_pairs([images[i]], [[t]])[0][0]
            assert got[i][j] == pytest.approx(one, abs=1e-5)
    # images do change the score (the tiny vision tower is not degenerate)
    assert not np.allclose(got[0][:1], got[2][-1:], atol=1e-7)


def test_vgpt_runs_vision_once_per_unique_image_through_the_engine(blip, images):
    seen: list[int] = []
    handle = blip.model.vision_model.register_forward_hook(lambda m, i, o: seen.append(o.last_hidden_state.shape[0]))
    try:
        refs = [PILImage(im, name=f"img{k}") for k, im in enumerate(images[:3])]
        cases = [
            Case(id=f"c{k}", texts=(TEXTS[k], TEXTS[k + 1], TEXTS[k + 2]), truth=np.array([[True, False, False]]),
                 images=(refs[k % 3],), tags={"subset": "s"})
            for k in range(3)
        ] + [
            Case(id="w", texts=(TEXTS[0], TEXTS[1]), truth=np.eye(2, dtype=bool), images=(refs[0], refs[1]),
                 tags={"subset": "s"}),
        ]  # fmt: skip
        engine = Engine(blip, progress=False)
        mats = list(engine.case_matrices(cases, "image-text"))
    finally:
        handle.remove()
    assert sum(seen) == 3  # three unique images, each encoded once
    assert mats[3].shape == (2, 2)
    assert mats[3][0, 0] == pytest.approx(mats[0][0, 0])  # same (image, text) pair, same number
    direct = blip.score_pairs([images[0]], [[TEXTS[0], TEXTS[1]]])[0]
    np.testing.assert_allclose(mats[3][0], direct, atol=1e-6)


def test_vgpt_null_prior_is_deterministic_and_follows_eq6(blip):
    a = blip.text_logprob(TEXTS[:3])
    b = blip.text_logprob(TEXTS[:3])
    np.testing.assert_array_equal(a, b)
    assert blip.null["space"] == "normalized" and blip.null_normalization is not None
    refs = null_images(
        blip.null["n"], seed=blip.null["seed"], mean=1.0, std=0.25, size=blip.image_size,
        normalization=blip.null_normalization,
    )  # fmt: skip
    rows = np.stack(blip.score_pairs([r.load() for r in refs], [TEXTS[:3]] * len(refs)))
    np.testing.assert_allclose(a, log_prior_from_scores(rows), atol=1e-9)
    # the engine's text-prior need goes through text_logprob
    engine = Engine(blip, progress=False)
    np.testing.assert_allclose(engine.text_prior(TEXTS[:3]), a, atol=1e-6)


def test_vgpt_spec_errors(blip_dir, tmp_path):
    with pytest.raises(ConfigError, match="unknown option"):
        load_scorer(f"vgpt:{blip_dir}?temperature=2")
    with pytest.raises(ConfigError):
        load_scorer(f"vgpt:{tmp_path / 'missing'}")
    itm = make_tiny_blip_retrieval(tmp_path / "itm")
    with pytest.raises(ConfigError, match="captioning decoder"):
        load_scorer(f"vgpt:{itm}")


def test_vgpt_backends_and_a_batch_size_set_after_loading(blip_dir, tmp_path, images):
    """BLIP's captioner gets the BLIP backend, BLIP-2 (no chat template) the generic one; both read the
    scorer's batch size at each call (``--batch-size auto`` sets it after loading) with equal scores."""
    from spotdiff.scorers.vgpt import BlipBackend, GenericBackend

    scorer = load_scorer(f"vgpt:{blip_dir}", ScorerOptions(device="cpu", batch_size=8))
    blip2 = load_scorer(f"vgpt:{make_tiny_blip2(tmp_path / 'blip2')}", ScorerOptions(device="cpu", batch_size=8))
    assert isinstance(scorer.scoring, BlipBackend) and scorer.backend == "blip"
    assert isinstance(blip2.scoring, GenericBackend) and blip2.backend == "generic" and not blip2.scoring.is_seq2seq
    assert "backend" not in scorer.identity() and scorer.identity()["class"] == "BlipForConditionalGeneration"
    calls: list[int] = []
    for s, decoder in ((scorer, scorer.model.text_decoder), (blip2, blip2.model.language_model)):
        whole = s.score_pairs(images[:2], [TEXTS[:3], TEXTS[1:4]])
        calls.clear()
        handle = decoder.register_forward_hook(lambda m, i, kw, o: calls.append(1), with_kwargs=True)
        try:
            s.options.batch_size = 2
            split = s.score_pairs(images[:2], [TEXTS[:3], TEXTS[1:4]])
        finally:
            handle.remove()
            s.options.batch_size = 8
        assert len(calls) == 3  # six pairs, two at a time
        for a, b in zip(whole, split, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_debias_through_engine_alpha0_raw_alpha1_pmi(blip, images):
    refs = [PILImage(im, name=f"img{k}") for k, im in enumerate(images)]
    cases = [
        Case(id=f"w{k}", texts=(TEXTS[k], TEXTS[k + 1]), truth=np.eye(2, dtype=bool),
             images=(refs[k], refs[(k + 1) % 4]), tags={"subset": "s"})
        for k in range(4)
    ]  # fmt: skip
    engine = Engine(blip, progress=False)
    config = DebiasConfig(prior="null", n_null=3, null_seed=7, alpha="tune", n_splits=3)
    res = debias_variants(engine, cases, "group", config)
    raw = list(engine.case_matrices(cases, "image-text"))
    for k, m in enumerate(raw):
        np.testing.assert_allclose(res.variants["raw"][k], m)
        q = res.log_priors[k]
        np.testing.assert_array_equal(np.argsort(debias(m, q, 0.0), axis=1), np.argsort(m, axis=1))
        pmi = m - q[None, :]
        np.testing.assert_allclose(res.variants["alpha=1"][k], pmi)
        np.testing.assert_array_equal(np.argsort(res.variants["alpha=1"][k], axis=1), np.argsort(pmi, axis=1))
    # null estimate: deterministic for the seed, different for another seed
    again = debias_variants(engine, cases, "group", config)
    for q1, q2 in zip(res.log_priors, again.log_priors, strict=True):
        np.testing.assert_array_equal(q1, q2)
    other = debias_variants(engine, cases, "group", DebiasConfig(prior="null", n_null=3, null_seed=8, alpha=0.5))
    assert np.abs(res.log_priors[0] - other.log_priors[0]).max() > 1e-7
    assert set(other.variants) == {"raw", "alpha=1", "blind", "alpha=0.5"}
    assert res.prior_info["size"] == [32, 32]
    curve = res.curve_data()
    assert len(curve["alphas"]) == 1001 and curve["cross_validation"]["n_splits"] == 3


# --------------------------------------------------------------------------- generic (BLIP-2)
@pytest.fixture(scope="module")
def blip2(tmp_path_factory):
    path = make_tiny_blip2(tmp_path_factory.mktemp("blip2"))
    return load_scorer(f"vgpt:{path}", ScorerOptions(device="cpu", batch_size=3))


def hand_blip2_score(scorer, image, text: str) -> float:
    inputs = scorer.processor(images=[image], text=[text], return_tensors="pt")
    with torch.no_grad():
        logits = scorer.model(**inputs).logits[0]
    ids = inputs["input_ids"][0]
    logits = logits[-len(ids) :]
    n = len(scorer.tokenizer(text, add_special_tokens=True)["input_ids"]) - 1  # drop [CLS]
    logp = torch.log_softmax(logits, dim=-1)
    terms = [logp[k - 1, ids[k]].item() for k in range(len(ids) - n, len(ids))]
    return sum(terms) / len(terms)


def test_generic_blip2_matches_hand_computation_and_reuses_vision(blip2, images):
    texts = [TEXTS[:3], TEXTS[1:2], TEXTS[2:5]]
    calls: list[int] = []
    tower = blip2.model.vision_model if hasattr(blip2.model, "vision_model") else blip2.model.model.vision_model
    handle = tower.register_forward_hook(lambda m, i, o: calls.append(o[0].shape[0]))
    try:
        got = blip2.score_pairs(images[:3], texts)
    finally:
        handle.remove()
    assert sum(calls) == 3  # once per unique image although 7 pairs in 3 batches
    for i, ts in enumerate(texts):
        for j, t in enumerate(ts):
            assert got[i][j] == pytest.approx(hand_blip2_score(blip2, images[i], t), abs=1e-5)
    ts = blip2.token_logprobs(images[0], TEXTS[0])
    assert ts.tokens == ("a", "cat", "on", "a", "table", "[SEP]")


# --------------------------------------------------------------------------- lm:
@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    return make_tiny_causal_lm(tmp_path_factory.mktemp("lm"))


def test_lm_text_logprob_matches_hand_computation(lm_dir):
    scorer = load_scorer(f"lm:{lm_dir}", ScorerOptions(device="cpu", batch_size=2))
    assert scorer.capabilities == {"text-prior"}
    got = scorer.text_logprob(TEXTS)
    tok = scorer.tokenizer
    for k, text in enumerate(TEXTS):
        ids = torch.tensor([tok(text)["input_ids"]])  # [CLS] ... [SEP]
        with torch.no_grad():
            logp = torch.log_softmax(scorer.model(input_ids=ids).logits[0], dim=-1)
        terms = [logp[i - 1, ids[0, i]].item() for i in range(1, ids.shape[1])]
        assert got[k] == pytest.approx(sum(terms) / len(terms), abs=1e-5)
        ts = scorer.token_logprobs(text)
        assert ts.tokens[-1] == "[SEP]" and ts.logprobs.size == len(terms)
    total = load_scorer(f"lm:{lm_dir}?normalize=sum", ScorerOptions(device="cpu")).text_logprob(TEXTS[:2])
    lengths = [len(tok(t)["input_ids"]) - 1 for t in TEXTS[:2]]
    np.testing.assert_allclose(total, got[:2] * np.array(lengths), atol=1e-4)
    engine = Engine(scorer, progress=False)
    case = Case(id="c", texts=tuple(TEXTS[:2]), truth=np.array([[True, False]]), tags={"subset": "s"})
    (mat,) = list(engine.case_matrices([case], "text-prior"))
    np.testing.assert_allclose(mat[0], got[:2], atol=1e-6)
    assert math.isfinite(float(mat.sum()))


def test_lm_bad_options(lm_dir):
    with pytest.raises(ConfigError):
        load_scorer(f"lm:{lm_dir}?normalize=median")
