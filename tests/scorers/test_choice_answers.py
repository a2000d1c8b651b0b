"""Answer-based questions of chat VLMs (EqBen Sec. 5.5): the option-likelihood reading equals the
argmax of the model's own next-token log-probabilities, both candidate orders are asked, ties and
unparseable generations give no answer, and single-image models refuse "which image" questions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spotdiff.cases import Case, PILImage
from spotdiff.diagnose.engine import Engine, check_capability
from spotdiff.errors import ConfigError
from spotdiff.protocols import get_protocol
from spotdiff.readers.choice import CHOICE_IMAGE_QUESTION, CHOICE_TEXT_QUESTION, parse_choice
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.tiny_models import tiny_images
from spotdiff.testing.tiny_vlms import make_tiny_vlm, next_token_logprobs

TEXTS = ("a red cup on a table", "a table on a red cup")


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return make_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("qwen"), seed=1)


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return make_tiny_vlm("llava", tmp_path_factory.mktemp("llava"), seed=1)


@pytest.fixture(scope="module")
def images():
    return tiny_images(2, seed=3)


def test_likelihood_reading_equals_direct_next_token_argmax(qwen, images):
    scorer = load_scorer(f"vqa:{qwen}", ScorerOptions(device="cpu", batch_size=3))
    got = scorer.answer_choices(images, TEXTS, "choice")
    assert got.shape == (4, 2, 1)
    for order, o in (((0, 1), 0), ((1, 0), 1)):
        options = "\n".join(f"{letter}. {TEXTS[c]}" for letter, c in zip("AB", order, strict=True))
        for i in range(2):  # text questions: image i, which caption
            lp = next_token_logprobs(scorer.chat, [images[i]], CHOICE_TEXT_QUESTION.format(options=options), "AB")
            assert got[i, o, 0] == order[int(lp.argmax())]
        for j in range(2):  # image questions: caption j, which image (images shown in `order`)
            question = CHOICE_IMAGE_QUESTION.format(text=TEXTS[j], options="A. Image 1\nB. Image 2")
            lp = next_token_logprobs(scorer.chat, [images[c] for c in order], question, "AB")
            assert got[2 + j, o, 0] == order[int(lp.argmax())]
    # the same answers through the engine, from the cache on a second pass
    refs = tuple(PILImage(im, name=f"i{k}") for k, im in enumerate(images))
    case = Case("c", TEXTS, np.eye(2, dtype=bool), refs, {"subset": "s"})
    with Engine(scorer, progress=False) as engine:
        (first,) = engine.case_matrices([case], "choice")
        (again,) = engine.case_matrices([case], "choice")
        assert engine.stats == {"computed": 1, "cached": 1}
    np.testing.assert_array_equal(first, got)
    np.testing.assert_array_equal(again, got)
    outcome = get_protocol("choice").outcomes(case, first)[0]
    assert 0.0 <= outcome["consistency"] <= 1.0 and outcome["no_answer"] == 0.0


def test_single_image_models_refuse_which_image_questions(llava, images):
    scorer = load_scorer(f"vqa:{llava}", ScorerOptions(device="cpu"))
    assert "choice" not in scorer.capabilities and "choice-text" in scorer.capabilities
    with pytest.raises(ConfigError, match="choice-text") as err:
        check_capability(scorer, "choice")
    assert "multi_image=yes" in str(err.value) and "'llava'" in str(err.value)
    with pytest.raises(ConfigError, match="several images"):
        scorer.answer_choices(images, TEXTS, "choice")
    assert scorer.answer_choices(images, TEXTS, "choice-text").shape == (2, 2, 1)
    forced = load_scorer(f"vqa:{llava}?multi_image=yes", ScorerOptions(device="cpu"))
    assert forced.answer_choices(images, TEXTS, "choice").shape == (4, 2, 1)


def test_a_likelihood_tie_is_no_answer(qwen, images):
    scorer = load_scorer(f"vqa:{qwen}", ScorerOptions(device="cpu"))
    a, b = (scorer.chat.tokenizer(x, add_special_tokens=False)["input_ids"][0] for x in "AB")
    with torch.no_grad():
        scorer.chat.model.lm_head.weight[b] = scorer.chat.model.lm_head.weight[a]
    got = scorer.answer_choices(images, TEXTS, "choice")
    assert np.isnan(got).all()
    case = Case("c", TEXTS, np.eye(2, dtype=bool), tuple(PILImage(im) for im in images), {"subset": "s"})
    outcome = get_protocol("choice").outcomes(case, got)[0]
    assert outcome["no_answer"] == 1.0 and outcome["group"] == 0.0 and outcome["consistency"] == 0.0


def test_generated_answers_are_parsed_strictly(qwen, images, monkeypatch):
    scorer = load_scorer(f"vqa:{qwen}?generate=3", ScorerOptions(device="cpu"))
    raw = scorer.chat.generate([images[0]], scorer.chat.render("Which?", 1), 3)
    assert isinstance(raw, str)  # greedy decoding of a random model: almost surely not a letter
    said = iter(["B", " (A) ", "A.", "the first one", "B", "B", "A", "C"])
    monkeypatch.setattr(scorer.chat, "generate", lambda *args: next(said))
    got = scorer.answer_choices(images, TEXTS, "choice")
    assert got.shape == (4, 2, 2)
    # rows: image 0, image 1, text 0, text 1; orders (orig, swap): in the swapped order "A" is candidate 1
    expected = np.array([[1, 1], [0, np.nan], [1, 0], [0, np.nan]])
    np.testing.assert_array_equal(got[..., 1], expected)
    case = Case("c", TEXTS, np.eye(2, dtype=bool), tuple(PILImage(im) for im in images), {"subset": "s"})
    outcome = get_protocol("choice").outcomes(case, got)[0]
    assert outcome["unparsed"] == 2 / 8
    assert outcome["gen_consistency"] == 1 / 4  # only image 0's question gets the same answer twice
    assert outcome["gen_text"] == 0.0 and outcome["gen_group"] == 0.0


@pytest.mark.parametrize(
    ("answer", "index"),
    [("A", 0), ("B", 1), (" B. ", 1), ("(A)", 0), ("A:", 0), ("C", None), ("b", None), ("A or B", None), ("", None)],
)
def test_parse_choice(answer, index):
    assert parse_choice(answer, 2) == index
