"""Vinoground's reader of a generated answer, ``first-char`` (:func:`read_first_char`); moved here from
``spotdiff.scorers.chat`` (issue 43).
"""

from __future__ import annotations

from collections.abc import Sequence

from spotdiff.cases import EMPTY_ANSWER

__all__ = ["read_first_char"]


def read_first_char(output: str, answers: Sequence[str]) -> int | None:
    """The candidate a generated answer's first character names, case-insensitive, as Vinoground's
    ``get_score_all.py`` reads it (``response[0][:len(gt)].lower() == gt.lower()``, github.com/Vinoground/
    Vinoground, commit 2602b94) and lmms-eval's vinoground task (``pred[0].lower() == gt.lower()``); nothing is
    stripped. None when it names none; :data:`EMPTY_ANSWER` for an empty answer.

    Args:
        output: the generated text.
        answers: the candidate answers, ``("A", "B")``.

    >>> [read_first_char(t, ("A", "B")) for t in ("B", "a. the first", " A", "The answer is A", "")]
    [1, 0, None, None, -1]
    """
    if not output:
        return EMPTY_ANSWER
    return next((k for k, a in enumerate(answers) if output[: len(a)].lower() == a.lower()), None)
