"""VQAScore (``vqa:``) and the chat backend of ``vgpt:`` on tiny random chat VLMs of three
architectures (LLaVA, Qwen2-VL, Idefics3), built from configs with SmolLM2's real tokenizer, saved,
and loaded by path like a user's checkpoint.

Every score is checked against a direct computation: the processor's own
``apply_chat_template(..., tokenize=True)`` with the images, the answer's tokens appended, one
forward pass of the model. Prefix reuse (KV cache per image) must give the same numbers as whole
sequences; NaN logits must give NaN scores, a warning and failures, not a crash.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from spotdiff.cases import Case, PILImage
from spotdiff.diagnose.engine import Engine
from spotdiff.errors import ConfigError
from spotdiff.protocols import get_protocol
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers import chat as chat_module
from spotdiff.scorers.vqa import DEFAULT_ANSWER, DEFAULT_QUESTION
from spotdiff.testing.tiny_models import tiny_images
from spotdiff.testing.tiny_vlms import TINY_VLMS, make_tiny_vlm

TEXTS = ["a cat on a table", "two dogs", "red car", "the sky is blue", "a man riding a horse"]


@pytest.fixture(scope="module")
def vlm_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlms")
    return {arch: make_tiny_vlm(arch, root / arch) for arch in TINY_VLMS}


@pytest.fixture(scope="module")
def images():
    return tiny_images(3)


def direct_logprobs(model, processor, images, question: str, answer_ids, system: str | None = None) -> np.ndarray:
    """log P(answer_k | chat prompt, answer_<k) through the processor's own chat-template
    tokenisation and one forward pass of the model."""
    content = [{"type": "image", "image": im} for im in images] + [{"type": "text", "text": question}]
    messages = [{"role": "user", "content": content}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": [{"type": "text", "text": system}]})
    enc = processor.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    n = enc["input_ids"].shape[1]
    answer = torch.tensor([list(answer_ids)])
    inputs = dict(enc)
    inputs["input_ids"] = torch.cat([enc["input_ids"], answer], dim=1)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    if "mm_token_type_ids" in enc:  # text tokens are type 0
        inputs["mm_token_type_ids"] = torch.cat([enc["mm_token_type_ids"], torch.zeros_like(answer)], dim=1)
    with torch.no_grad():
        logp = torch.log_softmax(model(**inputs).logits[0].float(), dim=-1)
    return np.array([logp[n - 1 + j, t].item() for j, t in enumerate(answer_ids)])


@pytest.mark.parametrize("arch", TINY_VLMS)
def test_vqascore_equals_direct_forward(arch, vlm_dirs, images):
    scorer = load_scorer(f"vqa:{vlm_dirs[arch]}", ScorerOptions(device="cpu", batch_size=2))
    assert scorer.question == DEFAULT_QUESTION == 'Does this figure show "{}"? Please answer yes or no.'
    assert scorer.answer == DEFAULT_ANSWER == "Yes"
    texts = [TEXTS[:3], TEXTS[3:], TEXTS[1:2]]
    got = scorer.score_pairs(images, texts)
    yes = scorer.chat.tokenizer("Yes", add_special_tokens=False)["input_ids"]
    for i, ts in enumerate(texts):
        for j, t in enumerate(ts):
            lp = direct_logprobs(scorer.chat.model, scorer.chat.processor, [images[i]], DEFAULT_QUESTION.format(t), yes)
            want = float(np.exp(lp.mean()))
            assert 0.0 < got[i][j] < 1.0
            assert np.log(got[i][j]) == pytest.approx(np.log(want), abs=1e-4)
    # the image matters, and so does the text
    assert abs(np.log(got[0][1]) - np.log(got[2][0])) > 1e-3
    assert np.ptp(np.log(got[0])) > 1e-3


@pytest.mark.parametrize("arch", TINY_VLMS)
def test_templates_system_and_multi_token_answers(arch, vlm_dirs, images):
    spec = f"vqa:{vlm_dirs[arch]}?question=Is%20it%20%22{{}}%22%3F&answer=Yes%20it%20is&system=Be%20brief."
    scorer = load_scorer(spec, ScorerOptions(device="cpu", batch_size=3))
    assert (scorer.question, scorer.answer, scorer.system) == ('Is it "{}"?', "Yes it is", "Be brief.")
    answer = scorer.chat.tokenizer("Yes it is", add_special_tokens=False)["input_ids"]
    assert len(answer) == 3
    got = scorer.score_pairs(images[:2], [TEXTS[:2], TEXTS[2:4]])
    for i, ts in enumerate([TEXTS[:2], TEXTS[2:4]]):
        for j, t in enumerate(ts):
            lp = direct_logprobs(
                scorer.chat.model, scorer.chat.processor, [images[i]], f'Is it "{t}"?', answer, system="Be brief."
            )
            assert np.log(got[i][j]) == pytest.approx(lp.mean(), abs=1e-4)  # exp(mean log P), t2v_metrics


def test_identity_holds_every_template(vlm_dirs):
    path = vlm_dirs["idefics3"]
    digests = {
        load_scorer(f"vqa:{path}{option}", ScorerOptions(device="cpu")).identity_digest()
        for option in ("", "?question=Is%20it%20{}%3F", "?answer=yes", "?system=Hi.", "?generate=3")
    }
    assert len(digests) == 5  # every template and reading option is part of the cache key
    default = load_scorer(f"vqa:{path}", ScorerOptions(device="cpu"))
    no_reuse = load_scorer(f"vqa:{path}?reuse=no", ScorerOptions(device="cpu"))
    assert no_reuse.identity_digest() == default.identity_digest()  # an execution strategy, same scores
    assert default.identity()["question"] == DEFAULT_QUESTION and default.identity()["weights"]


@pytest.mark.parametrize("arch", TINY_VLMS)
def test_prefix_reuse_equals_whole_sequences(arch, vlm_dirs, images):
    spec = f"vqa:{vlm_dirs[arch]}?answer=Yes%2C%20it%20does"
    reuse = load_scorer(spec, ScorerOptions(device="cpu", batch_size=2))
    whole = load_scorer(spec + "&reuse=no", ScorerOptions(device="cpu", batch_size=4))
    texts = [TEXTS, TEXTS[::-1][:3], TEXTS[2:3]]
    a = reuse.score_pairs(images, texts)
    b = whole.score_pairs(images, texts)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(np.log(x), np.log(y), atol=1e-4, rtol=0)
    # with reuse, the vision tower sees each image once however many texts it has (2 images per batch)
    tower = reuse.chat.core.visual if arch == "qwen2_vl" else (
        reuse.chat.core.vision_model if arch == "idefics3" else reuse.chat.core.vision_tower
    )
    seen: list[int] = []

    def count(module, args, kwargs):
        if arch == "qwen2_vl":  # patches of all images concatenated; one grid row per image
            seen.append(int(kwargs.get("grid_thw", args[1] if len(args) > 1 else None).shape[0]))
        else:
            seen.append(int(kwargs.get("pixel_values", args[0] if args else None).shape[0]))

    handle = tower.register_forward_pre_hook(count, with_kwargs=True)
    try:
        reuse.score_pairs(images, texts)
    finally:
        handle.remove()
    assert seen == [2, 1]


class CountedProcessor:
    """A chat VLM's processor that records how many prompts each call processes; everything else passes through."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []

    def __call__(self, *args, **kwargs):
        self.calls.append(len(kwargs["text"]))
        return self.inner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def sized_images(images):
    """Four images of four sizes and shapes (Qwen2-VL: 16, 8, 12 and 12 image tokens)."""
    return [images[0], images[1].resize((64, 40)), images[2].resize((24, 56)), images[0].resize((40, 24))]


