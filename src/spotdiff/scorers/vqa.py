"""``vqa:NAME_OR_PATH``: VQAScore for any Hugging Face image-text-to-text chat model.

VQAScore (Lin et al. 2024; code: t2v_metrics) is the probability that the model answers "Yes" when
asked whether the image shows the text, through the model's own chat template
(:mod:`spotdiff.scorers.chat`). The formula and the spec options: docs/scorers.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.readers import ANSWER_READERS
from spotdiff.scorers.base import SCORERS, PairScorer, ScorerOptions
from spotdiff.scorers.chat import AnswerChooser, ChatVLM, NanCounter, Request
from spotdiff.scorers.lm import model_identity_digests, model_identity_sources, parse_spec_options
from spotdiff.scorers.video import processor_frame_rule, split_clips
from spotdiff.video.clips import FrameRule

__all__ = ["DEFAULT_ANSWER", "DEFAULT_QUESTION", "VQAScorer", "option_flag"]

#: t2v_metrics' default question template (``clip_t5_model.py``, ``llava_model.py``).
DEFAULT_QUESTION = 'Does this figure show "{}"? Please answer yes or no.'
#: t2v_metrics' default answer template.
DEFAULT_ANSWER = "Yes"


def option_flag(value: Any, name: str) -> bool:
    """A yes/no spec option (``yes``/``no``, ``true``/``false``, ``1``/``0``)."""
    text = str(value).strip().lower()
    if text in ("yes", "true", "1", "on"):
        return True
    if text in ("no", "false", "0", "off"):
        return False
    raise ConfigError(f"option {name}={value!r}: expected yes or no")


@SCORERS.register("vqa")
class VQAScorer(PairScorer):
    """VQAScore, P(answer) given the image and question(text), through the model's chat template."""

    #: at most; an instance without several-image input drops "choice" (see ``cannot``)
    capabilities = frozenset({"image-text", "match-prob", "choice-text", "choice", "answer-prob"})
    OPTIONS = ("question", "answer", "system", "reuse", "generate", "multi_image", "frames")

    def __init__(self, rest: str, options: ScorerOptions) -> None:
        super().__init__(f"vqa:{rest}", options)
        import torch

        self.name, opts = parse_spec_options(rest, options, self.OPTIONS)
        self.question = str(opts.get("question", DEFAULT_QUESTION))
        self.answer = str(opts.get("answer", DEFAULT_ANSWER))
        self.system = opts.get("system")
        for what, template in (("question", self.question), ("answer", self.answer)):
            try:
                template.format("text")
            except (IndexError, KeyError, ValueError) as exc:
                raise ConfigError(f"{what} template {template!r}: use {{}} for the text ({exc})") from exc
        if "{}" not in self.question:
            raise ConfigError(f"question template {self.question!r} has no {{}} for the text")
        self.reuse = option_flag(opts.get("reuse", "yes"), "reuse")
        try:
            generate = int(opts.get("generate", 0))
        except ValueError as exc:
            raise ConfigError(f"option generate={opts.get('generate')!r}: expected a number of tokens") from exc
        multi = opts.get("multi_image")
        self.chat = ChatVLM.load(self.name, options, "vqa model")
        self.chat.render("probe")  # a model without a chat template fails here, before any data
        self.chooser = AnswerChooser(
            self.chat,
            system=self.system,
            generate=generate,
            multi_image=None if multi is None else option_flag(multi, "multi_image"),
        )
        self.capabilities = frozenset(
            {"image-text", "match-prob", "choice-text", "answer-prob"}
            | ({"choice"} if self.chooser.multi_image else set())
        )
        self.nans = NanCounter(self.spec)
        self.rule = processor_frame_rule(self.chat.processor, opts, self.spec)
        torch.manual_seed(options.seed)

    # -- identity ------------------------------------------------------------------------------
    @cached_property
    def _digests(self) -> dict[str, str | None]:
        return model_identity_digests(self.name, self.chat.config)

    def sources(self) -> list[Path]:
        return model_identity_sources(self.name)

    def identity(self) -> dict[str, Any]:
        return {
            "spec": f"vqa:{self.name}",  # every option that changes scores is its own field below
            "class": type(self.chat.model).__name__,
            **self._digests,
            "question": self.question,
            "answer": self.answer,
            "system": self.system,
            "chat_template": self.chat.processor.chat_template,
            "choice": self.chooser.identity(),
            "device": self.chat.device,
            "dtype": str(self.chat.dtype).replace("torch.", ""),
        }

    def frame_rule(self) -> FrameRule | None:
        """A model whose processor takes videos sees these frames of a clip (spec option ``frames``), through
        the chat template's video input; None for a model of images."""
        return self.rule

    def cannot(self, need: str) -> str | None:
        """Why a protocol need cannot be served (used in the capability error), else None."""
        return self.chooser.cannot(need)

    # -- scoring -------------------------------------------------------------------------------
    def requests(self, texts_per_image: Sequence[Sequence[str]], video: bool = False) -> list[Request]:
        """One request per (image, text): the rendered question and the answer's tokens.

        Args:
            texts_per_image: each image's texts.
            video: the images are clips (the chat template's video input).
        """
        answers = [[self.answer.format(t) for t in texts] for texts in texts_per_image]
        targets = {a: self.chat.answer_ids(a) for a in dict.fromkeys(a for row in answers for a in row)}
        return [
            Request((i,), self._render(self.question.format(t), video), targets[a])
            for i, (texts, row) in enumerate(zip(texts_per_image, answers, strict=True))
            for t, a in zip(texts, row, strict=True)
        ]

    def _render(self, question: str, video: bool) -> str:
        """``question`` about one image (or clip) in the model's chat template."""
        return self.chat.render(question, 1, self.system, video=video)

    def score_pairs(self, images: Sequence[Image.Image], texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """VQAScore of each image's texts, in [0, 1] (NaN where the model's logits were NaN)."""
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} images but {len(texts)} text lists")
        lps = self.chat.target_logprobs(images, self.requests(texts, split_clips(images, self.spec)), reuse=self.reuse)
        flat = np.array([np.exp(lp.mean()) for lp in lps], dtype=np.float64)
        self.nans.check(flat, self.chat.dtype)
        out, k = [], 0
        for ts in texts:
            out.append(flat[k : k + len(ts)])
            k += len(ts)
        return out

    def answer_choices(
        self, images: Sequence[Image.Image], texts: Sequence[str], need: str, style: str = "spotdiff"
    ) -> np.ndarray:
        """Answer-based choices of one K x K case (:class:`~spotdiff.scorers.chat.AnswerChooser`).

        Args:
            images: the case's K images.
            texts: its K texts.
            need: ``"choice"`` (caption and image questions) or ``"choice-text"`` (caption questions only).
            style: the question style (:data:`~spotdiff.readers.CHOICE_STYLES`), the case's tag ``prompts``.
        """
        return self.chooser.answer_choices(images, texts, image_questions=need == "choice", style=style)

    def answer_scores(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[Sequence[str]],
        answers: Sequence[str],
        reader: str = "words",
    ) -> list[np.ndarray]:
        """Per image, ``[n_questions, n_answers (+ 1)]``: ``log P(answer | image, question)`` of each
        candidate answer (the question asked as it is, through the chat template), and with spec option
        ``generate=N`` a last column: the candidate a greedy answer of up to N tokens gives, read by
        ``reader`` (:data:`~spotdiff.readers.ANSWER_READERS`), NaN when it gives none.

        Args:
            images: the images.
            questions: each image's questions.
            answers: the candidate answers (``("Yes", "No")``, ``("A", "B")``).
            reader: how a generated answer is read, a name of :data:`~spotdiff.readers.ANSWER_READERS`.
        """
        if len(images) != len(questions):
            raise ValueError(f"{len(images)} images but {len(questions)} question lists")
        chat, n, read = self.chat, len(answers), ANSWER_READERS[reader]
        video = split_clips(images, self.spec)
        prompts = [[self._render(q, video) for q in qs] for qs in questions]
        targets = [chat.answer_ids(a) for a in answers]
        requests = [Request((i,), p, t) for i, ps in enumerate(prompts) for p in ps for t in targets]
        lps = np.array([lp.sum() for lp in chat.target_logprobs(images, requests, reuse=self.reuse)])
        self.nans.check(lps, chat.dtype)
        texts = self._generated(images, prompts) if self.chooser.generate else None
        out, k = [], 0
        for i, ps in enumerate(prompts):
            block = lps[k : k + len(ps) * n].reshape(len(ps), n)
            k += len(ps) * n
            if texts is not None:
                said = [read(text, answers) for text in texts[i]]
                block = np.column_stack([block, [np.nan if a is None else a for a in said]])
            out.append(block)
        return out

    def answer_texts(self, images: Sequence[Image.Image], questions: Sequence[Sequence[str]]) -> list[list[str]]:
        """Per image, the greedy answer (spec option ``generate=N``: up to N tokens) to each of its questions,
        as :meth:`answer_scores` reads them (what ``--judge`` grades).

        Args:
            images: the images.
            questions: each image's questions, each asked as it is, with the image alone.
        """
        if not self.chooser.generate:
            raise ConfigError(f"{self.spec} generates no answers: give the spec option generate=N (N new tokens)")
        video = split_clips(images, self.spec)
        return self._generated(images, [[self._render(q, video) for q in qs] for qs in questions])

    def _generated(self, images: Sequence[Image.Image], prompts: Sequence[Sequence[str]]) -> list[list[str]]:
        """The greedy answers of up to ``generate`` tokens to each image's rendered prompts."""
        return [
            [self.chat.generate([image], p, self.chooser.generate) for p in ps]
            for image, ps in zip(images, prompts, strict=True)
        ]
