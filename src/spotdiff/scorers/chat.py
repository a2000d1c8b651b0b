"""Chat vision-language models: what the ``vqa:`` scorer and the chat backend of ``vgpt:`` share.

:class:`ChatVLM` loads a chat VLM, renders prompts with the model's own chat template and scores
answers by teacher forcing, reusing the KV cache of its prompts' common prefix; :class:`AnswerChooser`
asks multiple-choice questions (EqBen Sec. 5.5) in a benchmark's question style. How each benchmark's authors
word their questions and read the answers is theirs, in :mod:`spotdiff.readers` (moved there, issue 43).
Prompt layout and prefix reuse: docs/scorers.md.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.readers import CHOICE_STYLES
from spotdiff.readers.choice import CHOICE_IMAGE_QUESTION, CHOICE_TEXT_QUESTION, choice_questions, read_choice
from spotdiff.scorers.base import ScorerOptions
from spotdiff.scorers.lm import gguf_source, load_device_dtype
from spotdiff.scorers.video import split_clips
from spotdiff.scorers.weights import local_path, naming_damaged_weights
from spotdiff.video.clips import Clip

__all__ = [
    "SINGLE_IMAGE_MODEL_TYPES", "AnswerChooser", "ChatVLM", "NanCounter", "Request", "check_gguf_config",
]  # fmt: skip

#: Model types trained with one image per prompt: "which image" questions need ``multi_image=yes``.
#: (``llava`` is LLaVA-1.5; LLaVA-interleave checkpoints share the type and take several images.)
SINGLE_IMAGE_MODEL_TYPES = frozenset({"llava", "llava_next", "paligemma", "blip-2", "instructblip", "fuyu"})


@dataclass(frozen=True)
class Request:
    """One scoring request.

    Attributes:
        images: indices into the call's image list, in the order the prompt shows them.
        prompt: the rendered prompt (:meth:`ChatVLM.render`), generation prompt included.
        target: token ids scored right after the prompt (at least one).
    """

    images: tuple[int, ...]
    prompt: str
    target: tuple[int, ...]


class NanCounter:
    """Counts NaN scores and warns once per call (fp16 overflow in some VLMs gives NaN logits)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.total = 0

    def check(self, values: np.ndarray, dtype: Any) -> None:
        n = int(np.isnan(values).sum())
        if n:
            self.total += n
            warnings.warn(
                f"{self.what}: {n} of {values.size} scores are NaN (NaN logits; {self.total} so far); "
                f"protocols count them as failures. Running in {str(dtype).replace('torch.', '')}: "
                f"float32 or bfloat16 (--dtype) usually avoids this.",
                RuntimeWarning,
                stacklevel=3,
            )


def check_gguf_config(config: Any, name: str, gguf_file: str | None, what: str) -> None:
    """Refuse a GGUF checkpoint without a vision tower, naming what to use instead.

    Args:
        config: the model config read from the file.
        name: the model's name or path, for the message.
        gguf_file: the GGUF file's name, None for a checkpoint folder.
        what: what is loading it, for the message.
    """
    if gguf_file and not hasattr(config, "vision_config"):
        raise ConfigError(
            f"{what}: {name} is a text-only {config.model_type!r} GGUF (transformers reads GGUF files only "
            f"for text-only architectures); an image-text model needs its checkpoint folder. For this "
            f"file's text prior use lm:{name}"
        )


