"""``vgpt:SPEC``: VisualGPTScore, the generative image-text score log P(text | image).

VisualGPTScore (Lin et al., Sec. 3, Eq. 1-2) scores a caption ``t = t_1..t_m`` for an image ``i``
by the length-normalised log-likelihood of an image-conditioned language model::

    log VisualGPTScore(t, i) = sum_k w_k log P(t_k | t_<k, i),   w_k = 1/m          (Eq. 2)

The pair score this scorer returns is that log (the exponent is monotone, and the debiasing of
Sec. 4-6 works in log space). As the paper stresses, Eq. 2 is computed *in parallel* at all token
positions from one forward pass of the text decoder (teacher forcing), not by decoding. The vision
encoder runs once per unique image; all texts of a call are then batched against the cached image
embeddings. :meth:`VisualGPTScorer.token_logprobs` returns the per-token terms of Eq. 1 for
inspection.

Backends:

* ``BlipForConditionalGeneration`` (the paper's model; ``Salesforce/blip-image-captioning-*`` or a
  local checkpoint): the sequence is ``[BOS] prompt text [SEP]`` with BLIP's decoder BOS
  (``text_config.bos_token_id``, ``[DEC]``) in place of ``[CLS]``, exactly as BLIP's captioning
  loss and ``generate`` build it. The scored tokens are the text's tokens and the final ``[SEP]``
  (the end of the caption is part of P(t|i)); the prompt tokens are conditioning only, as in
  BLIP's loss, which masks the prompt. The default prompt is empty (override with ``prompt=``;
  BLIP's captioning fine-tunes used ``"a picture of "``).
* other image-conditioned LMs loaded with ``AutoModelForImageTextToText`` (BLIP-2, InstructBLIP,
  LLaVA, ...), through a prompt template ``prompt="... {text}"`` whose text before ``{text}`` is the
  conditioning prefix. Decoder-only language models score the last tokens of the processed
  sequence (the text's tokens); encoder-decoder ones (BLIP-2/InstructBLIP with Flan-T5) read the
  prefix in the encoder and score the text as the decoder's labels. The vision tower
  (``vision_model`` / ``vision_tower``) runs once per unique image: its outputs are cached and
  handed back, expanded, for every text of that image.

``text_logprob`` gives the "blind" prior ``log P(t|null)`` of Sec. 4 (Eq. 6 with null images): the
log of the mean VisualGPTScore over ``null_n`` seeded Gaussian-noise images, so a ``vgpt:`` model
also serves the ``"text-prior"`` need (Table 2a, column ``P(t|null)``).

* chat VLMs (a processor with a chat template: LLaVA, Qwen2-VL, Idefics3 / SmolVLM, ...): the caption
  is scored as the assistant's answer to a describe-the-image question, through the model's own
  chat template (:mod:`spotdiff.scorers.chat`): the prompt is one user turn (the image, then
  ``prompt``, default :data:`DESCRIBE_PROMPT`) after an optional ``system`` turn, with the
  generation prompt added, and the scored tokens are ``tokenizer(text, add_special_tokens=False)``
  right after it. The image and prompt are encoded once per unique image (their KV cache) and the
  image's captions are batched against it.

A ``.gguf`` path is passed to transformers as ``gguf_file``; transformers reads GGUF files only for
text-only language models, so such a file gives a clear error pointing to ``lm:`` for its prior.

Spec options after ``?`` (URL-encoded) or in ``ScorerOptions.extra``: ``prompt``, ``system``
(chat models), ``null_n`` (default 10), ``null_mean`` (1.0), ``null_std`` (0.25), ``null_seed`` (0),
``null_space`` (``normalized``, the default: the model's normalised input; or ``pixel``); see
:mod:`spotdiff.scorers.null_prior` for the paper's null-image settings.
Example: ``vgpt:Salesforce/blip-image-captioning-large``, ``vgpt:/ckpt/blip?prompt=a%20picture%20of%20``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.cases import ImageRef
from spotdiff.errors import ConfigError
from spotdiff.scorers.base import SCORERS, PairScorer, ScorerOptions
from spotdiff.scorers.chat import ChatVLM, Request, check_gguf_config
from spotdiff.scorers.factory import parse_spec_options
from spotdiff.scorers.lm import (
    TokenScores,
    gather_token_logprobs,
    gguf_source,
    load_device_dtype,
    model_identity_digests,
)
from spotdiff.scorers.weights import local_path

__all__ = ["DESCRIBE_PROMPT", "VisualGPTScorer"]

#: The user turn that asks a chat VLM for the caption whose likelihood is scored.
DESCRIBE_PROMPT = "Describe this image in one sentence."


@SCORERS.register("vgpt")
class VisualGPTScorer(PairScorer):
    """log VisualGPTScore (Eq. 2) of (image, text) pairs; vision once per unique image."""

    capabilities = frozenset({"image-text", "text-prior"})
    OPTIONS = ("prompt", "system", "null_n", "null_mean", "null_std", "null_seed", "null_space")

    def __init__(self, rest: str, options: ScorerOptions) -> None:
        super().__init__(f"vgpt:{rest}", options)
        import torch
        from transformers import AutoConfig, AutoProcessor

        from spotdiff.scorers.null_prior import NULL_DEFAULTS, null_normalization

        self.name, opts = parse_spec_options(rest, options, self.OPTIONS)
        self.prompt = str(opts.get("prompt", ""))
        self.system = opts.get("system")
        try:
            self.null = {
                "n": int(opts.get("null_n", NULL_DEFAULTS["n"])),
                "mean": float(opts.get("null_mean", NULL_DEFAULTS["mean"])),
                "std": float(opts.get("null_std", NULL_DEFAULTS["std"])),
                "seed": int(opts.get("null_seed", NULL_DEFAULTS["seed"])),
                "space": str(opts.get("null_space", NULL_DEFAULTS["space"])),
            }
        except ValueError as exc:
            raise ConfigError(f"bad null-image option in {self.spec!r}: {exc}") from exc
        self.device, self.dtype = load_device_dtype(options)
        source, gguf_file = gguf_source(self.name, "vgpt model")
        if gguf_file is None:
            local_path(self.name, "vgpt model")
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        try:
            self.config = AutoConfig.from_pretrained(source, **kw)
            check_gguf_config(self.config, self.name, gguf_file, "vgpt model")
            self.processor = AutoProcessor.from_pretrained(source, **kw)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"cannot load {self.name!r} for spec {self.spec!r}: {exc}") from exc
        self.tokenizer = getattr(self.processor, "tokenizer", None)
        if self.tokenizer is None:
            raise ConfigError(f"{self.name!r}: its processor has no tokenizer")
        self.image_processor = getattr(self.processor, "image_processor", None)
        # what puts null images in the null_space asked for (None: pixel units); fails before any data
        self.null_normalization = null_normalization(self.null["space"], self.image_processor)
        self.backend = "blip" if self.config.model_type == "blip" else "generic"
        archs = getattr(self.config, "architectures", None) or []
        if self.backend == "blip" and archs and "BlipForConditionalGeneration" not in archs:
            raise ConfigError(
                f"{self.name!r} is a {', '.join(archs)} checkpoint without BLIP's captioning decoder; "
                f"vgpt: needs BlipForConditionalGeneration (e.g. Salesforce/blip-image-captioning-large)"
            )
        try:
            if self.backend == "blip":
                from transformers import BlipForConditionalGeneration

                self.model = BlipForConditionalGeneration.from_pretrained(source, dtype=self.dtype, **kw)
            else:
                from transformers import AutoModelForImageTextToText

                self.model = AutoModelForImageTextToText.from_pretrained(source, dtype=self.dtype, **kw)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"cannot load {self.name!r} as an image-conditioned LM: {exc}") from exc
        self.model.to(self.device).eval()
        torch.manual_seed(options.seed)
        self._null_cache: dict[tuple, Any] = {}
        if self.backend == "blip":
            tc = self.config.text_config
            self.bos_id = int(tc.bos_token_id)
            sep = self.tokenizer.sep_token_id
            self.eos_id = int(sep if sep is not None else tc.sep_token_id)
            self.pad_id = int(tc.pad_token_id if tc.pad_token_id is not None else 0)
            self.max_length = int(tc.max_position_embeddings)
            self._prompt_ids = self._plain_ids(self.prompt) if self.prompt else []
        elif getattr(self.processor, "chat_template", None):
            self.backend = "chat"
            if "{text}" in self.prompt:
                raise ConfigError(
                    f"prompt {self.prompt!r}: for a chat model the caption is the assistant's answer and "
                    f"prompt= is the question before it (no {{text}})"
                )
            self.chat = ChatVLM(
                self.model, self.processor, self.config, device=self.device, dtype=self.dtype, options=options
            )  # fmt: skip
            self._chat_prompt = self.chat.render(self.prompt or DESCRIBE_PROMPT, 1, self.system)
        else:
            self._setup_generic()

    # -- identity ------------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "class": type(self.model).__name__,
            **model_identity_digests(self.name, self.config),
            "prompt": self.prompt,
            **({"backend": "chat", "chat_prompt": self._chat_prompt} if self.backend == "chat" else {}),
            "null": self.null,
            "device": self.device,
            "dtype": str(self.dtype).replace("torch.", ""),
        }

    @property
    def image_size(self) -> tuple[int, int] | None:
        """(width, height) the image processor resizes to, so null images need no resampling."""
        size = getattr(self.image_processor, "size", None)
        get = (lambda k: size.get(k)) if isinstance(size, dict) else (lambda k: getattr(size, k, None))
        if size is None:
            return None
        if get("height") and get("width"):
            return int(get("width")), int(get("height"))
        if get("shortest_edge"):
            return int(get("shortest_edge")), int(get("shortest_edge"))
        return None

    # -- public scoring --------------------------------------------------------------------------
    def score_pairs(self, images: Sequence[Image.Image], texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """log VisualGPTScore of each image's texts (Eq. 2); one vision pass per image."""
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} images but {len(texts)} text lists")
        pairs = [(i, t) for i, ts in enumerate(texts) for t in ts]
        scores = [ts.score for ts in self._pairs_token_logprobs(list(images), pairs)]
        out, k = [], 0
        for ts in texts:
            out.append(np.asarray(scores[k : k + len(ts)], dtype=np.float64))
            k += len(ts)
        return out

    def token_logprobs(self, image: Image.Image | ImageRef, text: str) -> TokenScores:
        """Per-token ``log P(t_k | t_<k, i)`` (Eq. 1) of one pair; ``.score`` is Eq. 2."""
        if isinstance(image, ImageRef):
            image = image.load()
        return self._pairs_token_logprobs([image], [(0, text)])[0]

    def text_logprob(self, texts: Sequence[str]) -> np.ndarray:
        """Blind prior ``log P(t|null)`` (Sec. 4, Eq. 6 over null Gaussian-noise images).

        ``log (1/n) sum_k VisualGPTScore(t, null_k)``, with the scorer's ``null_*`` settings.
        """
        from spotdiff.scorers.null_prior import log_prior_from_scores, null_images

        key = (*self.null.values(), self.image_size)
        if key not in self._null_cache:
            refs = null_images(
                self.null["n"],
                seed=self.null["seed"],
                mean=self.null["mean"],
                std=self.null["std"],
                size=self.image_size,
                normalization=self.null_normalization,
            )
            self._null_cache = {key: [r.load() for r in refs]}
        imgs = self._null_cache[key]
        rows = self.score_pairs(imgs, [list(texts)] * len(imgs))
        return log_prior_from_scores(np.stack(rows))

    # -- shared machinery ----------------------------------------------------------------------
    def _plain_ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _batches(self, n: int):
        bs = max(1, int(self.options.batch_size))
        for start in range(0, n, bs):
            yield range(start, min(n, start + bs))

    def _pairs_token_logprobs(self, images: list[Image.Image], pairs: list[tuple[int, str]]) -> list[TokenScores]:
        import torch

        with torch.inference_mode():
            if self.backend == "blip":
                return self._blip_pairs(images, pairs)
            if self.backend == "chat":
                return self._chat_pairs(images, pairs)
            return self._generic_pairs(images, pairs)

    def _pixels(self, images: list[Image.Image]):
        import torch

        pv = self.image_processor(images=images, return_tensors="pt")["pixel_values"]
        return pv.to(self.device, dtype=self.dtype if self.dtype != torch.float32 else pv.dtype)

    # -- BLIP ----------------------------------------------------------------------------------
    def _blip_ids(self, text: str) -> tuple[list[int], int]:
        """``[BOS] prompt text [SEP]`` and the index of the first scored (text) token."""
        head = [self.bos_id, *self._prompt_ids]
        body = [*self._plain_ids(text)[: max(1, self.max_length - len(head) - 1)], self.eos_id]
        return head + body, len(head)

    def _blip_pairs(self, images: list[Image.Image], pairs: list[tuple[int, str]]) -> list[TokenScores]:
        import torch

        device = self.device
        embeds = []
        for idx in self._batches(len(images)):  # the vision encoder: once per unique image
            pv = self._pixels([images[i] for i in idx])
            embeds.append(self.model.vision_model(pixel_values=pv).last_hidden_state)
        image_embeds = torch.cat(embeds) if embeds else None
        encoded: dict[str, tuple[list[int], int]] = {}
        for _, t in pairs:
            if t not in encoded:
                encoded[t] = self._blip_ids(t)
        out: list[TokenScores | None] = [None] * len(pairs)
        order = sorted(range(len(pairs)), key=lambda k: len(encoded[pairs[k][1]][0]))  # less padding
        for idx in self._batches(len(pairs)):
            batch = [pairs[order[k]] for k in idx]
            seqs = [encoded[t] for _, t in batch]
            width = max(len(s) for s, _ in seqs)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            att = torch.zeros((len(batch), width), dtype=torch.long)
            for b, (s, _) in enumerate(seqs):
                ids[b, : len(s)] = torch.tensor(s)
                att[b, : len(s)] = 1
            ids, att = ids.to(device), att.to(device)
            enc = image_embeds[torch.tensor([i for i, _ in batch], device=image_embeds.device)]
            logits = self.model.text_decoder(
                input_ids=ids,
                attention_mask=att,
                encoder_hidden_states=enc,
                encoder_attention_mask=torch.ones(enc.shape[:-1], dtype=torch.long, device=enc.device),
                use_cache=False,
            ).logits
            lp = gather_token_logprobs(logits[:, :-1], ids[:, 1:], att[:, 1:].bool()).cpu().numpy()
            for b, (s, first) in enumerate(seqs):
                toks = tuple(self.tokenizer.convert_ids_to_tokens(s[first:]))
                out[order[idx[b]]] = TokenScores(toks, lp[b, first - 1 : len(s) - 1].astype(np.float64))
        return out  # type: ignore[return-value]

    # -- chat VLMs ------------------------------------------------------------------------------
    def _chat_pairs(self, images: list[Image.Image], pairs: list[tuple[int, str]]) -> list[TokenScores]:
        """The caption as the assistant's answer after the describe prompt; prefix reused per image."""
        reqs = [Request((i,), self._chat_prompt, self.chat.answer_ids(t)) for i, t in pairs]
        lps = self.chat.target_logprobs(images, reqs)
        return [
            TokenScores(tuple(self.tokenizer.convert_ids_to_tokens(list(r.target))), lp)
            for r, lp in zip(reqs, lps, strict=True)
        ]

    # -- generic image-text-to-text models -------------------------------------------------------
    def _setup_generic(self) -> None:
        template = self.prompt or "{text}"
        if "{text}" not in template:
            template = template + "{text}"
        prefix, _, suffix = template.partition("{text}")
        if suffix.strip():
            raise ConfigError(
                f"prompt template {self.prompt!r}: the text must come last (tokens after it would not "
                f"change P(text | image, prefix))"
            )
        self.prefix = prefix
        text_cfg = getattr(self.config, "text_config", None)
        self.is_seq2seq = bool(getattr(text_cfg, "is_encoder_decoder", False)) or bool(
            getattr(self.config, "is_encoder_decoder", False)
        )
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._vision_owner, self._vision_attr = _find_vision_tower(self.model)

    def _n_scored_tokens(self, text: str) -> int:
        """How many final tokens of the processed sequence belong to ``text``: its own tokens (the
        prefix's trailing space joins the text) plus the end tokens the tokenizer appends."""
        tok = self.tokenizer
        joined = self.prefix + text
        plain = list(tok(joined, add_special_tokens=False)["input_ids"])
        special = list(tok(joined, add_special_tokens=True)["input_ids"])
        suffix = 0
        for start in range(len(special) - len(plain) + 1):
            if special[start : start + len(plain)] == plain:
                suffix = len(special) - start - len(plain)
                break
        base = len(tok(self.prefix.rstrip(), add_special_tokens=False)["input_ids"]) if self.prefix.strip() else 0
        return max(1, len(plain) - base) + suffix

    def _generic_pairs(self, images: list[Image.Image], pairs: list[tuple[int, str]]) -> list[TokenScores]:
        import torch

        device = self.device
        pixels = [self._pixels([im]) for im in images]
        vision = _cached_vision(self, pixels, {})
        out: list[TokenScores] = []
        for idx in self._batches(len(pairs)):
            batch = [pairs[k] for k in idx]
            imgs = [images[i] for i, _ in batch]
            if self.is_seq2seq:
                inputs = self.processor(images=imgs, text=[self.prefix] * len(batch), return_tensors="pt", padding=True)
                labels = [list(self.tokenizer(t, add_special_tokens=True)["input_ids"]) for _, t in batch]
                width = max(len(x) for x in labels)
                lab = torch.full((len(batch), width), -100, dtype=torch.long)
                for b, x in enumerate(labels):
                    lab[b, : len(x)] = torch.tensor(x)
                inputs = {k: v.to(device) for k, v in inputs.items()}
                with vision([i for i, _ in batch]):
                    logits = self.model(**inputs, labels=lab.to(device)).logits
                lab = lab.to(device)
                lp = gather_token_logprobs(logits[:, -width:], lab, lab != -100).cpu().numpy()
                for b, x in enumerate(labels):
                    toks = tuple(self.tokenizer.convert_ids_to_tokens(x))
                    out.append(TokenScores(toks, lp[b, : len(x)].astype(np.float64)))
                continue
            texts = [self.prefix + t for _, t in batch]
            self.tokenizer.padding_side = "right"
            inputs = self.processor(images=imgs, text=texts, return_tensors="pt", padding=True)
            inputs = {k: v.to(device) for k, v in inputs.items()}
            with vision([i for i, _ in batch]):
                logits = self.model(**inputs).logits
            ids = inputs["input_ids"]
            att = inputs["attention_mask"]
            lengths = att.sum(dim=1).tolist()
            # logits may cover extra positions (query tokens prepended as embeddings): align on the right
            logits = logits[:, -ids.shape[1] :]
            lp = gather_token_logprobs(logits[:, :-1], ids[:, 1:], att[:, 1:].bool()).cpu().numpy()
            for b, (_, t) in enumerate(batch):
                n = min(self._n_scored_tokens(t), int(lengths[b]) - 1)
                end = int(lengths[b])
                toks = tuple(self.tokenizer.convert_ids_to_tokens(ids[b, end - n : end].tolist()))
                out.append(TokenScores(toks, lp[b, end - n - 1 : end - 1].astype(np.float64)))
        return out