@pytest.mark.parametrize("arch", TINY_VLMS)
def test_prefix_reuse_processes_a_chunk_of_images_in_one_call(arch, vlm_dirs, images):
    """The prefixes of a chunk's images go through the processor in one call, split per image after it; each
    score still equals the processor's own single-image reference and the whole-sequence path."""
    spec = f"vqa:{vlm_dirs[arch]}"
    reuse = load_scorer(spec, ScorerOptions(device="cpu", batch_size=4))
    counted = CountedProcessor(reuse.chat.processor)
    reuse.chat.processor = counted
    sized, texts = sized_images(images), [TEXTS[:2], TEXTS[2:4], TEXTS[1:4], TEXTS[3:5]]
    got = reuse.score_pairs(sized, texts)
    assert counted.calls == [4]  # not one call per image
    yes = reuse.chat.answer_ids("Yes")
    for i, ts in enumerate(texts):
        for j, t in enumerate(ts):
            lp = direct_logprobs(reuse.chat.model, counted.inner, [sized[i]], DEFAULT_QUESTION.format(t), yes)
            assert np.log(got[i][j]) == pytest.approx(lp.mean(), abs=1e-4)
    whole = load_scorer(spec + "?reuse=no", ScorerOptions(device="cpu", batch_size=4))
    for x, y in zip(got, whole.score_pairs(sized, texts), strict=True):
        np.testing.assert_allclose(np.log(x), np.log(y), atol=1e-4, rtol=0)


