"""A client of any OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, hosted APIs): the requests in flight.

:class:`ChatClient` sends ``POST /chat/completions`` requests through the official ``openai`` client, at most
``concurrency`` in flight under a limit that halves on a 429, a 503 or a timeout (:class:`Limit`), across a stream
of calls (:meth:`ChatClient.stream`); each try of a request is bounded as a whole by the timeout and its
response read only up to what the request asked for (:func:`reply_limit`); each response is cached before it is
used (the engine's :class:`~spotdiff.diagnose.cache.CachedRequests`), and transient failures are asked again with a
backoff whose jitter comes from the run's seed, or after the server's ``Retry-After``. Moved out of
:mod:`spotdiff.scorers.api` (issue 43): the ``api:`` scorer writes the requests and reads the responses (and so
does the LLM judge, ``spotdiff.diagnose.judge``, through the scorer's ``chat_replies``); this module only asks.
Docs: docs/served.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import random
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from spotdiff.errors import EndpointError
from spotdiff.jsonio import json_row, row_json
from spotdiff.urls import is_loopback

__all__ = [
    "AHEAD", "API_KEY_VARS", "DEFAULT_CONCURRENCY", "HELD", "RESPONSES", "ChatClient", "Limit", "Plan", "reply_limit",
    "request_key", "retry_after",
]  # fmt: skip

#: Environment variables read for the endpoint's key, first set wins (vLLM without ``--api-key``
#: accepts any key; ``EMPTY`` is sent when neither is set).
API_KEY_VARS = ("SPOTDIFF_API_KEY", "OPENAI_API_KEY")
#: The cache kind of raw responses.
RESPONSES = "api-response"
#: The backoff between tries (the openai client's): 0.5 s, doubled each retry up to 8 s, less a jitter of
#: up to a quarter; a server's ``Retry-After`` up to two minutes is waited instead.
BACKOFF_S, BACKOFF_MAX_S, RETRY_AFTER_MAX_S = 0.5, 8.0, 120.0
#: Requests in flight at most, by default (spec option ``concurrency``): a serving engine batches them (vLLM
#: runs up to 256 sequences at once); a 429, a 503 or a timeout halves it (:class:`Limit`).
DEFAULT_CONCURRENCY = 64
#: A stream of calls (:meth:`ChatClient.stream`) takes the next call while fewer than this many times
#: ``concurrency`` requests are unanswered (so a slot that frees always has a request waiting) ...
AHEAD = 2
#: ... and fewer than this many times ``concurrency`` requests are held for calls not yet read (bounded memory
#: while one slow answer holds up the calls after it).
HELD = 64

#: What a response may hold besides its tokens (ids, usage, the message's fields, the JSON around them) ...
REPLY_ENVELOPE_BYTES = 64 * 1024
#: ... and for each token it may hold (each token of the reply, each listed alternative of it, each prompt token
#: whose log-probability was asked): its text JSON-escaped, its bytes listed, its log-probability; a token's entry
#: takes about a hundred bytes, so this is ten times that.
TOKEN_BYTES = 1024
#: The most prompt tokens an image may take (Qwen2-VL's processor at its default ``max_pixels``, 12845056 = 16384
#: patches of 28 x 28 pixels: more than LLaVA-1.5's 576, LLaVA-NeXT's 2880 or InternVL's 12 tiles of 256).
IMAGE_TOKENS = 16384

#: A call's plan (a generator): it yields its requests once, as ``(bodies, digests of their images' bytes)``,
#: is sent their responses in order, and returns the call's result (:meth:`ChatClient.stream`).
Plan = Generator[tuple[list[dict[str, Any]], dict[str, str]], list[dict[str, Any]], Any]


class Limit:
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
    """The requests of a stream of calls on one event loop (:meth:`ChatClient.stream`): each request is answered
    from the cache or sent once (its response stored as it arrives), under one :class:`Limit`."""

    def __init__(self, client: ChatClient) -> None:
        self.owner = client
        self.loop = asyncio.new_event_loop()
        self.limit = Limit(client.concurrency)
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
        requests = self.owner.requests
        if requests is not None and new:  # outside an engine there is no cache to read
            found, todo = requests.lookup(RESPONSES, [keys[i] for i in new])
            self.docs.update((k, row_json(row)) for k, row in found.items())
            new = [new[j] for j in todo]
        for i in new:
            key = keys[i]
            if key in sent:  # asked twice in one call
                continue
            if self.client is None:
                self.client = self.loop.run_until_complete(self.owner._client(self.limit))
            task = self.loop.create_task(self.owner._one(self.client, self.limit, self.stop, bodies[i]))
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
                if self.owner.requests is not None:
                    self.owner.requests.store(RESPONSES, [(key, json_row(task.result()))])
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
            self.owner.usage["throttled"] += self.limit.throttled
            self.loop.close()


class ChatClient:
    """Asks one model of an OpenAI-compatible server: its owner's plans' requests, answered from the cache or sent.

    Args:
        base_url: the endpoint's URL, without user name and password.
        auth: the URL's user name and password (HTTP basic authentication), or None.
        model: the model's name on the server (for messages).
        concurrency: requests in flight at most (:class:`Limit`).
        retries: how many times a transient failure is asked again.
        timeout: seconds a request may take.
        seed: the run's seed, which seeds the retries' jitter.
        usage: the owner's counts, to which the client adds ``sent``, ``prompt_tokens``, ``completion_tokens`` and
            ``throttled``.
        check: called with each response, its endpoint (for messages) and its request before the response is
            cached; refuses a response without what the request asked for.
        log: the owner's logger, which says each retry and a key or password sent over plain http.
    """

    def __init__(
        self,
        base_url: str,
        auth: tuple[str, str] | None,
        model: str,
        *,
        concurrency: int,
        retries: int,
        timeout: float,
        seed: int,
        usage: dict[str, Any],
        check: Callable[[dict[str, Any], str, dict[str, Any]], None],
        log: logging.Logger,
    ) -> None:
        self.base_url, self._auth, self.model = base_url, auth, model
        self.concurrency, self.retries, self.timeout = concurrency, retries, timeout
        self.usage, self._check, self._log = usage, check, log
        #: The retries' jitter: a generator of its own, seeded by the run's seed and the process's rank
        #: (a run's waits repeat; runs of other seeds and other ranks do not retry in lockstep; the
        #: global generators the run seeded are left alone).
        self._jitter = random.Random(f"spotdiff-api-retries:{seed}:{os.environ.get('RANK', '0')}")
        self.verbose = True  # say each retry (the engine's door says whether: not under --quiet)
        self._warned_plain_http = False
        self.requests: Any = None  # the engine's cached door (the owner's bind_requests)

    @property
    def where(self) -> str:
        """The endpoint and model, for messages (no password)."""
        return f"endpoint {self.base_url} (model {self.model})"  # base_url holds no password

    def answered(self, plan: Plan) -> Any:
        """One call's result (:meth:`stream` of a single call)."""
        with contextlib.closing(self.stream(iter([plan]))) as results:
            return next(results)

    def stream(self, plans: Iterator[Plan]) -> Iterator[Any]:
        """Each plan's result, in order. A plan's requests are answered from the cache or sent, at most
        ``concurrency`` at a time (:class:`Limit`), while the next plans are taken whenever fewer than
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
                    keys = [request_key(b, digests) for b in bodies]
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

    async def _client(self, limit: Limit) -> Any:
        """The client, retrying nothing itself (:meth:`_create` does); a user name and password from the
        URL go as HTTP basic authentication, outside the URL (the HTTP library logs URLs)."""
        import openai

        key = next((os.environ[v] for v in API_KEY_VARS if os.environ.get(v)), None)
        parts = urlsplit(self.base_url)
        if (key or self._auth) and parts.scheme == "http" and not is_loopback(parts.hostname):
            if not self._warned_plain_http:
                self._log.warning(
                    "%s: the %s goes over plain http to %s, readable on the way there; use an https URL",
                    self.where, "password in the URL" if self._auth else "API key", parts.hostname,
                )  # fmt: skip
            self._warned_plain_http = True
        http = openai.DefaultAsyncHttpxClient(event_hooks={"response": [limit.on_response]}, auth=self._auth)
        return openai.AsyncOpenAI(
            api_key=key or "EMPTY", base_url=self.base_url, max_retries=0, timeout=self.timeout, http_client=http
        )

    async def _one(self, client: Any, limit: Limit, stop: asyncio.Event, body: dict) -> dict[str, Any] | None:
        """One request: its response, after checking it holds what was asked (None: not sent, another failed
        first)."""
        async with limit:
            if stop.is_set():
                return None
            try:
                doc = await self._create(client, body, limit)
                self.usage["sent"] += 1
                self._check(doc, self.where, body)
            except BaseException:
                stop.set()  # before the limit is released: no request starts after a failure
                raise
            limit.succeeded()
            return doc

    async def _create(self, client: Any, body: dict, limit: Limit) -> dict[str, Any]:
        """A ``POST /chat/completions`` of ``body`` through the client (``extra_body`` merged in, as
        ``chat.completions.create`` merges it), read as the JSON the server sent. What may pass (a 408, 409, 429
        or 5xx, a timeout, a dropped connection, a body that is not JSON) is asked again, up to ``retries``
        times, after :meth:`_delay`; each retry is one log line, unless quiet."""
        import openai

        for attempt in range(self.retries + 1):
            try:
                text = await self._post(client, body)
                doc = json.loads(text)
                if not isinstance(doc, dict):
                    raise json.JSONDecodeError("not a JSON object", text, 0)
                return doc
            except (json.JSONDecodeError, TimeoutError, openai.APIError) as exc:
                if isinstance(exc, TimeoutError | openai.APITimeoutError):
                    limit.congested()  # a queue longer than the timeout: fewer requests at once
                reason = _transient(exc)
                if reason is None or attempt == self.retries:
                    raise EndpointError(_explain(exc, self.where, self.retries, self.timeout)) from exc
                delay = self._delay(attempt, exc)
                if self.verbose:
                    self._log.info("%s: %s; retry %d of %d in %.3f s", self.where, reason, attempt + 1, self.retries,
                                   delay)  # fmt: skip
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _post(self, client: Any, body: dict) -> bytes:
        """The body of the response to ``body``, ``POST /chat/completions`` (``extra_body`` merged in, as
        ``chat.completions.create`` merges it): the whole request, from connecting to the last byte, within
        ``timeout`` seconds (the HTTP client's own timeout bounds each read only, so a server sending a byte a
        second would hold it for ever: a :class:`TimeoutError`), and read only up to :func:`reply_limit` bytes
        (more is refused, nothing of it kept: an :class:`~spotdiff.errors.EndpointError`)."""
        import httpx2  # the openai client's HTTP library
        import openai
        from openai._constants import RAW_RESPONSE_HEADER

        bound = reply_limit(body)
        payload = {**{k: v for k, v in body.items() if k != "extra_body"}, **body.get("extra_body", {})}
        # The body as built, through the client's path for any endpoint (``chat.completions.create`` would validate
        # and copy it again, image data URL included: 0.90-1.01 of a plain client against 1.22-1.27 this way,
        # measurements/api_throughput.py); its response left unread by the client: the switch the client's own
        # ``with_streaming_response`` sets (pinned openai; the tests of the reply bound fail if it moves).
        options = {"headers": {RAW_RESPONSE_HEADER: "stream"}}
        async with asyncio.timeout(self.timeout):
            response = await client.post("/chat/completions", body=payload, cast_to=httpx2.Response, options=options)
            try:
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > bound:
                        raise EndpointError(_too_large(self.where, bound, body))
                    chunks.append(chunk)
            except httpx2.RequestError as exc:  # a body cut short, a dropped connection: as the client maps them
                raise openai.APIConnectionError(message=str(exc), request=exc.request) from exc
            finally:
                await response.aclose()
        return b"".join(chunks)

    def _delay(self, attempt: int, exc: Exception) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After``, else the backoff
        (:data:`BACKOFF_S`) less a jitter drawn from the client's own seeded generator."""
        response = getattr(exc, "response", None)
        after = retry_after(response.headers) if response is not None else None
        if after is not None:
            return after
        return min(BACKOFF_S * 2**attempt, BACKOFF_MAX_S) * (1 - 0.25 * self._jitter.random())


