"""Answer-based accuracy of a chat VLM on a benchmark's own multiple-choice questions (MMVP, Tong et
al., CVPR 2024, Sec. 3): question accuracy and pair accuracy, a pair counting only when every question
of the case is answered right. The scores are ``answer-prob``'s (:class:`~spotdiff.protocols.vqa.AnswerProtocol`);
the layout and the metrics: docs/protocols.md.
"""

from __future__ import annotations

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS
from spotdiff.protocols.vqa import VERDICT_YES, AnswerProtocol, Readings, diagonal_readings, judge_outcomes


def _accuracy(correct: np.ndarray) -> tuple[float, float]:
    """``(pair, question)`` accuracy from which answers ``[image, question]`` are right."""
    return float(correct.all()), float(correct.mean())


@PROTOCOLS.register("answer")
class QuestionAccuracy(AnswerProtocol):
    """Question and pair accuracy of a chat VLM's answers to a case's questions about its images (MMVP
    Sec. 3; lmms-eval's mmvp_accuracy is the question accuracy).

    Scores are ``answer-prob``'s ``[n_images, n_questions, n_answers (+ 1)]``: the candidate option
    letters' log-probabilities, and (when asked) the generated answer's option, NaN when it names none.

    >>> from spotdiff.cases import ArrayImage
    >>> images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    >>> tags = {"subset": "s", "answers": "A/B", "reader": "letter"}
    >>> case = Case("p", ("Feet visible?\\nA. Yes\\nB. No",), np.array([[True], [False]]), images, tags)
    >>> says_a = np.array([[[-0.1, -2.0]], [[-0.2, -1.5]]])  # [image, question, answer]
    >>> out = QuestionAccuracy().outcomes(case, says_a)[0]
    >>> out["pair"], out["question"], out["no_answer"]
    (0.0, 0.5, 0.0)
    """

    metrics = (
        "pair", "question", "no_answer", "gen_pair", "gen_question", "unparsed",
        "judge_pair", "judge_question", "judge_unparsed", "judge_failed",
    )  # fmt: skip
    description = (
        "MMVP Sec. 3 answer-based pair accuracy (every question of a pair right) and question accuracy of a "
        "chat VLM; no answer fails"
    )

    def readings(self, case: Case, scores: np.ndarray) -> Readings:
        """:meth:`AnswerProtocol.readings` of the questions asked: every image is asked a case's one
        question; a case with one question per image (an MMVP pair whose rows differ) asks image ``i``
        question ``i`` only, so each reading is its diagonal, ``[image, 1]``.

        Args:
            case: a question case.
            scores: its ``[n_images, n_questions, n_answers (+ 1 (+ 1))]`` scores.
        """
        readings = super().readings(case, scores)
        n_images, n_questions = readings.gold.shape
        if n_questions == 1:
            return readings
        if n_questions != n_images:
            raise DataError(f"case {case.id}: protocol {self.name!r} asks one question of every image or one "
                            f"per image; got {n_images} images x {n_questions} questions")  # fmt: skip
        return diagonal_readings(readings)

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        r = self.readings(case, scores)
        pair, question = _accuracy(r.said == r.gold)  # NaN (no answer) is wrong
        out = {"pair": pair, "question": question, "no_answer": float(np.isnan(r.said).mean())}
        if r.generated is not None:
            gen_pair, gen_question = _accuracy(r.generated == r.gold)
            out.update(gen_pair=gen_pair, gen_question=gen_question, unparsed=float(np.isnan(r.generated).mean()))
        if r.judged is not None:  # the judge's "yes" is a right answer; anything else is not
            judge_pair, judge_question = _accuracy(r.judged == VERDICT_YES)
            out.update(judge_pair=judge_pair, judge_question=judge_question, **judge_outcomes(r))
        return [out]
