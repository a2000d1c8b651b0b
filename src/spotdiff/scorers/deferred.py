"""A model built on its first cache miss: a run whose every value is cached never loads it.

Building a scorer loads its weights and the libraries that compute (torch, transformers): seconds, most of a
re-run whose values are all cached. :func:`remember` writes, beside the cache (``<cache>/scorers.json``), what
a run asks a loaded scorer without computing: its identity (the cache's key and the run's record), what it
serves (capabilities and the methods of its capability protocols), its device and batch size. The record is
filed under the request (the spec, the options, the working folder, the model libraries' versions and the
machine: host, visible GPUs, hub cache variables) with a stamp of the files the model was loaded from
(:meth:`~spotdiff.scorers.Scorer.sources`: each file's path, size, modification and change times and inode).
:func:`recall` gives a :class:`DeferredScorer` when the same request finds its files unchanged: it answers
from the record and builds the real scorer the first time something must be computed, refusing it (one
error, nothing recorded) should its identity differ from the record's. A scorer without known sources (a
served model, whose client loads nothing) is always built at once.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import logging
import os
import platform
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError
from spotdiff.jsonio import write_json
from spotdiff.scorers.base import (
    CAPABILITIES,
    AnswerChoice,
    AnswerLikelihood,
    AnswerTexts,
    EmbeddingScorer,
    ImagePreprocessor,
    ImageTextEmbedding,
    ITMLogits,
    PairScoring,
    Prepared,
    Scorer,
    ScorerOptions,
    TextEmbedding,
    TextPrior,
)
from spotdiff.version import __version__

log = logging.getLogger(__name__)

__all__ = ["REMEMBERED", "DeferredScorer", "recall", "remember", "request_key", "sources_stamp"]

#: The file under the cache directory that remembers the scorers loaded for it.
REMEMBERED = "scorers.json"
#: The capability protocols whose methods a deferred scorer offers (each builds the real scorer when called).
PROTOCOLS = (TextEmbedding, ImageTextEmbedding, PairScoring, ITMLogits, TextPrior, AnswerChoice, AnswerLikelihood,
             AnswerTexts)  # fmt: skip
#: Environment variables that change which files a model name loads, or on which device.
_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "SENTENCE_TRANSFORMERS_HOME",
        "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")  # fmt: skip
#: The libraries that build models; another version may build another one.
_LIBRARIES = ("torch", "transformers", "sentence-transformers", "open_clip_torch", "huggingface-hub")


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in _LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def request_key(spec: str, options: ScorerOptions) -> str:
    """The digest of what a scorer is asked to be: the spec, the options that change the model (device,
    precision, extras), the working folder (relative paths), the model libraries and spotdiff versions, and
    the machine (host, visible GPU devices, the hub cache and device variables)."""
    asked = {
        "spotdiff": __version__,
        "spec": spec,
        "device": options.device,
        "dtype": options.dtype,
        "extra": options.extra,
        "cwd": os.getcwd(),
        "env": {k: os.environ.get(k) for k in _ENV},
        "libraries": _versions(),
        "host": platform.node(),
        "platform": platform.platform(),
        "gpus": sorted(glob.glob("/dev/nvidia[0-9]*")),
    }
    return hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()


def sources_stamp(sources: Sequence[str | Path]) -> str | None:
    """A digest of every file under ``sources`` (its path, size, modification and change times, inode; links
    followed), or None when a source or a file is missing: any write to a model's files changes it."""
    h = hashlib.sha256()
    for source in map(Path, sources):
        if not source.exists():
            return None
        for path in [source] if source.is_file() else sorted(source.rglob("*")):
            try:
                st = path.stat()
            except OSError:  # a link to nothing
                return None
            if not stat.S_ISDIR(st.st_mode):
                h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n".encode())
    return h.hexdigest()


