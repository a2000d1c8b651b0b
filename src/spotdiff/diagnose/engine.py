"""Cases x scorer -> score matrices: deduplication, batching, caching, progress, resumption.

A chunk of cases asks the model for its unique images (by content key), texts or pairs once; every
computation passes through one door, :class:`~spotdiff.diagnose.cache.CachedRequests` (look up,
compute the missing in batches ahead-fed by :mod:`spotdiff.diagnose.pipeline`, store), and one
:class:`Need` per protocol need says what a chunk asks for and how rows assemble into each case's
matrix. Without a persistent cache rows spill to a temporary one, so memory stays flat.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from spotdiff.cases import (
    ANSWER_SEP,
    PROMPT_STYLES,
    Case,
    ImageRef,
    case_answers,
    case_pairs,
    case_prompts,
    case_reader,
    content_keys,
)
from spotdiff.diagnose.cache import Cache, CachedRequests
from spotdiff.diagnose.pipeline import InputPipeline
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import json_row, row_json
from spotdiff.processes import thread_budget, torch_threads
from spotdiff.readers import CHOICE_STYLES
from spotdiff.scorers.base import (
    SERVES,
    AnswerChoice,
    AnswerLikelihood,
    AnswerTexts,
    ImageTextEmbedding,
    ITMLogits,
    PairScoring,
    Scorer,
    Streaming,
    TextEmbedding,
    TextPrior,
)
from spotdiff.video.clips import sampled_case

if TYPE_CHECKING:
    from spotdiff.diagnose.judge import Judge

T = TypeVar("T")

#: Cases assembled per chunk (at least); bounds memory on long runs.
CHUNK_CASES = 2048
#: A chunk with images grows until it gives the input pipeline this many batches of images per
#: worker process, so that starting the workers and waiting for the first batch are paid once per
#: many batches, however many workers share each batch ...
PIPELINE_BATCHES = 32
#: ... up to this many cases.
MAX_CHUNK_CASES = 65536

#: Needs served per case by a chat scorer's answers, ``answer_choices`` (EqBen Sec. 5.5, protocols.choice).
CHOICE_NEEDS = ("choice", "choice-text")


def text_key(text: str) -> str:
    """Content key of a text (its exact characters)."""
    return "text:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def pair_key(image: ImageRef, text: str) -> str:
    return f"{image.key}|{text_key(text)}"


def cache_digest(scorer: Scorer, gpu_decode: bool = False) -> str:
    """The model key of the cache: the scorer's identity digest, and whether images are decoded on
    the GPU (those pixels differ from the CPU decoder's by rounding, so their rows are kept apart)."""
    digest = scorer.identity_digest()
    return hashlib.sha256(f"{digest}|gpu-decode".encode()).hexdigest() if gpu_decode else digest


def case_key(case: Case) -> str:
    """Content key of a whole case: its images' keys and its texts, in order."""
    h = hashlib.sha256()
    for part in [*(ref.key for ref in case.images), "\x00", *case.texts]:
        h.update(part.encode("utf-8") + b"\x00")
    return "case:" + h.hexdigest()


def _first_positions(keys: Sequence[str]) -> np.ndarray:
    """For each key, the position of its first occurrence."""
    first: dict[str, int] = {}
    return np.array([first.setdefault(k, i) for i, k in enumerate(keys)], dtype=np.int64)


def check_capability(scorer: Scorer, need: str) -> None:
    """Fail before any work when the scorer cannot serve what a protocol needs (with the scorer's
    reason when it gives one), or declares it without the methods (:data:`~spotdiff.scorers.base.SERVES`)."""
    if not scorer.can(need):
        can = ", ".join(sorted(scorer.capabilities)) or "nothing"
        why = scorer.cannot(need)
        raise ConfigError(
            f"model {scorer.spec!r} cannot serve a protocol that needs {need!r} (it provides: {can})"
            + (f": {why}" if why else "")
        )
    protocols = SERVES.get(need, ())
    if protocols and not isinstance(scorer, protocols):
        names = " or ".join(p.__name__ for p in protocols)
        raise ConfigError(f"model {scorer.spec!r} declares {need!r} but does not implement {names}")


def _serves(scorer: Scorer, protocol: type[T], what: str) -> T:
    """``scorer`` as ``protocol``, or a ConfigError saying it ``what``."""
    if not isinstance(scorer, protocol):
        raise ConfigError(f"model {scorer.spec!r} {what}")
    return scorer


def _text_items(case: Case) -> tuple[str, ...]:
    """What the model encodes for a case's texts: the texts, or every filled prompt of its labels."""
    if not case.prompts:
        return case.texts
    return tuple(template.replace("{c}", label) for label in case.texts for template in case.prompts)


def _owned_texts(cases: Sequence[Case], keep: Callable[[str], bool]) -> list[str]:
    """The unique texts the model encodes for ``cases`` whose :func:`text_key` ``keep`` accepts."""
    return [t for t in dict.fromkeys(t for c in cases for t in _text_items(c)) if keep(text_key(t))]


def _split(values: Sequence[Any] | np.ndarray, sizes: Iterable[int]) -> list[Any]:
    """``values`` cut into consecutive pieces of ``sizes``."""
    out, start = [], 0
    for n in sizes:
        out.append(values[start : start + n])
        start += n
    return out


def _float_rows(out: Any, n: int) -> list[np.ndarray]:
    """An image's scores for its ``n`` texts as ``n`` float32 rows (a row per text)."""
    out = np.asarray(out, dtype=np.float32)
    if out.ndim == 0 or out.shape[0] != n:
        raise ConfigError(f"scorer returned {out.size} scores for {n} texts")
    return list(out.reshape(n, -1))


def _text_rows(out: Sequence[str], n: int) -> list[np.ndarray]:
    """An image's generated answers to its ``n`` questions as ``n`` JSON rows."""
    if len(out) != n:
        raise ConfigError(f"scorer returned {len(out)} answers for {n} questions")
    return [json_row({"text": text}) for text in out]


def _runs(sizes: Iterable[int]) -> list[list[int]]:
    """Consecutive index lists of ``sizes`` items each (the batches of a flat list)."""
    sizes = list(sizes)
    return [list(run) for run in _split(range(sum(sizes)), sizes)]


class Need(ABC):
    """How one protocol need is served: which items a chunk of cases needs from the model
    (:meth:`prefill`, only the items ``keep`` accepts) and how their rows assemble into each case's
    matrix (:meth:`matrices`)."""

    #: Whether the need reads the cases' images (their content keys are computed ahead, on several threads).
    reads_images: ClassVar[bool] = True

    def __init__(self, need: str) -> None:
        self.need = need

    def check(self, engine: Engine, cases: Sequence[Case]) -> None:
        """Cases this need cannot serve fail (a DataError naming the case, or a ConfigError)."""
        embeds = isinstance(engine.scorer, ImageTextEmbedding)
        for case in cases:
            if self.need in ("image-text", "match-prob", "answer-prob", *CHOICE_NEEDS) and not case.images:
                raise DataError("protocol needs images but the case has none", record=case.id)
            if case.prompts and (self.need != "image-text" or not embeds):
                raise ConfigError(
                    f"case {case.id} holds labels with prompt templates (zero-shot classification): that needs an "
                    f"image-text protocol and an embedding model, not {self.need!r} with {engine.scorer.spec!r}"
                )

    @abstractmethod
    def prefill(self, engine: Engine, cases: Sequence[Case], keep: Callable[[str], bool]) -> None:
        """Compute and store the items of ``cases`` whose content key ``keep`` accepts."""

    @abstractmethod
    def matrices(self, engine: Engine, cases: Sequence[Case]) -> list[np.ndarray]:
        """Each case's score matrix."""


class TextTextNeed(Need):
    """``text-text``: each case's texts against each other, by embedding similarity."""

    reads_images = False

    def prefill(self, engine: Engine, cases: Sequence[Case], keep: Callable[[str], bool]) -> None:
        engine.embed_texts(_owned_texts(cases, keep))

    def matrices(self, engine: Engine, cases: Sequence[Case]) -> list[np.ndarray]:
        emb = engine.embed_texts([t for c in cases for t in c.texts])
        scorer = _serves(engine.scorer, TextEmbedding, "does not produce embeddings")
        return [scorer.similarity(e, e).astype(np.float64) for e in _split(emb, (len(c.texts) for c in cases))]


class TextPriorNeed(Need):
    """``text-prior``: a ``[1, n_texts]`` row of ``log P(t)`` per case."""

    reads_images = False

    def prefill(self, engine: Engine, cases: Sequence[Case], keep: Callable[[str], bool]) -> None:
        engine.text_prior(_owned_texts(cases, keep))

    def matrices(self, engine: Engine, cases: Sequence[Case]) -> list[np.ndarray]:
        prior = engine.text_prior([t for c in cases for t in c.texts])
        return [p.reshape(1, -1) for p in _split(prior, (len(c.texts) for c in cases))]


class ChoiceNeed(Need):
    """``choice`` / ``choice-text``: a chat model's answers per case, cached by case content."""

    def prefill(self, engine: Engine, cases: Sequence[Case], keep: Callable[[str], bool]) -> None:
        engine.answer_choices([c for c in cases if keep(case_key(c))], self.need)

    def matrices(self, engine: Engine, cases: Sequence[Case]) -> list[np.ndarray]:
        return engine.answer_choices(cases, self.need)


class EmbeddingNeed(Need):
    """``image-text`` with an embedding model: each case's image rows against its text rows (or its
    labels' prompt ensembles), exact ties kept (:meth:`Engine.case_similarity`)."""

    def prefill(self, engine: Engine, cases: Sequence[Case], keep: Callable[[str], bool]) -> None:
        engine.embed_images([r for c in cases for r in c.images if keep(r.key)])
        engine.embed_texts(_owned_texts(cases, keep))

    def matrices(self, engine: Engine, cases: Sequence[Case]) -> list[np.ndarray]:
        img = _split(engine.embed_images([r for c in cases for r in c.images]), (len(c.images) for c in cases))
        txt = iter(
            _split(
                engine.embed_texts([t for c in cases if not c.prompts for t in c.texts]),
                (len(c.texts) for c in cases if not c.prompts),
            )
        )
        return [
            engine.case_similarity(c, a, engine.embed_labels(c.texts, c.prompts) if c.prompts else next(txt))
            for c, a in zip(cases, img, strict=True)
        ]


class PairNeed(Need):
    """``image-text`` / ``match-prob`` with a pair scorer: the ``[n_images, n_texts]`` pair scores."""

    def rows(self, engine: Engine, pairs: Iterable[tuple[ImageRef, str]]) -> Mapping[str, Any]:
        return engine.pair_scores(pairs)

    def prefill(self, engine: Engine, cases: Sequence[Case], keep: Callable[[str], bool]) -> None:
        self.rows(engine, ((r, t) for c in cases for r in c.images if keep(r.key) for t in c.texts))

    def matrices(self, engine: Engine, cases: Sequence[Case]) -> list[np.ndarray]:
        rows = self.rows(engine, ((r, t) for c in cases for r in c.images for t in c.texts))
        return [np.array([[rows[pair_key(r, t)] for t in c.texts] for r in c.images], dtype=np.float64) for c in cases]


class ITMNeed(PairNeed):
    """``match-prob`` with an ITM head: the ``[n_images, n_texts, 2]`` ``(no-match, match)`` logits."""

    def rows(self, engine: Engine, pairs: Iterable[tuple[ImageRef, str]]) -> Mapping[str, Any]:
        return engine.itm_logits(pairs)


class AnswerNeed(Need):
    """``answer-prob``: per (image, question) of a question case, each candidate answer's
    log-probability (and the generated answer, read by the case's reader, when asked):
    ``[n_images, n_questions, n_answers (+ 1)]``; cached per (image, question) under the candidate set
    and the reader."""

    @staticmethod
    def _by_asked(cases: Sequence[Case]) -> dict[tuple[tuple[str, ...], str], list[Case]]:
        """The cases grouped by what they ask: (candidate answers, reader)."""
        out: dict[tuple[tuple[str, ...], str], list[Case]] = {}
        for case in cases:
            out.setdefault((case_answers(case), case_reader(case)), []).append(case)
        return out

    def prefill(self, engine: Engine, cases: Sequence[Case], keep: Callable[[str], bool]) -> None:
        for (answers, reader), group in self._by_asked(cases).items():
            pairs = ((r, t) for c in group for r, t in asked_pairs(c) if keep(r.key))
            engine.answer_scores(pairs, answers, reader)

    def matrices(self, engine: Engine, cases: Sequence[Case]) -> list[np.ndarray]:
        rows = {
            asked: engine.answer_scores((p for c in group for p in asked_pairs(c)), *asked)
            for asked, group in self._by_asked(cases).items()
        }
        out = []
        for c in cases:  # a pair the case does not ask (tags["pairs"]) is NaN
            found = rows[case_answers(c), case_reader(c)]
            cells = {(i, q): found[pair_key(c.images[i], c.texts[q])] for i, q in case_pairs(c)}
            width = len(next(iter(cells.values())))
            matrix = np.full((len(c.images), len(c.texts), width), np.nan)
            for (i, q), row in cells.items():
                matrix[i, q] = row
            out.append(matrix)
        if engine.judge is None:
            return out
        verdicts = engine.judged_answers(cases)
        return [np.concatenate([m, v[..., None]], axis=2) for m, v in zip(out, verdicts, strict=True)]


def asked_pairs(case: Case) -> list[tuple[ImageRef, str]]:
    """The (image, question) pairs a question case asks (:func:`~spotdiff.cases.case_pairs`)."""
    return [(case.images[i], case.texts[q]) for i, q in case_pairs(case)]


def need_for(scorer: Scorer, need: str) -> Need:
    """The :class:`Need` that serves ``need`` with ``scorer`` (the engine's one dispatch)."""
    if need == "text-text":
        return TextTextNeed(need)
    if need == "text-prior":
        return TextPriorNeed(need)
    if need in CHOICE_NEEDS:
        return ChoiceNeed(need)
    if need == "answer-prob":
        return AnswerNeed(need)
    if isinstance(scorer, ImageTextEmbedding):
        return EmbeddingNeed(need)
    if need == "match-prob" and scorer.can("itm-logits"):
        return ITMNeed(need)
    return PairNeed(need)


class Engine:
    """Scores cases with one scorer, reusing every computation it can; a context manager that
    closes its cache.

    Args:
        scorer: the model.
        cache_dir: a persistent cache directory, or None for a run that keeps its rows in a
            temporary cache, deleted on :meth:`close`.
        progress: show progress bars (items per second) on long work.
        workers: processes that decode and preprocess images ahead of the model (0: in this process; see
            :class:`~spotdiff.diagnose.pipeline.InputPipeline`), and
        threads: torch's intra-op threads while the model computes; None (either): chosen by
            :func:`~spotdiff.processes.thread_budget` from the other and the model's device, so that threads
            times workers stay within the usable cores (:attr:`budget`).
        decode_device: decode JPEG files on this device (``"cuda"``: GPU decoding), or None to decode
            them in the workers; needs a scorer whose image preprocessing is made of tensor operations.
        cache: an already open :class:`Cache` to use instead of ``cache_dir`` (a shard of a
            sharded run, see :mod:`spotdiff.diagnose.distributed`, opened under
            :func:`cache_digest`); the engine closes it.
        judge: a judge of generated answers (``--judge``, :class:`~spotdiff.diagnose.judge.Judge`): the
            ``answer-prob`` matrices get its verdicts as a last column; its replies are cached beside the
            model's, under the judge's identity.
    """

    def __init__(
        self,
        scorer: Scorer,
        cache_dir: str | Path | None = None,
        *,
        progress: bool = True,
        workers: int | None = None,
        threads: int | None = None,
        decode_device: str | None = None,
        cache: Cache | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.scorer = scorer
        if judge is not None and cache is not None:
            raise ConfigError("a judge keeps its replies beside the engine's own cache folder, not in an open shard")
        self._scratch: tempfile.TemporaryDirectory | None = None
        if cache is None and cache_dir is None:  # rows spill to disk, so a long run's memory stays flat
            self._scratch = tempfile.TemporaryDirectory(prefix="spotdiff-engine-")
            cache = Cache(self._scratch.name, "scratch")
        elif cache is None:
            cache = Cache(cache_dir, cache_digest(scorer, decode_device is not None))
        self.cache = cache
        self.progress = progress
        if decode_device is not None:
            prepare = scorer.image_preprocessor()
            if prepare is None or not prepare.on_tensors():
                raise ConfigError(
                    f"GPU decoding needs image preprocessing made of tensor operations; model {scorer.spec!r} "
                    "preprocesses decoded images on the CPU only"
                )
        device = str(getattr(scorer, "device", scorer.options.device))
        #: The run's cores: torch threads while the model computes, and the input pipeline's workers.
        self.budget = thread_budget(threads, workers, device=device)
        self.pipeline = InputPipeline(self.budget.workers, device=device, decode_device=decode_device)
        self.requests = CachedRequests(cache, progress=progress)
        self.stats = self.requests.stats
        scorer.bind_requests(CachedRequests(cache, progress=False, verbose=progress))  # a served model's responses
        #: Pair keys whose score is a bound, not a value (a second row entry of 1; counted in ``stats``).
        self.bounded: set[str] = set()
        self.judge = judge
        self._judge_cache = None if judge is None else Cache(cache.directory, judge.digest())
        if judge is not None:
            judge.bind(self._judge_cache)
        self._labels: dict[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] = {}
        self._frame_rule = scorer.frame_rule()
        self._frames = cache.directory / "frames"  # sampled video frames, by clip content and frame rule

    def _batch_size(self) -> int:
        return max(1, int(self.scorer.options.batch_size))

    def _budgeted(self, compute: Callable[[list[list[int]]], Iterator[T]]) -> Callable[[list[list[int]]], Iterator[T]]:
        """``compute`` run on the budget's torch threads (:attr:`budget`) when it has batches to compute and the
        model computes in this process (not a served model's)."""

        def run(batches: list[list[int]]) -> Iterator[T]:
            local = batches and getattr(self.scorer, "computes_here", True)
            with torch_threads(self.budget.threads if local else None):
                yield from compute(batches)

        return run

    # -- unique items, through the one cached door -------------------------------------------------
    def _encode(self, kind: str, inputs: list, keys: list[str], unit: str) -> dict[str, np.ndarray]:
        """The rows of unique ``inputs`` (aligned with ``keys``), the missing ones computed."""
        return self.requests(
            kind, keys, self._budgeted(lambda batches: self._rows(kind, inputs, batches)), self._batch_size(),
            desc=f"encoding {kind}s", unit=unit,
        )  # fmt: skip

    def _rows(self, kind: str, inputs: list, batches: list[list[int]]) -> Iterator[np.ndarray]:
        """The model's rows for each batch of ``inputs``, the next batches prepared meanwhile."""
        scorer = self.scorer
        if kind == "prior":
            prior = _serves(scorer, TextPrior, "does not score texts alone")
            for idx in batches:
                yield np.asarray(prior.text_logprob([inputs[i] for i in idx]), dtype=np.float32)
            return
        if kind == "image":
            embed = _serves(scorer, ImageTextEmbedding, "does not produce embeddings")
            with contextlib.closing(self.pipeline.images(inputs, batches, scorer.image_preprocessor())) as feed:
                for pixels in feed:
                    yield np.asarray(embed.encode_images(pixels), dtype=np.float32)
            return
        text = _serves(scorer, TextEmbedding, "does not produce embeddings")
        with contextlib.closing(self.pipeline.texts(inputs, batches, scorer.text_preprocessor())) as feed:
            for tokens in feed:
                yield np.asarray(text.encode_texts(tokens), dtype=np.float32)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (rows aligned with the input), each unique text encoded once."""
        _serves(self.scorer, TextEmbedding, "does not produce embeddings")
        unique = list(dict.fromkeys(texts))
        keys = [text_key(t) for t in unique]
        rows = self._encode("text", unique, keys, "txt")
        by_text = {t: rows[k] for t, k in zip(unique, keys, strict=True)}
        return np.stack([by_text[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)

    def embed_images(self, images: Sequence[ImageRef]) -> np.ndarray:
        """Embeddings of ``images`` (rows aligned with the input), each unique image encoded once."""
        _serves(self.scorer, ImageTextEmbedding, "does not produce embeddings")
        keys = content_keys(images, self.pipeline.workers)
        unique = list(dict(zip(keys, images, strict=True)).values())
        rows = self._encode("image", unique, [ref.key for ref in unique], "img")
        return np.stack([rows[ref.key] for ref in images]) if images else np.zeros((0, 0), np.float32)

    def embed_labels(self, labels: Sequence[str], prompts: Sequence[str]) -> np.ndarray:
        """CLIP's prompt ensemble per label (rows aligned with ``labels``; Radford et al. 2021 Sec. 3.1.4).

        Row ``c`` is ``normalize(mean_t normalize(embed(template_t with {c} -> label_c)))``, the
        zero-shot classifier of CLIP_benchmark / open_clip (``zero_shot_classifier``). The filled
        prompts go through :meth:`embed_texts` (deduplicated and cached); the matrix is kept for the
        next cases with the same labels and templates.
        """
        key = (tuple(prompts), tuple(labels))
        matrix = self._labels.get(key)
        if matrix is None:
            filled = [template.replace("{c}", label) for label in labels for template in key[0]]
            emb = self.embed_texts(filled).astype(np.float64).reshape(len(labels), len(key[0]), -1)
            emb /= np.linalg.norm(emb, axis=-1, keepdims=True).clip(min=1e-12)
            mean = emb.mean(axis=1)
            matrix = (mean / np.linalg.norm(mean, axis=-1, keepdims=True).clip(min=1e-12)).astype(np.float32)
            if len(self._labels) > 16:  # a run holds one or two label sets; stay bounded regardless
                self._labels.clear()
            self._labels[key] = matrix
        return matrix

    def text_prior(self, texts: Sequence[str]) -> np.ndarray:
        """Text-only log-probabilities log P(t), each unique text scored once."""
        check_capability(self.scorer, "text-prior")
        unique = list(dict.fromkeys(texts))
        keys = [text_key(t) for t in unique]
        rows = self._encode("prior", unique, keys, "txt")
        by_text = {t: float(rows[k].reshape(-1)[0]) for t, k in zip(unique, keys, strict=True)}
        return np.array([by_text[t] for t in texts], dtype=np.float64)

    def pair_scores(self, pairs: Iterable[tuple[ImageRef, str]]) -> dict[str, float]:
        """Joint scores of (image, text) pairs keyed by :func:`pair_key`; vision once per image."""
        scorer = _serves(self.scorer, PairScoring, "does not score pairs jointly")
        rows = self._pair_rows(pairs, "pair", scorer.score_pairs)
        self.bounded.update(k for k, v in rows.items() if v.size > 1 and v[1])
        if self.bounded:
            self.stats["bounded"] = len(self.bounded)
        return {k: float(v[0]) for k, v in rows.items()}

    def bounded_cells(self, case: Case) -> list[list[int]]:
        """The ``[image, text]`` cells of ``case`` whose pair score is only a bound (a served model's
        answer was not among its listed log-probabilities; :mod:`spotdiff.scorers.api`)."""
        if not self.bounded:
            return []
        case = self.sampled(case)
        return [
            [i, j]
            for i, ref in enumerate(case.images)
            for j, text in enumerate(case.texts)
            if pair_key(ref, text) in self.bounded
        ]

    def answer_scores(
        self, pairs: Iterable[tuple[ImageRef, str]], answers: tuple[str, ...], reader: str
    ) -> dict[str, np.ndarray]:
        """Each (image, question) pair's row of candidate-answer log-probabilities (and the generated
        answer, read by ``reader``, when asked), keyed by :func:`pair_key` and cached under the candidate
        set and the reader (``answer:Yes/No|words``), so two readers never share a generation."""
        scorer = _serves(self.scorer, AnswerLikelihood, "does not score answers to questions")
        kind = f"answer:{ANSWER_SEP.join(answers)}|{reader}"
        return self._pair_rows(pairs, kind, scorer.answer_scores, extra=(answers, reader))

    def itm_logits(self, pairs: Iterable[tuple[ImageRef, str]]) -> dict[str, np.ndarray]:
        """``(no-match, match)`` ITM logits of (image, text) pairs keyed by :func:`pair_key`."""
        check_capability(self.scorer, "itm-logits")
        scorer = _serves(self.scorer, ITMLogits, "does not provide image-text matching logits")
        return self._pair_rows(pairs, "itm", scorer.itm_logits)

    def generated_texts(self, pairs: Iterable[tuple[ImageRef, str]]) -> dict[str, str]:
        """The model's generated answer to each (image, question) pair, keyed by :func:`pair_key` and
        cached (kind ``generated``): what a judge grades."""
        scorer = _serves(self.scorer, AnswerTexts, "does not give its generated answers, which --judge grades")
        rows = self._pair_rows(pairs, "generated", scorer.answer_texts, _text_rows)
        return {k: row_json(v)["text"] for k, v in rows.items()}

    def judged_answers(self, cases: Sequence[Case]) -> list[np.ndarray]:
        """The judge's verdict on each generated answer of question cases, ``[n_images, n_questions]`` per
        case (:func:`~spotdiff.diagnose.judge.verdict`): the question as asked, its gold candidate and the
        answer, graded together."""
        texts = self.generated_texts(p for c in cases for p in asked_pairs(c))
        items = []
        for c in cases:
            answers = case_answers(c)
            items += [
                (c.texts[q], answers[0] if c.truth[i, q] else answers[1], texts[pair_key(c.images[i], c.texts[q])])
                for i, q in case_pairs(c)
            ]
        verdicts = self.judge.grade(items)
        out = []
        for c, v in zip(cases, _split(verdicts, (len(case_pairs(c)) for c in cases)), strict=True):
            grid = np.full(c.truth.shape, np.nan)  # a pair the case does not ask has no verdict
            for (i, q), verdict in zip(case_pairs(c), v, strict=True):
                grid[i, q] = verdict
            out.append(grid)
        return out

    def _pair_rows(
        self,
        pairs: Iterable[tuple[ImageRef, str]],
        kind: str,
        score: Callable[..., list],
        as_rows: Callable[[Any, int], list[np.ndarray]] | None = None,
        extra: tuple = (),
    ) -> dict[str, np.ndarray]:
        """``score``'s output row for each pair (a 1-vector per score, a 2-vector of logits; ``as_rows``
        turns an image's output for its ``n`` texts into their rows), cached under ``kind``; the vision
        side runs once per unique image, its texts batched against it (``score(images, texts, *extra)``)."""
        by_image: dict[str, tuple[ImageRef, dict[str, None]]] = {}
        for ref, text in pairs:
            by_image.setdefault(ref.key, (ref, {}))[1][text] = None
        unique = [(ref, t) for ref, texts in by_image.values() for t in texts]
        rows_of = as_rows or _float_rows
        return self.requests(
            kind, [pair_key(ref, t) for ref, t in unique],
            self._budgeted(lambda batches: self._score(unique, batches, score, rows_of, extra)),
            self._batch_size(), groups=[ref.key for ref, _ in unique], desc="scoring pairs", unit="pair",
        )  # fmt: skip

    def _score(
        self,
        pairs: list[tuple[ImageRef, str]],
        batches: list[list[int]],
        score: Callable[..., list],
        as_rows: Callable[[Any, int], list[np.ndarray]],
        extra: tuple,
    ) -> Iterator[list[np.ndarray]]:
        """Each batch's pair rows: its images (decoded ahead) each scored against their texts."""
        groups: list[list[list[int]]] = []
        for idx in batches:
            by_image: dict[str, list[int]] = {}
            for i in idx:
                by_image.setdefault(pairs[i][0].key, []).append(i)
            groups.append(list(by_image.values()))
        refs = [pairs[g[0]][0] for batch in groups for g in batch]
        per_batch = _runs(len(batch) for batch in groups)
        with contextlib.closing(self.pipeline.images(refs, per_batch, self.scorer.image_preprocessor())) as feed:
            calls = ((images, [[pairs[i][1] for i in g] for g in batch], *extra)
                     for batch, images in zip(groups, feed, strict=True))  # fmt: skip
            with contextlib.closing(self._calls(score, calls)) as answered:
                for batch, outputs in zip(groups, answered, strict=True):
                    rows: list[np.ndarray] = []
                    for g, out in zip(batch, outputs, strict=True):
                        rows += as_rows(out, len(g))
                    yield rows

    def _calls(self, method: Callable[..., T], calls: Iterator[tuple]) -> Iterator[T]:
        """``method(*args)`` for each ``args`` of ``calls``, in order; a scorer that streams (a served model,
        :class:`~spotdiff.scorers.base.Streaming`) is handed them all, so that its requests stay in flight
        across batches rather than each batch waiting for its slowest answer."""
        if isinstance(self.scorer, Streaming):
            return self.scorer.stream(method, calls)
        return (method(*args) for args in calls)

    def answer_choices(self, cases: Sequence[Case], need: str) -> list[np.ndarray]:
        """A chat scorer's answers per case, asked in the case's question style (:func:`case_prompts`) and
        cached by case content under the need and the style: ``[n_questions, n_orders, n_readings]``
        (protocols.choice)."""
        out: dict[int, np.ndarray] = {}
        by_style: dict[str, list[int]] = {}
        for k, case in enumerate(cases):
            by_style.setdefault(case_prompts(case), []).append(k)
        for style, members in by_style.items():
            answers = self._styled_answers([cases[k] for k in members], need, style)
            out.update(zip(members, answers, strict=True))
        return [out[k] for k in range(len(cases))]

    def _styled_answers(self, cases: Sequence[Case], need: str, style: str) -> list[np.ndarray]:
        """:meth:`answer_choices` of cases of one question style."""
        keys = [case_key(c) for c in cases]
        kind = need if style == PROMPT_STYLES[0] else f"{need}|{style}"  # spotdiff's rows keep their kind
        found = self.requests(
            kind, keys, self._budgeted(lambda batches: self._answers(cases, batches, need, style)), 1, desc="asking",
            unit="case",
        )  # fmt: skip
        out = []
        for case, key in zip(cases, keys, strict=True):
            rows = len(case.texts) * (2 if need == "choice" else 1)
            orders = len(CHOICE_STYLES[style].orders(len(case.texts)))
            out.append(np.asarray(found[key], dtype=np.float64).reshape(rows, orders, -1))
        return out

    def _answers(
        self, cases: Sequence[Case], batches: list[list[int]], need: str, style: str
    ) -> Iterator[list[np.ndarray]]:
        """Each batch's (one case's) answers, its images decoded ahead."""
        scorer = _serves(self.scorer, AnswerChoice, "does not answer multiple-choice questions")
        refs = [ref for (k,) in batches for ref in cases[k].images]
        per_case = _runs(len(cases[k].images) for (k,) in batches)
        with contextlib.closing(self.pipeline.images(refs, per_case, None)) as feed:
            calls = ((images, cases[k].texts, need, style) for (k,), images in zip(batches, feed, strict=True))
            with contextlib.closing(self._calls(scorer.answer_choices, calls)) as answered:
                for answers in answered:
                    yield [np.asarray(answers, dtype=np.float32).reshape(-1)]

    def image_text(self, images: Sequence[ImageRef], texts: Sequence[str]) -> np.ndarray:
        """The ``[len(images), len(texts)]`` score matrix (similarity, or the pair score)."""
        if isinstance(self.scorer, ImageTextEmbedding):
            return self.scorer.similarity(self.embed_images(images), self.embed_texts(texts))
        scores = self.pair_scores((ref, t) for ref in images for t in texts)
        return np.array([[scores[pair_key(ref, t)] for t in texts] for ref in images], dtype=np.float64)

    def case_similarity(self, case: Case, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """A case's similarity matrix; a text (or image) listed twice gets bitwise the same scores,
        as a matrix product need not give identical rows the same rounding, and a tie between equal
        candidates must be exact for ``--ties argmax`` (ARO-Order keeps perturbations equal to the
        caption)."""
        rows = _first_positions([r.key for r in case.images])
        cols = _first_positions(list(case.texts))
        unique_r, inv_r = np.unique(rows, return_inverse=True)
        unique_c, inv_c = np.unique(cols, return_inverse=True)
        scorer = _serves(self.scorer, TextEmbedding, "does not produce embeddings")
        sim = scorer.similarity(a[unique_r], b[unique_c]).astype(np.float64)
        return sim[np.ix_(inv_r.reshape(-1), inv_c.reshape(-1))]

    # -- cases -----------------------------------------------------------------------------------
    def _chunks(self, cases: Iterable[Case]) -> Iterator[list[Case]]:
        """``cases`` in chunks: :data:`CHUNK_CASES` cases, more when their images make fewer than
        :data:`PIPELINE_BATCHES` batches per worker (at most :data:`MAX_CHUNK_CASES` cases)."""
        chunk: list[Case] = []
        images, target = 0, PIPELINE_BATCHES * self._batch_size() * max(1, self.pipeline.workers)
        for case in cases:
            chunk.append(case)
            images += len(case.images)
            if len(chunk) >= CHUNK_CASES and (images == 0 or images >= target or len(chunk) >= MAX_CHUNK_CASES):
                yield chunk
                chunk, images = [], 0
        if chunk:
            yield chunk

    def _checked(self, serve: Need, chunk: list[Case]) -> list[Case]:
        """``chunk`` once ``serve`` accepts it, its images' content keys computed on the pipeline's cores when
        ``serve`` reads them (each reference keeps its own)."""
        serve.check(self, chunk)
        if serve.reads_images:
            content_keys([ref for case in chunk for ref in case.images], self.pipeline.workers)
        return chunk

    def sampled(self, case: Case) -> Case:
        """``case`` with its clips bound to the scorer's frame rule, their frames cached in the cache folder
        (:func:`~spotdiff.video.clips.sampled_case`): the keys the engine dedups and caches them by.

        Args:
            case: a case, of images or clips.
        """
        return sampled_case(case, self._frame_rule, self._frames, self.scorer.spec)

    def case_matrices(self, cases: Iterable[Case], need: str) -> Iterator[np.ndarray]:
        """Yield each case's score matrix for a protocol ``need``, streaming chunk by chunk."""
        check_capability(self.scorer, need)
        serve = need_for(self.scorer, need)
        for chunk in self._chunks(map(self.sampled, cases)):
            matrices = serve.matrices(self, self._checked(serve, chunk))
            self.commit()
            yield from matrices

    def prefill(self, cases: Iterable[Case], need: str, owns: Callable[[str], bool] | None = None) -> None:
        """Compute and store, without assembling matrices, every item ``need`` requires of ``cases``.

        Only items whose content key satisfies ``owns`` are computed (texts by :func:`text_key`,
        images by their key; pairs by their image's key, so a pair scorer still runs the vision
        side once per image). A sharded run gives each process the keys that hash to it.
        """
        check_capability(self.scorer, need)
        serve = need_for(self.scorer, need)
        for chunk in self._chunks(map(self.sampled, cases)):
            serve.prefill(self, self._checked(serve, chunk), owns or (lambda key: True))
            self.commit()

    def commit(self) -> None:
        """Commit what the cache holds (:meth:`Cache.commit`): once per chunk of cases, and on close."""
        self.cache.commit()
        if self._judge_cache is not None:
            self._judge_cache.commit()

    def close(self) -> None:
        """Commit and close the caches (what was computed before an error or an interrupt is kept)."""
        self.scorer.bind_requests(None)
        try:
            if self.judge is not None:
                self.judge.bind(None)
                self._judge_cache.close()
            self.cache.close()
        finally:
            if self._scratch is not None:
                self._scratch.cleanup()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