def _find_vision_tower(model) -> tuple[Any, str | None]:
    """The module holding the vision tower (``vision_model`` or ``vision_tower``) and its name."""
    import torch

    for owner in (model, getattr(model, "model", None)):
        if owner is None:
            continue
        for attr in ("vision_model", "vision_tower"):
            if isinstance(getattr(owner, attr, None), torch.nn.Module):
                return owner, attr
    return None, None


def _index_outputs(out, j: int):
    """Row ``j`` (kept as a batch of one) of a model output: tensors, tuples, ModelOutputs."""
    import torch

    if torch.is_tensor(out):
        return out[j : j + 1] if out.dim() > 0 else out
    if isinstance(out, dict):  # ModelOutput
        return type(out)(**{k: _index_outputs(v, j) for k, v in out.items()})
    if isinstance(out, (tuple, list)):
        return type(out)(_index_outputs(v, j) for v in out)
    return out


def _stack_outputs(items: list):
    """Concatenate per-image model outputs along the batch axis."""
    import torch

    first = items[0]
    if torch.is_tensor(first):
        return torch.cat(items) if first.dim() > 0 else first
    if isinstance(first, dict):  # ModelOutput
        return type(first)(**{k: _stack_outputs([it[k] for it in items]) for k in first})
    if isinstance(first, (tuple, list)):
        return type(first)(_stack_outputs([it[j] for it in items]) for j in range(len(first)))
    return first