class ChatVLM:
    """A loaded chat VLM: model, processor and the prompt / scoring machinery (docs/scorers.md).

    Build it with :meth:`load` (``vqa:``, and ``vgpt:`` for every image-conditioned LM it scores).

    Args:
        model: the loaded ``AutoModelForImageTextToText``.
        processor: its ``AutoProcessor`` (with a tokenizer).
        config: the model's config.
        device: the device the model is on.
        dtype: the model's dtype.
        options: the scorer options (batch size, ...).
    """

    def __init__(
        self, model: Any, processor: Any, config: Any, *, device: str, dtype: Any, options: ScorerOptions
    ) -> None:
        self.model, self.processor, self.config = model, processor, config
        self.device, self.dtype = device, dtype
        self.options = options
        self.tokenizer = getattr(processor, "tokenizer", None)
        if self.tokenizer is None:
            raise ConfigError(f"{type(processor).__name__} has no tokenizer")
        self.tokenizer.padding_side = "right"
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        self.image_token_ids = {  # the placeholders the processor expands: images' and videos'
            int(i)
            for i in (
                getattr(processor, "image_token_id", None),
                getattr(config, "image_token_id", None),
                getattr(config, "image_token_index", None),
                getattr(processor, "video_token_id", None),
                getattr(config, "video_token_id", None),
                getattr(config, "video_token_index", None),
            )
            if i is not None
        }
        self.core = getattr(model, "model", model)  # holds rope_deltas for M-RoPE models
        self._split_known = True  # whether _split_rows splits this processor's batches (until one says no)

    @property
    def batch_size(self) -> int:
        """The scorer's ``options.batch_size`` (``--batch-size auto`` sets it after loading)."""
        return max(1, int(self.options.batch_size))

    @classmethod
    def load(
        cls, name_or_path: str, options: ScorerOptions, what: str, check: Callable[[Any], None] | None = None
    ) -> ChatVLM:
        """Load ``AutoProcessor`` + ``AutoModelForImageTextToText`` by hub name, path or GGUF file.

        Args:
            name_or_path: hub name, local folder or ``.gguf`` file.
            options: device, dtype and batch size (kept, so a later batch size applies).
            what: what is loaded, for error messages (``"vqa model"``).
            check: called with the model's config before the weights load, to refuse a checkpoint.
        """
        from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

        device, dtype = load_device_dtype(options)
        source, gguf_file = gguf_source(name_or_path, what)
        if gguf_file is None:
            local_path(name_or_path, what)
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        try:
            config = AutoConfig.from_pretrained(source, **kw)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"{what}: cannot load the config of {name_or_path!r}: {exc}") from exc
        check_gguf_config(config, name_or_path, gguf_file, what)
        if check is not None:
            check(config)
        with naming_damaged_weights(what, source):
            try:
                processor = AutoProcessor.from_pretrained(source, **kw)
                model = AutoModelForImageTextToText.from_pretrained(source, dtype=dtype, **kw)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                what_failed = f"{what}: cannot load {name_or_path!r} as an image-text-to-text model"
                raise ConfigError(f"{what_failed}: {exc}") from exc
        model.to(device).eval()
        return cls(model, processor, config, device=device, dtype=dtype, options=options)

    # -- prompts -------------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.processor, "chat_template", None))

    def render(self, question: str, n_images: int = 1, system: str | None = None, *, video: bool = False) -> str:
        """The chat-templated prompt: [system turn,] one user turn (``n_images`` images, or videos, then the
        question), and the generation prompt.

        Args:
            question: the user turn's text.
            n_images: image placeholders before the question.
            system: a system turn, None for the template's own.
            video: the placeholders are videos' (``{"type": "video"}``), not images'.
        """
        if not self.has_chat_template:
            raise ConfigError(
                f"{type(self.processor).__name__} of this model has no chat template; chat scoring needs the "
                f"model's own prompt format"
            )
        kind = "video" if video else "image"
        content = [{"type": kind} for _ in range(n_images)] + [{"type": "text", "text": question}]
        messages = [{"role": "user", "content": content}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": [{"type": "text", "text": system}]})
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def answer_ids(self, answer: str) -> tuple[int, ...]:
        """``tokenizer(answer, add_special_tokens=False)``: the tokens scored after the prompt."""
        ids = tuple(self.tokenizer(answer, add_special_tokens=False)["input_ids"])
        if not ids:
            raise ConfigError(f"answer {answer!r} has no tokens")
        return ids

    def _add_special(self, prompt: str) -> bool:
        # as ProcessorMixin.apply_chat_template(tokenize=True): no second BOS when the template wrote one
        bos = self.tokenizer.bos_token
        return not (bos is not None and prompt.startswith(bos))

    def process(self, prompts: Sequence[str], images: Sequence[Sequence[Image.Image | Clip]]) -> dict[str, Any]:
        """The processor's tensors for prompts and their images (right-padded), on the device; prompts
        without images (a text-only turn) are passed as text alone. Clips are the processor's videos: their
        sampled frames, with the frames' metadata, not sampled again (``do_sample_frames=False``)."""
        import torch

        visual = self._visual_inputs([item for items in images for item in items], images)
        enc = self.processor(
            text=list(prompts),
            return_tensors="pt",
            padding=True,
            add_special_tokens=self._add_special(prompts[0]),
            **visual,
        )
        out = {}
        for key, value in enc.items():
            if torch.is_tensor(value):
                value = value.to(self.device)
                if value.is_floating_point() and self.dtype != torch.float32:
                    value = value.to(self.dtype)
            out[key] = value
        return out

    def _visual_inputs(self, flat: Sequence[Any], nested: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """The processor's image or video arguments for a batch's items (all images, or all clips)."""
        if not flat:
            return {}
        if not split_clips(flat, type(self.model).__name__):
            return {"images": [[im.convert("RGB") for im in ims] for ims in nested]}
        from transformers.video_utils import VideoMetadata

        return {
            "videos": [clip.array() for clip in flat],
            "video_metadata": [VideoMetadata(**clip.metadata()) for clip in flat],
            "do_sample_frames": False,
        }

    # -- scoring -------------------------------------------------------------------------------
    def target_logprobs(
        self, images: Sequence[Image.Image], requests: Sequence[Request], *, reuse: bool = True
    ) -> list[np.ndarray]:
        """``log P(target_k | prompt, target_<k, images)`` for each request (float64 arrays).

        With ``reuse`` the requests of each image tuple share one forward pass over their common
        prefix (docs/scorers.md); prefixes of equal length are run together, ``batch_size``
        image tuples at a time, and their requests' remaining tokens ``batch_size`` at a time.
        Otherwise each request is one full sequence, batched.

        Args:
            images: the images the requests index into.
            requests: the prompts and target tokens to score.
            reuse: share the forward pass over each image tuple's common prompt prefix.
        """
        import torch

        out: list[np.ndarray | None] = [None] * len(requests)
        groups: dict[tuple[int, ...], list[int]] = {}
        for k, r in enumerate(requests):
            if not r.target:
                raise ValueError("a request needs at least one target token")
            groups.setdefault(r.images, []).append(k)
        with torch.inference_mode():
            plans: dict[tuple, list[_Prefix]] = {}
            if reuse:
                found, whole = self._plan_prefixes(images, groups, requests)
                for plan in found:
                    plans.setdefault(plan.shape_key, []).append(plan)
            else:
                whole = [k for members in groups.values() for k in members]
            for same_shape in plans.values():
                for start in range(0, len(same_shape), self.batch_size):
                    for k, lp in self._with_prefixes(same_shape[start : start + self.batch_size], requests):
                        out[k] = lp
            by_count: dict[int, list[int]] = {}
            for k in whole:
                by_count.setdefault(len(requests[k].images), []).append(k)
            for ks in by_count.values():
                ks.sort(key=lambda k: len(requests[k].prompt) + len(requests[k].target))
                for start in range(0, len(ks), self.batch_size):
                    batch = ks[start : start + self.batch_size]
                    reqs = [requests[k] for k in batch]
                    got = self._whole([[images[i] for i in r.images] for r in reqs], reqs)
                    for k, lp in zip(batch, got, strict=True):
                        out[k] = lp
        return out  # type: ignore[return-value]

    @staticmethod
    def _token_aligned(value: Any, batch: int, length: int) -> bool:
        """Per-token integer tensors (input ids, masks, token types) of shape ``[batch, length]``."""
        import torch

        return (
            torch.is_tensor(value)
            and value.dim() == 2
            and tuple(value.shape) == (batch, length)
            and not value.is_floating_point()
        )

    def _whole(self, images: list[list[Image.Image]], reqs: list[Request]) -> list[np.ndarray]:
        """Each request as one sequence: the processed prompt with its target tokens appended."""
        import torch

        enc = self.process([r.prompt for r in reqs], images)
        ids, att = enc["input_ids"], enc["attention_mask"]
        n, width = ids.shape
        lengths = [int(x) for x in att.sum(dim=1).tolist()]
        extra = max(len(r.target) for r in reqs)
        inputs: dict[str, Any] = {}
        for key, value in enc.items():
            if not self._token_aligned(value, n, width):
                inputs[key] = value
                continue
            fill = self.pad_id if key == "input_ids" else 0
            grown = torch.full((n, width + extra), fill, dtype=value.dtype, device=value.device)
            for b, (length, r) in enumerate(zip(lengths, reqs, strict=True)):
                grown[b, :length] = value[b, :length]
                # the answer: its ids, attention on, a prefix-LM's "suffix" type (PaliGemma), else 0
                m = len(r.target)
                tail = {"input_ids": list(r.target), "attention_mask": [1] * m, "token_type_ids": [1] * m}
                grown[b, length : length + m] = torch.tensor(tail.get(key, [0] * m), dtype=value.dtype)
            inputs[key] = grown
        logits = self.model(**inputs).logits
        logits = logits[:, -(width + extra) :]
        logp = torch.log_softmax(logits.float(), dim=-1)
        out = []
        for b, (length, r) in enumerate(zip(lengths, reqs, strict=True)):
            pos = torch.arange(length - 1, length - 1 + len(r.target), device=logp.device)
            tgt = torch.tensor(r.target, device=logp.device)
            out.append(logp[b, pos, tgt].double().cpu().numpy())
        return out

    def _plan_prefixes(
        self, images: Sequence[Any], groups: dict[tuple[int, ...], list[int]], requests: Sequence[Request]
    ) -> tuple[list[_Prefix], list[int]]:
        """The shared prefix of each image tuple's requests (``groups``: tuple -> request indices), processed
        ``batch_size`` tuples per processor call; and the requests whose prefix cannot be split off (run whole)."""
        ids = self._token_ids(requests[k].prompt for members in groups.values() for k in members)
        whole: list[int] = []
        split: list[tuple[tuple[int, ...], list[int], int]] = []  # (image tuple, requests, common prefix length)
        for imgs, members in groups.items():
            texts = [ids[requests[k].prompt] for k in members]
            k = _common_prefix_length(texts)
            if k == 0 or any(t in self.image_token_ids for t_ids in texts for t in t_ids[k:]):
                whole.extend(members)  # an image after the point where the prompts differ
            else:
                split.append((imgs, members, k))
        plans: list[_Prefix] = []
        for start in range(0, len(split), self.batch_size):
            chunk = split[start : start + self.batch_size]
            prompts = [requests[members[0]].prompt for _, members, _ in chunk]
            sources = self._processed_apart(prompts, [[images[i] for i in imgs] for imgs, _, _ in chunk])
            for (_, members, k), (source, row) in zip(chunk, sources, strict=True):
                texts = [ids[requests[m].prompt] for m in members]
                plan = self._plan_prefix(source, row, members, texts, k, requests)
                if plan is None:
                    whole.extend(members)
                else:
                    plans.append(plan)
        return plans, whole

    def _token_ids(self, prompts: Iterable[str]) -> dict[str, list[int]]:
        """Each distinct prompt's tokens, each image placeholder still one token (one tokenizer call)."""
        by_special: dict[bool, list[str]] = {}
        for prompt in dict.fromkeys(prompts):
            by_special.setdefault(self._add_special(prompt), []).append(prompt)
        out: dict[str, list[int]] = {}
        for special, texts in by_special.items():
            out.update(zip(texts, self.tokenizer(texts, add_special_tokens=special)["input_ids"], strict=True))
        return out

    def _processed_apart(self, prompts: list[str], images: list[list[Any]]) -> list[tuple[_Processed, int]]:
        """Each prompt's processor tensors as (a processor call's output, the prompt's row in it): one call for
        all, split by :func:`_split_rows`; one call per prompt for a processor whose output it cannot split
        (known after its first batch)."""
        if len(prompts) > 1 and self._split_known:
            batch = _split_rows(self.process(prompts, images), [len(x) for x in images])
            if batch is not None:
                return [(batch, row) for row in range(len(prompts))]
            self._split_known = False
        return [(_Processed.alone(self.process([p], [x])), 0) for p, x in zip(prompts, images, strict=True)]

    def _plan_prefix(
        self, source: _Processed, row: int, members: list[int], texts: list[list[int]], k: int, reqs: Sequence[Request]
    ) -> _Prefix | None:
        """One image tuple's shared prefix from its processed first prompt (row ``row`` of ``source``, maybe
        right-padded) and its requests' tokens (``texts``, common to ``k`` tokens); None when it cannot be split."""
        enc = source.enc
        if "token_type_ids" in enc:
            return None  # prefix-LM: the prompt attends bidirectionally, a cached prefix would differ
        ids = enc["input_ids"][row]
        full = int(enc["attention_mask"][row].sum()) if "attention_mask" in enc else ids.shape[0]
        cut = full - (len(texts[0]) - k)
        if cut <= 0 or ids[cut:full].tolist() != texts[0][k:]:
            return None  # the processor's expansion does not keep the prompt's tail token for token
        conts = [t[k:] + list(reqs[m].target) for t, m in zip(texts, members, strict=True)]
        offsets = [len(t) - k for t in texts]  # prompt tokens after the prefix
        return _Prefix(source, row, cut, members, conts, offsets)

    def _with_prefixes(self, plans: list[_Prefix], requests: Sequence[Request]) -> list[tuple[int, np.ndarray]]:
        """Prefixes of equal shape in one forward pass (KV cache kept), then every request's
        remaining prompt and answer tokens against its own prefix's cache, ``batch_size`` rows at a time."""
        import torch

        head = plans[0]
        if all(p.source is head.source and p.row == head.row + g for g, p in enumerate(plans)):
            inputs = head.source.rows(head.row, head.row + len(plans), head.cut)  # one call's prompts in order
        else:
            parts = [p.inputs for p in plans]
            inputs = {key: torch.cat([part[key] for part in parts]) for key in parts[0]}
        keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.model.forward).parameters else {}
        first = self.model(**inputs, use_cache=True, **keep)
        cache = first.past_key_values
        deltas = getattr(self.core, "rope_deltas", None) if hasattr(self.core, "get_rope_index") else None
        cut = plans[0].cut
        out: dict[int, np.ndarray] = {}
        rows: list[tuple[int, int, list[int], int]] = []  # (prefix, request, continuation, offset)
        direct: dict[int, tuple[int, int, int]] = {}  # request: its first answer token follows the prefix directly
        for g, plan in enumerate(plans):
            for m, cont, offset in zip(plan.members, plan.conts, plan.offsets, strict=True):
                out[m] = np.empty(len(requests[m].target), dtype=np.float64)
                if offset == 0:
                    direct[m] = (g, -1, requests[m].target[0])
                if len(cont) > 1:
                    rows.append((g, m, cont, offset))
        if direct:
            for m, lp in zip(direct, _log_probs(first.logits, list(direct.values())), strict=True):
                out[m][0] = lp
        rows.sort(key=lambda row: len(row[2]))
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start : start + self.batch_size]
            feeds = [cont[:-1] for _, _, cont, _ in batch]
            width = max(len(f) for f in feeds)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long, device=self.device)
            att = torch.zeros((len(batch), cut + width), dtype=torch.long, device=self.device)
            att[:, :cut] = 1
            for b, f in enumerate(feeds):
                ids[b, : len(f)] = torch.tensor(f, device=self.device)
                att[b, cut : cut + len(f)] = 1
            which = torch.tensor([g for g, _, _, _ in batch], device=self.device)
            past = copy.deepcopy(cache)
            past.batch_select_indices(which)  # each row continues its own image's prefix
            kwargs: dict[str, Any] = {}
            if deltas is not None:  # M-RoPE: text positions continue at cut + delta on every axis
                pos = torch.arange(cut, cut + width, device=self.device)[None, :] + deltas.reshape(-1)[which][:, None]
                kwargs["position_ids"] = pos[None].expand(3, -1, -1)
            # the LM head and softmax only where an answer token is read (every row's, across the batch)
            read = sorted({offset + j - 1 for _, m, _, offset in batch for j in range(len(requests[m].target))} - {-1})
            column = {p: i for i, p in enumerate(read)} if keep else {p: p for p in read}
            if keep:
                kwargs["logits_to_keep"] = torch.tensor(read, dtype=torch.long, device=self.device)
            logits = self.model(
                input_ids=ids, attention_mask=att, past_key_values=past, use_cache=True, **kwargs
            ).logits
            picks, where = [], []
            for b, (_, m, _, offset) in enumerate(batch):
                for j, t in enumerate(requests[m].target):
                    if offset + j >= 1:
                        picks.append((b, column[offset + j - 1], t))
                        where.append((m, j))
            for (m, j), lp in zip(where, _log_probs(logits, picks), strict=True):
                out[m][j] = lp
        return list(out.items())

    def generate(self, images: Sequence[Image.Image], prompt: str, max_new_tokens: int) -> str:
        """Greedy decoding (no sampling) after ``prompt``; the new text, special tokens dropped.

        Args:
            images: the images the prompt shows.
            prompt: the rendered prompt (:meth:`render`).
            max_new_tokens: the most tokens generated.
        """
        import torch

        enc = self.process([prompt], [list(images)])
        with torch.inference_mode():
            out = self.model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, pad_token_id=self.pad_id
            )
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)

    @property
    def model_type(self) -> str:
        return str(getattr(self.config, "model_type", ""))


