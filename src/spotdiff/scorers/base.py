"""The scorer interface: a model, named by a spec string, that scores images and texts.

:class:`EmbeddingScorer` embeds each unique image and text once; :class:`PairScorer` scores (image,
text) pairs jointly, the vision side once per image. What a scorer can be asked is a runtime-checked
Protocol per capability (:data:`SERVES`). Families register a factory with ``@SCORERS.register``.
An optional CPU stage (:meth:`Scorer.image_preprocessor`, :meth:`Scorer.text_preprocessor`) lets the
engine prepare :class:`Prepared` batches ahead of the model (docs/architecture.md, "Scorers").
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from spotdiff.cases import as_image_ref
from spotdiff.errors import ConfigError
from spotdiff.registry import Registry
from spotdiff.video.clips import FrameRule

#: Capabilities a scorer may declare; all but ``"itm-logits"`` match the ``needs`` of protocols.
#: ``"itm-logits"``: a pair scorer whose match probability is ``softmax`` of a two-way image-text
#: matching head; it also returns those logits (:class:`ITMLogits`), which VALSE ranks on.
CAPABILITIES = (
    "image-text", "text-text", "match-prob", "text-prior", "choice", "choice-text", "itm-logits", "answer-prob",
)  # fmt: skip


@dataclass
class ScorerOptions:
    """Runtime options shared by every scorer."""

    device: str = "cpu"
    # "auto" = float32 off CUDA; on CUDA bfloat16 for LMs and chat VLMs where supported, else float16 (runtime.py);
    # or "float32"/"float16"/"bfloat16"
    dtype: str = "auto"
    batch_size: int = 32
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Scorer(ABC):
    """Base of every scorer. ``capabilities`` says which protocol needs it can serve."""

    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: The model computes in this process (its torch threads are the run's, :mod:`spotdiff.processes`);
    #: False for a served model, whose client computes nothing.
    computes_here: ClassVar[bool] = True

    def __init__(self, spec: str, options: ScorerOptions) -> None:
        self.spec = spec
        self.options = options

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Who this model is: spec, class, config and weight digests (recorded with every run)."""

    def identity_digest(self) -> str:
        """A stable digest of :meth:`identity`, used to key the persistent cache."""
        ident = {k: v for k, v in self.identity().items() if k not in ("device", "dtype")}
        ident["dtype"] = self.identity().get("dtype")
        return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()

    def sources(self) -> list[Path]:
        """The files and folders this model was loaded from, which (with the spec and options) decide its
        identity; empty when unknown (the default). A run whose values are all cached does not load a model
        whose sources are unchanged since it was last loaded (:mod:`spotdiff.scorers.deferred`)."""
        return []

    def can(self, need: str) -> bool:
        return need in self.capabilities

    def cannot(self, need: str) -> str | None:
        """Why a declared need cannot be served by this instance (shown in the capability error), or None."""
        return None

    def __call__(self, images: Sequence[Any], texts: Sequence[str]) -> np.ndarray:
        """The ``[len(images), len(texts)]`` score matrix of every image against every text.

        ``images`` are paths, PIL images, HxWx3 arrays or :class:`~spotdiff.cases.ImageRef` objects.
        Nothing is cached or deduplicated here; :class:`spotdiff.diagnose.engine.Engine` does that
        for benchmarks.
        """
        if "image-text" not in self.capabilities:
            raise ConfigError(f"model {self.spec!r} does not score images against texts")
        return self.score_matrix([as_image_ref(x).load() for x in images], list(texts))

    def score_matrix(self, images: Sequence[Image.Image], texts: Sequence[str]) -> np.ndarray:
        """Scores of decoded images (rows) against texts (columns); embedding and pair scorers
        provide it, a text-only scorer has none."""
        raise ConfigError(f"model {self.spec!r} does not score images against texts")

    def bind_requests(self, requests: Any) -> None:
        """Take the engine's cached door (a :class:`~spotdiff.diagnose.cache.CachedRequests` on the
        run's cache; None when the engine closes) for what this scorer asks elsewhere (a served
        model's responses); the default asks nothing elsewhere and ignores it."""
        return None

    def run_usage(self) -> dict[str, Any] | None:
        """What this scorer's work cost and could not read, recorded with the run (a served model's
        requests, tokens and bounded scores), or None (the default: nothing to record)."""
        return None

    def frame_rule(self) -> FrameRule | None:
        """The rule this model's video frames are sampled by (:class:`~spotdiff.video.clips.FrameRule`): the
        engine hands it each clip of a case as a :class:`~spotdiff.video.clips.Clip` of those frames, where it
        would hand an image. None (the default): the model scores images, and a case of videos is refused."""
        return None

    def image_preprocessor(self) -> ImagePreprocessor | None:
        """The CPU stage of the vision side (decoded images -> :class:`Prepared` pixels), or None.

        The engine runs it in worker processes and hands its output to ``encode_images`` /
        ``score_pairs``; None (the default) makes the engine hand over decoded images instead.
        """
        return None

    def text_preprocessor(self) -> Callable[[Sequence[str]], Prepared] | None:
        """Tokenisation as its own stage (texts -> :class:`Prepared` tokens), or None (the default)."""
        return None

    def probe_batch(self, n: int) -> None:
        """Run the model once on ``n`` worst-case inputs of every kind it encodes (``--batch-size auto``).

        Embedding and pair scorers probe their encoders; other scorers cannot be probed.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot probe its batch size")


#: A blank image and a text longer than any model's context: the worst case of :meth:`Scorer.probe_batch`.
PROBE_IMAGE_SIZE = 384
PROBE_TEXT = " ".join(["a"] * 1024)


def _probe_images(scorer: Scorer, n: int) -> Sequence[Image.Image] | Prepared:
    blank = Image.new("RGB", (PROBE_IMAGE_SIZE, PROBE_IMAGE_SIZE))
    prepare = scorer.image_preprocessor()
    return prepare([blank]).tile(n) if prepare is not None else [blank] * n


class EmbeddingScorer(Scorer):
    """Embeds images and texts separately; outputs are L2-normalised float32 rows."""

    @abstractmethod
    def encode_images(self, images: Sequence[Image.Image] | Prepared) -> np.ndarray:
        """L2-normalised embeddings of decoded images (or of this scorer's prepared pixels), one row each."""

    @abstractmethod
    def encode_texts(self, texts: Sequence[str] | Prepared) -> np.ndarray:
        """L2-normalised embeddings of texts (or of this scorer's prepared tokens), one row each."""

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Similarity between two sets of embeddings (cosine by default)."""
        return a @ b.T

    def probe_batch(self, n: int) -> None:
        if self.can("image-text"):
            self.encode_images(_probe_images(self, n))
        prepare = self.text_preprocessor()
        self.encode_texts(prepare([PROBE_TEXT]).tile(n) if prepare is not None else [PROBE_TEXT] * n)

    def embed_images(self, images: Sequence[Any]) -> np.ndarray:
        """L2-normalised embeddings of paths, PIL images, arrays or image references, one row each."""
        return self.encode_images([as_image_ref(x).load() for x in images])

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised embeddings of texts, one row each."""
        return self.encode_texts(list(texts))

    def score_matrix(self, images: Sequence[Image.Image], texts: Sequence[str]) -> np.ndarray:
        return self.similarity(self.encode_images(images), self.encode_texts(texts))


class PairScorer(Scorer):
    """Scores (image, text) pairs jointly; the vision side runs once per image."""

    @abstractmethod
    def score_pairs(
        self, images: Sequence[Image.Image] | Prepared, texts: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        """For each image (decoded, or a row of this scorer's prepared pixels), the scores of its texts
        (one float array per image)."""

    def probe_batch(self, n: int) -> None:
        self.score_pairs(_probe_images(self, n), [[PROBE_TEXT]] * n)

    def score_matrix(self, images: Sequence[Image.Image], texts: Sequence[str]) -> np.ndarray:
        rows = self.score_pairs(images, [list(texts)] * len(images))
        return np.array([np.asarray(r, dtype=np.float32).reshape(-1) for r in rows]).reshape(len(images), len(texts))


@dataclass(frozen=True)
class Prepared:
    """A batch through a scorer's CPU stage: the pixel tensor ``[n, C, H, W]``, or a dict of token
    tensors with ``n`` rows, that the forward pass takes as it is; or the pieces of such a batch in
    order (a list, see :meth:`join`), concatenated only where the model runs.

    The engine's DataLoader pins it (:meth:`pin_memory`) on CUDA, and :meth:`to` copies it to the
    device without blocking, so the copy overlaps the previous batch's forward pass. Pixels the
    workers left as ``uint8`` (:meth:`ImagePreprocessor.resized`) carry ``finish``, the rest of the
    preprocessing, which :meth:`to` runs where the model runs: a quarter of float32's bytes cross
    from the workers and to the device.
    """

    data: Any
    n: int
    finish: Callable[[Any], Any] | None = field(default=None, compare=False)

    def __len__(self) -> int:
        return self.n

    @staticmethod
    def join(parts: Sequence[Prepared]) -> Prepared:
        """The batch made of ``parts`` in order (pieces preprocessed by different workers), without
        copying: :meth:`to` concatenates them on the device."""
        pieces = [piece for part in parts for piece in (part.data if isinstance(part.data, list) else [part.data])]
        return Prepared(pieces, sum(part.n for part in parts), parts[0].finish)

    def _map(self, fn: Callable[[Any], Any]) -> Prepared:
        def one(data: Any) -> Any:
            return {k: fn(v) for k, v in data.items()} if isinstance(data, dict) else fn(data)

        data = [one(d) for d in self.data] if isinstance(self.data, list) else one(self.data)
        return Prepared(data, self.n, self.finish)

    def pin_memory(self) -> Prepared:
        """The batch in page-locked host memory (called by the DataLoader's pinning thread)."""
        return self._map(lambda t: t.pin_memory())

    def to(self, device: str, dtype: Any = None) -> Any:
        """The tensors on ``device`` (non-blocking copies, pieces then concatenated there, ``finish`` run
        there; floating pixels cast to ``dtype`` last)."""
        import torch

        data = self._map(lambda t: t.to(device, non_blocking=True)).data
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        elif isinstance(data, list) and isinstance(data[0], dict):
            data = {k: torch.cat([d[k] for d in data]) for k in data[0]}
        elif isinstance(data, list):
            data = torch.cat(data)
        if self.finish is not None:
            data = self.finish(data)
        if dtype is None:
            return data
        return Prepared(data, self.n)._map(lambda t: t.to(dtype) if t.is_floating_point() else t).data

    def tile(self, n: int) -> Prepared:
        """A batch of ``n`` copies of this one-row batch (the worst case probed by ``--batch-size auto``)."""
        return self._map(lambda t: t.expand(n, *t.shape[1:]).contiguous())


class ImagePreprocessor(ABC):
    """A scorer's CPU stage for images: decoded images -> :class:`Prepared` pixels, with no model.

    It must be picklable and touch no accelerator: the engine runs it in DataLoader worker processes.
    Each image's pixels must depend on that image alone (no padding to the batch's largest image):
    the engine preprocesses a batch in pieces, one per worker, and concatenates them.
    """

    @abstractmethod
    def __call__(self, images: Sequence[Image.Image]) -> Prepared:
        """The pixels of decoded images, on the CPU."""

    def on_tensors(self) -> bool:
        """Whether :meth:`from_uint8` can run: the preprocessing is made of tensor operations."""
        return False

    def splits(self) -> bool:
        """Whether the preprocessing is resizing and cropping ``uint8`` pixels (:meth:`resized`), then
        arithmetic on them alone (:meth:`finish`), which the engine runs where the model runs."""
        return False

    def resized(self, images: Sequence[Image.Image]) -> Prepared:
        """The ``uint8`` ``[n, 3, H, W]`` pixels of decoded images before :meth:`finish`, on the CPU, with
        ``finish`` set: ``resized(images).to(d)`` equals ``self(images).to(d)``; only when :meth:`splits`."""
        raise NotImplementedError(f"{type(self).__name__} does not split its preprocessing")

    def finish(self, pixels: Any) -> Any:
        """The preprocessing after :meth:`resized`, on ``pixels``' device (float32 out)."""
        raise NotImplementedError(f"{type(self).__name__} does not split its preprocessing")

    def from_uint8(self, images: Sequence[Any], device: str) -> Prepared:
        """The same pixels computed on ``device`` from decoded ``uint8`` ``[3, H, W]`` tensors there
        (GPU JPEG decoding); only when :meth:`on_tensors`."""
        raise NotImplementedError(f"{type(self).__name__} does not run on tensors")


def staged(
    items: Sequence[Any] | Prepared,
    prepare: Callable[[Sequence[Any]], Prepared],
    forward: Callable[[Prepared], np.ndarray],
    batch_size: int,
) -> np.ndarray:
    """``forward(prepare(chunk))`` over chunks of ``batch_size`` raw items, rows concatenated; an
    already prepared batch goes straight to ``forward`` (the engine's pipeline ran ``prepare``)."""
    if isinstance(items, Prepared):
        return forward(items)
    size = max(1, int(batch_size))
    return np.concatenate([forward(prepare(items[i : i + size])) for i in range(0, len(items), size)])


class StagedEncoder:
    """``encode_images`` / ``encode_texts`` of an embedding scorer whose preprocessors are its CPU
    stage: raw items are prepared and encoded ``batch_size`` at a time (:func:`staged`), a prepared
    batch goes straight to the forward pass, and no items give an empty ``[0, dim]``. The scorer
    supplies ``_dim()``, ``_forward_pixels(Prepared)`` and ``_forward_tokens(Prepared)``."""

    def encode_images(self, images: Sequence[Image.Image] | Prepared) -> np.ndarray:
        if len(images) == 0:
            return np.zeros((0, self._dim()), dtype=np.float32)  # type: ignore[attr-defined]
        return staged(images, self.image_preprocessor(), self._forward_pixels, self.batch_size)  # type: ignore[attr-defined]

    def encode_texts(self, texts: Sequence[str] | Prepared) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self._dim()), dtype=np.float32)  # type: ignore[attr-defined]
        return staged(texts, self.text_preprocessor(), self._forward_tokens, self.batch_size)  # type: ignore[attr-defined]


