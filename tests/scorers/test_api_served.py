"""``api:MODEL@BASE_URL`` against a loopback OpenAI-compatible server that runs a tiny chat VLM's real
forward pass (:class:`spotdiff.testing.openai_server.ChatCompletionsServer`), through the official
``openai`` client.

The server and the ``vqa:`` scorer share one in-memory model, so ``api:`` must equal ``vqa:`` (VQAScore
to 1e-4 in log space, answer-based choices exactly) on Winoground and EqBen fixtures, and candidate
answers' log-probabilities (with and without generated answers) on NaturalBench and MMVP fixtures. The
tiny model's LM head gets a bias towards the answer tokens ("Yes" and its spellings, "No", the option
letters), as a
trained chat model has them among its top tokens; without it a random model's "Yes" sits far below
any top-k. Faults injected through the server must end in a finished run or one clear line, with
everything answered cached, and a re-run from the cache must give identical metrics with no request.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import random
import re
from base64 import b64decode
from hashlib import sha256
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from spotdiff.cases import PILImage
from spotdiff.cli import main
from spotdiff.diagnose.engine import Engine, pair_key
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, EndpointError
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.api import encode_image, parse_api_spec, yes_probability
from spotdiff.testing.formats import mmvp_rows, write_eqben, write_mmvp, write_spec, write_winoground
from spotdiff.testing.hub_repos import naturalbench_repo
from spotdiff.testing.hub_server import HubServer, hub_environment
from spotdiff.testing.openai_server import ChatCompletionsServer
from spotdiff.testing.tiny_models import tiny_images
from spotdiff.testing.tiny_vlms import make_tiny_vlm

ANSWER_TOKENS = ("Yes", " Yes", "yes", "No", "A", "B")


@pytest.fixture(scope="module")
def vqa(tmp_path_factory):
    """The ``vqa:`` scorer of a tiny Qwen2-VL whose LM head favours the answer tokens."""
    path = make_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("vlm") / "qwen2_vl")
    scorer = load_scorer(f"vqa:{path}?generate=2", ScorerOptions(device="cpu", batch_size=4))
    head, tok = scorer.chat.model.lm_head, scorer.chat.tokenizer
    bias = torch.zeros(head.out_features)
    for text in ANSWER_TOKENS:
        (token,) = tok(text, add_special_tokens=False)["input_ids"]
        bias[token] = 12.0
    head.bias = torch.nn.Parameter(bias)
    return scorer


@pytest.fixture(scope="module")
def server(vqa):
    with ChatCompletionsServer(vqa.chat) as srv:
        yield srv


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    for rel, blob in naturalbench_repo(n=2).items():  # a yes_no sample and a multiple_choice one
        (root / "naturalbench" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "naturalbench" / rel).write_bytes(blob)
    return {
        "naturalbench": root / "naturalbench",
        "mmvp": write_mmvp(root / "mmvp", mmvp_rows(4), images=4),
        "winoground": write_winoground(root / "wino", n=2, seed=0),
        "eqben": write_eqben(root / "eqben", n=2),
        "spec": write_spec(root / "spec", n=1, subsets=("absolute_size",)),  # one 3 x 3 candidate set
    }


def api(server, extra="") -> object:
    return load_scorer(f"api:tiny-vlm@{server.base_url}?retries=3{extra}", ScorerOptions(batch_size=8))


def evaluate(scorer, benchmark, data, tmp_path, protocol=None, name="out", cache=None, progress=False):
    config = EvalConfig(
        model=scorer.spec, benchmark=benchmark, data=data, protocol=protocol, out=tmp_path / name,
        use_store=False, progress=progress, n_boot=0, workers=0, device="cpu", cache=cache,
    )  # fmt: skip
    return run_eval(config, scorer=scorer)


def test_spec_and_image_encoding():
    assert parse_api_spec("m@https://h/v1/") == ("m", "https://h/v1")
    for bad in ("m", "@http://h", "m@h:8000", "m@http:///v1", "m@http://me:pw@h:80x/v1"):
        with pytest.raises(ConfigError, match="MODEL@BASE_URL") as err:
            parse_api_spec(bad)
        assert "pw" not in str(err.value)  # a password is not repeated in the message
    for option in ("timeout=soon", "concurrency=0", "spellings=some", "score=clip", "price=2.5", "price=-1/2"):
        with pytest.raises(ConfigError, match=option.split("=")[0]):
            load_scorer(f"api:m@http://127.0.0.1:9/v1?{option}", ScorerOptions())
    (image,) = tiny_images(1)
    url, digest = encode_image(image.resize((300, 100)), 150)
    data = b64decode(url.split(",", 1)[1])
    assert url.startswith("data:image/png;base64,") and sha256(data).hexdigest() == digest
    assert Image.open(BytesIO(data)).size == (150, 50)  # the longer side scaled down to max_side


def test_yes_probability_combines_spellings_and_bounds():
    top = [{"token": "No", "logprob": np.log(0.5)}, {"token": " yes", "logprob": np.log(0.2)},
           {"token": "Yes", "logprob": np.log(0.1)}]  # fmt: skip
    assert yes_probability(top, "Yes", "all") == (pytest.approx(0.3), False)
    assert yes_probability(top, "Yes", "exact") == (pytest.approx(0.1), False)
    assert yes_probability(top[:1], "Yes", "all") == (pytest.approx(0.5), True)


@pytest.mark.parametrize("benchmark", ["winoground", "eqben", "spec"])
def test_vqascore_equals_in_process(benchmark, vqa, server, data, tmp_path):
    scorer = api(server)  # the default spellings: P("Yes") of the token "Yes" alone, as vqa: reads it
    got = evaluate(scorer, benchmark, data[benchmark], tmp_path, name="api")
    want = evaluate(vqa, benchmark, data[benchmark], tmp_path, name="vqa")
    assert got.metrics == want.metrics
    lines = [json.loads(x) for x in (tmp_path / "api" / "scores.jsonl").read_text().splitlines()]
    wants = [json.loads(x) for x in (tmp_path / "vqa" / "scores.jsonl").read_text().splitlines()]
    for a, b in zip(lines, wants, strict=True):
        np.testing.assert_allclose(np.log(a["scores"]), np.log(b["scores"]), atol=1e-4)
        assert "bounded" not in a
    assert got.engine_stats["computed"] == want.engine_stats["computed"] and "bounded" not in got.engine_stats


def test_requests_stay_in_flight_across_the_engines_batches(vqa):
    """Batches of 2 images (4 requests each) do not wait for their slowest answer: at concurrency=8, 8 requests
    are in flight at once (the server counts them), never more; the scores are those asked one by one."""
    refs = [PILImage(im, name=f"i{k}") for k, im in enumerate(tiny_images(12, seed=5))]
    pairs = [(ref, t) for ref in refs for t in ("a red cup", "a blue bowl")]
    with ChatCompletionsServer(vqa.chat, delay=0.02, spread=1.0, seed=1) as srv:
        scorer = load_scorer(f"api:tiny-vlm@{srv.base_url}?concurrency=8", ScorerOptions(batch_size=2))
        with Engine(scorer, progress=False, workers=0) as engine:
            scores = engine.pair_scores(pairs)
        assert srv.peak == 8 and srv.in_flight == 0 and scorer.usage["sent"] == 24
        for ref, text in pairs[:4]:
            alone = scorer.score_pairs([ref.load()], [[text]])[0][0, 0]
            assert scores[pair_key(ref, text)] == float(np.float32(alone))  # the cache keeps float32


def test_spellings_all_is_where_api_and_vqa_differ(vqa, server):
    """spellings=all adds P(" Yes") and P("yes") (here favoured as much as "Yes"): above vqa:'s P("Yes"),
    by their sum; the default (exact) equals vqa:'s."""
    images, texts = tiny_images(2), ["a cat on a mat", "two dogs"]
    want = vqa.score_matrix(images, texts)
    exact = api(server).score_matrix(images, texts)
    combined = api(server, "&spellings=all").score_matrix(images, texts)
    np.testing.assert_allclose(np.log(exact), np.log(want), atol=1e-4)
    assert np.all(combined > want + 0.1) and np.all(combined <= 1 + 1e-6)


