"""Cases x scorer -> score matrices: deduplication, batching, caching, progress, resumption.

The published SPEC, VISLA and SugarCrepe code re-encodes every case's images and texts. The engine
instead collects the unique images (by content key) and unique texts of a chunk of cases, looks
them up in the persistent cache, encodes only what is missing in batches, and assembles every
case's score matrix from those rows. Pair scorers run the vision side once per unique image with
all of that image's texts batched against it. Batches are decoded, preprocessed and tokenised
ahead of the model on the other cores (:mod:`spotdiff.diagnose.pipeline`). Cases stream through in
chunks, and without a persistent cache the computed rows go to a temporary one on disk, so memory
does not grow with the number of cases.

A case with ``prompts`` (zero-shot classification) holds labels rather than texts: each label's row
is CLIP's prompt ensemble (:meth:`Engine.embed_labels`), built once per (templates, labels) and
shared by every case that holds them.

For a ``match-prob`` protocol, a scorer that also declares ``"itm-logits"`` (BLIP's ITM head) gives
its two ITM logits per pair instead, a ``[n_images, n_texts, 2]`` matrix of ``(no-match, match)``:
VALSE ranks captions on the match logit (:mod:`spotdiff.protocols.valse`).
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from spotdiff.cases import Case, ImageRef
from spotdiff.diagnose.cache import Cache
from spotdiff.diagnose.pipeline import InputPipeline
from spotdiff.errors import ConfigError, DataError
from spotdiff.scorers.base import EmbeddingScorer, PairScorer, Scorer

#: Cases assembled per chunk (at least); bounds memory on long runs.
CHUNK_CASES = 2048
#: A chunk with images grows until it gives the input pipeline this many batches of images per
#: worker process, so that starting the workers and waiting for the first batch are paid once per
#: many batches, however many workers share each batch ...
PIPELINE_BATCHES = 32
#: ... up to this many cases.
MAX_CHUNK_CASES = 65536

#: Needs served per case by a chat scorer's ``answer_choices`` (EqBen Sec. 5.5, protocols.choice).
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
    reason when it gives one)."""
    if not scorer.can(need):
        can = ", ".join(sorted(scorer.capabilities)) or "nothing"
        why = getattr(scorer, "cannot", lambda need: None)(need)
        raise ConfigError(
            f"model {scorer.spec!r} cannot serve a protocol that needs {need!r} (it provides: {can})"
            + (f": {why}" if why else "")
        )


