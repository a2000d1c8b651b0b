"""VisMin's and ColorSwap's MLLM answer paths (protocols ``mllm`` and ``mllm-text``): the authors' questions
(VisMin's TaskPrompts, ColorSwap's vlm_results prompts), their readers of generated answers equal to
transcriptions of VisMin's ``is_match_with_label`` and ColorSwap's ``vlm_eval.py`` on real and random
answers (an answer naming both options or none is no answer, as ColorSwap counts it), the text / image /
group scores equal to transcriptions of ``compute_mllm_score_itg`` and ``vlm_eval.py`` on answer tables,
and the path served by ``vqa:`` (the model's own label log-probabilities) and by ``api:`` (equal to it,
re-run from the cache without a request)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import ANY_OPTION, PROMPT_STYLES
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.protocols import get_protocol
from spotdiff.protocols.choice import right
from spotdiff.readers import CHOICE_STYLES
from spotdiff.readers.choice import ChoiceQuestion, choice_questions, read_choice
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.formats import write_vismin
from spotdiff.testing.hub_repos import colorswap_repo
from spotdiff.testing.openai_server import ChatCompletionsServer
from spotdiff.testing.tiny_vlms import make_tiny_vlm, next_token_logprobs


# ------------------------------------------------------------------ VisMin's code, transcribed
def _vismin_normalize_model_prediction(text: str):
    """evals/metrics/itm.py normalize_model_prediction (github.com/rabiulcste/vismin, commit 29ce2c0)."""
    match = re.search(r"\((.*?)\)", text)
    if match:
        text = match.group(1)
    match = re.search(r"([A-Za-z])\)", text)
    if match:
        text = match.group(1)
    text = text.split("\n")[0]
    text = re.sub(r"[^\w\s]", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = text.lower()
    return text


def _vismin_is_match_with_label(output, label):
    """evals/metrics/itm.py is_match_with_label (commit 29ce2c0)."""
    answer_phrase = f"ANSWER: {label}"
    normalized_output = _vismin_normalize_model_prediction(output)
    normalized_correct_answer = _vismin_normalize_model_prediction(label)
    normalized_answer_phrase = _vismin_normalize_model_prediction(answer_phrase)
    string_match_phrase = normalized_correct_answer in normalized_output.split()
    match_phrase = re.search(re.escape(normalized_answer_phrase), normalized_output, re.IGNORECASE) is not None
    match_answer = normalized_correct_answer == normalized_output
    match = match_phrase or match_answer or string_match_phrase
    return match


def _vismin_get_text_task_prompt(captions: list):
    """evals/dataset_zoo/task_prompts.py TaskPrompts.get_text_task_prompt (commit 29ce2c0)."""
    option_texts = ", ".join(
        [
            f"({chr(65 + i)}) {caption}" if i < len(captions) - 1 else f"or ({chr(65 + i)}) {caption}"
            for i, caption in enumerate(captions)
        ]
    )
    options = ", ".join([f"{chr(65 + i)}" for i in range(len(captions))])
    prompt = f"Does this image best match: {option_texts}? Choices: {options}. "
    return prompt.strip()


def _vismin_get_image_task_prompt(caption: str):
    """TaskPrompts.get_image_task_prompt (commit 29ce2c0)."""
    prompt = f'Which image better aligns with the description: "{caption}"? Choices: First, Second. '
    return prompt.strip()


def _vismin_compute_mllm_score_itg(results: dict):
    """evals/metrics/itm.py compute_mllm_score_itg (commit 29ce2c0), the rates as fractions."""
    total_samples = len(results)
    text = sum(data["text"][0]["match"] and data["text"][1]["match"] for data in results.values())
    image = sum(data["image"][0]["match"] and data["image"][1]["match"] for data in results.values())
    group = sum(
        (data["text"][0]["match"] and data["text"][1]["match"])
        and (data["image"][0]["match"] and data["image"][1]["match"])
        for data in results.values()
    )
    return text / total_samples, image / total_samples, group / total_samples


# ------------------------------------------------------------------ ColorSwap's code, transcribed
def _colorswap_is_option_text(response, option_text, alternative_text, option="A", alternative="B"):
    """vlm_eval.py is_option_text (github.com/Top34051/colorswap, commit 4f2c9e4)."""
    if option_text.lower() in response.lower() and alternative_text.lower() not in response.lower():
        return True
    if f"image presents ({option})".lower() in response.lower():
        return True
    if f"image presents option ({option})".lower() in response.lower():
        return True
    if f"image presents option {option}".lower() in response.lower():
        return True
    if response.startswith(f"{option})") or response.startswith(f"({option})"):
        return True
    if (
        response.startswith(f"Option {option}")
        or response.startswith(f"Option {option})")
        or response.startswith(f"Option ({option})")
    ):
        return True
    if (
        f"option {option}".lower() in response.lower()
        or f"option ({option})".lower() in response.lower()
        or f"option {option})".lower() in response.lower()
    ) and not (f"({alternative})".lower() in response.lower() or f"{alternative})".lower() in response.lower()):
        return True
    if response == option:
        return True
    if f"it would imply ({option})".lower() in response.lower():
        return True
    if f"it could metaphorically represent ({option})".lower() in response.lower():
        return True
    if f"it is ({option})".lower() in response.lower():
        return True
    if f"this image presents {option_text}".lower() in response.lower():
        return True

    def remove_p(text):
        text = (
            text.replace(" a ", " ").replace(" an ", " ").replace(" the ", " ").replace(" with ", " ")
            .replace(" and ", " ")
        )  # fmt: skip
        text = text.removeprefix("a ")
        text = text.removeprefix("an ")
        text = text.removeprefix("the ")
        return text

    if (  # noqa: SIM103 (transcribed as written)
        remove_p(option_text).lower() in remove_p(response).lower()
        and remove_p(alternative_text).lower() not in remove_p(response).lower()
    ):
        return True
    return False


def _colorswap_is_option_image(response, option_text, alternative_text, option="first", alternative="second"):
    """vlm_eval.py is_option_image (commit 4f2c9e4)."""
    if option in response.lower() and alternative not in response.lower():
        return True
    if f"{option} image better aligns" in response.lower() or f"{option} image aligns better" in response.lower():
        return True
    if f"the {option} image is more relevant" in response.lower():  # noqa: SIM103 (transcribed as written)
        return True
    return False


def _colorswap_chosen_text(response, options):
    """vlm_eval.py's chosen option of a caption question ("A", "B" or None)."""
    option_a = _colorswap_is_option_text(response, options[0], options[1], "A", "B")
    option_b = _colorswap_is_option_text(response, options[1], options[0], "B", "A")
    return {(0, 0): None, (0, 1): "B", (1, 0): "A", (1, 1): None}[(option_a, option_b)]


