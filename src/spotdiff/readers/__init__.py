"""The benchmarks' rules for asking a chat model and reading its answers, each by the name a case's tag gives.

A benchmark declaration names its reader (tag ``reader``, :data:`spotdiff.cases.READERS`) or its question style (tag
``prompts``, :data:`spotdiff.cases.PROMPT_STYLES`); this is the one place those names are resolved:
:data:`ANSWER_READERS` (NaturalBench's ``words``, MMVP's ``letter``, ``letter-lmms-eval`` and ``letter-lmms-corrected``,
Vinoground's ``first-char`` and ``first-char-lists``) and :data:`CHOICE_STYLES` (spotdiff's own, VisMin's two readings,
ColorSwap's). One module per benchmark's
authors' rules, :mod:`spotdiff.readers.choice` the choice path's questions. Moved here from
``spotdiff.scorers.chat`` (issue 43): a scorer family is only the model and reaches these rules by name, through
this package and the choice path's machinery (a ``lint-imports`` contract: it imports no benchmark's module); a
new benchmark's reader is a module here and a line below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from spotdiff.readers.choice import SPOTDIFF, ChoiceStyle
from spotdiff.readers.colorswap import COLORSWAP
from spotdiff.readers.mmvp import read_letter, read_letter_corrected, read_letter_lmms_eval
from spotdiff.readers.naturalbench import extract_answer
from spotdiff.readers.vinoground import read_first_char, read_first_char_lists
from spotdiff.readers.vismin import VISMIN_AUTHORS, VISMIN_STRICT

__all__ = ["ANSWER_READERS", "CHOICE_STYLES"]

#: The readers of generated answers by the names of :data:`spotdiff.cases.READERS`: the candidate's
#: index, None when the text gives none.
ANSWER_READERS: dict[str, Callable[[str, Sequence[str]], int | None]] = {
    "words": extract_answer,
    "letter": read_letter,
    "letter-lmms-eval": read_letter_lmms_eval,
    "letter-lmms-corrected": read_letter_corrected,
    "first-char": read_first_char,
    "first-char-lists": read_first_char_lists,
}

#: The question styles of the choice path by name (:data:`spotdiff.cases.PROMPT_STYLES`): spotdiff's own
#: (EqBen Sec. 5.5's both orders, :data:`CHOICE_TEXT_QUESTION`, :data:`CHOICE_IMAGE_QUESTION`, the letter
#: alone), VisMin's (evals/dataset_zoo/task_prompts.py and evals/metrics/itm.py ``is_match_with_label``,
#: commit 29ce2c0: an answer naming both options right, as the authors read it, or no answer) and ColorSwap's (the
#: prompts of its vlm_results and vlm_eval.py's readers, commit 4f2c9e4: an answer naming both options or none
#: is no answer), each asked once in the case's order.
CHOICE_STYLES: dict[str, ChoiceStyle] = {
    style.name: style for style in (SPOTDIFF, VISMIN_AUTHORS, VISMIN_STRICT, COLORSWAP)
}