class Engine:
    """Scores cases with one scorer, reusing every computation it can; a context manager that
    closes its cache.

    Args:
        scorer: the model.
        cache_dir: a persistent cache directory, or None for a run that keeps its rows in a
            temporary cache, deleted on :meth:`close`.
        progress: show progress bars (items per second) on long work.
        workers: processes that decode and preprocess images ahead of the model (None: every core;
            0: in this process); see :class:`~spotdiff.diagnose.pipeline.InputPipeline`.
        decode_device: decode JPEG files on this device (``"cuda"``: GPU decoding), or None to decode
            them in the workers; needs a scorer whose image preprocessing is made of tensor operations.
        cache: an already open :class:`Cache` to use instead of ``cache_dir`` (a shard of a
            sharded run, see :mod:`spotdiff.diagnose.distributed`, opened under
            :func:`cache_digest`); the engine closes it.
    """

    def __init__(
        self,
        scorer: Scorer,
        cache_dir: str | Path | None = None,
        *,
        progress: bool = True,
        workers: int | None = None,
        decode_device: str | None = None,
        cache: Cache | None = None,
    ) -> None:
        self.scorer = scorer
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
        self.pipeline = InputPipeline(workers, device=device, decode_device=decode_device)
        self.stats = {"computed": 0, "cached": 0}
        self._labels: dict[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] = {}

    # -- storage -------------------------------------------------------------------------------
    def _lookup(self, kind: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        return self.cache.get(kind, keys) if keys else {}

    def _store(self, kind: str, items: list[tuple[str, np.ndarray]]) -> None:
        self.cache.put(kind, items)

    def _bar(self, total: int, desc: str, unit: str) -> tqdm:
        return tqdm(total=total, desc=desc, unit=unit, disable=not self.progress or total == 0, leave=False)

    def _batch_size(self) -> int:
        return max(1, int(self.scorer.options.batch_size))

    def _batches(self, n: int) -> list[range]:
        bs = self._batch_size()
        return [range(start, min(n, start + bs)) for start in range(0, n, bs)]

    def _rows(self, kind: str, inputs: list, batches: list[list[int]]) -> Iterator[np.ndarray]:
        """The model's rows for each batch of ``inputs``, the next batches prepared meanwhile."""
        scorer = self.scorer
        if kind == "prior":
            for idx in batches:
                yield scorer.text_logprob([inputs[i] for i in idx])  # type: ignore[attr-defined]
            return
        embed = self._embedding_scorer()
        if kind == "image":
            for pixels in self.pipeline.images(inputs, batches, scorer.image_preprocessor()):
                yield embed.encode_images(pixels)
        else:
            for tokens in self.pipeline.texts(inputs, batches, scorer.text_preprocessor()):
                yield embed.encode_texts(tokens)

    # -- unique-item encoders --------------------------------------------------------------------
    def _encode(self, kind: str, keys: list[str], inputs: list, unit: str) -> dict[str, np.ndarray]:
        """Encode ``inputs`` (aligned with ``keys``) that are not cached; return all rows."""
        found = self._lookup(kind, keys)
        self.stats["cached"] += len(found)
        todo = [i for i, k in enumerate(keys) if k not in found]
        batches = [[todo[j] for j in b] for b in self._batches(len(todo))]
        with self._bar(len(todo), f"encoding {kind}s", unit) as bar, contextlib.closing(
            self._rows(kind, inputs, batches)
        ) as encoded:
            for idx, rows in zip(batches, encoded, strict=True):
                rows = np.asarray(rows, dtype=np.float32)
                items = [(keys[i], rows[j]) for j, i in enumerate(idx)]
                self._store(kind, items)
                found.update(items)
                self.stats["computed"] += len(idx)
                bar.update(len(idx))
        return found

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (rows aligned with the input), each unique text encoded once."""
        self._embedding_scorer()
        unique = list(dict.fromkeys(texts))
        keys = [text_key(t) for t in unique]
        rows = self._encode("text", keys, unique, "txt")
        by_text = {t: rows[k] for t, k in zip(unique, keys, strict=True)}
        return np.stack([by_text[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)

    def embed_images(self, images: Sequence[ImageRef]) -> np.ndarray:
        """Embeddings of ``images`` (rows aligned with the input), each unique image encoded once."""
        self._embedding_scorer()
        unique = list({ref.key: ref for ref in images}.values())
        keys = [ref.key for ref in unique]
        rows = self._encode("image", keys, unique, "img")
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

    @staticmethod
    def _text_items(case: Case) -> tuple[str, ...]:
        """What the model encodes for a case's texts: the texts, or every filled prompt of its labels."""
        if not case.prompts:
            return case.texts
        return tuple(template.replace("{c}", label) for label in case.texts for template in case.prompts)

    def _embedding_scorer(self) -> EmbeddingScorer:
        if not isinstance(self.scorer, EmbeddingScorer):
            raise ConfigError(f"model {self.scorer.spec!r} does not produce embeddings")
        return self.scorer

    def text_prior(self, texts: Sequence[str]) -> np.ndarray:
        """Text-only log-probabilities log P(t), each unique text scored once."""
        check_capability(self.scorer, "text-prior")
        unique = list(dict.fromkeys(texts))
        keys = [text_key(t) for t in unique]
        rows = self._encode("prior", keys, unique, "txt")
        by_text = {t: float(rows[k].reshape(-1)[0]) for t, k in zip(unique, keys, strict=True)}
        return np.array([by_text[t] for t in texts], dtype=np.float64)

    def pair_scores(self, pairs: Iterable[tuple[ImageRef, str]]) -> dict[str, float]:
        """Joint scores of (image, text) pairs keyed by :func:`pair_key`; vision once per image."""
        scorer = self._pair_scorer()
        return {k: float(v[0]) for k, v in self._pair_rows(pairs, "pair", scorer.score_pairs).items()}

    def itm_logits(self, pairs: Iterable[tuple[ImageRef, str]]) -> dict[str, np.ndarray]:
        """``(no-match, match)`` ITM logits of (image, text) pairs keyed by :func:`pair_key`."""
        check_capability(self.scorer, "itm-logits")
        return self._pair_rows(pairs, "itm", self._pair_scorer().itm_logits)

    def _pair_scorer(self) -> PairScorer:
        if not isinstance(self.scorer, PairScorer):
            raise ConfigError(f"model {self.scorer.spec!r} does not score pairs jointly")
        return self.scorer

    def _pair_rows(
        self, pairs: Iterable[tuple[ImageRef, str]], kind: str, score: Callable[..., list]
    ) -> dict[str, np.ndarray]:
        """``score``'s output row for each pair (a 1-vector per score, a 2-vector of logits), cached
        under ``kind``; the vision side runs once per unique image, its texts batched against it."""
        by_image: dict[str, tuple[ImageRef, dict[str, str]]] = {}
        for ref, text in pairs:
            by_image.setdefault(ref.key, (ref, {}))[1][text] = pair_key(ref, text)
        all_keys = [k for _, texts in by_image.values() for k in texts.values()]
        found = dict(self._lookup(kind, all_keys))
        self.stats["cached"] += len(found)
        todo = [
            (ref, [t for t, k in texts.items() if k not in found])
            for ref, texts in by_image.values()
            if any(k not in found for k in texts.values())
        ]
        batches = [list(b) for b in self._batches(len(todo))]
        refs = [ref for ref, _ in todo]
        feed = self.pipeline.images(refs, batches, self.scorer.image_preprocessor())
        with self._bar(sum(len(t) for _, t in todo), "scoring pairs", "pair") as bar, contextlib.closing(feed):
            for idx, images in zip(batches, feed, strict=True):
                group = [todo[i] for i in idx]
                outputs = score(images, [texts for _, texts in group])
                items = []
                for (ref, texts), out in zip(group, outputs, strict=True):
                    out = np.asarray(out, dtype=np.float32)
                    if out.ndim == 0 or out.shape[0] != len(texts):
                        raise ConfigError(f"scorer returned {out.size} scores for {len(texts)} texts")
                    rows = out.reshape(len(texts), -1)
                    items += [(pair_key(ref, t), rows[j]) for j, t in enumerate(texts)]
                self._store(kind, items)
                found.update(items)
                self.stats["computed"] += len(items)
                bar.update(len(items))
        return found

    def answer_choices(self, cases: Sequence[Case], need: str) -> list[np.ndarray]:
        """A chat scorer's answers per case (``[n_questions, 2, n_readings]``, protocols.choice),
        cached by case content."""
        keys = [case_key(c) for c in cases]
        found = self._lookup(need, keys)
        self.stats["cached"] += len(found)
        todo = [k for k, key in enumerate(keys) if key not in found]
        refs = [ref for k in todo for ref in cases[k].images]
        starts = np.cumsum([0] + [len(cases[k].images) for k in todo])
        per_case = [list(range(starts[j], starts[j + 1])) for j in range(len(todo))]
        feed = self.pipeline.images(refs, per_case, None)  # each case's images, decoded ahead
        with self._bar(len(todo), "asking", "case") as bar, contextlib.closing(feed):
            for k, images in zip(todo, feed, strict=True):
                case = cases[k]
                answers = self.scorer.answer_choices(images, case.texts, need)  # type: ignore[attr-defined]
                item = (keys[k], np.asarray(answers, dtype=np.float32).reshape(-1))
                self._store(need, [item])
                found[keys[k]] = item[1]
                self.stats["computed"] += 1
                bar.update(1)
        out = []
        for case, key in zip(cases, keys, strict=True):
            rows = len(case.texts) * (2 if need == "choice" else 1)
            out.append(np.asarray(found[key], dtype=np.float64).reshape(rows, 2, -1))
        return out

    def image_text(self, images: Sequence[ImageRef], texts: Sequence[str]) -> np.ndarray:
        """The ``[len(images), len(texts)]`` score matrix (similarity, or the pair score)."""
        if isinstance(self.scorer, EmbeddingScorer):
            scorer = self.scorer
            return scorer.similarity(self.embed_images(images), self.embed_texts(texts))
        scores = self.pair_scores((ref, t) for ref in images for t in texts)
        return np.array([[scores[pair_key(ref, t)] for t in texts] for ref in images], dtype=np.float64)

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

    def case_matrices(self, cases: Iterable[Case], need: str) -> Iterator[np.ndarray]:
        """Yield each case's score matrix for a protocol ``need``, streaming chunk by chunk."""
        check_capability(self.scorer, need)
        for chunk in self._chunks(cases):
            yield from self._chunk(chunk, need)

    def prefill(self, cases: Iterable[Case], need: str, owns: Callable[[str], bool] | None = None) -> None:
        """Compute and store, without assembling matrices, every item ``need`` requires of ``cases``.

        Only items whose content key satisfies ``owns`` are computed (texts by :func:`text_key`,
        images by their key; pairs by their image's key, so a pair scorer still runs the vision
        side once per image). A sharded run gives each process the keys that hash to it.
        """
        check_capability(self.scorer, need)
        for chunk in self._chunks(cases):
            self._prefill_chunk(chunk, need, owns)

    def _prefill_chunk(self, cases: list[Case], need: str, owns: Callable[[str], bool] | None) -> None:
        keep = owns or (lambda key: True)
        self._check_images(cases, need)
        texts = [t for t in dict.fromkeys(t for c in cases for t in self._text_items(c)) if keep(text_key(t))]
        if need == "text-text":
            self.embed_texts(texts)
        elif need == "text-prior":
            self.text_prior(texts)
        elif need in CHOICE_NEEDS:
            self.answer_choices([c for c in cases if keep(case_key(c))], need)
        elif isinstance(self.scorer, EmbeddingScorer):
            self.embed_images([r for c in cases for r in c.images if keep(r.key)])
            self.embed_texts(texts)
        elif need == "match-prob" and self.scorer.can("itm-logits"):
            self.itm_logits((r, t) for c in cases for r in c.images if keep(r.key) for t in c.texts)
        else:
            self.pair_scores((r, t) for c in cases for r in c.images if keep(r.key) for t in c.texts)

    def _case_similarity(self, case: Case, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """A case's similarity matrix; a text (or image) listed twice gets bitwise the same scores,
        as a matrix product need not give identical rows the same rounding, and a tie between equal
        candidates must be exact for ``--ties argmax`` (ARO-Order keeps perturbations equal to the
        caption)."""
        rows = _first_positions([r.key for r in case.images])
        cols = _first_positions(list(case.texts))
        unique_r, inv_r = np.unique(rows, return_inverse=True)
        unique_c, inv_c = np.unique(cols, return_inverse=True)
        sim = self.scorer.similarity(a[unique_r], b[unique_c]).astype(np.float64)  # type: ignore[attr-defined]
        return sim[np.ix_(inv_r.reshape(-1), inv_c.reshape(-1))]

    def _check_images(self, cases: list[Case], need: str) -> None:
        for case in cases:
            if need in ("image-text", "match-prob", *CHOICE_NEEDS) and not case.images:
                raise DataError("protocol needs images but the case has none", record=case.id)
            if case.prompts and (need != "image-text" or not isinstance(self.scorer, EmbeddingScorer)):
                raise ConfigError(
                    f"case {case.id} holds labels with prompt templates (zero-shot classification): that needs an "
                    f"image-text protocol and an embedding model, not {need!r} with {self.scorer.spec!r}"
                )

    def _chunk(self, cases: list[Case], need: str) -> list[np.ndarray]:
        self._check_images(cases, need)
        if need == "text-text":
            texts = [t for c in cases for t in c.texts]
            emb = self.embed_texts(texts)
            out, start = [], 0
            for c in cases:
                e = emb[start : start + len(c.texts)]
                out.append(self._embedding_scorer().similarity(e, e).astype(np.float64))
                start += len(c.texts)
            return out
        if need == "text-prior":
            prior = self.text_prior([t for c in cases for t in c.texts])
            out, start = [], 0
            for c in cases:
                out.append(prior[start : start + len(c.texts)].reshape(1, -1))
                start += len(c.texts)
            return out
        if need in CHOICE_NEEDS:
            return self.answer_choices(cases, need)
        if isinstance(self.scorer, EmbeddingScorer):
            img = self.embed_images([r for c in cases for r in c.images])
            txt = self.embed_texts([t for c in cases if not c.prompts for t in c.texts])
            out, i0, t0 = [], 0, 0
            for c in cases:
                a = img[i0 : i0 + len(c.images)]
                if c.prompts:
                    b = self.embed_labels(c.texts, c.prompts)
                else:
                    b = txt[t0 : t0 + len(c.texts)]
                    t0 += len(c.texts)
                out.append(self._case_similarity(c, a, b))
                i0 += len(c.images)
            return out
        if need == "match-prob" and self.scorer.can("itm-logits"):
            logits = self.itm_logits((ref, t) for c in cases for ref in c.images for t in c.texts)
            return [
                np.array([[logits[pair_key(ref, t)] for t in c.texts] for ref in c.images], dtype=np.float64)
                for c in cases
            ]
        scores = self.pair_scores((ref, t) for c in cases for ref in c.images for t in c.texts)
        return [
            np.array([[scores[pair_key(ref, t)] for t in c.texts] for ref in c.images], dtype=np.float64)
            for c in cases
        ]

    def close(self) -> None:
        self.cache.close()
        if self._scratch is not None:
            self._scratch.cleanup()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