class _cached_vision:
    """Swap the vision tower for a stand-in that runs it once per unique image and replays it.

    The model calls its tower with a batch whose rows repeat images (one row per text); the
    stand-in computes the real tower only on images it has not seen with the same keyword
    arguments, then stacks the cached per-image outputs in the batch's order.
    """

    def __init__(self, scorer: VisualGPTScorer, pixels: list, cache: dict) -> None:
        self.scorer, self.pixels, self.cache = scorer, pixels, cache
        self.index: list[int] = []
        self.tower = None

    def __call__(self, index: list[int]) -> _cached_vision:
        self.index = index
        return self

    def __enter__(self) -> _cached_vision:
        owner, attr = self.scorer._vision_owner, self.scorer._vision_attr
        if owner is None:
            return self
        self.tower = getattr(owner, attr)
        setattr(owner, attr, _replay_tower(self.tower, self))
        return self

    def __exit__(self, *exc) -> None:
        if self.tower is not None:
            setattr(self.scorer._vision_owner, self.scorer._vision_attr, self.tower)
            self.tower = None

    def run(self, inner, kwargs: dict):
        import torch

        kw_key = repr(sorted((k, v) for k, v in kwargs.items() if not torch.is_tensor(v)))
        missing = [i for i in dict.fromkeys(self.index) if (i, kw_key) not in self.cache]
        if missing:
            out = inner(pixel_values=torch.cat([self.pixels[i] for i in missing]), **kwargs)
            for j, i in enumerate(missing):
                self.cache[(i, kw_key)] = _index_outputs(out, j)
        return _stack_outputs([self.cache[(i, kw_key)] for i in self.index])


def _replay_tower(inner, ctx: _cached_vision):
    import torch

    class ReplayTower(torch.nn.Module):
        """Stands in for a vision tower: one real pass per unique image (Sec. 3 cost note)."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args, **kwargs):
            if args:
                kwargs = {k: v for k, v in kwargs.items() if k != "pixel_values"}
                args = args[1:]
            else:
                kwargs = {k: v for k, v in kwargs.items() if k != "pixel_values"}
            if args:
                raise TypeError("the vision tower stand-in takes keyword arguments after pixel_values")
            return ctx.run(self.inner, kwargs)

        def __getattr__(self, name: str):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.inner, name)

    return ReplayTower()
