"""``vgpt:SPEC``: VisualGPTScore, the generative image-text score log P(text | image).

The pair score is the length-normalised log-likelihood of the caption (Lin et al., Sec. 3, Eq. 2),
computed with teacher forcing by one of three backends (:class:`BlipBackend`, :class:`ChatBackend`,
:class:`GenericBackend`); ``text_logprob`` gives the null-image prior. Details and spec options:
docs/scorers.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.cases import ImageRef
from spotdiff.errors import ConfigError
from spotdiff.scorers.base import SCORERS, PairScorer, ScorerOptions
from spotdiff.scorers.chat import ChatVLM, Request
from spotdiff.scorers.factory import parse_spec_options
from spotdiff.scorers.lm import TokenScores, gather_token_logprobs, model_identity_digests, model_identity_sources

__all__ = ["DESCRIBE_PROMPT", "VisualGPTScorer"]

#: The user turn that asks a chat VLM for the caption whose likelihood is scored.
DESCRIBE_PROMPT = "Describe this image in one sentence."

Pairs = list[tuple[int, str]]


@SCORERS.register("vgpt")
class VisualGPTScorer(PairScorer):
    """log VisualGPTScore (Eq. 2) of (image, text) pairs; vision once per unique image."""

    capabilities = frozenset({"image-text", "text-prior"})
    OPTIONS = ("prompt", "system", "null_n", "null_mean", "null_std", "null_seed", "null_space")

    def __init__(self, rest: str, options: ScorerOptions) -> None:
        super().__init__(f"vgpt:{rest}", options)
        import torch

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
        vlm = ChatVLM.load(self.name, options, "vgpt model", check=self._check_config)
        self.model, self.processor, self.config, self.tokenizer = vlm.model, vlm.processor, vlm.config, vlm.tokenizer
        self.device, self.dtype = vlm.device, vlm.dtype
        self.image_processor = getattr(self.processor, "image_processor", None)
        # what puts null images in the null_space asked for (None: pixel units); fails before any data
        self.null_normalization = null_normalization(self.null["space"], self.image_processor)
        torch.manual_seed(options.seed)
        self._null_cache: dict[tuple, Any] = {}
        if self.config.model_type == "blip":
            self.scoring: Backend = BlipBackend(vlm, self.prompt)  # the backend computes Eq. 1's terms
        elif vlm.has_chat_template:
            self.scoring = ChatBackend(vlm, self.prompt, self.system)
        else:
            self.scoring = GenericBackend(vlm, self.prompt)
        self.backend = self.scoring.name

    def _check_config(self, config: Any) -> None:
        """Refuse a BLIP checkpoint without the captioning decoder before its weights load."""
        archs = getattr(config, "architectures", None) or []
        if config.model_type == "blip" and archs and "BlipForConditionalGeneration" not in archs:
            raise ConfigError(
                f"{self.name!r} is a {', '.join(archs)} checkpoint without BLIP's captioning decoder; "
                f"vgpt: needs BlipForConditionalGeneration (e.g. Salesforce/blip-image-captioning-large)"
            )

    # -- identity ------------------------------------------------------------------------------
    def sources(self) -> list[Path]:
        return model_identity_sources(self.name)

    def identity(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "class": type(self.model).__name__,
            **model_identity_digests(self.name, self.config),
            "prompt": self.prompt,
            **self.scoring.identity(),
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

    def _pairs_token_logprobs(self, images: list[Image.Image], pairs: Pairs) -> list[TokenScores]:
        import torch

        with torch.inference_mode():
            return self.scoring.pairs(images, pairs)


class Backend:
    """How one family of image-conditioned LMs gives Eq. 1's per-token terms of (image, text) pairs.

    Args:
        vlm: the loaded model, processor and config (:meth:`ChatVLM.load`); its options' batch size
            is read at each call, so ``--batch-size auto`` set after loading applies.
        prompt: the scorer's ``prompt`` option.
    """

    #: the backend's name (``VisualGPTScorer.backend``)
    name = ""

    def __init__(self, vlm: ChatVLM, prompt: str) -> None:
        self.vlm, self.prompt = vlm, prompt
        self.model, self.processor, self.config, self.tokenizer = vlm.model, vlm.processor, vlm.config, vlm.tokenizer
        self.device, self.dtype = vlm.device, vlm.dtype
        self.image_processor = getattr(self.processor, "image_processor", None)

    def identity(self) -> dict[str, Any]:
        """What the backend adds to the scorer's identity."""
        return {}

    def pairs(self, images: list[Image.Image], pairs: Pairs) -> list[TokenScores]:
        """Per-token log-probabilities of each ``(image index, text)`` pair (under inference mode)."""
        raise NotImplementedError

    def plain_ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def batches(self, n: int) -> Iterator[range]:
        bs = self.vlm.batch_size
        for start in range(0, n, bs):
            yield range(start, min(n, start + bs))

    def pixels(self, images: list[Image.Image]):
        import torch

        pv = self.image_processor(images=images, return_tensors="pt")["pixel_values"]
        return pv.to(self.device, dtype=self.dtype if self.dtype != torch.float32 else pv.dtype)