def test_prefix_reuse_processes_prompts_apart_when_a_batch_cannot_be_split(vlm_dirs, images, monkeypatch):
    """A processor whose batched outputs are of a layout not known to split: its first batch tells, then each
    prompt is processed alone, with the same scores."""
    spec = f"vqa:{vlm_dirs['qwen2_vl']}"
    texts = [TEXTS[:2], TEXTS[2:4], TEXTS[1:4], TEXTS[3:5]]
    want = load_scorer(spec, ScorerOptions(device="cpu", batch_size=2)).score_pairs(sized_images(images), texts)
    reuse = load_scorer(spec, ScorerOptions(device="cpu", batch_size=2))
    counted = CountedProcessor(reuse.chat.processor)
    reuse.chat.processor = counted
    monkeypatch.setattr(chat_module, "_split_rows", lambda enc, counts: None)
    got = reuse.score_pairs(sized_images(images), texts)
    assert counted.calls == [2, 1, 1, 1, 1]  # the first chunk's batched call, then one per prompt
    for x, y in zip(got, want, strict=True):
        np.testing.assert_allclose(np.log(x), np.log(y), atol=1e-6, rtol=0)


def test_split_rows_cuts_a_batch_per_prompt():
    """Per-token tensors by row (cut to the prefix), per-image tensors by each prompt's images, Qwen-VL's
    concatenated patches by the grid; a tensor of another layout, or no attention mask, cannot be split."""
    ids = torch.arange(12).reshape(3, 4)
    grid = torch.tensor([[1, 2, 2], [1, 2, 4], [1, 1, 2], [1, 2, 2]])  # 4, 8, 2 and 4 patches
    enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": torch.arange(18)[:, None],
           "image_grid_thw": grid, "image_sizes": torch.arange(4)}  # fmt: skip
    batch = chat_module._split_rows(enc, [1, 2, 1])
    rows = [batch.rows(r, r + 1, cut=3) for r in range(3)]
    assert [r["input_ids"].tolist() for r in rows] == [[[0, 1, 2]], [[4, 5, 6]], [[8, 9, 10]]]
    assert [r["image_sizes"].tolist() for r in rows] == [[0], [1, 2], [3]]
    assert [r["image_grid_thw"].shape[0] for r in rows] == [1, 2, 1]
    assert [r["pixel_values"][:, 0].tolist() for r in rows] == [[0, 1, 2, 3], list(range(4, 14)), [14, 15, 16, 17]]
    both = batch.rows(1, 3, cut=4)  # two consecutive prompts: views of the batch, not copies
    assert both["input_ids"].tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]] and both["image_sizes"].tolist() == [1, 2, 3]
    assert both["pixel_values"].data_ptr() == enc["pixel_values"][4].data_ptr() and len(both["pixel_values"]) == 14
    assert chat_module._split_rows({**enc, "extra": torch.zeros(5)}, [1, 2, 1]) is None
    assert chat_module._split_rows({"input_ids": ids, "pixel_values": torch.zeros(4, 2)}, [1, 2, 1]) is None


def test_vqa_through_the_engine_and_protocols(vlm_dirs, images):
    scorer = load_scorer(f"vqa:{vlm_dirs['qwen2_vl']}", ScorerOptions(device="cpu", batch_size=4))
    assert {"image-text", "match-prob", "choice", "choice-text", "answer-prob"} == set(scorer.capabilities)
    refs = [PILImage(im, name=f"i{k}") for k, im in enumerate(images)]
    case = Case("w", (TEXTS[0], TEXTS[1]), np.eye(2, dtype=bool), (refs[0], refs[1]), {"subset": "s"})
    valse = Case("v", (TEXTS[2], TEXTS[3]), np.array([[True, False]]), (refs[2],), {"subset": "s"})
    with Engine(scorer, progress=False) as engine:
        (mat,) = engine.case_matrices([case], "image-text")
        (prob,) = engine.case_matrices([valse], "match-prob")
    np.testing.assert_allclose(mat, np.stack(scorer.score_pairs(images[:2], [list(case.texts)] * 2)), rtol=1e-6)
    assert ((prob >= 0) & (prob <= 1)).all()
    outcome = get_protocol("valse-prob").outcomes(valse, prob)[0]
    assert outcome["p_f"] == 1.0 and outcome["p_c"] == 0.0  # tiny random model: P(Yes) << 0.5 for both


