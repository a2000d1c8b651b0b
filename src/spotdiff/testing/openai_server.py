"""A loopback OpenAI-compatible server answering ``POST /v1/chat/completions`` with a tiny in-process
chat VLM's real forward pass (real logits, real top-k), with faults to inject.

It stands in for vLLM / SGLang / llama.cpp's server in the tests of ``api:`` (:mod:`spotdiff.scorers.api`)
and in ``measurements/api_throughput.py``. Usage: docs/testing.md.
"""

from __future__ import annotations

import base64
import io
import json
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from PIL import Image

from spotdiff.testing.http_server import LoopbackServer, send_bytes

__all__ = ["FAULTS", "ChatCompletionsServer"]

#: The faults :meth:`ChatCompletionsServer.inject` knows: ``ok`` (none: a normal answer), a 429 with
#: ``Retry-After``, a 500, an answer later than the client's timeout (:attr:`~ChatCompletionsServer.
#: timeout_s`), a body cut short, a body that is not JSON, an answer without ``logprobs``, a refused
#: key (401), an unknown model (404), a response whose message holds no reply (``content: null``), an
#: answer whose first :attr:`~ChatCompletionsServer.trickle_bytes` bytes come one every
#: :attr:`~ChatCompletionsServer.trickle_s` seconds (a server that never stops sending, yet never answers), and
#: one whose reply is :attr:`~ChatCompletionsServer.oversize_bytes` long whatever was asked.
FAULTS = ("ok", "429", "500", "timeout", "truncated", "bad-json", "no-logprobs", "401", "404", "no-reply", "trickle",
          "oversize")  # fmt: skip