def _read(cache_dir: Path) -> dict[str, Any]:
    path = cache_dir / REMEMBERED
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s (models are loaded as usual): %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def _members(protocol: type) -> set[str]:
    """The method names a capability protocol declares (its own and its protocol bases')."""
    names = (name for cls in protocol.__mro__ if cls in PROTOCOLS for name, v in vars(cls).items() if callable(v))
    return {name for name in names if not name.startswith("_")}


def remember(cache_dir: str | Path, spec: str, options: ScorerOptions, scorer: Scorer) -> bool:
    """Record ``scorer`` (just built for ``spec`` and ``options``) in ``cache_dir``, for :func:`recall`; False
    (nothing recorded) for a scorer without known sources.

    Args:
        cache_dir: the run's cache folder.
        spec: the model spec as given.
        options: the options it was built with.
        scorer: the built scorer, its batch size set.
    """
    sources = [str(p) for p in scorer.sources()]
    stamp = sources_stamp(sources) if sources else None
    if stamp is None or not scorer.computes_here:
        return False
    methods = sorted({m for p in PROTOCOLS if isinstance(scorer, p) for m in _members(p)})
    record = {
        "spec": scorer.spec,
        "identity": scorer.identity(),
        "digest": scorer.identity_digest(),
        "capabilities": sorted(scorer.capabilities),
        "cannot": {need: why for need in CAPABILITIES if (why := scorer.cannot(need))},
        "frame_rule": None if (rule := scorer.frame_rule()) is None else rule.text,
        "sampler_key": None if rule is None else rule.sampler_key,
        "methods": methods,
        "cosine": getattr(type(scorer), "similarity", None) is EmbeddingScorer.similarity,
        "device": str(getattr(scorer, "device", options.device)),
        "batch_size": int(scorer.options.batch_size),
        "sources": sources,
        "stamp": stamp,
    }
    cache_dir = Path(cache_dir)
    known = _read(cache_dir)
    if known.get(request_key(spec, options)) != record:
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_json(cache_dir / REMEMBERED, {**known, request_key(spec, options): record})
    return True


def recall(
    cache_dir: str | Path, spec: str, options: ScorerOptions, build: Callable[[], Scorer]
) -> DeferredScorer | None:
    """A :class:`DeferredScorer` for ``spec`` and ``options`` when :func:`remember` recorded one for the same
    request whose files are unchanged since; else None (the caller builds the scorer).

    Args:
        cache_dir: the run's cache folder.
        spec: the model spec as given.
        options: the options to build it with (shared with the deferred scorer, whose batch size becomes the
            recorded one, an ``auto`` batch size's answer, until the caller sets another).
        build: builds the real scorer (and remembers it again).
    """
    record = _read(Path(cache_dir)).get(request_key(spec, options))
    if not isinstance(record, dict) or not record.get("sources"):
        return None
    try:
        if sources_stamp(record["sources"]) != record["stamp"]:
            return None
        if not isinstance(record["frame_rule"], str | None) or not isinstance(record["sampler_key"], str | None):
            raise TypeError("frame_rule")
        cls = _deferred_class(frozenset(record["methods"]), bool(record["cosine"]))
        options.batch_size = int(record["batch_size"])
        return cls(record, build, options, Path(cache_dir) / REMEMBERED)
    except (KeyError, TypeError) as exc:  # a record of another shape: load as usual
        log.warning("ignoring a record of %s in %s: %s", spec, cache_dir, exc)
        return None


