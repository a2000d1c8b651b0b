"""MMVP's readers of a generated option letter: ``letter`` (the letter alone, :func:`read_letter`) and
``letter-lmms`` (in the order of lmms-eval's mmvp task, :func:`read_letter_lmms`); moved here from
``spotdiff.scorers.chat`` (issue 43).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from spotdiff.cases import LETTERS
from spotdiff.readers.choice import parse_choice

__all__ = ["read_letter", "read_letter_lmms"]


def read_letter(output: str, answers: Sequence[str]) -> int | None:
    """The candidate a generated answer names by its option letter, read strictly (:func:`parse_choice`:
    the letter alone, optionally ``(B)``, ``B.`` or ``B:``); the candidates are the letters A, B, ...
    (:func:`spotdiff.cases.case_reader`). MMVP's reader with ``-o reader=strict``.

    Args:
        output: the generated text.
        answers: the candidate answers, ``("A", "B", ...)``.

    >>> read_letter("(B)", ("A", "B")), read_letter("B, the second", ("A", "B"))
    (1, None)
    """
    return parse_choice(output, len(answers))


def read_letter_lmms(output: str, answers: Sequence[str]) -> int | None:
    """The option letter a generated answer gives, read in the order of lmms-eval's mmvp task
    (``_extract_answer_letter``, lmms_eval/tasks/mmvp/utils.py at commit 75571cfe), the first that
    matches: the letter alone (``"b"``, ``"(A)"``, ``"B."``); the letter opening the answer, in
    parentheses or followed by ``.``, ``)`` or ``:`` (``"(A) Left"``, ``"B. Right"``); ``"answer is B"``;
    ``"option A"``; any other standalone letter. None when no letter is given.

    lmms-eval matches every pattern case-insensitively, finds a letter at the end of any word and
    finally takes the answer's first character, so the article "a" and words' initials read as options
    ("It is a cat" and "Apple" are A there, "Bob" and "Both" B). Here a lower-case letter counts only
    alone or in parentheses, a letter only as a whole word, an "A" opening a sentence before a word in
    lower case that starts with a consonant is the article ("A dog sits on it."; "A answer", lmms-eval's
    own example, is option A), and there is no first-character fallback.

    Args:
        output: the generated text.
        answers: the candidate answers, ``("A", "B", ...)``.

    >>> [read_letter_lmms(t, ("A", "B")) for t in ("The answer is B", "Option A", "(a)", "b", "(A) Left")]
    [1, 0, 0, 1, 0]
    >>> [read_letter_lmms(t, ("A", "B")) for t in ("It is a cat", "Both", "A dog, so B", "Bob")]
    [None, None, 1, None]
    """
    text = output.strip()
    upper = "".join(LETTERS[: len(answers)])
    both = upper + upper.lower()
    either = rf"(?:\(([{both}])\)|([{upper}]))"  # a parenthesised letter of either case, or a capital
    patterns = (
        rf"^\(?([{both}])\)?[.:]?$",  # the letter alone
        rf"^(?:\(([{both}])\)|([{both}])[.):])(?:\s|$)",  # opening the answer, "(A) ...", "B. ..."
        rf"(?i:answer\s+is)\s*:?\s*{either}(?![\w'])",  # "answer is B"
        rf"(?i:option)\s+{either}(?![\w'])",  # "option A"
    )
    for pattern in patterns:
        m = re.search(pattern, text)
        if m:
            return upper.index(next(g for g in m.groups() if g).upper())
    for m in re.finditer(rf"\(([{both}])\)|(?<![\w'])([{upper}])(?![\w'])", text):
        if m.group(2) == "A" and re.match(_CONSONANT_WORD, text[m.end() :]) and _opens_sentence(text, m.start()):
            continue  # the article
        return upper.index((m.group(1) or m.group(2)).upper())
    return None


#: A word in lower case starting with a consonant, after white space (what the article "A" precedes).
_CONSONANT_WORD = r"\s+[b-df-hj-np-tv-z]"


def _opens_sentence(text: str, start: int) -> bool:
    """Whether position ``start`` of ``text`` opens a sentence (the text's start, or after ``.``, ``!``, ``?``)."""
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?"
