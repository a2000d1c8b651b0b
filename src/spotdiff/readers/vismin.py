"""VisMin's choice questions and its reading of their answers (github.com/rabiulcste/vismin, commit 29ce2c0):
the question style ``vismin`` (:data:`VISMIN`), moved here from ``spotdiff.scorers.chat`` (issue 43).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from spotdiff.cases import LETTERS
from spotdiff.readers.choice import ChoiceStyle, first_second, letters

__all__ = ["VISMIN", "vismin_matches"]


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


def _read_vismin(output: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    """The one label VisMin's ``is_match_with_label`` finds in the answer; None for none or several."""
    found = [k for k, label in enumerate(labels) if vismin_matches(output, label)]
    return found[0] if len(found) == 1 else None


def _vismin_text(options: Sequence[str]) -> str:
    """VisMin's ``TaskPrompts.get_text_task_prompt`` (evals/dataset_zoo/task_prompts.py, commit 29ce2c0)."""
    listed = ", ".join(f"({LETTERS[i]}) {c}" if i < len(options) - 1 else f"or ({LETTERS[i]}) {c}"
                       for i, c in enumerate(options))  # fmt: skip
    return f"Does this image best match: {listed}? Choices: {', '.join(LETTERS[: len(options)])}."


#: VisMin's style (evals/dataset_zoo/task_prompts.py and evals/metrics/itm.py ``is_match_with_label``), asked once
#: in the case's order; an answer that names both options or none is no answer.
VISMIN = ChoiceStyle(
    "vismin",
    _vismin_text,
    lambda text, k: f'Which image better aligns with the description: "{text}"? Choices: First, Second.',
    letters,
    first_second,
    False,
    _read_vismin,
    _read_vismin,
)