def _colorswap_chosen_image(response, options):
    """vlm_eval.py's chosen image of an image question ("first", "second" or None)."""
    option_first = _colorswap_is_option_image(response, options[0], options[1], "first", "second")
    option_second = _colorswap_is_option_image(response, options[1], options[0], "second", "first")
    return {(0, 0): None, (0, 1): "second", (1, 0): "first", (1, 1): None}[(option_first, option_second)]


#: Answers of the authors' vlm_results (commit 4f2c9e4) to "Does this image present (A) ..., or (B) ...?":
#: (option A, option B, response).
COLORSWAP_TEXT = [
    ("yellow grapes in a purple bowl", "purple grapes in a yellow bowl", "(B) purple grapes in a yellow bowl."),
    ("a child in an orange jacket is flying a blue kite", "a child in a blue jacket is flying an orange kite",
     "A child in an orange jacket is flying a blue kite."),
    ("a white chicken is standing on the left and a brown rabbit is standing on the right",
     "a brown chicken is standing on the left and a white rabbit is standing on the right",
     "The image presents option (B) a brown chicken is standing on the left and a white rabbit is standing on "
     "the right."),
    ("a green apple on a red plate", "a red apple on a green plate", "B) A red apple on a green plate."),
    ("a blue raft floats on white water", "a white raft floats on blue water", "B) a white raft floats on blue water"),
    ("a blue raft floats on white water", "a white raft floats on blue water", "(A) A blue raft floats on white water"),
    ("a red apple on a green plate", "a green apple on a red plate", "A"),
    ("a red sign is above a blue sign", "a blue sign is above a red sign", "B"),
    ("a modern interior with a black table, red couch, and white stairs",
     "a modern interior with a white table, black couch, and red stairs",
     "The image presents a modern interior with a black table, red couch, and white stairs."),
    ("purple grapes in a yellow bowl", "yellow grapes in a purple bowl",
     "The image presents (A) purple grapes in a yellow bowl."),
    ("a red apple on a green plate", "a green apple on a red plate",
     "This image presents (A) a red apple on a green plate."),
    ("a red apple", "a green apple", "Both could be right."),
    ("a red apple", "a green apple", "It is (A), not a green apple"),
]  # fmt: skip
#: Answers of the vlm_results to the image questions.
COLORSWAP_IMAGE = [
    "The second image better aligns with the description of an orange chair next to a yellow table.",
    "The second image.",
    "The first image better aligns with the description of a red apple on a green table.",
    "The first image better aligns with the description, as it shows a blue apple on a yellow plate. In the second "
    "image, there is no apple present, only a",
    "The first image",
    "Neither image matches.",
]