class BlipBackend(Backend):
    """``BlipForConditionalGeneration``: ``[BOS] prompt text [SEP]`` through BLIP's text decoder
    against the cached image embeddings (see docs/scorers.md)."""

    name = "blip"

    def __init__(self, vlm: ChatVLM, prompt: str) -> None:
        super().__init__(vlm, prompt)
        tc = self.config.text_config
        self.bos_id = int(tc.bos_token_id)
        sep = self.tokenizer.sep_token_id
        self.eos_id = int(sep if sep is not None else tc.sep_token_id)
        self.pad_id = int(tc.pad_token_id if tc.pad_token_id is not None else 0)
        self.max_length = int(tc.max_position_embeddings)
        self.prompt_ids = self.plain_ids(prompt) if prompt else []

    def encode(self, text: str) -> tuple[list[int], int]:
        """``[BOS] prompt text [SEP]`` and the index of the first scored (text) token."""
        head = [self.bos_id, *self.prompt_ids]
        body = [*self.plain_ids(text)[: max(1, self.max_length - len(head) - 1)], self.eos_id]
        return head + body, len(head)

    def pairs(self, images: list[Image.Image], pairs: Pairs) -> list[TokenScores]:
        import torch

        device = self.device
        embeds = []
        for idx in self.batches(len(images)):  # the vision encoder: once per unique image
            pv = self.pixels([images[i] for i in idx])
            embeds.append(self.model.vision_model(pixel_values=pv).last_hidden_state)
        image_embeds = torch.cat(embeds) if embeds else None
        encoded: dict[str, tuple[list[int], int]] = {}
        for _, t in pairs:
            if t not in encoded:
                encoded[t] = self.encode(t)
        out: list[TokenScores | None] = [None] * len(pairs)
        order = sorted(range(len(pairs)), key=lambda k: len(encoded[pairs[k][1]][0]))  # less padding
        for idx in self.batches(len(pairs)):
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


class ChatBackend(Backend):
    """A chat VLM: the caption as the assistant's answer after the describe prompt, the prompt's
    prefix reused per image (:meth:`ChatVLM.target_logprobs`).

    Args:
        vlm: the loaded chat VLM.
        prompt: the question before the answer (default :data:`DESCRIBE_PROMPT`).
        system: an optional system turn.
    """

    name = "chat"

    def __init__(self, vlm: ChatVLM, prompt: str, system: str | None) -> None:
        super().__init__(vlm, prompt)
        if "{text}" in prompt:
            raise ConfigError(
                f"prompt {prompt!r}: for a chat model the caption is the assistant's answer and "
                f"prompt= is the question before it (no {{text}})"
            )
        self.chat_prompt = vlm.render(prompt or DESCRIBE_PROMPT, 1, system)

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "chat_prompt": self.chat_prompt}

    def pairs(self, images: list[Image.Image], pairs: Pairs) -> list[TokenScores]:
        reqs = [Request((i,), self.chat_prompt, self.vlm.answer_ids(t)) for i, t in pairs]
        lps = self.vlm.target_logprobs(images, reqs)
        return [
            TokenScores(tuple(self.tokenizer.convert_ids_to_tokens(list(r.target))), lp)
            for r, lp in zip(reqs, lps, strict=True)
        ]


