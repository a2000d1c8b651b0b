"""NaturalBench's reader of a generated answer, ``words`` (:func:`extract_answer`); moved here from
``spotdiff.scorers.chat`` (issue 43).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["extract_answer"]


def extract_answer(output: str, answers: Sequence[str]) -> int | None:
    """The candidate answer a generated text gives, read as NaturalBench's ``extract_answer``
    (naturalbench_vqa.py, github.com/Baiqi-Li/NaturalBench, commit 9967605): the candidate whose
    first whole-word, case-insensitive occurrence comes earliest; None when no candidate occurs.

    The authors' code reads two candidates, ``("yes", "no")`` or ``("A", "B")``, and returns 1 for the
    first, 0 for the second, -1 for none; this returns the candidate's index (0, 1) or None.

    Args:
        output: the generated text.
        answers: the candidate answers, in order.

    >>> extract_answer("No, it is not. Yes?", ("Yes", "No")), extract_answer("Nope", ("Yes", "No"))
    (1, None)
    >>> extract_answer("It is a cat, so B", ("A", "B"))  # the article "a" is the word A
    0
    """
    found = [re.search(r"\b" + re.escape(a) + r"\b", output, re.IGNORECASE) for a in answers]
    starts = [(m.start(), k) for k, m in enumerate(found) if m is not None]
    return min(starts)[1] if starts else None