@pytest.mark.parametrize(("a", "b", "response"), COLORSWAP_TEXT)
def test_colorswap_caption_answers_read_as_vlm_eval(a: str, b: str, response: str) -> None:
    question = ChoiceQuestion((0,), "", (0, 1), ("A", "B"), "text")
    said = read_choice(CHOICE_STYLES["colorswap"], question, (a, b), response)
    assert {None: None, 0: "A", 1: "B"}[said] == _colorswap_chosen_text(response, (a, b))


@pytest.mark.parametrize("response", COLORSWAP_IMAGE)
def test_colorswap_image_answers_read_as_vlm_eval(response: str) -> None:
    question = ChoiceQuestion((0, 1), "", (0, 1), ("First", "Second"), "image")
    said = read_choice(CHOICE_STYLES["colorswap"], question, ("x", "y"), response)
    assert {None: None, 0: "first", 1: "second"}[said] == _colorswap_chosen_image(response, ("x", "y"))


#: Answers to VisMin's questions: (labels, answer).
VISMIN_ANSWERS = [
    (("A", "B"), "A"), (("A", "B"), "(B)"), (("A", "B"), "(B) a red cup"), (("A", "B"), "B) a red cup"),
    (("A", "B"), "The answer is B."), (("A", "B"), "ANSWER: A"), (("A", "B"), "a red cup on the left"),
    (("A", "B"), "A or B"), (("A", "B"), "neither"), (("A", "B"), "b\nbecause"), (("First", "Second"), "First"),
    (("First", "Second"), "The second image."), (("First", "Second"), "Second, not the first"),
    (("First", "Second"), "the 1st one"), (("First", "Second"), "(First)"),
]  # fmt: skip


@pytest.mark.parametrize(("labels", "answer"), VISMIN_ANSWERS)
def test_vismin_answers_read_as_is_match_with_label(labels: tuple[str, str], answer: str) -> None:
    """The option the authors' is_match_with_label finds, when it finds exactly one; an answer it matches
    to both labels ("A or B", "Second, not the first") the authors score right whichever is gold (ANY_OPTION,
    vismin-authors) and the strict reading takes for no answer (vismin-strict), as one it matches to none."""
    kind = "text" if labels == ("A", "B") else "image"
    question = ChoiceQuestion((0,), "", (0, 1), labels, kind)
    authors, strict = (read_choice(CHOICE_STYLES[style], question, ("a red cup", "a blue cup"), answer)
                       for style in ("vismin-authors", "vismin-strict"))  # fmt: skip
    matches = [_vismin_is_match_with_label(answer, label) for label in labels]
    assert strict == (matches.index(True) if sum(matches) == 1 else None)
    assert authors == (ANY_OPTION if all(matches) else strict)
    for gold in (0, 1):  # right in the authors' reading exactly when the authors' code says so
        assert bool(right(np.array([np.nan if authors is None else authors]), np.array([gold]))[0]) == matches[gold]