def test_choice_equals_in_process(vqa, server, data, tmp_path):
    scorer = api(server, "&generate=2")
    got = evaluate(scorer, "winoground", data["winoground"], tmp_path, protocol="choice-text", name="api")
    want = evaluate(vqa, "winoground", data["winoground"], tmp_path, protocol="choice-text", name="vqa")
    assert got.metrics == want.metrics
    usage = scorer.run_usage()
    assert usage["no_letter"] == 0 and usage["sent"] == 2 * 4  # 2 cases x 2 images x 2 orders
    images, texts = tiny_images(2), ["a cat on a mat", "two dogs"]
    answers = scorer.answer_choices(images, texts, "choice")  # and the "which image" questions
    np.testing.assert_array_equal(answers, vqa.answer_choices(images, texts, "choice"))
    unparseable = int(np.isnan(got_generated(tmp_path / "api")).sum() + np.isnan(answers[..., 1]).sum())
    assert scorer.run_usage()["unparseable"] == unparseable


def got_generated(out) -> np.ndarray:
    """The generation reading of every case in a choice run's ``scores.jsonl``."""
    lines = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return np.array([np.asarray(line["scores"], dtype=float)[..., 1] for line in lines])


def likelihood_only(vqa):
    """The in-process scorer on the same model, without generated answers."""
    plain = copy.copy(vqa)
    plain.chooser = copy.copy(vqa.chooser)
    plain.chooser.generate = 0
    return plain