def test_nan_logits_give_nan_scores_a_warning_and_failures(vlm_dirs, images):
    scorer = load_scorer(f"vqa:{vlm_dirs['llava']}", ScorerOptions(device="cpu"))
    head = scorer.chat.model.lm_head
    with torch.no_grad():
        head.weight[0, 0] = float("nan")  # one NaN weight: every logit of token 0 is NaN, softmax too
    with pytest.warns(RuntimeWarning, match="NaN"):
        got = scorer.score_pairs(images[:2], [TEXTS[:2], TEXTS[:2]])
    assert np.isnan(np.concatenate(got)).all()
    assert scorer.nans.total == 4
    refs = tuple(PILImage(im) for im in images[:2])
    case = Case("w", (TEXTS[0], TEXTS[1]), np.eye(2, dtype=bool), refs, {"subset": "s"})
    assert get_protocol("group").outcomes(case, np.stack(got)) == [{"text": 0.0, "image": 0.0, "group": 0.0}]
    reuse_free = load_scorer(f"vqa:{vlm_dirs['llava']}?reuse=no", ScorerOptions(device="cpu"))
    with torch.no_grad():
        reuse_free.chat.model.lm_head.weight[0, 0] = float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(reuse_free.score_pairs(images[:1], [TEXTS[:1]])[0]).all()


def test_spec_errors(vlm_dirs, tmp_path):
    path = vlm_dirs["idefics3"]
    with pytest.raises(ConfigError, match="unknown option"):
        load_scorer(f"vqa:{path}?temperature=0")
    with pytest.raises(ConfigError, match="no \\{\\} for the text"):
        load_scorer(f"vqa:{path}?question=Is%20it%20true%3F")
    with pytest.raises(ConfigError, match="reuse"):
        load_scorer(f"vqa:{path}?reuse=maybe")
    with pytest.raises(ConfigError, match="does not exist"):
        load_scorer(f"vqa:{tmp_path / 'missing'}")


# ------------------------------------------------------------------------------- vgpt: chat backend
@pytest.mark.parametrize("arch", ["qwen2_vl", "idefics3"])
def test_vgpt_chat_backend_scores_the_caption_as_the_answer(arch, vlm_dirs, images):
    scorer = load_scorer(f"vgpt:{vlm_dirs[arch]}?system=Be%20brief.", ScorerOptions(device="cpu", batch_size=2))
    assert scorer.backend == "chat"
    texts = [TEXTS[:3], TEXTS[3:]]
    got = scorer.score_pairs(images[:2], texts)
    for i, ts in enumerate(texts):
        for j, t in enumerate(ts):
            ids = scorer.tokenizer(t, add_special_tokens=False)["input_ids"]
            lp = direct_logprobs(
                scorer.model, scorer.processor, [images[i]], "Describe this image in one sentence.", ids, "Be brief."
            )
            assert got[i][j] == pytest.approx(lp.mean(), abs=1e-4)  # Eq. 2: mean token log-probability
    ts = scorer.token_logprobs(images[0], "two dogs")
    ids = scorer.tokenizer("two dogs", add_special_tokens=False)["input_ids"]
    assert ts.tokens == tuple(scorer.tokenizer.convert_ids_to_tokens(ids))
    assert ts.score == pytest.approx(scorer.score_pairs(images[:1], [["two dogs"]])[0][0], abs=1e-6)
    prior = scorer.text_logprob(TEXTS[:2])  # null images (Eq. 6): the text-prior need still works
    assert prior.shape == (2,) and np.isfinite(prior).all()
    other = load_scorer(f"vgpt:{vlm_dirs[arch]}?prompt=What%20is%20shown%3F", ScorerOptions(device="cpu"))
    assert other.identity_digest() != scorer.identity_digest()
    with pytest.raises(ConfigError, match="assistant's answer"):
        load_scorer(f"vgpt:{vlm_dirs[arch]}?prompt=a%20photo%20of%20{{text}}")