#: Twenty VisMin pairs' answers to the two caption questions (gold A for image 0, B for image 1), free-form as
#: chat models answer, some naming both options: (answer of image 0, answer of image 1, how many such pairs).
VISMIN_FREE_FORM = [("A", "B", 11), ("A or B", "B", 3), ("(A) a red cup", "Either A or B", 3), ("B", "B", 3)]


def test_the_authors_reading_counts_an_answer_naming_both_right_as_the_authors_do() -> None:
    """Issue 45, item 5: on VISMIN_FREE_FORM the text score is 85.0 by the authors' reading (the default:
    compute_mllm_score_itg on is_match_with_label against the gold label, transcribed above) and 55.0 by the
    strict one, as docs/benchmarks.md says."""
    from spotdiff.cases import ArrayImage, Case

    images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    texts = ("a red cup on a blue mat", "a blue cup on a red mat")
    pairs = [(first, second) for first, second, n in VISMIN_FREE_FORM for _ in range(n)]
    authors = {n: {"text": [{"match": _vismin_is_match_with_label(a, g)} for a, g in zip(pair, "AB", strict=True)],
                   "image": [{"match": True}] * 2} for n, pair in enumerate(pairs)}  # fmt: skip
    want = _vismin_compute_mllm_score_itg(authors)[0]
    got = {}
    for style in ("vismin-authors", "vismin-strict"):
        questions = choice_questions(texts, False, CHOICE_STYLES[style])
        units = []
        for n, pair in enumerate(pairs):
            case = Case(str(n), texts, np.eye(2, dtype=bool), images, {"subset": "s", "prompts": style})
            said = [read_choice(CHOICE_STYLES[style], q, texts, a) for q, a in zip(questions, pair, strict=True)]
            scores = np.array([[[0.0, np.nan if s is None else s]] for s in said])  # [question, order, reading]
            units.append(get_protocol("mllm-text").outcomes(case, scores)[0])
        got[style] = 100 * np.mean([u["gen_text"] for u in units])
    assert got == {"vismin-authors": pytest.approx(85.0), "vismin-strict": pytest.approx(55.0)}
    assert got["vismin-authors"] == pytest.approx(100 * want)


def test_the_questions_are_the_authors() -> None:
    texts = ("a red cup left of a plate", "a blue cup left of a plate")
    vismin = choice_questions(texts, True, CHOICE_STYLES["vismin-authors"])
    assert [q.question for q in choice_questions(texts, True, CHOICE_STYLES["vismin-strict"])] == [
        q.question for q in vismin
    ]
    assert [q.question for q in vismin] == [_vismin_get_text_task_prompt(list(texts))] * 2 + [
        _vismin_get_image_task_prompt(t) for t in texts
    ]
    asked = [((0,), ("A", "B")), ((1,), ("A", "B")), ((0, 1), ("First", "Second")), ((0, 1), ("First", "Second"))]
    assert [(q.images, q.labels) for q in vismin] == asked
    colorswap = choice_questions(texts, False, CHOICE_STYLES["colorswap"])
    assert colorswap[0].question == (
        "Does this image present (A) a red cup left of a plate, or (B) a blue cup left of a plate? Note, you must "
        "choose one of the two options"  # as prompt_image_1 in the vlm_results, without a final period
    )
    assert set(CHOICE_STYLES) == set(PROMPT_STYLES)