def reply_limit(body: dict[str, Any]) -> int:
    """The most bytes a response to ``body`` may hold: :data:`REPLY_ENVELOPE_BYTES`, and :data:`TOKEN_BYTES` for each
    token it asked for (``max_tokens``, each with ``top_logprobs`` alternatives when ``logprobs``) and, when it asks
    for the prompt's log-probabilities (vLLM's ``prompt_logprobs``), for each prompt token it may have (a byte of
    text at most one token, an image at most :data:`IMAGE_TOKENS`).

    >>> reply_limit({"max_tokens": 16}), reply_limit({"max_tokens": 1, "logprobs": True, "top_logprobs": 20})
    (81920, 87040)

    Args:
        body: the request.
    """
    listed = int(body.get("top_logprobs") or 0) if body.get("logprobs") else 0
    tokens = int(body.get("max_tokens") or 1) * (1 + listed)
    if "prompt_logprobs" in (body.get("extra_body") or {}):
        for message in body.get("messages", ()):
            content = message.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for part in parts:
                is_text = part.get("type") == "text"
                tokens += len(str(part.get("text", "")).encode("utf-8")) if is_text else IMAGE_TOKENS
    return REPLY_ENVELOPE_BYTES + TOKEN_BYTES * tokens


def _too_large(where: str, bound: int, body: dict[str, Any]) -> str:
    """The one line refusing a response larger than :func:`reply_limit` allows ``body``'s."""
    asked = f"at most {int(body.get('max_tokens') or 1)} tokens"
    if body.get("logprobs"):
        asked += f" ({int(body.get('top_logprobs') or 0)} log-probabilities each)"
    if "prompt_logprobs" in (body.get("extra_body") or {}):
        asked += " and its prompt's log-probabilities"
    return (
        f"{where} answered more than {bound} bytes to a request of {asked}: refused, nothing of it kept; the "
        "server sends what was not asked for (check its version and options)"
    )


