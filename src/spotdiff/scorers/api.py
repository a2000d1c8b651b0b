"""``api:MODEL@BASE_URL``: a chat VLM served behind an OpenAI-compatible endpoint (vLLM, SGLang,
llama.cpp's server, hosted APIs), asked through the official ``openai`` client.

VQAScore (Lin et al. 2024, as ``vqa:``) is P("Yes") read from the first answer token's
``top_logprobs``; answer-based choice (EqBen Sec. 5.5) reads the option letters' log-probabilities and
the generated answer; ``answer-prob`` (NaturalBench, MMVP) reads each candidate answer's probability
from the same first token's ``top_logprobs``. This module writes the requests and reads the responses; the
requests in flight are :class:`~spotdiff.scorers.client.ChatClient`'s (moved there, issue 43): every response is
cached before it is used, requests run concurrently under a limit that halves on a 429, a 503 or a timeout, across
the engine's batches (:meth:`ApiScorer.stream`), and transient failures are asked again with a backoff whose
jitter comes from the run's seed.
A password in the URL and the key never reach what is recorded (docs/security.md). Docs: docs/served.md.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from PIL import Image

from spotdiff.cases import LETTER_READERS
from spotdiff.errors import ConfigError, EndpointError
from spotdiff.readers import ANSWER_READERS, CHOICE_STYLES
from spotdiff.readers.choice import (
    CHOICE_IMAGE_QUESTION,
    CHOICE_TEXT_QUESTION,
    ChoiceQuestion,
    choice_questions,
    read_choice,
)
from spotdiff.scorers.base import SCORERS, PairScorer, ScorerOptions
from spotdiff.scorers.client import DEFAULT_CONCURRENCY, ChatClient, Plan
from spotdiff.scorers.lm import parse_spec_options
from spotdiff.scorers.vgpt import DESCRIBE_PROMPT
from spotdiff.scorers.video import DEFAULT_FRAMES, frame_rule_option, split_clips
from spotdiff.scorers.vqa import DEFAULT_ANSWER, DEFAULT_QUESTION, option_flag
from spotdiff.urls import canonical_endpoint, redact_text, split_userinfo
from spotdiff.video.clips import Clip, FrameRule

__all__ = ["ApiScorer", "caption_logprob", "encode_image", "parse_api_spec", "parse_price", "yes_probability"]

#: What the question about a clip's frames opens with: the opening of VLMEvalKit's
#: ``FRAMES_TMPL_NOSUB``, its prompt for a video sent as frames (vlmeval/dataset/videomme.py, commit e757641);
#: spec option ``frames_prompt`` replaces it.
FRAMES_PROMPT = "These are the frames of a video."
#: The resize rule's default: the longer side is at most this many pixels.
DEFAULT_MAX_SIDE = 1024

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
        self.responses = {"computed": 0, "cached": 0}
        self.usage = {"sent": 0, "bounded": 0, "no_letter": 0, "unparseable": 0, "prompt_tokens": 0,
                      "completion_tokens": 0, "throttled": 0}  # fmt: skip
        #: The requests in flight, retried and cached (:class:`~spotdiff.scorers.client.ChatClient`).
        self.client = ChatClient(self.base_url, self._auth, self.model, concurrency=self.concurrency,
                                 retries=self.retries, timeout=self.timeout, seed=options.seed, usage=self.usage,
                                 check=_check_response, log=log)  # fmt: skip
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
        self.client.requests = requests
        if requests is not None:
            self.responses = requests.stats
            self.client.verbose = requests.verbose

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
        return self.client.stream(plan(*args) for args in calls)

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
        return self.client.answered(self._plan_score_pairs(images, texts))

    def _plan_score_pairs(self, images: Sequence[Image.Image], texts: Sequence[Sequence[str]]) -> Plan:
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} images but {len(texts)} text lists")
        urls, digests, opening = self._encode(images)
        if self.score == "vgpt":
            bodies = [self._vgpt_body(p, t) for p, ts in zip(urls, texts, strict=True) for t in ts]
            docs = iter((yield bodies, digests))
            where = self.client.where
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
        return self.client.answered(self._plan_answer_choices(images, texts, need, style))

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
        return self.client.answered(self._plan_answer_scores(images, questions, answers, reader))

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
        return self.client.answered(self._plan_answer_texts(images, questions))

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
        return self.client.answered(self._plan_chat_replies(conversations, max_tokens))

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