def _random_answers(rng: np.random.Generator, style: str, kind: str, gold: int) -> str:
    """A free answer as chat models phrase them, right, wrong, ambiguous or none."""
    pick = int(rng.integers(0, 4))
    if kind == "text":
        letter = ("A", "B")[gold if pick < 2 else 1 - gold]
        forms = ("{}", "({})", "{}) the cup", "The answer is {}.") if style.startswith("vismin") else (
            "{}", "({}) the cup", "The image presents ({})", "Option {}")  # fmt: skip
        return "I cannot tell" if pick == 3 else str(rng.choice(forms)).format(letter)
    word = ("first", "second")[gold if pick < 2 else 1 - gold]
    return (
        "Neither"
        if pick == 3
        else str(rng.choice(("The {} image.", "{}", "The {} image better aligns"))).format(
            word.capitalize() if pick == 0 else word
        )
    )


@pytest.mark.parametrize("style", ["vismin-authors", "colorswap"])
def test_scores_equal_the_authors_on_random_answer_tables(style: str) -> None:
    """Generated answers of random cases read by the style, scored by protocol mllm: text, image and group
    equal the authors' (VisMin's compute_mllm_score_itg on is_match_with_label; ColorSwap's vlm_eval.py)."""
    from spotdiff.cases import ArrayImage, Case

    rng = np.random.default_rng(6)
    images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    texts = ("a red cup on a blue mat", "a blue cup on a red mat")
    questions = choice_questions(texts, True, CHOICE_STYLES[style])
    protocol = get_protocol("mllm")
    ours, authors = [], {}
    for n in range(150):
        case = Case(str(n), texts, np.eye(2, dtype=bool), images, {"subset": "s", "prompts": style})
        gold = (0, 1, 0, 1)  # image 0 -> caption A, image 1 -> B; caption 0 -> First image, caption 1 -> Second
        answers = [_random_answers(rng, style, q.kind, g) for q, g in zip(questions, gold, strict=True)]
        said = [read_choice(CHOICE_STYLES[style], q, texts, a) for q, a in zip(questions, answers, strict=True)]
        scores = np.array([[[0.0, np.nan if s is None else s]] for s in said])  # [question, order, reading]
        ours.append(protocol.outcomes(case, scores)[0])
        if style == "vismin-authors":
            labels = ("A", "B", "First", "Second")
            matches = [_vismin_is_match_with_label(a, labels[k]) for k, a in enumerate(answers)]
            authors[n] = {"text": [{"match": m} for m in matches[:2]], "image": [{"match": m} for m in matches[2:]]}
        else:
            text = [_colorswap_chosen_text(a, texts) == g for a, g in zip(answers[:2], ("A", "B"), strict=True)]
            image = [_colorswap_chosen_image(a, texts) == g for a, g in zip(answers[2:], ("first", "second"),
                                                                          strict=True)]  # fmt: skip
            authors[n] = (all(text), all(image))
    if style == "vismin-authors":
        want = _vismin_compute_mllm_score_itg(authors)
    else:
        want = tuple(np.mean(x) for x in ([t for t, _ in authors.values()], [i for _, i in authors.values()],
                                          [t and i for t, i in authors.values()]))  # fmt: skip
    got = tuple(np.mean([o[m] for o in ours]) for m in ("gen_text", "gen_image", "gen_group"))
    assert got == pytest.approx(want)


# ------------------------------------------------------------------ served by vqa: and api:
LABEL_TOKENS = ("A", "B", "First", "Second", "first", "second")