def run_scores(out) -> list[np.ndarray]:
    return [np.asarray(json.loads(x)["scores"], dtype=float) for x in (out / "scores.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("generate", [0, 2], ids=["likelihood", "generated"])
@pytest.mark.parametrize("benchmark", ["naturalbench", "mmvp"])
def test_answer_scores_equal_in_process_and_rerun_from_cache(benchmark, generate, vqa, server, data, tmp_path):
    scorer = api(server, f"&generate={generate}")
    cache = tmp_path / "cache"
    got = evaluate(scorer, benchmark, data[benchmark], tmp_path, name="api", cache=cache)
    want = evaluate(vqa if generate else likelihood_only(vqa), benchmark, data[benchmark], tmp_path, name="vqa")
    np.testing.assert_equal(got.metrics, want.metrics)  # identical, NaN (a reading not asked) included
    n = 2 + bool(generate)  # [image, question, (the two candidates' log-probabilities, generated answer)]
    for a, b in zip(run_scores(tmp_path / "api"), run_scores(tmp_path / "vqa"), strict=True):
        assert a.shape[-1] == b.shape[-1] == n
        np.testing.assert_allclose(a[..., :2], b[..., :2], atol=1e-4)
        np.testing.assert_array_equal(a[..., 2:], b[..., 2:])
    usage = scorer.run_usage()
    assert usage["bounded"] == 0 and usage["sent"] == 2 * 2 * (2 if benchmark == "naturalbench" else 1)
    assert usage["completion_tokens"] <= usage["sent"] * max(1, generate)
    path = "/v1/chat/completions"
    asked = len(server.requests_for(path))
    again = api(server, f"&generate={generate}")
    rerun = evaluate(again, benchmark, data[benchmark], tmp_path, name="again", cache=cache)
    assert len(server.requests_for(path)) == asked and again.run_usage()["sent"] == 0  # no request
    np.testing.assert_equal(rerun.metrics, got.metrics)


def test_unlisted_candidates_get_the_bound_and_are_counted(vqa, server):
    scorer = api(server, "&generate=0&top_logprobs=1")  # at most one candidate listed
    images, questions = tiny_images(2), [["Is the cat on the mat?", "Is it red?"]] * 2
    got = np.stack(scorer.answer_scores(images, questions, ("Yes", "No")))
    want = np.stack(likelihood_only(vqa).answer_scores(images, questions, ("Yes", "No")))
    bounded = scorer.run_usage()["bounded"]
    assert bounded >= 4  # each of the 4 (image, question) rows lists one token at most
    assert np.all(got >= want - 1e-4)  # P(unlisted) < the smallest listed probability: a bound from above
    assert int((np.abs(got - want) > 1e-4).sum()) == bounded  # exact where listed, the bound where not
    with pytest.raises(ConfigError, match="not single words or letters"):
        scorer.answer_scores(images[:1], [["Which way?"]], ("Towards the camera", "Away"))


def test_bounded_scores_are_flagged_and_counted(server, data, tmp_path):
    scorer = api(server, "&answer=Maybe&top_logprobs=3&price=2.5/10")  # "Maybe" is never in this top 3
    result = evaluate(scorer, "winoground", data["winoground"], tmp_path)
    lines = [json.loads(x) for x in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    assert all(line["bounded"] == [[0, 0], [0, 1], [1, 0], [1, 1]] for line in lines)
    assert result.engine_stats["bounded"] == 4 * len(lines) == scorer.run_usage()["bounded"]
    usage = json.loads((tmp_path / "out" / "metrics.json").read_text())["usage"]  # recorded with the run
    assert usage["bounded"] == 4 * len(lines) and usage["sent"] == usage["responses"]["computed"] == 4 * len(lines)
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] == 4 * len(lines)
    assert usage["endpoint"] == server.base_url and usage["model"] == "tiny-vlm"
    cost = (usage["prompt_tokens"] * 2.5 + usage["completion_tokens"] * 10) / 1e6  # the given price list
    assert usage["cost_usd"] == pytest.approx(cost) and usage["price_usd_per_million_tokens"]["completion"] == 10


@pytest.mark.parametrize(
    "faults",
    [("429", "429", "429", "500"), ("ok", "timeout"), ("truncated", "bad-json")],
    ids=["429-burst-and-500", "timeout", "truncated-and-bad-json"],
)
def test_transient_faults_finish_the_run(faults, server, data, tmp_path):
    clean = evaluate(api(server), "winoground", data["winoground"], tmp_path, name="clean")
    server.timeout_s = 1.5
    server.inject(*faults)
    scorer = api(server, "&timeout=1&concurrency=1" if "timeout" in faults else "")
    result = evaluate(scorer, "winoground", data["winoground"], tmp_path)
    assert result.metrics == clean.metrics
    if "429" in faults:
        assert scorer.run_usage()["throttled"] == 3


def test_fatal_fault_stops_with_one_line_and_rerun_resumes(server, data, tmp_path):
    path = "/v1/chat/completions"
    asked_before = len(server.requests_for(path))
    scorer = api(server, "&concurrency=1")
    server.inject("ok", "ok", "500", "500", "500", "500")  # the third request fails 4 times: retries=3 spent
    cache = tmp_path / "cache"
    with pytest.raises(EndpointError) as err:
        evaluate(scorer, "winoground", data["winoground"], tmp_path, cache=cache)
    message = str(err.value)
    assert "\n" not in message and server.base_url in message and "re-run resumes from the cache" in message
    assert scorer.run_usage()["sent"] == scorer.run_usage()["responses"]["computed"] == 2  # answered, cached
    scorer = api(server)
    first = evaluate(scorer, "winoground", data["winoground"], tmp_path, name="first", cache=cache)
    assert scorer.run_usage()["sent"] == 6 and scorer.run_usage()["responses"]["cached"] == 2  # not asked again
    asked = len(server.requests_for(path)) - asked_before
    again = api(server)
    rerun = evaluate(again, "winoground", data["winoground"], tmp_path, name="again", cache=cache)
    assert len(server.requests_for(path)) - asked_before == asked and again.run_usage()["sent"] == 0  # no request
    assert rerun.metrics == first.metrics


def test_no_logprobs_unknown_model_and_refused_key_stop_cleanly(server, data, tmp_path):
    server.inject("no-logprobs")
    with pytest.raises(EndpointError, match="without top_logprobs: serve the model with log-probabilities"):
        evaluate(api(server, "&concurrency=1"), "winoground", data["winoground"], tmp_path)
    spec = f"api:other@{server.base_url}"
    with pytest.raises(EndpointError, match="does not serve this model"):
        evaluate(load_scorer(spec, ScorerOptions()), "winoground", data["winoground"], tmp_path, name="o")
    server.inject("401")
    with pytest.raises(EndpointError, match=r"refused the key \(401\): set SPOTDIFF_API_KEY or OPENAI_API_KEY"):
        evaluate(api(server, "&concurrency=1"), "winoground", data["winoground"], tmp_path, name="k")


@pytest.fixture(scope="module")
def vgpt(tmp_path_factory):
    """``vgpt:`` on a tiny Qwen2-VL (the chat backend: the caption as the answer to the describe prompt)."""
    path = make_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("vgpt") / "qwen2_vl", seed=1)
    return load_scorer(f"vgpt:{path}", ScorerOptions(device="cpu", batch_size=4))


def test_visualgptscore_from_prompt_logprobs_equals_in_process(vgpt, data, tmp_path):
    with ChatCompletionsServer(vgpt.scoring.vlm) as server:
        scorer = api(server, "&score=vgpt")
        assert scorer.capabilities == {"image-text", "choice-text", "choice", "answer-prob"}  # not match-prob
        got = evaluate(scorer, "eqben", data["eqben"], tmp_path, name="api")
        want = evaluate(vgpt, "eqben", data["eqben"], tmp_path, name="vgpt")
        assert got.metrics == want.metrics
        for a, b in zip(
            *((tmp_path / n / "scores.jsonl").read_text().splitlines() for n in ("api", "vgpt")), strict=True
        ):
            np.testing.assert_allclose(json.loads(a)["scores"], json.loads(b)["scores"], atol=1e-4)
        server.inject("no-logprobs")  # a server without prompt_logprobs (any but vLLM): one clear line
        with pytest.raises(EndpointError, match=r"returned no prompt_logprobs: VisualGPTScore \(score=vgpt\) needs"):
            evaluate(api(server, "&score=vgpt&concurrency=1"), "winoground", data["winoground"], tmp_path, name="n")


# ------------------------------------------------------------------- identity, secrets, retries


def test_the_cache_is_keyed_by_the_server_not_by_how_its_url_is_spelled(server, data, tmp_path):
    """127.0.0.1 and localhost (any loopback name), a default port, a trailing / or a password are the
    same server: a run through another spelling asks nothing again."""
    cache, path = tmp_path / "cache", "/v1/chat/completions"
    first = evaluate(api(server), "winoground", data["winoground"], tmp_path, name="first", cache=cache)
    asked = len(server.requests_for(path))
    port = server.base_url.rsplit(":", 1)[1].split("/")[0]
    for n, url in enumerate((f"http://localhost:{port}/v1/", f"http://me:pw@LOCALHOST:{port}/v1",
                             f"http://[::1]:{port}/v1")):  # fmt: skip
        scorer = load_scorer(f"api:tiny-vlm@{url}", ScorerOptions(batch_size=8))
        assert scorer.identity_digest() == api(server).identity_digest()
        again = evaluate(scorer, "winoground", data["winoground"], tmp_path, name=f"again{n}", cache=cache)
        assert again.metrics == first.metrics and scorer.run_usage()["sent"] == 0
    assert len(server.requests_for(path)) == asked
    assert api(server).identity()["base_url"] == f"http://localhost:{port}/v1"


def test_a_password_in_the_url_is_used_and_never_recorded(server, data, tmp_path, capsys, caplog, monkeypatch):
    """``http://user:password@host``: sent as HTTP basic authentication, and absent from everything the run
    writes or says (metrics.json, scores.jsonl, the run store, the cache, `spotdiff runs`, the report, the
    hub push, printed lines, log lines at -v, error lines)."""
    from huggingface_hub import constants

    secret = "s3cret-Pw"
    spec = with_password(server, secret)
    out, store, cache, report = tmp_path / "out", tmp_path / "runs.sqlite", tmp_path / "cache", tmp_path / "report"
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-token"))
    server.inject("500")  # one retry line
    with HubServer() as hub, hub_environment(hub.url), caplog.at_level(logging.DEBUG):
        assert main(["-v", "eval", "--model", spec, "--benchmark", "winoground", "--data", str(data["winoground"]),
                     "--out", str(out), "--store", str(store), "--cache", str(cache), "--n-boot", "0",
                     "--workers", "0", "--push-to-hub", "me/results"]) == 0  # fmt: skip
        assert main(["runs", "--store", str(store)]) == 0
        (run,) = RunStore(store).runs()
        assert main(["runs", run.id, "--store", str(store)]) == 0
        assert main(["report", "--store", str(store), "--out", str(report), "--no-cases"]) == 0
        assert main(["eval", "--model", spec + "&colour=red", "--benchmark", "winoground", "--no-store",
                     "--data", str(data["winoground"])]) == 2  # an error line that quotes the spec  # fmt: skip
        pushed = hub.repos[("dataset", "me/results")]
    auth = "Basic " + base64.b64encode(f"alice:{secret}".encode()).decode()
    assert server.requests_for("/v1/chat/completions")[-1].headers["authorization"] == auth  # it was used
    said = capsys.readouterr()
    assert run.model == f"api:tiny-vlm@{server.base_url}?retries=1" and run.model in said.out
    assert "retry 1 of 1" in caplog.text and "HTTP Request: POST" in caplog.text  # the lines looked through
    assert "unknown option 'colour'" in said.err
    texts = [store.read_bytes(), *pushed.files.values(), *(c.encode() for c in pushed.commits)]
    assert_nowhere(secret, [out, cache, report], [*texts, said.out, said.err, caplog.text])


def with_password(server, secret: str, extra: str = "?retries=1") -> str:
    """The server's ``api:`` spec with the user alice and the password ``secret`` in its URL."""
    return f"api:tiny-vlm@{server.base_url.replace('http://', f'http://alice:{secret}@')}{extra}"


def assert_nowhere(secret: str, folders: list, texts: list) -> None:
    """Neither the password nor the user name is in any file under ``folders`` nor in ``texts`` (streams)."""
    written = [p.read_bytes() for folder in folders for p in Path(folder).rglob("*") if p.is_file()]
    for text in (*written, *(t.encode() if isinstance(t, str) else t for t in texts)):
        assert secret.encode() not in text and b"alice" not in text


def test_a_password_in_a_synthesis_model_is_never_recorded(tiny_t2i, server, tmp_path, capsys, caplog):
    """Issue 44: ``synth eqsd --check api:...`` wrote the password twice into synth.json and printed it, and
    ``synth visla --llm api:...`` left it in ``.synth-run.json`` when refused: every spec a synthesis run
    records or prints is redacted, as an evaluation's is."""
    from spotdiff.testing.formats import write_sugarcrepe

    secret = "s3cret-Synth"
    spec = with_password(server, secret)
    checked, refused = tmp_path / "eqsd", tmp_path / "visla"
    pairs = write_sugarcrepe(tmp_path / "sugarcrepe", n=1) / "swap_att.json"
    asked = len(server.requests_for("/v1/chat/completions"))
    with caplog.at_level(logging.DEBUG):
        assert main(["synth", "eqsd", "--out", str(checked), "--n", "1", "--image-size", "32", "--steps", "2",
                     "--t2i", tiny_t2i, "--device", "cpu", "--check", spec, "-q"]) == 0  # fmt: skip
        assert main(["synth", "visla", "--out", str(refused), "--pairs", str(pairs), "--llm", spec, "-q"]) == 2
    assert len(server.requests_for("/v1/chat/completions")) > asked  # the check asked the served model
    said = capsys.readouterr()
    record = json.loads((checked / "synth.json").read_text())
    shown = f"api:tiny-vlm@{server.base_url}?retries=1"
    assert record["options"]["check"] == record["summary"]["check"] == shown
    assert f"check: {shown}" in said.out and "a causal lm: model is needed" in said.err
    assert_nowhere(secret, [checked, refused], [said.out, said.err, caplog.text])


def test_a_password_in_a_judges_url_is_never_recorded(vqa, server, data, tmp_path, capsys, caplog):
    """Issue 44: ``--judge api:J@http://user:PW@host/v1`` wrote the password into metrics.json, the output
    folder's run marker and the run store."""
    secret = "s3cret-Judge"
    config = EvalConfig(model=vqa.spec, benchmark="mmvp", data=data["mmvp"], out=tmp_path / "out",
                        store=tmp_path / "runs.sqlite", cache=tmp_path / "cache", progress=False, n_boot=0,
                        workers=0, device="cpu", judge=with_password(server, secret))  # fmt: skip
    asked = len(server.requests_for("/v1/chat/completions"))
    with caplog.at_level(logging.DEBUG):
        result = run_eval(config, scorer=vqa)
    assert result.judge["verdicts"]["judged"] == 4 and len(server.requests_for("/v1/chat/completions")) > asked
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    shown = f"api:tiny-vlm@{server.base_url}?retries=1"
    assert metrics["run_config"]["judge"] == shown  # as given, less its password
    # its identity names its endpoint in one spelling, without how it is asked (issue 45, item 2)
    assert metrics["judge"]["identity"]["spec"] == f"api:tiny-vlm@{server.base_url}".replace("127.0.0.1", "localhost")
    said = capsys.readouterr()
    assert_nowhere(secret, [tmp_path], [said.out, said.err, caplog.text])


@pytest.mark.parametrize(
    ("url", "key", "warned"),
    [
        ("http://alice:pw@192.0.2.1:9/v1", None, "the password in the URL goes over plain http to 192.0.2.1"),
        ("http://192.0.2.1:9/v1", "sk-test", "the API key goes over plain http to 192.0.2.1"),
        ("http://192.0.2.1:9/v1", None, None),  # no key to read: vLLM without --api-key
        ("https://192.0.2.1:9/v1", "sk-test", None),
    ],
)
def test_a_key_over_plain_http_to_another_host_is_warned_about(url, key, warned, monkeypatch, caplog):
    """192.0.2.1 is TEST-NET-1 (RFC 5737): nothing answers; the warning comes before the request fails."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    if key:
        monkeypatch.setenv("SPOTDIFF_API_KEY", key)
    else:
        monkeypatch.delenv("SPOTDIFF_API_KEY", raising=False)
    scorer = load_scorer(f"api:m@{url}?retries=0&timeout=0.2", ScorerOptions())
    with caplog.at_level(logging.WARNING), pytest.raises(EndpointError, match="did not answer after 0 retries"):
        scorer.score_matrix(tiny_images(1), ["a cat"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ([f"endpoint {url.replace('alice:pw@', '')} (model m): {warned}, readable on the way there; "
                         "use an https URL"]
                        if warned else [])  # fmt: skip


def test_retries_0_means_one_try(server):
    scorer = api(server, "&retries=0&concurrency=1")
    asked = len(server.requests_for("/v1/chat/completions"))
    server.inject("500")
    with pytest.raises(EndpointError, match=r"kept failing \(500\) after 0 retries"):
        scorer.score_matrix(tiny_images(1), ["a cat"])
    assert len(server.requests_for("/v1/chat/completions")) == asked + 1


def retry_delays(server, caplog, seed: int) -> list[float]:
    """The waits of a scorer of run seed ``seed`` before asking again after two 500s, from its retry lines."""
    scorer = load_scorer(f"api:tiny-vlm@{server.base_url}?concurrency=1", ScorerOptions(seed=seed))
    caplog.clear()
    server.inject("500", "500")
    with caplog.at_level(logging.INFO, logger="spotdiff.scorers.api"):
        scorer.score_matrix(tiny_images(1), ["a cat"])
    return [float(x) for x in re.findall(r"HTTP 500; retry \d of 4 in ([\d.]+) s", caplog.text)]


def test_retry_jitter_comes_from_the_runs_seed_not_the_global_generator(server, caplog):
    random.seed(7)
    before = random.getstate()
    first, again, other = (retry_delays(server, caplog, seed) for seed in (0, 0, 1))
    assert random.getstate() == before  # the run's seeded global generator is not drawn from
    assert len(first) == 2 and first == again and other != first  # reproducible; another seed, other waits
    assert 0.375 <= first[0] <= 0.5 and 0.75 <= first[1] <= 1.0  # 0.5 s then 1 s, less up to a quarter


def test_quiet_silences_the_retry_lines(server, data, tmp_path, caplog):
    """Without -q each retry is one line naming the endpoint; with -q (progress off) there is none."""
    for progress in (True, False):
        caplog.clear()
        server.inject("500")
        with caplog.at_level(logging.INFO):
            evaluate(api(server, "&concurrency=1"), "winoground", data["winoground"], tmp_path, name=f"q{progress}",
                     progress=progress)  # fmt: skip
        retries = [r.getMessage() for r in caplog.records if "retr" in r.getMessage().lower()]  # any library's
        want = [f"endpoint {server.base_url} (model tiny-vlm): HTTP 500; retry 1 of 3 in "] if progress else []
        assert [m[: len(want[0])] for m in retries] == want if progress else retries == []


def _judge(server, options: str):
    from spotdiff.diagnose.judge import Judge

    return Judge(f"api:tiny-vlm@{server.base_url}?{options}", ScorerOptions())


def test_the_timeout_bounds_the_whole_request_of_models_and_judges(server):
    """Issue 44, item 7: a server that sends its answer a byte at a time (each byte well within the timeout,
    the whole far beyond it) fails after ``timeout`` seconds, for a model and for a judge, as one line."""
    for ask in (
        lambda: api(server, "&retries=0&timeout=1").score_matrix(tiny_images(1), ["a cat"]),
        lambda: _judge(server, "retries=0&timeout=1").grade([("Is it a cat?", "Yes", "yes")]),
    ):
        server.inject("trickle")  # 25 bytes 0.2 s apart, then the rest: 5 s, where the timeout is 1 s
        with pytest.raises(EndpointError, match=r"did not answer after 0 retries \(no answer within 1 s\)") as err:
            ask()
        assert "\n" not in str(err.value)


def test_a_reply_larger_than_asked_is_refused_and_never_cached(server, tmp_path):
    """Issue 44, item 8: a judge's or a model's reply far beyond what its request asked for (max_tokens, the
    log-probabilities asked) is refused in one line and not cached: the next run asks again."""
    from spotdiff.diagnose.cache import Cache, CachedRequests

    judge = _judge(server, "retries=0")
    item = [("Is it a cat?", "Yes", "yes, a cat")]
    with Cache(tmp_path / "judge", judge.digest()) as cache:
        judge.bind(cache)
        server.inject("oversize")  # 4 MiB to a request of 16 tokens
        with pytest.raises(EndpointError, match=r"answered more than \d+ bytes to a request of at most 16 tokens"):
            judge.grade(item)
        asked = len(server.requests_for("/v1/chat/completions"))
        judge.grade(item)  # nothing of the refused reply was kept: asked again
        assert len(server.requests_for("/v1/chat/completions")) == asked + 1
    model = api(server, "&retries=0")
    with Cache(tmp_path / "model", "m") as cache:
        model.bind_requests(CachedRequests(cache, progress=False))
        server.inject("oversize")
        with pytest.raises(EndpointError, match=r"to a request of at most 1 tokens \(20 log-probabilities each\)"):
            model.score_matrix(tiny_images(1), ["a cat"])
        asked = len(server.requests_for("/v1/chat/completions"))
        model.score_matrix(tiny_images(1), ["a cat"])
        assert len(server.requests_for("/v1/chat/completions")) == asked + 1
