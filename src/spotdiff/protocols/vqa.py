"""NaturalBench's answer-based scores of 2 images x 2 questions (Li et al., NeurIPS 2024).

Each (question, image) is answered by the candidate answers' log-probabilities (the likelihood
reading) and, when asked, by a generated answer read by the authors' ``extract_answer`` (the
generation reading). Acc, Q-Acc, I-Acc and G-Acc follow the authors' ``get_scores``
(naturalbench_vqa.py, github.com/Baiqi-Li/NaturalBench, commit 9967605); the definitions and the
score layout: docs/protocols.md.
"""

from __future__ import annotations

import numpy as np

from spotdiff.cases import Case, case_answers
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, Protocol, beats
from spotdiff.protocols.choice import asked_readings

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


def _scores(answers: np.ndarray, gold: np.ndarray, yes: int | None) -> dict[str, float]:
    """Acc, Q-Acc, I-Acc, G-Acc of one case (``answers`` and ``gold`` ``[image, question]``) and its
    yes rate (NaN unless its questions are yes/no), as get_scores counts them."""
    correct = answers == gold  # NaN (no answer) is wrong, as extract_answer's -1 is
    q_acc = correct.all(axis=0).mean()  # each question right on both images
    i_acc = correct.all(axis=1).mean()  # each image's both questions right
    return {
        "acc": float(correct.mean()),
        "q_acc": float(q_acc),
        "i_acc": float(i_acc),
        "g_acc": float(correct.all()),
        "yes_rate": float(np.mean(answers == yes)) if yes is not None else float("nan"),
    }


@PROTOCOLS.register("naturalbench")
class NaturalBenchScores(Protocol):
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

    needs = "answer-prob"
    metrics = (
        "acc", "q_acc", "i_acc", "g_acc", "yes_rate",
        "gen_acc", "gen_q_acc", "gen_i_acc", "gen_g_acc", "gen_yes_rate", "unparsed",
    )  # fmt: skip
    description = (
        "NaturalBench Acc, Q-Acc, I-Acc, G-Acc (the authors' get_scores) on 2 images x 2 questions, answered "
        "by candidate likelihood (and by generation when asked); no answer fails"
    )

    def _checked(self, case: Case, scores: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
        answers = case_answers(case)
        s = np.asarray(scores, dtype=np.float64)
        n = len(answers)
        if case.truth.shape != (2, 2) or s.shape[:2] != (2, 2) or s.ndim != 3 or s.shape[2] not in (n, n + 1):
            raise DataError(
                f"case {case.id}: protocol {self.name!r} expects 2 images x 2 questions and scores of shape "
                f"(2, 2, {n} or {n + 1}), got {case.truth.shape} and {s.shape}"
            )
        return s, answers

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        s, answers = self._checked(case, scores)
        n = len(answers)
        gold = np.where(case.truth, 0.0, 1.0)
        yes = _yes_index(answers)
        out = _scores(question_answers(s[..., :n], self.ties), gold, yes)
        if s.shape[2] == n + 1:
            gen = _scores(s[..., n], gold, yes)
            out.update({f"gen_{m}": v for m, v in gen.items()})
            out["unparsed"] = float(np.isnan(s[..., n]).mean())
        return [out]

    def answer_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(answers, unparseable)`` of the generation reading, when asked.

        Args:
            case: the case.
            scores: its ``[2, 2, n_answers (+ 1)]`` scores.
        """
        s, answers = self._checked(case, scores)
        if s.shape[2] != len(answers) + 1:
            return None
        return s[..., -1].size, int(np.isnan(s[..., -1]).sum())

    def yes_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(answers, "yes" answers)`` of the likelihood reading of a case of yes/no questions.

        Args:
            case: the case.
            scores: its ``[2, 2, n_answers (+ 1)]`` scores.
        """
        s, answers = self._checked(case, scores)
        yes = _yes_index(answers)
        if yes is None:
            return None
        said = question_answers(s[..., : len(answers)], self.ties)
        return said.size, int((said == yes).sum())

    def aggregate(self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray]) -> dict[str, float]:
        return super().aggregate(_asked(values), groups)

    def aggregate_resamples(
        self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray], idx: np.ndarray
    ) -> dict[str, np.ndarray]:
        """:meth:`Protocol.aggregate_resamples`, leaving out the generation reading when none was asked.

        Args:
            values: metric -> per-unit values.
            groups: tag -> per-unit tag values.
            idx: ``[B, n]`` unit indices, one resample per row.
        """
        return super().aggregate_resamples(_asked(values), groups, idx)


def _asked(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`~spotdiff.protocols.choice.asked_readings`, and without the yes rates when no case had
    yes/no questions."""
    return {
        m: v
        for m, v in asked_readings(values).items()
        if not (m.endswith("yes_rate") and np.isnan(np.asarray(v, dtype=float)).all())
    }