class DeferredScorer(Scorer):
    """A scorer answered from its record (:func:`remember`) until something is computed: its methods that
    compute, and any attribute the record does not hold, build the real scorer first (:meth:`real`).

    Args:
        record: what :func:`remember` wrote.
        build: builds the real scorer.
        options: the options (the batch size the run sets is shared with the real scorer).
        where: the record's file, named in errors.
    """

    def __init__(self, record: dict, build: Callable[[], Scorer], options: ScorerOptions, where: Path) -> None:
        super().__init__(record["spec"], options)
        self.capabilities = frozenset(record["capabilities"])
        self.device = record["device"]
        self._record, self._build, self._where = record, build, where
        self._real: Scorer | None = None
        self._requests: Any = None

    @property
    def built(self) -> bool:
        """Whether the real scorer has been built."""
        return self._real is not None

    def real(self) -> Scorer:
        """The real scorer, built on the first call; one whose identity differs from the record's is refused."""
        if self._real is None:
            scorer = self._build()
            if scorer.identity_digest() != self._record["digest"]:
                raise ConfigError(
                    f"model {self.spec!r}: its identity differs from the one recorded in {self._where} when it was "
                    "last loaded (its files changed while this run read values cached for the old one); run again"
                )
            scorer.bind_requests(self._requests)
            self._real = scorer
        return self._real

    def identity(self) -> dict[str, Any]:
        return dict(self._record["identity"])

    def identity_digest(self) -> str:
        return str(self._record["digest"])

    def cannot(self, need: str) -> str | None:
        return self._record["cannot"].get(need)

    def sources(self) -> list[Path]:
        return [Path(p) for p in self._record["sources"]]

    def frame_rule(self) -> Any:
        """The recorded frame rule (None: the model scores images); one sampled by the model's own video
        processor gets a sampler that builds the model when a clip's frames are first chosen (a clip whose
        values are cached is never sampled)."""
        from spotdiff.video.clips import parse_frame_rule

        text = self._record["frame_rule"]
        if text is None:
            return None
        return parse_frame_rule(text, sampler=_DeferredSampler(self), sampler_key=self._record["sampler_key"] or "")

    def bind_requests(self, requests: Any) -> None:
        self._requests = requests
        if self._real is not None:
            self._real.bind_requests(requests)

    def run_usage(self) -> dict[str, Any] | None:
        return None if self._real is None else self._real.run_usage()

    def image_preprocessor(self) -> ImagePreprocessor | None:
        return self.real().image_preprocessor()

    def text_preprocessor(self) -> Callable[[Sequence[str]], Prepared] | None:
        return self.real().text_preprocessor()

    def probe_batch(self, n: int) -> None:
        self.real().probe_batch(n)

    def score_matrix(self, images: Sequence[Any], texts: Sequence[str]) -> Any:
        return self.real().score_matrix(images, texts)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # the instance's own (during construction, copying, unpickling)
            raise AttributeError(name)
        if name in _CAPABILITY_METHODS:  # not among the record's methods: a capability check, answered here
            raise AttributeError(f"{self.spec!r} has no {name} (recorded in {self._where})")
        return getattr(self.real(), name)


class _DeferredSampler:
    """The video processor of a :class:`DeferredScorer` whose frame rule is its processor's own: the real scorer
    is built, and its processor chooses the frames, the first time a clip is sampled."""

    def __init__(self, owner: DeferredScorer) -> None:
        self._owner = owner

    def sample_frames(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner.real().frame_rule().sampler.sample_frames(*args, **kwargs)


def _forward(name: str) -> Callable[..., Any]:
    def method(self: DeferredScorer, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.real(), name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The real scorer's ``{name}`` (built on the first call)."
    return method


#: Every method of a capability protocol: a deferred scorer without one in its record has none (an ``isinstance``
#: check against a protocol is answered without building the model).
_CAPABILITY_METHODS = frozenset(name for protocol in PROTOCOLS for name in _members(protocol))


@functools.lru_cache(maxsize=32)
def _deferred_class(methods: frozenset[str], cosine: bool) -> type[DeferredScorer]:
    """A :class:`DeferredScorer` class with ``methods`` (so that it passes the capability protocols' checks
    without building anything); ``similarity`` computed here when the real one is the cosine of
    :class:`~spotdiff.scorers.EmbeddingScorer`, which needs no model."""
    namespace: dict[str, Any] = {name: _forward(name) for name in methods}
    if cosine and "similarity" in methods:
        namespace["similarity"] = EmbeddingScorer.similarity
    return type("DeferredScorer", (DeferredScorer,), namespace)