# --- what a scorer can be asked (checked with isinstance; a capability names one of these) -------


@runtime_checkable
class TextEmbedding(Protocol):
    """Embeds texts; similarity of two sets of embeddings (``text-text``)."""

    def encode_texts(self, texts: Sequence[str] | Prepared) -> np.ndarray: ...

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class ImageTextEmbedding(TextEmbedding, Protocol):
    """Embeds images and texts apart (``image-text`` by similarity, :class:`EmbeddingScorer`)."""

    def encode_images(self, images: Sequence[Image.Image] | Prepared) -> np.ndarray: ...


@runtime_checkable
class PairScoring(Protocol):
    """Scores (image, text) pairs jointly (``image-text``, ``match-prob``, :class:`PairScorer`)."""

    def score_pairs(
        self, images: Sequence[Image.Image] | Prepared, texts: Sequence[Sequence[str]]
    ) -> list[np.ndarray]: ...


@runtime_checkable
class ITMLogits(Protocol):
    """A two-way image-text matching head's logits (``itm-logits``)."""

    def itm_logits(self, images: Sequence[Image.Image] | Prepared, texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """For each image, its texts' ``(no-match, match)`` logits, ``[n_texts, 2]`` per image."""
        ...


@runtime_checkable
class TextPrior(Protocol):
    """Text-only log-probabilities ``log P(t)`` (``text-prior``)."""

    def text_logprob(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class AnswerChoice(Protocol):
    """Answers multiple-choice questions about one K x K case (``choice``, ``choice-text``), in spotdiff's
    wording or a benchmark's authors' (the case's tag ``prompts``)."""

    def answer_choices(
        self, images: Sequence[Image.Image], texts: Sequence[str], need: str, style: str = "spotdiff"
    ) -> np.ndarray:
        """``[n_questions, n_orders, n_readings]``: the chosen candidate per question, order and reading,
        the questions asked in ``style`` (a name of :data:`spotdiff.cases.PROMPT_STYLES`)."""
        ...


@runtime_checkable
class AnswerLikelihood(Protocol):
    """Scores candidate answers to questions about an image (``answer-prob``: NaturalBench, MMVP)."""

    def answer_scores(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[Sequence[str]],
        answers: Sequence[str],
        reader: str = "words",
    ) -> list[np.ndarray]:
        """Per image, ``[n_questions, n_answers (+ 1)]``: each answer's log-probability (and a generated
        answer read by ``reader``, a name of :data:`spotdiff.cases.READERS`)."""
        ...


@runtime_checkable
class AnswerTexts(Protocol):
    """Gives the generated answers that ``answer_scores`` reads (what a judge grades, ``--judge``)."""

    def answer_texts(self, images: Sequence[Image.Image], questions: Sequence[Sequence[str]]) -> list[list[str]]:
        """Per image, the generated answer to each of its questions."""
        ...


@runtime_checkable
class Streaming(Protocol):
    """Keeps requests in flight across calls (a served model, ``api:``): the engine hands it a request's batches
    together, ``method(*args)`` for each ``args`` of ``calls``, and reads the results in order."""

    def stream(self, method: Callable[..., Any], calls: Iterable[tuple]) -> Iterator[Any]: ...


#: The protocols a scorer declaring each capability implements (one of them, where several).
SERVES: dict[str, tuple[type, ...]] = {
    "image-text": (ImageTextEmbedding, PairScoring),
    "text-text": (TextEmbedding,),
    "match-prob": (PairScoring,),
    "text-prior": (TextPrior,),
    "choice": (AnswerChoice,),
    "choice-text": (AnswerChoice,),
    "itm-logits": (ITMLogits,),
    "answer-prob": (AnswerLikelihood,),
}


SCORERS: Registry[Callable[[str, ScorerOptions], Scorer]] = Registry(
    "scorer family", "spotdiff.scorers", entry_points="spotdiff.scorers"
)
