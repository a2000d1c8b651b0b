"""Vinoground's readers of a generated answer, ``first-char`` (:func:`read_first_char`, the default) and
``first-char-lists`` (:func:`read_first_char_lists`); moved here from ``spotdiff.scorers.chat`` (issue 43).

Vinoground's ``get_score_all.py`` (github.com/Vinoground/Vinoground, commit 2602b94) reads
``response[0][:len(gt)]`` for every model (its ``if "qwen" or "ma-lmm" in model`` is always true), so what it
reads depends on how the authors' script saved the answer: ``eval/llava-onevision.py`` saves the decoded string
(commit 7d38b03: ``response=text_outputs[0]``), so ``response[0]`` is its first character and an empty answer
raises an IndexError that the pair's ``except: continue`` swallows, leaving the rest of the pair unscored;
``eval/qwen.py`` saves the list ``batch_decode`` returns (``response=output_text``), so ``response[0]`` is the whole
answer, and an empty one is only a wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from spotdiff.cases import EMPTY_ANSWER

__all__ = ["read_first_char", "read_first_char_lists"]


def read_first_char(output: str, answers: Sequence[str]) -> int | None:
    """The candidate a generated answer's first character names, case-insensitive, as Vinoground's
    ``get_score_all.py`` reads an answer saved as a string (``response[0][:len(gt)].lower() == gt.lower()``,
    github.com/Vinoground/Vinoground, commit 2602b94; the strings of ``eval/llava-onevision.py``) and lmms-eval's
    vinoground task (``pred[0].lower() == gt.lower()``); nothing is stripped. None when it names none;
    :data:`EMPTY_ANSWER` for an empty answer (it stops the pair's scoring there).

    Args:
        output: the generated text.
        answers: the candidate answers, ``("A", "B")``.

    >>> [read_first_char(t, ("A", "B")) for t in ("B", "a. the first", " A", "The answer is A", "")]
    [1, 0, None, None, -1]
    """
    if not output:
        return EMPTY_ANSWER
    return next((k for k, a in enumerate(answers) if output[: len(a)].lower() == a.lower()), None)


def read_first_char_lists(output: str, answers: Sequence[str]) -> int | None:
    """:func:`read_first_char` as ``get_score_all.py`` reads an answer saved as a list (``eval/qwen.py``'s
    ``batch_decode`` output, commit 7d38b03: ``response[0]`` the answer, ``[:len(gt)]`` its first character): an
    empty answer names no candidate (a wrong answer), and the pair is scored on.

    Args:
        output: the generated text.
        answers: the candidate answers, ``("A", "B")``.

    >>> [read_first_char_lists(t, ("A", "B")) for t in ("b. the second", "")]
    [1, None]
    """
    return read_first_char(output, answers) if output else None