class GenericBackend(Backend):
    """Other image-text-to-text models (BLIP-2, InstructBLIP, LLaVA without a chat template, ...):
    ``prompt="... {text}"``, the text last; the vision tower run once per unique image."""

    name = "generic"

    def __init__(self, vlm: ChatVLM, prompt: str) -> None:
        super().__init__(vlm, prompt)
        template = prompt or "{text}"
        if "{text}" not in template:
            template = template + "{text}"
        prefix, _, suffix = template.partition("{text}")
        if suffix.strip():
            raise ConfigError(
                f"prompt template {prompt!r}: the text must come last (tokens after it would not "
                f"change P(text | image, prefix))"
            )
        self.prefix = prefix
        text_cfg = getattr(self.config, "text_config", None)
        self.is_seq2seq = bool(getattr(text_cfg, "is_encoder_decoder", False)) or bool(
            getattr(self.config, "is_encoder_decoder", False)
        )
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.vision_owner, self.vision_attr = _find_vision_tower(self.model)

    def n_scored_tokens(self, text: str) -> int:
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

    def pairs(self, images: list[Image.Image], pairs: Pairs) -> list[TokenScores]:
        vision = _cached_vision(self, [self.pixels([im]) for im in images], {})
        out: list[TokenScores] = []
        for idx in self.batches(len(pairs)):
            batch = [pairs[k] for k in idx]
            score = self._seq2seq_batch if self.is_seq2seq else self._causal_batch
            with vision([i for i, _ in batch]):
                out.extend(score([images[i] for i, _ in batch], [t for _, t in batch]))
        return out

    def _seq2seq_batch(self, imgs: list[Image.Image], texts: list[str]) -> list[TokenScores]:
        """The prefix read by the encoder, each text scored as the decoder's labels."""
        import torch

        device = self.device
        inputs = self.processor(images=imgs, text=[self.prefix] * len(texts), return_tensors="pt", padding=True)
        labels = [list(self.tokenizer(t, add_special_tokens=True)["input_ids"]) for t in texts]
        width = max(len(x) for x in labels)
        lab = torch.full((len(texts), width), -100, dtype=torch.long)
        for b, x in enumerate(labels):
            lab[b, : len(x)] = torch.tensor(x)
        inputs = {k: v.to(device) for k, v in inputs.items()}
        logits = self.model(**inputs, labels=lab.to(device)).logits
        lab = lab.to(device)
        lp = gather_token_logprobs(logits[:, -width:], lab, lab != -100).cpu().numpy()
        return [
            TokenScores(tuple(self.tokenizer.convert_ids_to_tokens(x)), lp[b, : len(x)].astype(np.float64))
            for b, x in enumerate(labels)
        ]

    def _causal_batch(self, imgs: list[Image.Image], texts: list[str]) -> list[TokenScores]:
        """``prefix + text`` as one sequence; the text's tokens are the last of each row."""
        self.tokenizer.padding_side = "right"
        inputs = self.processor(images=imgs, text=[self.prefix + t for t in texts], return_tensors="pt", padding=True)
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        logits = self.model(**inputs).logits
        ids = inputs["input_ids"]
        att = inputs["attention_mask"]
        lengths = att.sum(dim=1).tolist()
        # logits may cover extra positions (query tokens prepended as embeddings): align on the right
        logits = logits[:, -ids.shape[1] :]
        lp = gather_token_logprobs(logits[:, :-1], ids[:, 1:], att[:, 1:].bool()).cpu().numpy()
        out = []
        for b, t in enumerate(texts):
            n = min(self.n_scored_tokens(t), int(lengths[b]) - 1)
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

    def __init__(self, backend: GenericBackend, pixels: list, cache: dict) -> None:
        self.backend, self.pixels, self.cache = backend, pixels, cache
        self.index: list[int] = []
        self.tower = None

    def __call__(self, index: list[int]) -> _cached_vision:
        self.index = index
        return self

    def __enter__(self) -> _cached_vision:
        owner, attr = self.backend.vision_owner, self.backend.vision_attr
        if owner is None:
            return self
        self.tower = getattr(owner, attr)
        setattr(owner, attr, _replay_tower(self.tower, self))
        return self

    def __exit__(self, *exc) -> None:
        if self.tower is not None:
            setattr(self.backend.vision_owner, self.backend.vision_attr, self.tower)
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
