"""MMVP's readers of a generated option letter: ``letter`` (the letter alone, :func:`read_letter`),
``letter-lmms-eval`` (lmms-eval's mmvp ``_extract_answer_letter`` transcribed with its quirks,
:func:`read_letter_lmms_eval`: the benchmark's default, so that its ``gen_*`` metrics are lmms-eval's) and
``letter-lmms-corrected`` (spotdiff's reading in lmms-eval's order, without its quirks, :func:`read_letter_corrected`);
moved here from ``spotdiff.scorers.chat`` (issue 43), the transcription added in issue 45.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from spotdiff.cases import LETTERS
from spotdiff.readers.choice import parse_choice

__all__ = ["read_letter", "read_letter_corrected", "read_letter_lmms_eval"]


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


#: lmms-eval's ``_extract_answer_letter`` patterns, verbatim (lmms_eval/tasks/mmvp/utils.py,
#: github.com/EvolvingLMMs-Lab/lmms-eval, commit d8fcb9c345fd89b22b4857244b3fdbb89206f8f5, unchanged at 75571cfe),
#: each searched case-insensitively in this order.
LMMS_EVAL_PATTERNS = (
    r"^\s*\(?([AB])\)?\.?\s*$",  # Just the letter with optional parens/period
    r"^\s*\(?([AB])\)?[\.\s]",  # Letter at start
    r"answer\s+is\s+\(?([AB])\)?",  # "answer is A/B"
    r"option\s+\(?([AB])\)?",  # "option A/B"
    r"\(?([AB])\)?(?:\s|$)",  # Any standalone A/B
)


def read_letter_lmms_eval(output: str, answers: Sequence[str]) -> int | None:
    """The option letter lmms-eval's mmvp task reads in a generated answer: its ``_extract_answer_letter``
    transcribed exactly, quirks included (:data:`LMMS_EVAL_PATTERNS` searched with ``re.IGNORECASE`` on the
    stripped answer, the first match's letter upper-cased; else the answer's first character when it is an
    A or a B of either case; else none), so that the benchmark's ``gen_question`` and ``gen_pair`` are
    lmms-eval's ``mmvp_accuracy`` and ``mmvp_pair_accuracy`` on the same answers. lmms-eval reads A and B
    only, so the candidates must be ``("A", "B")``.

    Its quirks (where :func:`read_letter_corrected` departs): the article "a" is option A anywhere ("It is a
    cat", "the answer is a dog"), so is an "A" opening a sentence ("A dog sits on the left, so B"); a word's
    first letter is an option ("Apple" A, "Both" B, through the first-character fallback); and so is a
    letter ending a word ("Bob sits" B, "Tab" B).

    Args:
        output: the generated text.
        answers: the candidate answers, ``("A", "B")``.

    >>> [read_letter_lmms_eval(t, ("A", "B")) for t in ("(b)", "It is a cat", "Both", "Bob sits", "Neither")]
    [1, 0, 1, 1, None]
    """
    if tuple(answers) != ("A", "B"):
        raise ValueError(f"lmms-eval's mmvp reader reads the letters A and B only, not {'/'.join(answers)}")
    text = output.strip()
    for pattern in LMMS_EVAL_PATTERNS:
        match = re.search(pattern, text, flags=re.IGNORECASE)
        if match:
            return "AB".index(match.group(1).upper())
    if text and text[0].upper() in ["A", "B"]:  # Fallback: check first character
        return "AB".index(text[0].upper())
    return None


def read_letter_corrected(output: str, answers: Sequence[str]) -> int | None:
    """The option letter a generated answer gives, read in the order of lmms-eval's mmvp task
    (:func:`read_letter_lmms_eval`) without its quirks, the first that matches: the letter alone (``"b"``,
    ``"(A)"``, ``"B."``); the letter opening the answer, in parentheses or followed by ``.``, ``)`` or ``:``
    (``"(A) Left"``, ``"B. Right"``); ``"answer is B"``; ``"option A"``; any other standalone letter. None
    when no letter is given.

    lmms-eval matches every pattern case-insensitively, finds a letter at the end of any word and
    finally takes the answer's first character, so the article "a" and words' initials read as options
    ("It is a cat" and "Apple" are A there, "Bob" and "Both" B). Here a lower-case letter counts only
    alone or in parentheses, a letter only as a whole word, an "A" opening a sentence before a word in
    lower case that starts with a consonant is the article ("A dog sits on it."; "A answer", lmms-eval's
    own example, is option A), and there is no first-character fallback.

    Args:
        output: the generated text.
        answers: the candidate answers, ``("A", "B", ...)``.

    >>> [read_letter_corrected(t, ("A", "B")) for t in ("The answer is B", "Option A", "(a)", "b", "(A) Left")]
    [1, 0, 0, 1, 0]
    >>> [read_letter_corrected(t, ("A", "B")) for t in ("It is a cat", "Both", "A dog, so B", "Bob")]
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