@pytest.fixture(scope="module")
def vqa(tmp_path_factory):
    """The ``vqa:`` scorer of a tiny Qwen2-VL whose LM head favours the labels (as a trained chat model's)."""
    path = make_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("vlm") / "qwen2_vl", seed=2)
    scorer = load_scorer(f"vqa:{path}?generate=2", ScorerOptions(device="cpu", batch_size=4))
    head, tok = scorer.chat.model.lm_head, scorer.chat.tokenizer
    bias = torch.zeros(head.out_features)
    for text in LABEL_TOKENS:
        (token,) = tok(text, add_special_tokens=False)["input_ids"]
        bias[token] = 12.0
    head.bias = torch.nn.Parameter(bias)
    return scorer


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    for rel, blob in colorswap_repo(n=2).items():
        (root / "colorswap" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "colorswap" / rel).write_bytes(blob)
    return {"vismin": write_vismin(root / "vismin", n=2), "colorswap": root / "colorswap"}


def _evaluate(scorer, benchmark, data, out, protocol="mllm", cache=None):
    config = EvalConfig(model=scorer.spec, benchmark=benchmark, data=data, protocol=protocol, out=out,
                        use_store=False, progress=False, n_boot=0, workers=0, device="cpu", cache=cache)  # fmt: skip
    return run_eval(config, scorer=scorer)


@pytest.mark.parametrize("benchmark", ["vismin", "colorswap"])
def test_likelihood_reading_is_the_models_label_logprobs(benchmark: str, vqa, data) -> None:
    case = get_benchmark(benchmark)(data[benchmark]).load()[0]
    style = case.tags["prompts"]
    images = [ref.load() for ref in case.images]
    got = vqa.answer_choices(images, case.texts, "choice", style=style)
    assert got.shape == (4, 1, 2)
    decided = 0
    for row, q in enumerate(choice_questions(case.texts, True, CHOICE_STYLES[style])):
        lp = next_token_logprobs(vqa.chat, [images[i] for i in q.images], q.question, q.labels)
        if abs(lp[0] - lp[1]) > 1e-4:  # the label the model's own next-token distribution prefers
            assert got[row, 0, 0] == q.order[int(np.argmax(lp))]
            decided += 1
    assert decided >= 2


@pytest.mark.parametrize("benchmark", ["vismin", "colorswap"])
def test_served_equals_in_process_and_reruns_from_the_cache(benchmark: str, vqa, data, tmp_path) -> None:
    want = _evaluate(vqa, benchmark, data[benchmark], tmp_path / "vqa")
    with ChatCompletionsServer(vqa.chat) as server:
        spec = f"api:tiny-vlm@{server.base_url}?generate=2&spellings=exact&retries=1"
        scorer = load_scorer(spec, ScorerOptions(batch_size=4))
        got = _evaluate(scorer, benchmark, data[benchmark], tmp_path / "api", cache=tmp_path / "cache")
        np.testing.assert_equal(got.metrics, want.metrics)
        lines = [json.loads(x) for x in (tmp_path / "api" / "scores.jsonl").read_text().splitlines()]
        wants = [json.loads(x) for x in (tmp_path / "vqa" / "scores.jsonl").read_text().splitlines()]
        assert [x["scores"] for x in lines] == [x["scores"] for x in wants]
        assert np.shape(lines[0]["scores"]) == (4, 1, 2)  # 2 caption + 2 image questions, once, 2 readings
        assert scorer.run_usage()["sent"] == 4 * len(lines)
        asked = len(server.requests_for("/v1/chat/completions"))
        again = load_scorer(spec, ScorerOptions(batch_size=4))
        rerun = _evaluate(again, benchmark, data[benchmark], tmp_path / "again", cache=tmp_path / "cache")
        assert len(server.requests_for("/v1/chat/completions")) == asked and again.run_usage()["sent"] == 0
        np.testing.assert_equal(rerun.metrics, got.metrics)


def test_eval_mllm_text_with_the_cli(vqa, data, tmp_path: Path) -> None:
    result = _evaluate(vqa, "vismin", data["vismin"], tmp_path / "out", protocol="mllm-text")
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["protocol"] == "mllm-text" and set(result.metrics["all"]) >= {"text", "gen_text", "unparsed"}
    assert metrics["n_answers"] == 2 * 2  # two cases, one caption question per image, once