class ChatCompletionsServer(LoopbackServer):
    """Serves ``chat`` (a :class:`~spotdiff.scorers.chat.ChatVLM`) under the model name ``name``.

    A request's messages are rendered by the model's own chat template (the images of a user turn
    first, then its text, as ``vqa:`` renders them); ``top_logprobs`` come from the first answer
    position's log-softmax, each token as its decoded text; with ``max_tokens > 1`` the answer is
    greedy generation. A final assistant turn is continued (vLLM's ``continue_final_message``), and
    ``prompt_logprobs`` returns the log-probability of each prompt token (vLLM's extension). The
    model runs one request at a time (a lock), as a single GPU would.

    Args:
        chat: the loaded chat VLM.
        name: the model name the server answers to (another gives a 404).
        delay: seconds each answer waits before the model runs, requests in parallel (the latency of a
            server that batches many requests; for the throughput benchmark): the median, with ``spread``.
        memo: answer a request seen before from memory (the model runs once per distinct request),
            so that a benchmark measures the client and the latency rather than the tiny model.
        spread: each request's wait is ``delay * exp(spread * z)``, ``z`` standard normal (log-normal
            latencies, as a serving engine's: most answers near the median, a long tail of slow ones), drawn
            from a generator seeded by ``seed``; 0: every request waits ``delay``.
        seed: the seed of the latencies.

    While it serves, :attr:`in_flight` counts the chat requests being answered, and :attr:`peak` the most at
    once since :meth:`reset_peak` (what a client keeps in flight).
    """

    def __init__(
        self,
        chat: Any,
        name: str = "tiny-vlm",
        delay: float = 0.0,
        memo: bool = False,
        *,
        spread: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.chat, self.name, self.delay, self.spread = chat, name, delay, spread
        self._memo: dict[str, dict[str, Any]] | None = {} if memo else None
        self._faults: list[str] = []
        self._model_lock = threading.Lock()
        self._latencies = random.Random(seed)
        self.answered = 0
        self.timeout_s = 2.0
        self.trickle_s, self.trickle_bytes = 0.2, 25
        self.oversize_bytes = 4 * 2**20
        self.in_flight = 0
        self.peak = 0

    def reset_peak(self) -> None:
        """Start counting :attr:`peak` afresh."""
        with self._lock:
            self.peak = self.in_flight

    def latency(self) -> float:
        """The next request's wait (see ``delay`` and ``spread``)."""
        if not self.spread:
            return self.delay
        with self._lock:
            z = self._latencies.gauss(0.0, 1.0)
        return self.delay * math.exp(self.spread * z)

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def inject(self, *faults: str) -> None:
        """The next requests get these faults, one each, in order (see :data:`FAULTS`)."""
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {FAULTS}")
        with self._lock:
            self._faults.extend(faults)

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        if handler.command != "POST" or not handler.path.endswith("/chat/completions"):
            return _send_json(handler, 404, {"error": {"message": f"no route {handler.path}"}})
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        out = threading.Event()

        def answered() -> None:  # once, before the answer goes out: a client's next request never counts twice
            if not out.is_set():
                out.set()
                with self._lock:
                    self.in_flight -= 1

        try:
            self._answer(handler, body, answered)
        finally:
            answered()

    def _answer(self, handler: BaseHTTPRequestHandler, body: bytes, answered: Callable[[], None]) -> None:
        with self._lock:
            fault = self._faults.pop(0) if self._faults else None
        if fault in ("429", "500", "401"):
            headers = {"Retry-After": "1", "retry-after-ms": "20"} if fault == "429" else {}
            answered()
            return _send_json(handler, int(fault), {"error": {"message": f"injected {fault}"}}, headers)
        request = json.loads(body)
        if fault == "404" or request.get("model") != self.name:
            answered()
            return _send_json(handler, 404, {"error": {"message": f"model {request.get('model')!r} not found"}})
        if fault == "timeout":
            time.sleep(self.timeout_s)
        time.sleep(self.latency())
        if self._memo is not None and fault is None:
            key = body.decode()
            answer = self._memo.get(key) or self._memo.setdefault(key, self.complete(request))
        else:
            answer = self.complete(request, logprobs=fault != "no-logprobs")
        if fault == "no-reply":
            answer["choices"][0]["message"]["content"] = None
        if fault == "oversize":
            answer["choices"][0]["message"]["content"] += " yes" * (self.oversize_bytes // 4)
        data = json.dumps(answer).encode()
        if fault == "bad-json":
            data = data[: len(data) // 2] + b" " * (len(data) - len(data) // 2)
        answered()
        if fault == "trickle":
            return _send_slowly(handler, data, self.trickle_bytes, self.trickle_s)
        send_bytes(handler, data, content_type="application/json",
                   drop_after=len(data) // 2 if fault == "truncated" else None)  # fmt: skip

    def complete(self, request: dict[str, Any], *, logprobs: bool = True) -> dict[str, Any]:
        """The ``chat.completion`` object answering ``request``."""
        import torch

        images, question, system, answer = _read_messages(request["messages"])
        chat = self.chat
        prompt = chat.render(question, len(images), system) + (answer or "")
        k = int(request.get("top_logprobs") or 0)
        with self._model_lock, torch.inference_mode():
            enc = chat.process([prompt], [images])
            every = torch.log_softmax(chat.model(**enc).logits[0].float(), dim=-1)
            logp = every[-1]
            prompt_logprobs = _prompt_logprobs(chat.tokenizer, enc["input_ids"][0], every)
            top = torch.topk(logp, min(max(1, k), logp.numel()))  # any k: the whole vocabulary at most
            max_tokens = int(request.get("max_tokens") or 1)
            text = (
                chat.generate(images, prompt, max_tokens) if max_tokens > 1 else chat.tokenizer.decode(top.indices[:1])
            )
        entries = [
            {"token": chat.tokenizer.decode([int(t)]), "logprob": float(lp)}
            for t, lp in zip(top.indices.tolist(), top.values.tolist(), strict=True)
        ]
        first = {**entries[0], "top_logprobs": entries[:k]}
        self.answered += 1
        n_prompt = int(enc["input_ids"].shape[1])
        return {
            "id": f"chatcmpl-{self.answered}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": {"content": [first]} if logprobs and request.get("logprobs") else None,
                    "finish_reason": "stop",
                }
            ],
            **({"prompt_logprobs": prompt_logprobs} if logprobs and request.get("prompt_logprobs") is not None else {}),
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": max_tokens,
                "total_tokens": n_prompt + max_tokens,
            },
        }


def _read_messages(messages: Sequence[dict[str, Any]]) -> tuple[list[Image.Image], str, str | None, str | None]:
    """The images and text of the one user turn (images first; its content a list of parts, or a text as
    OpenAI's API also takes it), the system turn's text, and the text of a final assistant turn
    (continued: vLLM's ``continue_final_message``)."""
    system = next((m["content"] for m in messages if m["role"] == "system"), None)
    answer = messages[-1]["content"] if messages[-1]["role"] == "assistant" else None
    (user,) = [m for m in messages if m["role"] == "user"]
    parts = user["content"] if isinstance(user["content"], list) else [{"type": "text", "text": user["content"]}]
    images, texts = [], []
    for part in parts:
        if part["type"] == "image_url":
            if texts:
                raise ValueError("this server takes a user turn's images before its text")
            url = part["image_url"]["url"]
            images.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))
        else:
            texts.append(part["text"])
    return images, "".join(texts), system, answer


def _prompt_logprobs(tokenizer: Any, ids: Any, logp: Any) -> list[dict[str, dict[str, Any]] | None]:
    """vLLM's ``prompt_logprobs`` (with ``prompt_logprobs=0``): None for the first token, then each
    token's ``{id: {"logprob", "rank", "decoded_token"}}`` given the tokens before it."""
    out: list[dict[str, dict[str, Any]] | None] = [None]
    for k in range(1, len(ids)):
        t = int(ids[k])
        lp = logp[k - 1, t]
        rank = int((logp[k - 1] > lp).sum()) + 1
        out.append({str(t): {"logprob": float(lp), "rank": rank, "decoded_token": tokenizer.decode([t])}})
    return out


def _send_slowly(handler: BaseHTTPRequestHandler, data: bytes, slow: int, pause: float) -> None:
    """Answer with ``data``, its length announced, its first ``slow`` bytes one every ``pause`` seconds (the rest at
    once); a client that hangs up meanwhile ends it."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    try:
        for k in range(min(slow, len(data))):
            handler.wfile.write(data[k : k + 1])
            handler.wfile.flush()
            time.sleep(pause)
        handler.wfile.write(data[slow:])
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


def _send_json(handler: BaseHTTPRequestHandler, status: int, doc: dict, headers: dict | None = None) -> None:
    data = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(data)
