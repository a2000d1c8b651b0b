"""``api:MODEL@BASE_URL``: a chat VLM served behind an OpenAI-compatible endpoint (vLLM, SGLang,
llama.cpp's server, hosted APIs), asked through the official ``openai`` client.

VQAScore (Lin et al. 2024, as ``vqa:``) is P("Yes") read from the first answer token's
``top_logprobs``; answer-based choice (EqBen Sec. 5.5) reads the option letters' log-probabilities and
the generated answer; ``answer-prob`` (NaturalBench, MMVP) reads each candidate answer's probability
from the same first token's ``top_logprobs``. Every response is cached before it is used
(:class:`~spotdiff.diagnose.cache.CachedRequests`), requests run concurrently under a limit that halves
on a 429, a 503 or a timeout, across the engine's batches (:meth:`ApiScorer.stream`), and transient failures
are asked again with a backoff whose jitter comes from the run's seed.
A password in the URL and the key never reach what is recorded (docs/security.md). Docs: docs/served.md.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import io
import json
import logging
import math
import os
import random
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from PIL import Image

from spotdiff.cases import LETTER_READERS
from spotdiff.errors import ConfigError, EndpointError
from spotdiff.jsonio import json_row, row_json
from spotdiff.readers import (
    ANSWER_READERS,
    CHOICE_IMAGE_QUESTION,
    CHOICE_STYLES,
    CHOICE_TEXT_QUESTION,
    ChoiceQuestion,
    choice_questions,
    read_choice,
)
from spotdiff.scorers.base import SCORERS, PairScorer, ScorerOptions
from spotdiff.scorers.lm import parse_spec_options
from spotdiff.scorers.vgpt import DESCRIBE_PROMPT
from spotdiff.scorers.video import DEFAULT_FRAMES, frame_rule_option, split_clips
from spotdiff.scorers.vqa import DEFAULT_ANSWER, DEFAULT_QUESTION, option_flag
from spotdiff.urls import canonical_endpoint, is_loopback, redact_text, split_userinfo
from spotdiff.video.clips import Clip, FrameRule

__all__ = [
    "API_KEY_VARS", "ApiScorer", "caption_logprob", "encode_image", "parse_api_spec", "parse_price", "retry_after",
    "yes_probability",
]  # fmt: skip

#: Environment variables read for the endpoint's key, first set wins (vLLM without ``--api-key``
#: accepts any key; ``EMPTY`` is sent when neither is set).
API_KEY_VARS = ("SPOTDIFF_API_KEY", "OPENAI_API_KEY")
#: The cache kind of raw responses.
RESPONSES = "api-response"
#: What the question about a clip's frames opens with: the opening of VLMEvalKit's
#: ``FRAMES_TMPL_NOSUB``, its prompt for a video sent as frames (vlmeval/dataset/videomme.py, commit e757641);
#: spec option ``frames_prompt`` replaces it.
FRAMES_PROMPT = "These are the frames of a video."
#: The resize rule's default: the longer side is at most this many pixels.
DEFAULT_MAX_SIDE = 1024
#: The backoff between tries (the openai client's): 0.5 s, doubled each retry up to 8 s, less a jitter of
#: up to a quarter; a server's ``Retry-After`` up to two minutes is waited instead.
BACKOFF_S, BACKOFF_MAX_S, RETRY_AFTER_MAX_S = 0.5, 8.0, 120.0
#: Requests in flight at most, by default (spec option ``concurrency``): a serving engine batches them (vLLM
#: runs up to 256 sequences at once); a 429, a 503 or a timeout halves it (:class:`_Limit`).
DEFAULT_CONCURRENCY = 64
#: A stream of calls (:meth:`ApiScorer.stream`) takes the next call while fewer than this many times
#: ``concurrency`` requests are unanswered (so a slot that frees always has a request waiting) ...
AHEAD = 2
#: ... and fewer than this many times ``concurrency`` requests are held for calls not yet read (bounded memory
#: while one slow answer holds up the calls after it).
HELD = 64

#: A call's plan (a generator): it yields its requests once, as ``(bodies, digests of their images' bytes)``,
#: is sent their responses in order, and returns the call's result (:meth:`ApiScorer.stream`).
Plan = Generator[tuple[list[dict[str, Any]], dict[str, str]], list[dict[str, Any]], Any]

log = logging.getLogger(__name__)


def parse_api_spec(rest: str) -> tuple[str, str]:
    """Split ``MODEL@BASE_URL`` (the spec after ``api:``, options removed) into (model, base URL).

    >>> parse_api_spec("Qwen/Qwen2.5-VL-72B-Instruct@http://gpu1:8000/v1")
    ('Qwen/Qwen2.5-VL-72B-Instruct', 'http://gpu1:8000/v1')
    """
    model, sep, url = rest.partition("@")
    if not sep or not model or not url.startswith(("http://", "https://")) or not _names_a_host(url):
        raise ConfigError(
            f"api spec {redact_text(rest)!r}: expected MODEL@BASE_URL, e.g. "
            "api:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1"
        )
    return model, url.rstrip("/")


def _names_a_host(url: str) -> bool:
    """Whether ``url`` names a host (and, when it names a port, one that is a number)."""
    try:
        parts = urlsplit(url)
        return bool(parts.hostname) and (parts.port is None or parts.port >= 0)
    except ValueError:  # urlsplit's port of a URL whose port is not a number
        return False


def encode_image(image: Image.Image, max_side: int) -> tuple[str, str]:
    """The image as a base64 PNG data URL, and the SHA-256 of the PNG bytes.

    The resize rule (recorded in the scorer's identity): RGB; when the longer side exceeds
    ``max_side``, scaled down (aspect kept, Lanczos) so that it equals ``max_side``; PNG is lossless,
    so an image within the limit reaches the server pixel for pixel.

    Args:
        image: a decoded image.
        max_side: the longest side sent, in pixels (0: never resized).
    """
    image = image.convert("RGB")
    if max_side and max(image.size) > max_side:
        scale = max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    data = buf.getvalue()
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii"), hashlib.sha256(data).hexdigest()


def yes_probability(top: Sequence[dict], answer: str, spellings: str) -> tuple[float, bool]:
    """P(answer) from one token's ``top_logprobs`` entries, and whether it is only a bound.

    ``spellings="all"`` sums every entry whose text, stripped and lower-cased, is the answer's
    (``"Yes"``, ``" Yes"``, ``"yes"``, ...); ``"exact"`` takes the entry equal to the answer (as
    t2v_metrics' GPT-4V model). When no entry matches, the answer's probability is below the
    smallest listed one: that bound is returned, flagged True.

    >>> top = [{"token": " Yes", "logprob": -0.5}, {"token": "No", "logprob": -1.5}, {"token": "yes", "logprob": -2.0}]
    >>> p, bounded = yes_probability(top, "Yes", "all"); round(p, 4), bounded
    (0.7419, False)
    >>> p, bounded = yes_probability(top[1:2], "Yes", "exact"); round(p, 4), bounded
    (0.2231, True)
    """
    want = answer.strip().lower()
    hits = [
        e["logprob"]
        for e in top
        if (e["token"].strip().lower() == want if spellings == "all" else e["token"] == answer)
    ]
    if hits:
        return float(np.exp(hits).sum()), False
    return float(np.exp(min(e["logprob"] for e in top))), True


class _Limit:
    """At most ``limit`` requests in flight, admitted in arrival order; the limit halves when the server says
    it is overloaded (a 429 or 503, a request that timed out) and grows back by one per ``limit`` successes
    (additive increase, multiplicative decrease)."""

    def __init__(self, limit: int) -> None:
        self.top = self.limit = float(limit)
        self.active = 0
        self.throttled = 0
        self._waiting: deque[asyncio.Future] = deque()

    async def __aenter__(self) -> None:
        if self.active < int(self.limit) and not self._waiting:
            self.active += 1
            return
        admitted = asyncio.get_running_loop().create_future()
        self._waiting.append(admitted)
        await admitted  # the slot was counted by whoever admitted it

    async def __aexit__(self, *exc: object) -> None:
        self.active -= 1
        self._admit()

    def _admit(self) -> None:
        while self._waiting and self.active < int(self.limit):
            admitted = self._waiting.popleft()
            if not admitted.done():  # a cancelled waiter is skipped
                self.active += 1
                admitted.set_result(None)

    async def on_response(self, response: Any) -> None:
        """An HTTP response hook: a 429 or 503 halves the limit (the client then retries it)."""
        if response.status_code in (429, 503):
            self.congested()

    def congested(self) -> None:
        """The server is overloaded: halve the limit (counted in :attr:`throttled`)."""
        self.throttled += 1
        self.limit = max(1.0, self.limit / 2)

    def succeeded(self) -> None:
        self.limit = min(self.top, self.limit + 1 / self.limit)
        self._admit()


class _Flight:
    """The requests of a stream of calls on one event loop (:meth:`ApiScorer._drive`): each request is answered
    from the cache or sent once (its response stored as it arrives), under one :class:`_Limit`."""

    def __init__(self, scorer: ApiScorer) -> None:
        self.scorer = scorer
        self.loop = asyncio.new_event_loop()
        self.limit = _Limit(scorer.concurrency)
        self.stop = asyncio.Event()
        self.client: Any = None
        #: Requests sent and not answered yet, by task; responses held for the calls not read yet.
        self.tasks: dict[asyncio.Task, str] = {}
        self.docs: dict[str, dict[str, Any]] = {}
        self.wanted: Counter[str] = Counter()
        self.failure: BaseException | None = None

    def has_room(self, held: int) -> bool:
        """Whether another call's requests may be taken (see :data:`AHEAD`, :data:`HELD`)."""
        top = self.limit.top
        return len(self.tasks) < AHEAD * top and held < HELD * top

    def ask(self, keys: list[str], bodies: list[dict[str, Any]]) -> None:
        """Read the cached responses among ``keys``; send the others not already sent."""
        self.wanted.update(keys)
        sent = set(self.tasks.values())
        new = [i for i, k in enumerate(keys) if k not in self.docs and k not in sent]
        requests = self.scorer.requests
        if requests is not None and new:  # outside an engine there is no cache to read
            found, todo = requests.lookup(RESPONSES, [keys[i] for i in new])
            self.docs.update((k, row_json(row)) for k, row in found.items())
            new = [new[j] for j in todo]
        for i in new:
            key = keys[i]
            if key in sent:  # asked twice in one call
                continue
            if self.client is None:
                self.client = self.loop.run_until_complete(self.scorer._client(self.limit))
            task = self.loop.create_task(self.scorer._one(self.client, self.limit, self.stop, bodies[i]))
            self.tasks[task] = key
            sent.add(key)

    def answered(self, keys: list[str]) -> bool:
        return all(k in self.docs for k in keys)

    def take(self, keys: list[str]) -> list[dict[str, Any]]:
        """The responses to ``keys``, in order; those no later call wants are let go."""
        docs = [self.docs[k] for k in keys]
        self.wanted.subtract(keys)
        for key in keys:
            if self.wanted[key] <= 0:
                self.docs.pop(key, None)
                del self.wanted[key]
        return docs

    def wait(self) -> None:
        """Wait for the next answers; store each (a failure stops new requests; the first is kept)."""
        done, _ = self.loop.run_until_complete(asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED))
        for task in done:
            key = self.tasks.pop(task)
            if task.exception() is not None:
                self.failure = self.failure or task.exception()
                self.stop.set()
            elif task.result() is not None:
                if self.scorer.requests is not None:
                    self.scorer.requests.store(RESPONSES, [(key, json_row(task.result()))])
                self.docs[key] = task.result()

    def drain(self) -> None:
        """Stop sending; wait for (and store) every answer in flight."""
        self.stop.set()
        while self.tasks:
            self.wait()

    def close(self) -> None:
        run = self.loop.run_until_complete
        try:
            for task in self.tasks:
                task.cancel()
            if self.tasks:
                run(asyncio.wait(self.tasks))
            if self.client is not None:
                run(self.client.close())
        finally:
            self.scorer.usage["throttled"] += self.limit.throttled
            self.loop.close()


def parse_price(value: object) -> tuple[float, float] | None:
    """The spec option ``price=IN/OUT``: US dollars per million prompt and completion tokens (a provider's
    price list), from which the run records its cost; None when not given.

    >>> parse_price("2.5/10")
    (2.5, 10.0)
    """
    if value is None:
        return None
    try:
        per_in, per_out = (float(x) for x in str(value).split("/"))
    except ValueError:
        expected = "expected IN/OUT, US dollars per million tokens (e.g. 2.5/10)"
        raise ConfigError(f"option price={value!r}: {expected}") from None
    if not (math.isfinite(per_in) and math.isfinite(per_out)) or per_in < 0 or per_out < 0:
        raise ConfigError(f"option price={value!r}: prices are finite and >= 0")
    return per_in, per_out


@SCORERS.register("api")
class ApiScorer(PairScorer):
    """A served chat VLM: VQAScore, answer-based choice and candidate answers' log-probabilities through
    an OpenAI-compatible endpoint."""

    capabilities = frozenset({"image-text", "match-prob", "choice-text", "choice", "answer-prob"})
    computes_here = False  # the server computes; this client only asks
    OPTIONS = (
        "question", "answer", "system", "spellings", "top_logprobs", "generate", "max_side",
        "concurrency", "timeout", "retries", "multi_image", "score", "price", "frames", "frames_prompt",
    )  # fmt: skip

    def __init__(self, rest: str, options: ScorerOptions) -> None:
        super().__init__(f"api:{redact_text(rest)}", options)  # the spec as recorded: no password
        name, opts = parse_spec_options(rest, options, self.OPTIONS)
        self.model, url = parse_api_spec(name)
        #: The URL as given less its user name and password (those go to the HTTP client only).
        self.base_url, self._auth = split_userinfo(url)
        #: The server, one spelling per server (the model's identity, so the cache's key).
        self.endpoint = canonical_endpoint(self.base_url)
        self.question = str(opts.get("question", DEFAULT_QUESTION))
        self.answer = str(opts.get("answer", DEFAULT_ANSWER))
        self.system = opts.get("system")
        self.spellings = str(opts.get("spellings", "exact"))
        if self.spellings not in ("all", "exact"):
            raise ConfigError(f"option spellings={self.spellings!r}: expected all or exact")
        ints = {k: _positive(opts, k, d) for k, d in (("top_logprobs", 20), ("concurrency", DEFAULT_CONCURRENCY))}
        self.top_logprobs, self.concurrency = ints["top_logprobs"], ints["concurrency"]
        self.retries = _positive(opts, "retries", 4, minimum=0)
        #: The retries' jitter: a generator of its own, seeded by the run's seed and the process's rank
        #: (a run's waits repeat; runs of other seeds and other ranks do not retry in lockstep; the
        #: global generators the run seeded are left alone).
        self._jitter = random.Random(f"spotdiff-api-retries:{options.seed}:{os.environ.get('RANK', '0')}")
        self._verbose = True  # say each retry (the engine's door says whether: not under --quiet)
        self._warned_plain_http = False
        self.generate = _positive(opts, "generate", 8, minimum=0)
        self.max_side = _positive(opts, "max_side", DEFAULT_MAX_SIDE, minimum=0)
        try:
            self.timeout = float(opts.get("timeout", 60))
        except ValueError as exc:
            raise ConfigError(f"option timeout={opts.get('timeout')!r}: expected seconds") from exc
        self.multi_image = option_flag(opts.get("multi_image", "yes"), "multi_image")
        self.score = str(opts.get("score", "vqa"))
        if self.score not in ("vqa", "vgpt"):
            raise ConfigError(f"option score={self.score!r}: expected vqa (VQAScore) or vgpt (VisualGPTScore)")
        if "{}" not in self.question:
            raise ConfigError(f"question template {self.question!r} has no {{}} for the text")
        self.price = parse_price(opts.get("price"))
        self.rule = frame_rule_option(opts, DEFAULT_FRAMES)  # a clip is sent as these frames, as images
        self.frames_prompt = str(opts.get("frames_prompt", FRAMES_PROMPT))
        self.requests: Any = None  # the engine's cached door (bind_requests)
        self.responses = {"computed": 0, "cached": 0}
        self.usage = {"sent": 0, "bounded": 0, "no_letter": 0, "unparseable": 0, "prompt_tokens": 0,
                      "completion_tokens": 0, "throttled": 0}  # fmt: skip
        pair = {"image-text", "match-prob"} if self.score == "vqa" else {"image-text"}  # vgpt: a log-probability
        asked = {"choice-text", "answer-prob"} | ({"choice"} if self.multi_image else set())
        self.capabilities = frozenset(pair | asked)

    def identity(self) -> dict[str, Any]:
        return {
            "spec": f"api:{self.model}@{self.endpoint}",
            "class": "ApiScorer",
            "model": self.model,
            "base_url": self.endpoint,
            "question": self.question,
            "answer": self.answer,
            "system": self.system,
            "score": self.score,
            "vgpt_prompt": DESCRIBE_PROMPT if self.score == "vgpt" else None,
            "spellings": self.spellings,
            "top_logprobs": self.top_logprobs,
            "generate": self.generate,
            "image_encoding": f"PNG data URL, RGB, longer side scaled down (Lanczos) to at most {self.max_side} px",
            "frames_prompt": self.frames_prompt,
            "choice": {"text_question": CHOICE_TEXT_QUESTION, "image_question": CHOICE_IMAGE_QUESTION},
            "device": "remote",
            "dtype": None,
        }

    def frame_rule(self) -> FrameRule:
        """A clip is sent as these frames (spec option ``frames``), each an image, the question opening with
        :attr:`frames_prompt`."""
        return self.rule

    def cannot(self, need: str) -> str | None:
        if need == "choice" and not self.multi_image:
            return "'which image' questions show several images in one prompt; spec option multi_image=yes allows them"
        return None

    def bind_requests(self, requests: Any) -> None:
        """Cache every response through ``requests`` (the engine's cached door, on the run's cache)."""
        self.requests = requests
        if requests is not None:
            self.responses = requests.stats
            self._verbose = requests.verbose

    def run_usage(self) -> dict[str, Any]:
        """What the run cost and what it could not read (recorded with the run): requests sent,
        responses read from the cache, tokens, bounded scores, answers that could not be read."""
        usage = {"endpoint": self.base_url, "model": self.model, **self.usage, "responses": dict(self.responses)}
        if self.price is not None:
            per_in, per_out = self.price
            usage["price_usd_per_million_tokens"] = {"prompt": per_in, "completion": per_out}
            usage["cost_usd"] = (self.usage["prompt_tokens"] * per_in + self.usage["completion_tokens"] * per_out) / 1e6
        return usage

    # -- requests ------------------------------------------------------------------------------
    def _body(self, parts: Sequence[dict[str, Any]], question: str, max_tokens: int) -> dict[str, Any]:
        """A chat request: one user turn of ``parts`` (:meth:`_encode`'s images and frames) and the question."""
        content = [*parts, {"type": "text", "text": question}]
        messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
        if self.system is not None:
            messages.insert(0, {"role": "system", "content": self.system})
        return {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "logprobs": True,
            "top_logprobs": self.top_logprobs,
        }

    def _vgpt_body(self, parts: Sequence[dict[str, Any]], text: str) -> dict[str, Any]:
        """The caption as the assistant's turn after vgpt:'s describe prompt, continued rather than
        answered, asking for the prompt tokens' log-probabilities (vLLM's chat extensions)."""
        body = self._body(parts, DESCRIBE_PROMPT, 1)
        body["messages"].append({"role": "assistant", "content": text})
        del body["logprobs"], body["top_logprobs"]
        body["extra_body"] = {"add_generation_prompt": False, "continue_final_message": True, "prompt_logprobs": 0}
        return body

    def stream(self, method: Callable[..., Any], calls: Iterable[tuple]) -> Iterator[Any]:
        """``method(*args)`` for each ``args`` of ``calls``, in order, with requests in flight across calls: the
        next calls' requests are sent while earlier ones wait for their slowest answers, so that ``concurrency``
        requests stay in flight whatever the engine's batches (:class:`~spotdiff.scorers.base.Streaming`).

        Args:
            method: one of this scorer's asking methods (``score_pairs``, ``answer_scores``, ``answer_texts``,
                ``answer_choices``, ``chat_replies``).
            calls: each call's arguments, taken as the requests in flight leave room.
        """
        plan = getattr(self, f"_plan_{getattr(method, '__name__', '')}", None)
        if plan is None or getattr(method, "__self__", None) is not self:
            raise ValueError(f"{method!r} is not one of this scorer's asking methods")
        return self._drive(plan(*args) for args in calls)

    def _answered(self, plan: Plan) -> Any:
        """One call's result (:meth:`stream` of a single call)."""
        with contextlib.closing(self._drive(iter([plan]))) as results:
            return next(results)

    def _drive(self, plans: Iterator[Plan]) -> Iterator[Any]:
        """Each plan's result, in order. A plan's requests are answered from the cache or sent, at most
        ``concurrency`` at a time (:class:`_Limit`), while the next plans are taken whenever fewer than
        :data:`AHEAD` times that many requests are unanswered (and fewer than :data:`HELD` times that many
        are held for plans not yet read); each response is stored as it arrives. On a failure no further
        request starts, those in flight are awaited and stored, then the first failure is raised."""
        flight = _Flight(self)
        window: deque[tuple[Plan, list[str]]] = deque()
        held, more = 0, True
        try:
            while True:
                while more and flight.failure is None and (not window or flight.has_room(held)):
                    plan = next(plans, None)
                    if plan is None:
                        more = False
                        break
                    bodies, digests = next(plan)
                    keys = [_request_key(b, digests) for b in bodies]
                    flight.ask(keys, bodies)
                    window.append((plan, keys))
                    held += len(keys)
                while window and flight.answered(window[0][1]):
                    plan, keys = window.popleft()
                    held -= len(keys)
                    yield self._read(plan, flight.take(keys))
                if flight.failure is not None and not flight.tasks:
                    raise flight.failure
                if not window and not more:
                    return
                flight.wait()
        except Exception:
            flight.drain()  # what is in flight is awaited and kept
            raise
        finally:
            flight.close()

    def _read(self, plan: Plan, docs: list[dict[str, Any]]) -> Any:
        """A plan's result from its responses (their tokens counted in :attr:`usage`)."""
        for doc in docs:
            usage = doc.get("usage") or {}
            self.usage["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            self.usage["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        try:
            plan.send(docs)
        except StopIteration as done:
            return done.value
        raise RuntimeError("a plan asks its requests once")

    async def _client(self, limit: _Limit) -> Any:
        """The client, retrying nothing itself (:meth:`_create` does); a user name and password from the
        URL go as HTTP basic authentication, outside the URL (the HTTP library logs URLs)."""
        import openai

        key = next((os.environ[v] for v in API_KEY_VARS if os.environ.get(v)), None)
        parts = urlsplit(self.base_url)
        if (key or self._auth) and parts.scheme == "http" and not is_loopback(parts.hostname):
            if not self._warned_plain_http:
                log.warning(
                    "%s: the %s goes over plain http to %s, readable on the way there; use an https URL",
                    self._where(), "password in the URL" if self._auth else "API key", parts.hostname,
                )  # fmt: skip
            self._warned_plain_http = True
        http = openai.DefaultAsyncHttpxClient(event_hooks={"response": [limit.on_response]}, auth=self._auth)
        return openai.AsyncOpenAI(
            api_key=key or "EMPTY", base_url=self.base_url, max_retries=0, timeout=self.timeout, http_client=http
        )

    async def _one(self, client: Any, limit: _Limit, stop: asyncio.Event, body: dict) -> dict[str, Any] | None:
        """One request: its response, after checking it holds what was asked (None: not sent, another failed
        first)."""
        async with limit:
            if stop.is_set():
                return None
            try:
                doc = await self._create(client, body, limit)
                self.usage["sent"] += 1
                _check_response(doc, self._where(), body)
            except BaseException:
                stop.set()  # before the limit is released: no request starts after a failure
                raise
            limit.succeeded()
            return doc

    async def _create(self, client: Any, body: dict, limit: _Limit) -> dict[str, Any]:
        """A ``POST /chat/completions`` of ``body`` through the client (``extra_body`` merged in, as
        ``chat.completions.create`` merges it), read as the JSON the server sent. What may pass (a 408, 409, 429
        or 5xx, a timeout, a dropped connection, a body that is not JSON) is asked again, up to ``retries``
        times, after :meth:`_delay`; each retry is one log line, unless quiet."""
        import openai

        payload = {**{k: v for k, v in body.items() if k != "extra_body"}, **body.get("extra_body", {})}
        for attempt in range(self.retries + 1):
            try:  # the body as it is (it is ours: the client's typed-parameter pass would only copy it)
                text = await client.post("/chat/completions", body=payload, cast_to=str)
                doc = json.loads(text)
                if not isinstance(doc, dict):
                    raise json.JSONDecodeError("not a JSON object", text, 0)
                return doc
            except (json.JSONDecodeError, openai.APIError) as exc:
                if isinstance(exc, openai.APITimeoutError):
                    limit.congested()  # a queue longer than the timeout: fewer requests at once
                reason = _transient(exc)
                if reason is None or attempt == self.retries:
                    raise EndpointError(_explain(exc, self._where(), self.retries)) from exc
                delay = self._delay(attempt, exc)
                if self._verbose:
                    log.info("%s: %s; retry %d of %d in %.3f s", self._where(), reason, attempt + 1, self.retries,
                             delay)  # fmt: skip
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, exc: Exception) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After``, else the backoff
        (:data:`BACKOFF_S`) less a jitter drawn from the scorer's own seeded generator."""
        response = getattr(exc, "response", None)
        after = retry_after(response.headers) if response is not None else None
        if after is not None:
            return after
        return min(BACKOFF_S * 2**attempt, BACKOFF_MAX_S) * (1 - 0.25 * self._jitter.random())

    def _where(self) -> str:
        return f"endpoint {self.base_url} (model {self.model})"  # base_url holds no password

    def _encode(self, images: Sequence[Image.Image | Clip]) -> tuple[list[list[dict[str, Any]]], dict[str, str], str]:
        """Each image's content part (its data URL) or each clip's (its frames' data URLs, in order: an endpoint
        that takes no video sees a clip as its frames), the digest of each URL's image bytes (for the cache keys),
        and what the question then opens with (:attr:`frames_prompt` and a new line when the items are clips).
        """
        parts, digests = [], {}
        for item in images:
            urls = []
            for frame in item.frames if isinstance(item, Clip) else (item,):
                url, digests[url] = encode_image(frame, self.max_side)
                urls.append({"type": "image_url", "image_url": {"url": url}})
            parts.append(urls)
        return parts, digests, f"{self.frames_prompt}\n" if split_clips(images, self.spec) else ""

    # -- scoring -------------------------------------------------------------------------------
    def score_pairs(self, images: Sequence[Image.Image], texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """For each image, ``[n_texts, 2]``: VQAScore, and 1 where it is only a bound (the answer
        was not among the ``top_logprobs``; the score is then the smallest listed probability); or,
        with ``score=vgpt``, log VisualGPTScore (:func:`caption_logprob`) and 0."""
        return self._answered(self._plan_score_pairs(images, texts))

    def _plan_score_pairs(self, images: Sequence[Image.Image], texts: Sequence[Sequence[str]]) -> Plan:
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} images but {len(texts)} text lists")
        urls, digests, opening = self._encode(images)
        if self.score == "vgpt":
            bodies = [self._vgpt_body(p, t) for p, ts in zip(urls, texts, strict=True) for t in ts]
            docs = iter((yield bodies, digests))
            where = self._where()
            return [np.array([[caption_logprob(next(docs), t, where), 0.0] for t in ts]).reshape(-1, 2) for ts in texts]
        q = self.question
        bodies = [self._body(p, opening + q.format(t), 1) for p, ts in zip(urls, texts, strict=True) for t in ts]
        docs = iter((yield bodies, digests))
        out = []
        for ts in texts:
            rows = [yes_probability(_first_top(next(docs)), self.answer, self.spellings) for _ in ts]
            self.usage["bounded"] += sum(b for _, b in rows)
            out.append(np.array(rows, dtype=np.float64).reshape(len(ts), 2))
        return out

    def score_matrix(self, images: Sequence[Image.Image], texts: Sequence[str]) -> np.ndarray:
        rows = self.score_pairs(images, [list(texts)] * len(images))
        return np.array([r[:, 0] for r in rows], dtype=np.float32).reshape(len(images), len(texts))

    def answer_choices(
        self, images: Sequence[Image.Image], texts: Sequence[str], need: str, style: str = "spotdiff"
    ) -> np.ndarray:
        """Answer-based choices of one K x K case, as ``vqa:``'s (``[n_questions, n_orders, 1 or 2]``;
        readings: the option whose label is most likely as the first answer token among the
        ``top_logprobs``, and the generated answer read as the style's authors read it).

        Args:
            images: the case's K images.
            texts: its K texts.
            need: ``"choice"`` (caption and image questions) or ``"choice-text"`` (caption questions only).
            style: the question style (:data:`~spotdiff.readers.CHOICE_STYLES`), the case's tag ``prompts``.
        """
        return self._answered(self._plan_answer_choices(images, texts, need, style))

    def _plan_answer_choices(
        self, images: Sequence[Image.Image], texts: Sequence[str], need: str, style: str = "spotdiff"
    ) -> Plan:
        k = len(texts)
        if len(images) != k:
            raise ConfigError(f"answer-based questions need K x K candidates, got {len(images)} x {k}")
        if need == "choice" and not self.multi_image:
            raise ConfigError(self.cannot("choice") or "")
        how = CHOICE_STYLES[style]
        questions = choice_questions(texts, need == "choice", how)
        parts, digests, opening = self._encode(images)
        tokens = max(1, self.generate)
        bodies = [self._body([p for i in q.images for p in parts[i]], opening + q.question, tokens) for q in questions]
        docs = yield bodies, digests
        n_orders = len(how.orders(k))
        out = np.full((len(questions) // n_orders, n_orders, 2 if self.generate else 1), np.nan)
        for n, (q, doc) in enumerate(zip(questions, docs, strict=True)):
            row, o = divmod(n, n_orders)
            out[row, o, 0] = self._label_choice(_first_top(doc), q)
            if self.generate:
                said = read_choice(how, q, texts, doc["choices"][0]["message"].get("content") or "")
                self.usage["unparseable"] += said is None
                out[row, o, 1] = np.nan if said is None else said
        return out

    def answer_scores(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[Sequence[str]],
        answers: Sequence[str],
        reader: str = "words",
    ) -> list[np.ndarray]:
        """Per image, ``[n_questions, n_answers (+ 1)]``, as ``vqa:``'s: each candidate answer's
        log-probability as the first answer token, read from its ``top_logprobs`` (spellings combined
        as :func:`yes_probability` combines them, except for the letter readers, whose option letters
        count only as themselves, as the choice path reads them: a lower-case "a" is an article; a
        candidate not listed gets the bound, counted in ``bounded``), and with ``generate=N`` a last
        column: the candidate the answer of up to N tokens gives, read by ``reader``
        (:data:`~spotdiff.readers.ANSWER_READERS`), NaN when it gives none.

        Only the first token is read: candidates are single words or letters (Yes/No, A/B), which a
        chat tokenizer spells as one token; a candidate of several words is refused.

        Args:
            images: the images.
            questions: each image's questions, each asked as it is, with the image alone.
            answers: the candidate answers (``("Yes", "No")``, ``("A", "B")``).
            reader: how a generated answer is read: ``words`` or ``letter``.
        """
        return self._answered(self._plan_answer_scores(images, questions, answers, reader))

    def _plan_answer_scores(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[Sequence[str]],
        answers: Sequence[str],
        reader: str = "words",
    ) -> Plan:
        if len(images) != len(questions):
            raise ValueError(f"{len(images)} images but {len(questions)} question lists")
        several = [a for a in answers if len(a.split()) != 1]
        if several:
            raise ConfigError(
                f"api: reads a candidate answer's probability from the first answer token only; candidates "
                f"{several!r} are not single words or letters (use vqa: in process, which scores every token)"
            )
        read = ANSWER_READERS[reader]
        spellings = "exact" if reader in LETTER_READERS else self.spellings
        urls, digests, opening = self._encode(images)
        asked = [(p, opening + q) for p, qs in zip(urls, questions, strict=True) for q in qs]
        bodies = [self._body(p, q, max(1, self.generate)) for p, q in asked]
        docs = iter((yield bodies, digests))
        out = []
        for qs in questions:
            rows = []
            for doc in (next(docs) for _ in qs):
                probs = [yes_probability(_first_top(doc), a, spellings) for a in answers]
                self.usage["bounded"] += sum(b for _, b in probs)
                row = [math.log(p) for p, _ in probs]
                if self.generate:
                    said = read(doc["choices"][0]["message"].get("content") or "", answers)
                    self.usage["unparseable"] += said is None
                    row.append(np.nan if said is None else float(said))
                rows.append(row)
            out.append(np.array(rows, dtype=np.float64).reshape(len(qs), len(answers) + bool(self.generate)))
        return out

    def answer_texts(self, images: Sequence[Image.Image], questions: Sequence[Sequence[str]]) -> list[list[str]]:
        """Per image, the generated answer to each of its questions, from the same requests (and cached
        responses) as :meth:`answer_scores`'s (what ``--judge`` grades).

        Args:
            images: the images.
            questions: each image's questions, each asked as it is, with the image alone.
        """
        return self._answered(self._plan_answer_texts(images, questions))

    def _plan_answer_texts(self, images: Sequence[Image.Image], questions: Sequence[Sequence[str]]) -> Plan:
        if not self.generate:
            raise ConfigError(f"{self.spec} generates no answers (generate=0): give generate=N (N new tokens)")
        urls, digests, opening = self._encode(images)
        bodies = [self._body(p, opening + q, self.generate) for p, qs in zip(urls, questions, strict=True) for q in qs]
        docs = iter((yield bodies, digests))
        return [[next(docs)["choices"][0]["message"].get("content") or "" for _ in qs] for qs in questions]

    def chat_replies(self, conversations: Sequence[list[dict[str, Any]]], max_tokens: int) -> list[str | None]:
        """The model's greedy replies (``temperature=0``, no log-probabilities) to text-only conversations, None
        where a response holds no reply (``spotdiff eval --judge``).

        Args:
            conversations: each a list of ``{"role", "content"}`` messages.
            max_tokens: the most tokens a reply may have.
        """
        return self._answered(self._plan_chat_replies(conversations, max_tokens))

    def _plan_chat_replies(self, conversations: Sequence[list[dict[str, Any]]], max_tokens: int) -> Plan:
        bodies = [{"model": self.model, "messages": m, "max_tokens": max_tokens, "temperature": 0.0}
                  for m in conversations]  # fmt: skip
        docs = yield bodies, {}
        return [((doc.get("choices") or [{}])[0].get("message") or {}).get("content") for doc in docs]

    def _label_choice(self, top: Sequence[dict], question: ChoiceQuestion) -> float:
        """The candidate whose label is most likely among the listed tokens (NaN: none listed, or a tie):
        an option letter only as itself, a word ("First") in the spellings of option ``spellings``
        (:func:`yes_probability`)."""
        best: dict[int, float] = {}
        for p, label in enumerate(question.labels):
            prob, bounded = yes_probability(top, label, "exact" if len(label) == 1 else self.spellings)
            if not bounded:
                best[p] = math.log(prob)
        if not best:
            self.usage["no_letter"] += 1
            return np.nan
        top_lp = max(best.values())
        winners = [p for p, lp in best.items() if lp == top_lp]
        return float(question.order[winners[0]]) if len(winners) == 1 else np.nan


def _positive(opts: dict, name: str, default: int, minimum: int = 1) -> int:
    try:
        value = int(opts.get(name, default))
    except ValueError as exc:
        raise ConfigError(f"option {name}={opts.get(name)!r}: expected a whole number") from exc
    if value < minimum:
        raise ConfigError(f"option {name}={value}: must be at least {minimum}")
    return value


def _request_key(body: dict[str, Any], digests: dict[str, str]) -> str:
    """The cache key of a request: the endpoint's model name and the full request, each image's
    data URL replaced by the SHA-256 of its bytes."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return f"sha256:{digests[value]}" if isinstance(value, str) and value in digests else value

    text = json.dumps(strip(body), sort_keys=True, ensure_ascii=False)
    return "api:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_response(doc: dict[str, Any], where: str, body: dict[str, Any]) -> None:
    """Refuse a response without what its request asked for (before it is cached): the first
    token's ``top_logprobs``, or the prompt's ``prompt_logprobs`` (a text request asks for neither)."""
    choices = doc.get("choices") or []
    if choices and choices[0].get("finish_reason") == "content_filter":
        raise EndpointError(f"{where} refused the request (content policy); this case cannot be scored there")
    if not body.get("logprobs") and "extra_body" not in body:
        return  # a text request (chat_replies): its reply is read by the caller, a missing one counted there
    if "prompt_logprobs" in body.get("extra_body", {}):
        if not doc.get("prompt_logprobs"):
            raise EndpointError(
                f"{where} returned no prompt_logprobs: VisualGPTScore (score=vgpt) needs the prompt tokens' "
                "log-probabilities, which vLLM returns; use score=vqa there, or vgpt: in-process"
            )
        return
    logprobs = (choices[0].get("logprobs") or {}) if choices else {}
    content = logprobs.get("content") or []
    if not content or not content[0].get("top_logprobs"):
        raise EndpointError(
            f"{where} answered without top_logprobs: serve the model with log-probabilities enabled "
            "(vLLM, SGLang and llama.cpp's server return them; vLLM caps them with --max-logprobs), "
            "or use another endpoint"
        )


def caption_logprob(doc: dict[str, Any], text: str, where: str) -> float:
    """log VisualGPTScore (Eq. 2, the mean over the caption's tokens) from a response's
    ``prompt_logprobs``: the caption is the prompt's last tokens, found by their decoded text.

    >>> doc = {"prompt_logprobs": [None, {"7": {"logprob": -9.0, "decoded_token": "\\n"}},
    ...        {"3": {"logprob": -1.0, "decoded_token": "a"}}, {"4": {"logprob": -2.0, "decoded_token": " cat"}}]}
    >>> caption_logprob(doc, "a cat", "here")
    -1.5
    """
    entries = [next(iter(e.values())) for e in doc["prompt_logprobs"][1:]]
    joined = ""
    for n in range(1, len(entries) + 1):
        joined = entries[-n]["decoded_token"] + joined
        if joined == text:
            return float(np.mean([e["logprob"] for e in entries[-n:]]))
        if len(joined) >= len(text):
            break
    raise EndpointError(f"{where}: the prompt's last tokens do not spell the caption {text!r}; cannot score it")


def _first_top(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["choices"][0]["logprobs"]["content"][0]["top_logprobs"]


def retry_after(headers: Any) -> float | None:
    """The seconds a response asks to wait before asking again (``retry-after-ms``, else ``Retry-After``
    in seconds or as a date), when given and at most :data:`RETRY_AFTER_MAX_S`; else None.

    >>> retry_after({"retry-after-ms": "20", "retry-after": "1"}), retry_after({"retry-after": "600"})
    (0.02, None)

    Args:
        headers: the response's headers (a case-insensitive mapping).
    """
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            try:
                seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
            except (TypeError, ValueError):
                continue
        return seconds if 0 < seconds <= RETRY_AFTER_MAX_S else None
    return None


def _transient(exc: Exception) -> str | None:
    """What went wrong, when asking again may help (as the openai client's own rule: 408, 409, 429, 5xx,
    timeouts, dropped connections; and a body that is not JSON); None when it will not."""
    import openai

    if isinstance(exc, json.JSONDecodeError):
        return "a response that is not JSON"
    if isinstance(exc, openai.APITimeoutError):
        return "no answer in time"
    if isinstance(exc, openai.APIConnectionError):
        return "the connection failed"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status in (408, 409, 429) or status >= 500):
        return f"HTTP {status}"
    return None


def _explain(exc: Exception, where: str, retries: int) -> str:
    """One line for a failed request: what happened at ``where`` and what to do."""
    import openai

    status = getattr(exc, "status_code", None)
    after, resume = f"after {retries} retries", "a re-run resumes from the cache"
    explained = (  # the failure, and what to do
        (json.JSONDecodeError, f"sent unreadable responses ({exc}) {after}; check the server; {resume}"),
        ((openai.AuthenticationError, openai.PermissionDeniedError),
         f"refused the key ({status}): set {' or '.join(API_KEY_VARS)} to a key it accepts"),
        (openai.NotFoundError, f"does not serve this model ({status}): use a name its /models route lists"),
        (openai.RateLimitError, f"still rate-limited {after}: lower concurrency= in the spec; {resume}"),
        ((openai.APITimeoutError, openai.APIConnectionError),
         f"did not answer {after} ({type(exc).__name__}): check the server; {resume}"),
        (openai.InternalServerError, f"kept failing ({status}) {after}: check the server's log; {resume}"),
    )  # fmt: skip
    said = next((line for kinds, line in explained if isinstance(exc, kinds)), None)
    if said is not None:
        return f"{where} {said}"
    detail = str(getattr(exc, "message", exc)).replace("\n", " ")[:200]
    return f"{where} refused the request ({status}: {detail}); check the spec's options against what it supports"
