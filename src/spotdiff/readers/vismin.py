"""VisMin's choice questions and their readings (github.com/rabiulcste/vismin, commit 29ce2c0): the question styles
``vismin-authors`` (:data:`VISMIN_AUTHORS`, the authors' reading, VisMin's default) and ``vismin-strict``
(:data:`VISMIN_STRICT`), moved here from ``spotdiff.scorers.chat`` (issue 43), the authors' reading added in issue 45.

The authors' ``evals/mllm_inference.py`` matches each answer against its gold label only
(``is_match_with_label(prediction, label)``), so an answer that names both options ("A or B", "the first, not the
second") is right there whichever is gold: the authors' reading gives it :data:`~spotdiff.cases.ANY_OPTION`, which
the choice protocols count right. spotdiff's strict reading takes an answer naming both as no answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from spotdiff.cases import ANY_OPTION, LETTERS
from spotdiff.errors import ConfigError
from spotdiff.readers.choice import ChoiceStyle, first_second, letters

__all__ = ["VISMIN_AUTHORS", "VISMIN_STRICT", "vismin_matches"]


def _vismin_normalize(text: str) -> str:
    """VisMin's ``normalize_model_prediction`` (evals/metrics/itm.py, github.com/rabiulcste/vismin, commit
    29ce2c0): the text in the first parentheses, else a letter before ``)``, the first line, no punctuation,
    single spaces, lower case."""
    m = re.search(r"\((.*?)\)", text)
    if m:
        text = m.group(1)
    m = re.search(r"([A-Za-z])\)", text)
    if m:
        text = m.group(1)
    text = re.sub(r"[^\w\s]", "", text.split("\n")[0])
    return re.sub(r"\s+", " ", text).strip().lower()


def vismin_matches(output: str, label: str) -> bool:
    """VisMin's ``is_match_with_label``: the normalised label is a word of the normalised answer, the
    answer is the label, or it holds "answer <label>".

    >>> vismin_matches("(B) a red cup", "B"), vismin_matches("The first image", "First")
    (True, True)
    """
    out = _vismin_normalize(output)
    gold = _vismin_normalize(label)
    phrase = _vismin_normalize(f"ANSWER: {label}")
    return gold in out.split() or re.search(re.escape(phrase), out, re.IGNORECASE) is not None or gold == out


def _read_vismin_strict(output: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    """The one label VisMin's ``is_match_with_label`` finds in the answer; None for none or several."""
    found = [k for k, label in enumerate(labels) if vismin_matches(output, label)]
    return found[0] if len(found) == 1 else None


def _read_vismin_authors(output: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    """The label VisMin's ``is_match_with_label`` finds in the answer, as the authors count it: one label, that
    label; both (the authors' questions have two options, :func:`_two_letters`), :data:`ANY_OPTION` (right
    whichever is gold, as matching the gold label alone makes it); none, None.

    >>> _read_vismin_authors("A or B", ["a cup", "a mug"], ["A", "B"]), _read_vismin_authors("B", [], ["A", "B"])
    (-2, 1)
    """
    found = [k for k, label in enumerate(labels) if vismin_matches(output, label)]
    if len(found) == len(labels):
        return ANY_OPTION
    return found[0] if found else None


def _two_letters(k: int) -> tuple[str, ...]:
    """The caption options' letters, A and B: the authors' questions compare two captions (with two, an answer
    naming several options names every one, which :data:`ANY_OPTION` says exactly)."""
    if k != 2:
        raise ConfigError(f"VisMin's authors' questions compare two captions (A, B), got {k}")
    return letters(k)


def _vismin_text(options: Sequence[str]) -> str:
    """VisMin's ``TaskPrompts.get_text_task_prompt`` (evals/dataset_zoo/task_prompts.py, commit 29ce2c0)."""
    listed = ", ".join(f"({LETTERS[i]}) {c}" if i < len(options) - 1 else f"or ({LETTERS[i]}) {c}"
                       for i, c in enumerate(options))  # fmt: skip
    return f"Does this image best match: {listed}? Choices: {', '.join(LETTERS[: len(options)])}."


def _vismin_image(text: str, k: int) -> str:
    """VisMin's ``TaskPrompts.get_image_task_prompt`` (evals/dataset_zoo/task_prompts.py, commit 29ce2c0)."""
    return f'Which image better aligns with the description: "{text}"? Choices: First, Second.'


#: VisMin's style read as the authors read it (evals/dataset_zoo/task_prompts.py, evals/mllm_inference.py and
#: evals/metrics/itm.py ``is_match_with_label``), asked once in the case's order: an answer naming both options
#: is right (:data:`ANY_OPTION`), one naming none is no answer.
VISMIN_AUTHORS = ChoiceStyle(
    "vismin-authors", _vismin_text, _vismin_image, _two_letters, first_second, False, _read_vismin_authors,
    _read_vismin_authors,
)  # fmt: skip
#: VisMin's style read strictly (spotdiff's): an answer naming both options or none is no answer.
VISMIN_STRICT = ChoiceStyle(
    "vismin-strict", _vismin_text, _vismin_image, letters, first_second, False, _read_vismin_strict,
    _read_vismin_strict,
)  # fmt: skip