def request_key(body: dict[str, Any], digests: dict[str, str]) -> str:
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
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return "no answer in time"
    if isinstance(exc, openai.APIConnectionError):
        return "the connection failed"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status in (408, 409, 429) or status >= 500):
        return f"HTTP {status}"
    return None


def _explain(exc: Exception, where: str, retries: int, timeout: float) -> str:
    """One line for a failed request: what happened at ``where`` (asked with ``retries`` and ``timeout``) and what
    to do."""
    import openai

    status = getattr(exc, "status_code", None)
    after, resume = f"after {retries} retries", "a re-run resumes from the cache"
    explained = (  # the failure, and what to do
        (json.JSONDecodeError, f"sent unreadable responses ({exc}) {after}; check the server; {resume}"),
        ((openai.AuthenticationError, openai.PermissionDeniedError),
         f"refused the key ({status}): set {' or '.join(API_KEY_VARS)} to a key it accepts"),
        (openai.NotFoundError, f"does not serve this model ({status}): use a name its /models route lists"),
        (openai.RateLimitError, f"still rate-limited {after}: lower concurrency= in the spec; {resume}"),
        (TimeoutError, f"did not answer {after} (no answer within {timeout:g} s): check the server; {resume}"),
        ((openai.APITimeoutError, openai.APIConnectionError),
         f"did not answer {after} ({type(exc).__name__}): check the server; {resume}"),
        (openai.InternalServerError, f"kept failing ({status}) {after}: check the server's log; {resume}"),
    )  # fmt: skip
    said = next((line for kinds, line in explained if isinstance(exc, kinds)), None)
    if said is not None:
        return f"{where} {said}"
    detail = str(getattr(exc, "message", exc)).replace("\n", " ")[:200]
    return f"{where} refused the request ({status}: {detail}); check the spec's options against what it supports"
