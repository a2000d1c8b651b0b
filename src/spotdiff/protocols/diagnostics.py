"""Per-run diagnostics next to the metrics: the tie rate, the unparseable share of answers, the yes
rate of yes/no questions, the cases with NaN scores, and the bag-of-words scope (issue 25).

* A unit is *tied* when a tie among the scores that decide it changes its outcome: its outcomes under
  the ``strict`` and ``argmax`` tie rules differ (:meth:`Protocol.tied_units`).
* The answer-based protocols count their answers and the unparseable ones
  (:meth:`Protocol.answer_counts`); those of yes/no questions count their "yes" answers
  (:meth:`Protocol.yes_counts`), so a yes-bias shows next to the accuracy; a judge's verdicts on the
  generated answers are counted (unparsed, failed) with the judge's agreement with the case's reader
  (:meth:`Protocol.judge_counts`).
* A case has *NaN scores* when its model gave NaN where a score is expected (:meth:`Protocol.nan_scores`):
  a diverged model, whose NaN would otherwise read as a real 0%.
* A case is *bag-of-words identical* when every negative text has the same multiset of words as a
  positive text of its row, so a bag-of-words model cannot tell them apart (sugar-crepe issue 10: 572
  of SugarCrepe's 7,511 pairs); its units form the scope :data:`BOW_SCOPE` of ``metrics.json`` when
  they are some but not all of the run's units (ARO's VG-Relation: all, the scope would repeat ``all``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spotdiff.cases import Case

#: How many ids of cases with NaN scores a run keeps (for its error, ``metrics.json`` and the table).
NAN_EXAMPLES = 5
#: The scope of the units whose case is bag-of-words identical, and the unit tag that marks them.
BOW_SCOPE = "bag_of_words_identical"
BOW_TAG = "bag_of_words"
_WORD = re.compile(r"\w+")


def word_bag(text: str) -> tuple[str, ...]:
    """The multiset of a text's words, as a sorted tuple: lowercased runs of letters, digits and ``_``
    (punctuation and spacing ignored).

    >>> word_bag("The dog bites the man.") == word_bag("the man bites the dog")
    True
    """
    return tuple(sorted(_WORD.findall(text.lower())))


def bag_of_words_identical(case: Case) -> bool:
    """True when, in every row of the case's truth, each false text has the words (as a multiset) of
    one of the row's true texts: no bag-of-words model can separate them.

    Args:
        case: the case; a case with no false text is not identical.
    """
    truth = np.asarray(case.truth, dtype=bool)
    if truth.all():
        return False
    bags: dict[int, tuple[str, ...]] = {}  # computed as needed: the first text that differs settles it

    def bag(j: int) -> tuple[str, ...]:
        if j not in bags:
            bags[j] = word_bag(case.texts[j])
        return bags[j]

    for row in truth.tolist():  # a case's few rows: Python lists beat numpy's call costs
        true_bags = [bag(j) for j, t in enumerate(row) if t]
        if any(bag(j) not in true_bags for j, t in enumerate(row) if not t):
            return False
    return True


@dataclass
class RunDiagnostics:
    """Counts gathered case by case over a run: cases and those with NaN scores (the first few of
    their ids), units, tied units, answers and unparseable answers, yes/no answers and "yes" answers."""

    units: int = 0
    tied: int = 0
    answers: int = 0
    unparseable: int = 0
    yes_no: int = 0
    yes: int = 0
    cases: int = 0
    nan_cases: int = 0
    nan_examples: list[str] = field(default_factory=list)
    #: the judge's verdicts: ``judged``, ``unparsed``, ``failed``, ``compared`` (yes or no), ``agreed``
    judge: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)

    def add(
        self,
        tied: list[bool],
        answers: tuple[int, int] | None,
        yes: tuple[int, int] | None = None,
        nan_case: str | None = None,
        judge: tuple[int, int, int, int, int] | None = None,
    ) -> None:
        """Count one case.

        Args:
            tied: per unit, whether a tie decides it.
            answers: ``(answers, unparseable)`` of an answer-based case, else None.
            yes: ``(yes/no answers, "yes" answers)`` of a case of yes/no questions, else None.
            nan_case: the case's id when its scores hold NaN (:meth:`Protocol.nan_scores`), else None.
            judge: a judge's ``(judged, unparsed, failed, compared, agreed)`` (:meth:`Protocol.judge_counts`).
        """
        self.cases += 1
        if nan_case is not None:
            self.nan_cases += 1
            if len(self.nan_examples) < NAN_EXAMPLES:
                self.nan_examples.append(nan_case)
        self.units += len(tied)
        self.tied += sum(tied)
        if answers is not None:
            self.answers += answers[0]
            self.unparseable += answers[1]
        if yes is not None:
            self.yes_no += yes[0]
            self.yes += yes[1]
        if judge is not None:
            self.judge = tuple(a + b for a, b in zip(self.judge, judge, strict=True))  # type: ignore[assignment]

    def as_json(self) -> dict[str, Any]:
        """The ``metrics.json`` keys, in percent: ``tie_rate`` (and ``n_tied_units``), ``n_nan_cases``
        (and, when some, ``nan_rate`` and ``nan_cases``, the first few ids), and for an answer-based run
        ``unparseable_rate`` (and ``n_answers``), and for a run with yes/no questions ``yes_rate`` (and
        ``n_yes_no_answers``), and for a judged run ``judge_agreement`` (the judge's verdicts that say what
        the case's reader says, of its yes or no verdicts) and ``judge_verdicts``.

        >>> RunDiagnostics(units=8, tied=2).as_json()
        {'tie_rate': 25.0, 'n_tied_units': 2, 'n_nan_cases': 0}
        >>> RunDiagnostics(units=4, cases=4, nan_cases=1, nan_examples=["c3"]).as_json()["nan_rate"]
        25.0
        >>> RunDiagnostics(units=2, yes_no=8, yes=6).as_json()["yes_rate"]
        75.0
        """
        out: dict[str, Any] = {"tie_rate": 100.0 * self.tied / self.units if self.units else None}
        out["n_tied_units"] = self.tied
        out["n_nan_cases"] = self.nan_cases
        if self.nan_cases:
            out["nan_rate"] = 100.0 * self.nan_cases / self.cases
            out["nan_cases"] = list(self.nan_examples)
        if self.answers:
            out["unparseable_rate"] = 100.0 * self.unparseable / self.answers
            out["n_answers"] = self.answers
        if self.yes_no:
            out["yes_rate"] = 100.0 * self.yes / self.yes_no
            out["n_yes_no_answers"] = self.yes_no
        judged, unparsed, failed, compared, agreed = self.judge
        if judged:
            out["judge_verdicts"] = {"judged": judged, "unparsed": unparsed, "failed": failed, "compared": compared,
                                     "agreed": agreed}  # fmt: skip
            out["judge_agreement"] = 100.0 * agreed / compared if compared else None
        return out


def diagnostic_notes(diagnostics: dict[str, Any] | None) -> list[str]:
    """Table footer lines for the keys of :meth:`RunDiagnostics.as_json`.

    >>> diagnostic_notes({"tie_rate": 25.0, "n_tied_units": 2})
    ['tie rate: 25.00% of units have a tie among the scores that decide them (2)']
    """
    if not diagnostics or diagnostics.get("tie_rate") is None:
        return []
    lines = [
        f"tie rate: {diagnostics['tie_rate']:.2f}% of units have a tie among the scores that decide them "
        f"({diagnostics['n_tied_units']})"
    ]
    if diagnostics.get("n_nan_cases"):
        lines.append(
            f"NaN scores: {diagnostics['n_nan_cases']} cases ({diagnostics['nan_rate']:.2f}%) scored as failures "
            f"(--nan-as-failure; first: {', '.join(diagnostics['nan_cases'])})"
        )
    if "unparseable_rate" in diagnostics:
        lines.append(f"unparseable answers: {diagnostics['unparseable_rate']:.2f}% of {diagnostics['n_answers']}")
    if "yes_rate" in diagnostics:
        lines.append(f"yes rate: {diagnostics['yes_rate']:.2f}% of {diagnostics['n_yes_no_answers']} yes/no answers")
    if "judge_verdicts" in diagnostics:
        v, agreement = diagnostics["judge_verdicts"], diagnostics["judge_agreement"]
        agrees = "no yes/no verdict" if agreement is None else f"agrees with the reader on {agreement:.2f}%"
        lines.append(f"judge: {v['judged']} answers judged, {v['unparsed']} verdicts unparsed, {v['failed']} failed; "
                     f"{agrees} of {v['compared']}")  # fmt: skip
    return lines
