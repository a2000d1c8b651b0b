"""The scorer interface: a model, named by a spec string, that scores images and texts.

Two shapes of model share it (DESIGN.md, "Scorers"):

* :class:`EmbeddingScorer` embeds each unique image and text once; similarities are dot products
  of L2-normalised embeddings, so text-text similarity comes for free.
* :class:`PairScorer` scores (image, text) pairs jointly, but runs the vision side once per unique
  image and batches that image's texts against it.

A scorer family registers a factory under its spec prefix (``hf-clip``, ``blip-itm``, ...) with
``@SCORERS.register(prefix)``; ``load_scorer("prefix:rest")`` builds it. Aliases map short names
(``minilm``) to full specs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.registry import Registry

#: Capabilities a scorer may declare; they match the ``needs`` of protocols.
CAPABILITIES = ("image-text", "text-text", "match-prob", "text-prior")


@dataclass
class ScorerOptions:
    """Runtime options shared by every scorer."""

    device: str = "cpu"
    dtype: str = "auto"  # "auto" = float16 on CUDA, float32 elsewhere; or "float32"/"float16"/"bfloat16"
    batch_size: int = 32
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Scorer:
    """Base of every scorer. ``capabilities`` says which protocol needs it can serve."""

    capabilities: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, spec: str, options: ScorerOptions) -> None:
        self.spec = spec
        self.options = options

    def identity(self) -> dict[str, Any]:
        """Who this model is: spec, class, config and weight digests (recorded with every run)."""
        raise NotImplementedError

    def identity_digest(self) -> str:
        """A stable digest of :meth:`identity`, used to key the persistent cache."""
        ident = {k: v for k, v in self.identity().items() if k not in ("device", "dtype")}
        ident["dtype"] = self.identity().get("dtype")
        return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()

    def can(self, need: str) -> bool:
        return need in self.capabilities


class EmbeddingScorer(Scorer):
    """Embeds images and texts separately; outputs are L2-normalised float32 rows."""

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        raise NotImplementedError

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Similarity between two sets of embeddings (cosine by default)."""
        return a @ b.T


class PairScorer(Scorer):
    """Scores (image, text) pairs jointly; the vision side runs once per image."""

    def score_pairs(self, images: Sequence[Image.Image], texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """For each image, the scores of its texts (one float array per image)."""
        raise NotImplementedError


SCORERS: Registry[Callable[[str, ScorerOptions], Scorer]] = Registry("scorer family", "spotdiff.scorers")

#: Short names for common specs.
ALIASES: dict[str, str] = {}


def resolve_spec(spec: str) -> tuple[str, str]:
    """Split a spec string into (family prefix, rest), expanding aliases."""
    spec = ALIASES.get(spec, spec)
    if ":" not in spec:
        raise ConfigError(
            f"model spec {spec!r} has no family prefix; expected 'family:name-or-path' "
            f"(see `spotdiff models`)"
        )
    family, rest = spec.split(":", 1)
    return family, rest


def load_scorer(spec: str, options: ScorerOptions | None = None) -> Scorer:
    """Build the scorer a spec string names (``hf-clip:/path``, ``minilm``, ...)."""
    SCORERS.names()  # discover families (and their aliases)
    family, rest = resolve_spec(spec)
    factory = SCORERS.get(family)
    return factory(rest, options or ScorerOptions())


def digest_files(paths: Sequence[Path]) -> str:
    """SHA-256 over files' names and bytes (weights or config), in a stable order."""
    from spotdiff.cases import file_digest

    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        h.update(file_digest(p).encode())
    return h.hexdigest()