@dataclass(frozen=True)
class _Processed:
    """One processor call's tensors for one or more prompts: ``tokens`` names the per-token ones (a row per
    prompt); ``spans[key]``: prompt ``r``'s entries of another lie at ``spans[key][r]:spans[key][r + 1]`` along
    its first axis (a key in neither: every prompt takes the value as it is)."""

    enc: dict[str, Any]
    tokens: frozenset[str]
    spans: dict[str, list[int]]

    @classmethod
    def alone(cls, enc: dict[str, Any]) -> _Processed:
        """The output of a call for one prompt."""
        width = enc["input_ids"].shape[1]
        return cls(enc, frozenset(k for k, v in enc.items() if ChatVLM._token_aligned(v, 1, width)), {})

    def rows(self, lo: int, hi: int, cut: int) -> dict[str, Any]:
        """The tensors of prompts ``lo`` to ``hi - 1`` (views), their tokens cut to the first ``cut``."""
        out = {}
        for key, value in self.enc.items():
            if key in self.tokens:
                out[key] = value[lo:hi, :cut]
            elif key in self.spans:
                out[key] = value[self.spans[key][lo] : self.spans[key][hi]]
            else:
                out[key] = value
        return out


@dataclass
class _Prefix:
    """One image tuple's shared prompt prefix, processed (row ``row`` of ``source``, cut to ``cut`` tokens), and
    its requests' continuations (remaining prompt tokens, then the answer)."""

    source: _Processed
    row: int
    cut: int
    members: list[int]
    conts: list[list[int]]
    offsets: list[int]

    @property
    def inputs(self) -> dict[str, Any]:
        """The prefix's tensors, for the model."""
        return self.source.rows(self.row, self.row + 1, self.cut)

    @property
    def shape_key(self) -> tuple:
        """Prefixes with equal keys can run in one batch (same length, same tensor shapes)."""
        return tuple((k, tuple(v.shape)) for k, v in sorted(self.inputs.items()) if hasattr(v, "shape"))


