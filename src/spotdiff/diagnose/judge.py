"""An LLM judge of generated answers (``spotdiff eval --judge SPEC``), as MMVP's authors graded free-form
answers with GPT-4 (``scripts/gpt_grader.py``, github.com/tsb0601/MMVP, commit 7635005) and lmms-eval /
VLMEvalKit grade with a judge model.

Each generated answer is graded against the gold option with the authors' system turn and question; the
reply is a verdict when it is "yes" or "no" alone (the authors' ``^(yes|no)$``), else it is counted as
unparsed; a response without a reply is counted as failed. Replies are cached like any model request,
keyed by the judge's identity (its model's identity as the model's own rules make it, so an ``api:`` judge's
endpoint in one spelling per server and without the options that only change how it is asked; the prompt; the
decoding) and the whole prompt (question, gold answer, graded answer), each stored as it arrives; an in-process
judge remembered in the cache folder is built only when a reply is missing (:mod:`spotdiff.scorers.deferred`).
Docs: docs/protocols.md, docs/served.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.diagnose.cache import Cache, CachedRequests
from spotdiff.errors import ConfigError
from spotdiff.jsonio import json_row, row_json
from spotdiff.protocols.vqa import VERDICT_FAILED, VERDICT_NO, VERDICT_YES
from spotdiff.scorers import Scorer, ScorerOptions, load_scorer
from spotdiff.scorers.api import ApiScorer
from spotdiff.scorers.deferred import recall, remember
from spotdiff.scorers.lm import LanguageModelScorer
from spotdiff.urls import redact_text

#: gpt_grader.py's system turn.
JUDGE_SYSTEM = (
    "You are a helpful and precise assistant for checking the quality of the answer. Please answer in only yes or no."
)
#: gpt_grader.py's question (``question4gpt``), verbatim.
JUDGE_PROMPT = (
    "Given the following question {question}, the correct answer is {answer}. Does the following answer correctly "
    "answers the question, answer:{response}?"
)
#: gpt_grader.py's verdict: the reply is "yes" or "no" alone, in any case (here stripped of white space first).
VERDICT = re.compile(r"^(yes|no)$", re.IGNORECASE)
#: The most tokens a judge's reply may have (a verdict is one word).
JUDGE_MAX_TOKENS = 16
#: The cache kind of the judge's replies.
REPLIES = "judge-reply"
#: Prompts per batch of an in-process judge (one: each reply is stored as it is made), and per call of a served
#: one (whose requests stay in flight across calls, each response stored as it arrives).
_BATCH = {"local": 1, "api": 64}
#: What a judge's record in a cache folder's remembered scorers is filed under, before its spec (a judge's record
#: is never taken for a run's model's, nor the other way).
_REMEMBERED_AS = "judge:"


def verdict(reply: str | None) -> float:
    """A reply's verdict: :data:`VERDICT_YES`, :data:`VERDICT_NO`, NaN when it is no verdict, and
    :data:`VERDICT_FAILED` when there was no reply.

    >>> verdict("Yes"), verdict(" no\\n"), verdict("Yes, it does."), verdict(None)
    (1.0, 0.0, nan, -1.0)
    """
    if reply is None:
        return VERDICT_FAILED
    m = VERDICT.match(reply.strip())
    if m is None:
        return math.nan
    return VERDICT_YES if m.group(1).lower() == "yes" else VERDICT_NO


def judge_messages(question: str, gold: str, response: str) -> list[dict[str, str]]:
    """The conversation that asks the judge whether ``response`` answers ``question``, whose right answer
    is ``gold``: gpt_grader.py's system turn and question.

    Args:
        question: the question as the model was asked it.
        gold: the right answer (the gold candidate: "A", "Yes", ...).
        response: the model's generated answer.
    """
    user = JUDGE_PROMPT.format(question=question, answer=gold, response=response)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


class Judge:
    """A judge model, ``api:`` (served) or an in-process chat model (``lm:``, e.g. the alias ``smollm2``),
    grading generated answers; its replies are cached under its own identity (:meth:`bind`).

    Args:
        spec: the judge's model spec.
        options: device, dtype and seed of an in-process judge.
        cache_dir: the run's cache folder, where an in-process judge is remembered once loaded: a later run whose
            replies are all cached there never loads it (None: loaded at once).
    """

    def __init__(self, spec: str, options: ScorerOptions, cache_dir: str | Path | None = None) -> None:
        self.spec = redact_text(spec)  # as recorded and named in errors: no password
        self._given = spec  # the model gets the spec as given
        remembered = None  # an in-process chat model, checked when it was remembered
        if cache_dir is not None:
            remembered = recall(cache_dir, _REMEMBERED_AS + spec, options, lambda: self._load(options, None))
        self.model: Scorer = self._load(options, cache_dir) if remembered is None else remembered
        self.kind = "api" if isinstance(self.model, ApiScorer) else "local"
        self.requests: CachedRequests | None = None
        self.counts = {"judged": 0, "yes": 0, "no": 0, "unparsed": 0, "failed": 0}

    def _load(self, options: ScorerOptions, cache_dir: str | Path | None) -> Scorer:
        """The judge's model, loaded and checked (and remembered in ``cache_dir`` when it computes here)."""
        model = load_scorer(self._given, options)
        if isinstance(model, LanguageModelScorer):
            model.check_chat(f"--judge {self.spec}")
        elif not isinstance(model, ApiScorer):
            raise ConfigError(
                f"--judge {self.spec}: a judge is a served model (api:MODEL@URL) or an in-process chat model (lm:, "
                f"e.g. smollm2), not {type(model).__name__}"
            )
        if cache_dir is not None:
            remember(cache_dir, _REMEMBERED_AS + self._given, options, model)
        return model

    def identity(self) -> dict[str, Any]:
        """What the judge is (recorded with the run, digested into its cache key): its model's identity (its
        ``spec`` as that identity names it: an ``api:`` judge's endpoint in one spelling, without its options
        that only change how it is asked), the prompt, the verdict rule and the decoding."""
        model = self.model.identity()
        return {
            "spec": model["spec"],
            "model": model,
            "system": JUDGE_SYSTEM,
            "prompt": JUDGE_PROMPT,
            "verdict": f"{VERDICT.pattern}, any case, on the reply stripped of white space",
            "max_tokens": JUDGE_MAX_TOKENS,
            "decoding": "greedy (temperature 0)",
            "source": "MMVP scripts/gpt_grader.py (github.com/tsb0601/MMVP, commit 7635005)",
        }

    def digest(self) -> str:
        """SHA-256 of :meth:`identity`: the judge's cache key."""
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True, default=str).encode()).hexdigest()

    def bind(self, cache: Cache | None) -> None:
        """Cache the judge's replies in ``cache`` (opened under :meth:`digest`), or nowhere (None); a served judge's
        responses are stored there too, each as it arrives."""
        self.requests = None if cache is None else CachedRequests(cache, progress=False)
        if self.kind == "api":
            self.model.bind_requests(None if cache is None else CachedRequests(cache, progress=False))

    def grade(self, items: Sequence[tuple[str, str, str]]) -> np.ndarray:
        """The verdict (:func:`verdict`) on each ``(question, gold answer, generated answer)``.

        Args:
            items: the answers to grade.
        """
        conversations = [judge_messages(*item) for item in items]
        keys = ["judge:" + hashlib.sha256(json.dumps(c, sort_keys=True).encode()).hexdigest() for c in conversations]
        unique = dict(zip(keys, conversations, strict=True))
        ordered = list(unique)
        if self.requests is None:  # used alone, outside an engine: nothing to keep the replies in
            with contextlib.closing(self._rows(unique, ordered, [list(range(len(ordered)))])) as computed:
                rows = dict(zip(ordered, next(computed), strict=True))
        else:
            rows = self.requests(
                REPLIES, ordered, lambda batches: self._rows(unique, ordered, batches), _BATCH[self.kind],
                desc="judging", unit="answer",
            )  # fmt: skip
        out = np.array([verdict(row_json(rows[k])["reply"]) for k in keys], dtype=np.float64)
        self.counts["judged"] += len(out)
        self.counts["yes"] += int((out == VERDICT_YES).sum())
        self.counts["no"] += int((out == VERDICT_NO).sum())
        self.counts["unparsed"] += int(np.isnan(out).sum())
        self.counts["failed"] += int((out == VERDICT_FAILED).sum())
        return out

    def _rows(self, unique: dict[str, list], ordered: list[str], batches: list[list[int]]) -> Iterator[list]:
        """The replies to each batch of conversations, as cache rows: a served judge's requests stay in flight
        across batches (:meth:`~spotdiff.scorers.api.ApiScorer.stream`), an in-process judge replies to one at a
        time."""
        asked = ([unique[ordered[i]] for i in idx] for idx in batches)
        if self.kind == "api":
            model: Any = self.model
            replies = model.stream(model.chat_replies, ((c, JUDGE_MAX_TOKENS) for c in asked))
        else:
            replies = ([self.model.chat(m, JUDGE_MAX_TOKENS) for m in c] for c in asked)
        with contextlib.closing(replies):
            for batch in replies:
                yield [json_row({"reply": reply}) for reply in batch]

    def record(self) -> dict[str, Any]:
        """What the run records about its judge: its identity, its verdicts' counts and, served, its usage."""
        out: dict[str, Any] = {"identity": self.identity(), "verdicts": dict(self.counts)}
        if self.requests is not None:
            out["replies"] = dict(self.requests.stats)
        if self.kind == "api":
            out["usage"] = self.model.run_usage()
        return out
