"""Answer-based scores of a chat VLM on question cases: each (image, question) answered among the
case's candidate answers (need ``answer-prob``), and NaturalBench's scores of 2 images x 2 questions
(Li et al., NeurIPS 2024).

Each (question, image) is answered by the candidate answers' log-probabilities (the likelihood
reading) and, when asked, by a generated answer read as the benchmark's authors read it (the
generation reading; the case's reader, :func:`spotdiff.cases.case_reader`). :class:`AnswerProtocol`
holds what every protocol on these scores shares (the shape check, the tie rule, the generation
column); NaturalBench's Acc, Q-Acc, I-Acc and G-Acc follow the authors' ``get_scores``
(naturalbench_vqa.py, github.com/Baiqi-Li/NaturalBench, commit 9967605); the definitions and the
score layout: docs/protocols.md.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from spotdiff.cases import EMPTY_ANSWER, Case, case_answers, case_pairs
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, beats
from spotdiff.protocols.choice import ReadingsProtocol, asked_readings

#: The candidate answer whose share of a case's answers is its ``yes_rate``.
YES = "yes"


def _yes_index(answers: tuple[str, ...]) -> int | None:
    """The index of the candidate "Yes" (any case), None when the questions are not yes/no."""
    return next((k for k, a in enumerate(answers) if a.lower() == YES), None)


def question_answers(lps: np.ndarray, ties: str) -> np.ndarray:
    """The answer (candidate index, NaN for none) of each ``lps[..., :]`` row of candidate
    log-probabilities: the candidate that beats every other under the tie rule (``strict``: a tie gives
    no answer; ``argmax``: the candidate listed first, "Yes" or "A").

    Args:
        lps: ``[..., n_answers]`` log-probabilities.
        ties: ``"strict"`` or ``"argmax"``.

    >>> question_answers(np.array([[-1.0, -2.0], [-3.0, -3.0]]), "strict").tolist()
    [0.0, nan]
    >>> question_answers(np.array([[-3.0, -3.0]]), "argmax").tolist()
    [0.0]
    """
    flat = lps.reshape(-1, lps.shape[-1])
    every = np.arange(lps.shape[-1])
    out = np.full(flat.shape[0], np.nan)
    for r, row in enumerate(flat):
        for c in every:
            if beats(row, np.array([c]), np.delete(every, c), ties):
                out[r] = c
                break
    return out.reshape(lps.shape[:-1])


#: A judge's verdict on a generated answer, in the judged column of ``answer-prob`` scores: right, wrong,
#: no reply (a failure). A reply that is not a verdict is NaN (unparsed).
VERDICT_YES, VERDICT_NO, VERDICT_FAILED = 1.0, 0.0, -1.0


class Readings(NamedTuple):
    """The readings of a question case's answers, each ``[image, question]``: the likelihood answers and
    the generated ones (candidate indices, NaN: no answer), the gold answers, and the judge's verdicts on
    the generated answers (:data:`VERDICT_YES` ...; NaN: unparsed), None when not asked."""

    said: np.ndarray
    generated: np.ndarray | None
    gold: np.ndarray
    judged: np.ndarray | None


def judge_outcomes(readings: Readings) -> dict[str, float]:
    """The judge's shares of a case: ``judge_unparsed`` (replies that are not a verdict) and
    ``judge_failed`` (no reply), of its judged answers; empty when no judge was asked.

    Args:
        readings: the case's readings.
    """
    if readings.judged is None:
        return {}
    verdicts = readings.judged
    return {
        "judge_unparsed": float(np.isnan(verdicts).mean()),
        "judge_failed": float((verdicts == VERDICT_FAILED).mean()),
    }


class AnswerProtocol(ReadingsProtocol):
    """A protocol on ``answer-prob`` scores, ``[n_images, n_questions, n_answers (+ 1 (+ 1))]`` per question
    case: ``truth[i, q]`` True when the first candidate answers question ``q`` about image ``i``. The
    likelihood reading is :func:`question_answers` under the protocol's tie rule, the generation reading
    (when asked) the next column, the read candidate's index or NaN, and a judge's verdicts on the
    generated answers (``--judge``) the last; :meth:`readings` gives them."""

    needs = "answer-prob"
    #: the (n_images, n_questions) the protocol's cases must have, None for any
    case_shape: tuple[int, int] | None = None

    def checked(self, case: Case, scores: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
        """The case's scores as float64 and its candidate answers; a DataError for a wrong shape.

        Args:
            case: a question case.
            scores: its ``[n_images, n_questions, n_answers (+ 1)]`` scores.
        """
        answers = case_answers(case)
        s = np.asarray(scores, dtype=np.float64)
        n = len(answers)
        shape = case.truth.shape if self.case_shape is None else self.case_shape
        if case.truth.shape != shape or s.ndim != 3 or s.shape[:2] != shape or s.shape[2] not in (n, n + 1, n + 2):
            raise DataError(
                f"case {case.id}: protocol {self.name!r} expects {shape[0]} images x {shape[1]} questions and "
                f"scores of shape ({shape[0]}, {shape[1]}, {n} to {n + 2}), got {case.truth.shape} and {s.shape}"
            )
        return s, answers

    def readings(self, case: Case, scores: np.ndarray) -> Readings:
        """The likelihood answers, the generated ones and the judge's verdicts (when asked) and the gold
        answers, each ``[image, question]`` (:class:`Readings`).

        Args:
            case: a question case.
            scores: its ``[n_images, n_questions, n_answers (+ 1 (+ 1))]`` scores.
        """
        s, answers = self.checked(case, scores)
        n = len(answers)
        generated = s[..., n] if s.shape[2] > n else None
        judged = s[..., n + 1] if s.shape[2] > n + 1 else None
        return Readings(question_answers(s[..., :n], self.ties), generated, np.where(case.truth, 0.0, 1.0), judged)

    def nan_scores(self, case: Case, scores: np.ndarray) -> bool:
        """Whether a candidate answer's log-probability of a question asked is NaN (:func:`~spotdiff.cases.
        case_pairs`: the cells of pairs not asked are NaN; the generation column's NaN is an answer that names
        no candidate, counted as unparseable instead).

        Args:
            case: the case.
            scores: its ``[n_images, n_questions, n_answers (+ 1)]`` scores.
        """
        s, answers = self.checked(case, scores)
        asked = tuple(np.array(case_pairs(case)).T)
        return bool(np.isnan(s[asked][:, : len(answers)]).any())

    def answer_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(answers, unparseable)`` of the generation reading, when asked.

        Args:
            case: the case.
            scores: its ``[n_images, n_questions, n_answers (+ 1)]`` scores.
        """
        generated = self.readings(case, scores).generated
        if generated is None:
            return None
        return generated.size, int((np.isnan(generated) | (generated == EMPTY_ANSWER)).sum())

    def judge_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int, int, int, int] | None:
        """``(judged, unparsed, failed, compared, agreed)`` of the judge's verdicts on the generated answers,
        when asked: ``compared`` the verdicts that are yes or no, ``agreed`` those that say what the case's
        reader says (the answer right or wrong).

        Args:
            case: the case.
            scores: its ``[n_images, n_questions, n_answers + 2]`` scores.
        """
        r = self.readings(case, scores)
        if r.judged is None:
            return None
        verdict = r.judged
        compared = (verdict == VERDICT_YES) | (verdict == VERDICT_NO)
        agreed = compared & ((verdict == VERDICT_YES) == (r.generated == r.gold))
        failed = int((verdict == VERDICT_FAILED).sum())
        return verdict.size, int(np.isnan(verdict).sum()), failed, int(compared.sum()), int(agreed.sum())


def diagonal_readings(readings: Readings) -> Readings:
    """The readings of question ``i`` about image ``i`` only (a case that asks each image its own question), each
    ``[image, 1]``.

    Args:
        readings: a case's readings, ``[n, n]`` each.
    """
    mine = np.arange(readings.gold.shape[0])
    return Readings(*(None if r is None else r[mine, mine][:, None] for r in readings))


def _scores(correct: np.ndarray) -> dict[str, float]:
    """Acc, Q-Acc, I-Acc, G-Acc of one case from which answers are right (``[image, question]``), as
    get_scores counts them."""
    return {
        "acc": float(correct.mean()),
        "q_acc": float(correct.all(axis=0).mean()),  # each question right on both images
        "i_acc": float(correct.all(axis=1).mean()),  # each image's both questions right
        "g_acc": float(correct.all()),
    }


def _yes_rate(answers: np.ndarray, yes: int | None) -> float:
    """The share of ``answers`` that are "Yes" (NaN unless the questions are yes/no)."""
    return float(np.mean(answers == yes)) if yes is not None else float("nan")


@PROTOCOLS.register("naturalbench")
class NaturalBenchScores(AnswerProtocol):
    """NaturalBench Acc, Q-Acc, I-Acc and G-Acc of a case of 2 images x 2 questions (the authors' get_scores).

    ``truth[i, q]`` is True when question ``q``'s answer about image ``i`` is the first candidate
    (Yes / A). A model that answers "Yes" everywhere gets half the answers and no question right:

    >>> from spotdiff.cases import ArrayImage
    >>> images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    >>> tags = {"subset": "yes_no", "answers": "Yes/No"}
    >>> case = Case("c", ("Is it dark?", "Is it bright?"), np.eye(2), images, tags)
    >>> says_yes = np.tile(np.array([-0.1, -2.0]), (2, 2, 1))  # [image, question, answer]
    >>> out = NaturalBenchScores().outcomes(case, says_yes)[0]
    >>> out["acc"], out["q_acc"], out["i_acc"], out["g_acc"], out["yes_rate"]
    (0.5, 0.0, 0.0, 0.0, 1.0)
    """

    case_shape = (2, 2)
    metrics = (
        "acc", "q_acc", "i_acc", "g_acc", "yes_rate",
        "gen_acc", "gen_q_acc", "gen_i_acc", "gen_g_acc", "gen_yes_rate", "unparsed",
        "judge_acc", "judge_q_acc", "judge_i_acc", "judge_g_acc", "judge_unparsed", "judge_failed",
    )  # fmt: skip
    description = (
        "NaturalBench Acc, Q-Acc, I-Acc, G-Acc (the authors' get_scores) on 2 images x 2 questions, answered "
        "by candidate likelihood (and by generation when asked); no answer fails"
    )

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        r = self.readings(case, scores)
        yes = _yes_index(case_answers(case))
        out = {**_scores(r.said == r.gold), "yes_rate": _yes_rate(r.said, yes)}  # NaN (no answer) is wrong
        if r.generated is not None:
            out.update({f"gen_{m}": v for m, v in _scores(r.generated == r.gold).items()})
            out["gen_yes_rate"] = _yes_rate(r.generated, yes)
            out["unparsed"] = float(np.isnan(r.generated).mean())
        if r.judged is not None:  # the judge's "yes" is a right answer; anything else is not
            out.update({f"judge_{m}": v for m, v in _scores(r.judged == VERDICT_YES).items()})
            out.update(judge_outcomes(r))
        return [out]

    def yes_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(answers, "yes" answers)`` of the likelihood reading of a case of yes/no questions.

        Args:
            case: the case.
            scores: its ``[2, 2, n_answers (+ 1)]`` scores.
        """
        said = self.readings(case, scores).said
        yes = _yes_index(case_answers(case))
        if yes is None:
            return None
        return said.size, int((said == yes).sum())

    def asked(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """:func:`~spotdiff.protocols.choice.asked_readings`, and without the yes rates when no case had
        yes/no questions."""
        return {
            m: v
            for m, v in asked_readings(values).items()
            if not (m.endswith("yes_rate") and np.isnan(np.asarray(v, dtype=float)).all())
        }


def vinoground_outcome(right: np.ndarray, empty: np.ndarray) -> dict[str, float]:
    """One pair's text, video and group score from its four answers (in a case's order: the text-score questions
    on the pos and neg videos, then the video-score questions for the pos and neg captions): which are
    right, and which are empty, as Vinoground's get_score_all.py scores them (github.com/Vinoground/Vinoground,
    commit 2602b94): the text score needs both text questions right, the video score both video questions, the
    group score all four; an empty answer raises there (its pos answer's check is evaluated first and a wrong one
    skips its neg's), which leaves the rest of the pair unscored (an empty text answer: no video score either).

    Args:
        right: the four answers, right or not.
        empty: the four answers, empty or not.

    >>> vinoground_outcome(np.array([True] * 4), np.zeros(4, bool))
    {'text': 1.0, 'video': 1.0, 'group': 1.0}
    >>> vinoground_outcome(np.array([True, False, True, True]), np.array([False, True, False, False]))
    {'text': 0.0, 'video': 0.0, 'group': 0.0}
    """

    def both(first: int) -> tuple[bool, bool]:  # (right, stopped) of a question pair, as `a and b` runs
        if empty[first] or (right[first] and empty[first + 1]):
            return False, True
        return bool(right[first] and right[first + 1]), False

    text, stopped = both(0)
    if stopped:
        return {"text": 0.0, "video": 0.0, "group": 0.0}
    video, stopped = both(2)
    video = video and not stopped
    return {"text": float(text), "video": float(video), "group": float(text and video)}


@PROTOCOLS.register("vinoground")
class VinogroundScores(AnswerProtocol):
    """Vinoground's text, video and group score from a chat model's answers to the authors' four questions of a
    pair (text pos, text neg, video pos, video neg), each about its own video (the case's ``pairs`` tag is
    ``diagonal``: the other cells of its scores are NaN, never asked): read by the candidates' likelihood
    (``text``, ``video``, ``group``) and, when generated, by the answer's first character (``gen_*``,
    get_score_all.py's reading: :func:`vinoground_outcome`)."""

    case_shape = (4, 4)
    metrics = ("text", "video", "group", "gen_text", "gen_video", "gen_group", "unparsed")
    description = (
        "Vinoground text, video and group score from a chat VLM's answers to the authors' text-score and "
        "video-score questions (get_score_all.py), by candidate likelihood and by the generated answer"
    )

    def readings(self, case: Case, scores: np.ndarray) -> Readings:
        """The readings of the four questions asked, each about its own video (:func:`diagonal_readings`).

        Args:
            case: a vinoground-lmm case.
            scores: its ``[4, 4, n_answers (+ 1 (+ 1))]`` scores.
        """
        if case_pairs(case) != [(k, k) for k in range(4)]:
            raise DataError(f"case {case.id}: protocol 'vinoground' asks question k about video k (tag pairs=diagonal)")
        return diagonal_readings(super().readings(case, scores))

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        r = self.readings(case, scores)
        gold = r.gold[:, 0]
        out = vinoground_outcome(r.said[:, 0] == gold, np.zeros(4, dtype=bool))  # no answer (a tie, NaN) is wrong
        if r.generated is not None:
            said = r.generated[:, 0]
            out.update({f"gen_{m}": v for m, v in vinoground_outcome(said == gold, said == EMPTY_ANSWER).items()})
            out["unparsed"] = float(np.mean(np.isnan(said) | (said == EMPTY_ANSWER)))
        return [out]