def _common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token sequences."""
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs):
            return i
    return n


def _split_rows(enc: dict[str, Any], counts: Sequence[int]) -> _Processed | None:
    """Where each prompt's tensors lie in a batched processor output (``counts``: each prompt's images):
    per-token tensors by row (right padding kept), the others by image, or by patch where one ``*_grid_thw``
    tensor gives each image's patches (Qwen-VL's concatenated ``pixel_values``). None for any other layout."""
    import torch

    rows, ids = len(counts), enc.get("input_ids")
    if ids is None or "attention_mask" not in enc:
        return None  # the rows' lengths are not known
    by_item = np.cumsum([0, *counts]).tolist()
    grids = [v for key, v in enc.items() if key.endswith("grid_thw") and torch.is_tensor(v)]
    by_patch = None
    if len(grids) == 1 and grids[0].dim() == 2 and grids[0].shape[0] == by_item[-1]:
        patches = np.cumsum([0, *grids[0].prod(dim=-1).tolist()]).tolist()
        by_patch = [patches[i] for i in by_item]
    tokens, spans = set(), {}
    for key, value in enc.items():
        if not torch.is_tensor(value) or value.dim() == 0:
            return None
        if ChatVLM._token_aligned(value, rows, ids.shape[1]):
            tokens.add(key)
        elif value.shape[0] == by_item[-1]:  # one entry per image (or, when equal, per patch: one each)
            spans[key] = by_item
        elif by_patch is not None and value.shape[0] == by_patch[-1]:
            spans[key] = by_patch
        else:
            return None
    return _Processed(enc, frozenset(tokens), spans)


def _log_probs(logits: Any, picks: Sequence[tuple[int, int, int]]) -> list[float]:
    """``log_softmax(logits[b, c])[t]`` for each ``(b, c, t)`` of ``picks``, normalised only where read."""
    import torch

    b, c, t = (torch.tensor(x, device=logits.device) for x in zip(*picks, strict=True))
    return torch.log_softmax(logits[b, c].float(), dim=-1).gather(1, t[:, None])[:, 0].tolist()


class AnswerChooser:
    """Asks a chat VLM which candidate matches a K x K case, in the wording of the case's question style
    (:data:`CHOICE_STYLES`): spotdiff's own lettered questions in both candidate orders (EqBen Sec. 5.5:
    MLLMs are evaluated by their answers, and the order of the captions matters), or a benchmark's
    authors' questions, once (VisMin, ColorSwap).

    For a case of K images x K texts (K <= 26), :func:`choice_questions`:

    * text questions, one per image ``i``: the image and the caption question listing the K captions
      (spotdiff: :data:`CHOICE_TEXT_QUESTION`, options A, B, ...);
    * image questions, one per text ``j`` (only when the model takes several images): the K images
      in one prompt and the image question (spotdiff: :data:`CHOICE_IMAGE_QUESTION`, "A. Image 1", ...).

    The answer is read by option likelihood: the option whose label (its letter, or "First" / "Second")
    has the highest log-probability as the answer after the prompt (no sampling); a tie or NaN gives no
    answer. With ``generate > 0`` it is also read by greedy generation of up to ``generate`` tokens, read
    as the style's authors read it (spotdiff: :func:`parse_choice`); an unreadable answer gives none.

    :meth:`answer_choices` returns ``[n_questions, n_orders, n_readings]``: rows are the text questions
    (images in case order), then the image questions (texts in case order); axis 1 is the order
    (0: as in the case, 1: reversed, when the style asks both); axis 2 the reading (0: likelihood, 1:
    generation when asked). Values are the chosen candidate's index in the case's own order, NaN for no
    answer.

    Args:
        chat: the loaded chat VLM.
        system: a system turn, None for the template's own.
        generate: N > 0 also reads each answer by greedy generation of up to N tokens.
        multi_image: whether image questions may show several images (default: by the model type).
    """

    def __init__(
        self, chat: ChatVLM, *, system: str | None = None, generate: int = 0, multi_image: bool | None = None
    ) -> None:
        self.chat, self.system, self.generate = chat, system, int(generate)
        if self.generate < 0:
            raise ConfigError(f"generate must be >= 0 new tokens, got {generate}")
        self.multi_image = (chat.model_type not in SINGLE_IMAGE_MODEL_TYPES) if multi_image is None else multi_image

    def identity(self) -> dict[str, Any]:
        return {
            "text_question": CHOICE_TEXT_QUESTION,
            "image_question": CHOICE_IMAGE_QUESTION,
            "system": self.system,
            "generate": self.generate,
        }

    def cannot(self, need: str) -> str | None:
        """Why the ``choice`` need cannot be served (a single-image model), else None."""
        if need == "choice" and not self.multi_image:
            return (
                f"'which image' questions show several images in one prompt, and this {self.chat.model_type!r} "
                f"model is taken to accept one (spec option multi_image=yes overrides); protocol "
                f"'choice-text' asks the caption questions only"
            )
        return None

    def answer_choices(
        self, images: Sequence[Image.Image], texts: Sequence[str], *, image_questions: bool, style: str = "spotdiff"
    ) -> np.ndarray:
        """The choices of one K x K case (see the class docstring).

        Args:
            images: the case's K images.
            texts: its K texts.
            image_questions: also ask the image questions (the model must take several images).
            style: the question style, a name of :data:`CHOICE_STYLES`.
        """
        k = len(texts)
        if len(images) != k:
            raise ConfigError(f"answer-based questions need K images x K texts, got {len(images)} x {k}")
        if image_questions and not self.multi_image:
            raise ConfigError(self.cannot("choice") or "")
        how = CHOICE_STYLES[style]
        questions = choice_questions(texts, image_questions, how)
        video = split_clips(images, self.chat.model_type)
        prompts = [self.chat.render(q.question, len(q.images), self.system, video=video) for q in questions]
        requests = [
            Request(q.images, prompt, self.chat.answer_ids(label))
            for q, prompt in zip(questions, prompts, strict=True)
            for label in q.labels
        ]
        lps = iter(self.chat.target_logprobs(images, requests))
        n_orders = len(how.orders(k))
        out = np.full((len(questions) // n_orders, n_orders, 2 if self.generate else 1), np.nan)
        for n, (q, prompt) in enumerate(zip(questions, prompts, strict=True)):
            row, o = divmod(n, n_orders)
            scores = np.array([next(lps).sum() for _ in q.labels])
            if not np.isnan(scores).any() and (scores == scores.max()).sum() == 1:
                out[row, o, 0] = q.order[int(scores.argmax())]
            if self.generate:
                answer = self.chat.generate([images[i] for i in q.images], prompt, self.generate)
                said = read_choice(how, q, texts, answer)
                out[row, o, 1] = np.nan if said is None else said
        return out
