"""The choice path's questions: how a K x K case is asked as multiple-choice questions, and how an answer is read.

:class:`ChoiceStyle` declares one question style (its caption and image questions, its option labels, whether
both candidate orders are asked, and how a generated answer is read); :data:`SPOTDIFF` is spotdiff's own (EqBen
Sec. 5.5, the option letter read strictly by :func:`parse_choice`); :func:`choice_questions` asks a case in a
style and :func:`read_choice` reads an answer to one of them. Moved here from ``spotdiff.scorers.chat``
(issue 43): the styles are the benchmarks' rules, the scorers ask the questions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spotdiff.cases import ANY_OPTION, LETTERS
from spotdiff.errors import ConfigError

__all__ = [
    "CHOICE_IMAGE_QUESTION", "CHOICE_TEXT_QUESTION", "SPOTDIFF", "ChoiceQuestion", "ChoiceStyle", "choice_questions",
    "first_second", "letters", "parse_choice", "read_choice",
]  # fmt: skip

#: The caption question (one image, K lettered captions), after lmms-eval's multiple-choice wording.
CHOICE_TEXT_QUESTION = (
    "Which caption matches the image?\n{options}\nAnswer with the option's letter from the given choices directly."
)
#: The image question (K images in the prompt, one caption).
CHOICE_IMAGE_QUESTION = (
    'Which image matches the caption "{text}"?\n{options}\n'
    "Answer with the option's letter from the given choices directly."
)


_CHOICE = re.compile(r"^\(?([A-Z])\)?[.:]?$")


def parse_choice(answer: str, n_options: int) -> int | None:
    """The option index a generated answer names, read strictly: the letter alone, optionally in
    parentheses or followed by ``.`` / ``:`` (``"B"``, ``"(B)"``, ``"B."``); anything else is None.

    >>> parse_choice(" B. ", 2), parse_choice("(A)", 2), parse_choice("B is right", 2), parse_choice("C", 2)
    (1, 0, None, None)
    """
    m = _CHOICE.match(answer.strip())
    if m is None:
        return None
    index = LETTERS.index(m.group(1))
    return index if index < n_options else None


@dataclass(frozen=True)
class ChoiceStyle:
    """How one benchmark's authors ask a K x K case's caption and image questions and read the answers.

    Attributes:
        name: the style's name (a case's tag ``prompts``, :data:`spotdiff.cases.PROMPT_STYLES`).
        text_question: the caption question, from the options in the order asked.
        image_question: the image question, from the caption (the images shown in the order asked).
        text_labels: the caption options' names, as the likelihood reading scores them (A, B, ...).
        image_labels: the image options' names (``A``, ``B`` or ``First``, ``Second``).
        both_orders: ask every question in the case's order and reversed (EqBen Sec. 5.5), or once.
        read_text: the option position a caption question's answer names (from the answer, the options
            in the order asked and their labels), None for none.
        read_image: the same for an image question.
    """

    name: str
    text_question: Callable[[Sequence[str]], str]
    image_question: Callable[[str, int], str]
    text_labels: Callable[[int], tuple[str, ...]]
    image_labels: Callable[[int], tuple[str, ...]]
    both_orders: bool
    read_text: Callable[[str, Sequence[str], Sequence[str]], int | None]
    read_image: Callable[[str, Sequence[str], Sequence[str]], int | None]

    def orders(self, k: int) -> tuple[tuple[int, ...], ...]:
        """The candidate orders each question is asked in: the case's, and reversed when ``both_orders``."""
        case = tuple(range(k))
        return (case, tuple(reversed(case))) if self.both_orders else (case,)


def letters(k: int) -> tuple[str, ...]:
    """The option letters of ``k`` candidates: ``("A", "B", ...)``."""
    return tuple(LETTERS[:k])


def first_second(k: int) -> tuple[str, ...]:
    """The labels of the authors' image questions, which compare two images: ``("First", "Second")``."""
    if k != 2:
        raise ConfigError(f"the authors' image questions compare two images (First, Second), got {k}")
    return ("First", "Second")


def _read_letter_choice(output: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    return parse_choice(output, len(options))


#: spotdiff's own style: EqBen Sec. 5.5's both orders, :data:`CHOICE_TEXT_QUESTION`, :data:`CHOICE_IMAGE_QUESTION`,
#: the letter alone (:func:`parse_choice`).
SPOTDIFF = ChoiceStyle(
    "spotdiff",
    lambda options: CHOICE_TEXT_QUESTION.format(options="\n".join(f"{LETTERS[p]}. {c}" for p, c in enumerate(options))),
    lambda text, k: CHOICE_IMAGE_QUESTION.format(
        text=text, options="\n".join(f"{LETTERS[p]}. Image {p + 1}" for p in range(k))
    ),
    letters,
    letters,
    True,
    _read_letter_choice,
    _read_letter_choice,
)


@dataclass(frozen=True)
class ChoiceQuestion:
    """One question of the choice path: the images shown (indices into the case's), the question, the
    candidates in the order asked (indices into the case's texts, or images), their labels, and whether it
    asks about a caption (``text``) or an image."""

    images: tuple[int, ...]
    question: str
    order: tuple[int, ...]
    labels: tuple[str, ...]
    kind: str


def choice_questions(texts: Sequence[str], image_questions: bool, style: ChoiceStyle) -> list[ChoiceQuestion]:
    """The questions of a K x K case in ``style``: per image its caption question, in each order; then
    (``image_questions``) per caption its image question, in each order (docs/protocols.md).

    Args:
        texts: the case's K captions.
        image_questions: also ask which image matches each caption (several images in one prompt).
        style: how the questions are worded and read.
    """
    k = len(texts)
    if not 2 <= k <= len(LETTERS):
        raise ConfigError(f"answer-based questions need K x K candidates (2 <= K <= {len(LETTERS)}), got K = {k}")
    orders = style.orders(k)
    out = [
        ChoiceQuestion((i,), style.text_question([texts[c] for c in order]), order, style.text_labels(k), "text")
        for i in range(k)
        for order in orders
    ]
    if image_questions:
        out += [
            ChoiceQuestion(order, style.image_question(texts[j], k), order, style.image_labels(k), "image")
            for j in range(k)
            for order in orders
        ]
    return out


def read_choice(style: ChoiceStyle, question: ChoiceQuestion, texts: Sequence[str], output: str) -> int | None:
    """The candidate (an index in the case's order) a generated answer to ``question`` names, None for none, or
    :data:`~spotdiff.cases.ANY_OPTION` for every one (a style whose authors count such an answer right).

    Args:
        style: the question's style.
        question: the question answered.
        texts: the case's captions.
        output: the generated answer.
    """
    read = style.read_text if question.kind == "text" else style.read_image
    options = [texts[c] for c in question.order] if question.kind == "text" else list(question.labels)
    said = read(output, options, question.labels)
    if said is None or said == ANY_OPTION:  # none, or every option (whatever their order)
        return said
    return question.order[said]
