"""Answer-based accuracy of a chat VLM on a benchmark's own multiple-choice questions, one per image
(MMVP, Tong et al., CVPR 2024, Sec. 3): question accuracy and pair accuracy, a pair counting only
when every question of the case is answered right. The score layout and the metrics: docs/protocols.md.
"""

from __future__ import annotations

import numpy as np

from spotdiff.cases import Case
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, Protocol
from spotdiff.protocols.choice import asked_readings


def chosen(scores: np.ndarray, ties: str) -> np.ndarray:
    """Per row of ``scores`` ``[n_questions, n_options]``, the option with the highest score, -1 for none.

    A row with a NaN has no answer; a tie for the highest score has none under ``"strict"`` and goes to
    the first tied option under ``"argmax"`` (``np.argmax``).

    Args:
        scores: one row of option scores per question.
        ties: ``"strict"`` or ``"argmax"``.

    >>> chosen(np.array([[0.1, 0.9], [0.5, 0.5], [np.nan, 1.0]]), "strict").tolist()
    [1, -1, -1]
    >>> chosen(np.array([[0.5, 0.5]]), "argmax").tolist()
    [0]
    """
    s = np.asarray(scores, dtype=np.float64)
    out = np.full(s.shape[0], -1, dtype=np.int64)
    for q, row in enumerate(s):
        if np.isnan(row).any():
            continue
        top = np.flatnonzero(row == row.max())
        if top.size == 1 or ties == "argmax":
            out[q] = top[0]
    return out


@PROTOCOLS.register("answer")
class QuestionAccuracy(Protocol):
    """Question and pair accuracy of a chat VLM's answers to each image's question (MMVP Sec. 3).

    Scores are ``[n_images, n_options, n_readings]``: reading 0 the option letters' log-probabilities,
    reading 1 (when asked) the greedy answer's option as 1, NaN when it names none.

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    >>> case = Case("p", ("Yes", "No"), np.eye(2), images, {"subset": "s"}, questions=("Feet visible?",) * 2)
    >>> says_yes = np.array([[-0.1, -2.0], [-0.2, -1.5]])[..., None]
    >>> out = QuestionAccuracy().outcomes(case, says_yes)[0]
    >>> out["pair"], out["question"], out["no_answer"]
    (0.0, 0.5, 0.0)
    """

    needs = "answer"
    metrics = ("pair", "question", "no_answer", "gen_pair", "gen_question", "unparsed")
    description = (
        "MMVP Sec. 3 answer-based pair accuracy (every question of a pair right) and question accuracy of a "
        "chat VLM; no answer fails"
    )

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        if not case.questions:
            raise DataError(f"case {case.id}: protocol {self.name!r} needs a question per image")
        gold = case.truth.argmax(axis=1)
        c = np.asarray(scores, dtype=np.float64)
        if c.ndim != 3 or c.shape[:2] != case.truth.shape or c.shape[2] not in (1, 2):
            raise DataError(
                f"case {case.id}: protocol {self.name!r} expects option scores of shape "
                f"({case.truth.shape[0]}, {case.truth.shape[1]}, 1 or 2), got {c.shape}"
            )
        said = chosen(c[..., 0], self.ties)
        out = {"pair": float((said == gold).all()), "question": float((said == gold).mean()),
               "no_answer": float((said < 0).mean())}  # fmt: skip
        if c.shape[2] == 2:
            gen = chosen(c[..., 1], "strict")
            out.update(gen_pair=float((gen == gold).all()), gen_question=float((gen == gold).mean()),
                       unparsed=float((gen < 0).mean()))  # fmt: skip
        return [out]

    def answer_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(answers, unparseable)`` of the generation reading, when asked (``generate > 0``).

        Args:
            case: the case.
            scores: its option scores, ``[n_images, n_options, n_readings]``.
        """
        c = np.asarray(scores, dtype=np.float64)
        if c.ndim != 3 or c.shape[2] != 2:
            return None
        return c.shape[0], int(np.isnan(c[..., 1]).any(axis=1).sum())

    def aggregate(self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray]) -> dict[str, float]:
        return super().aggregate(asked_readings(values), groups)

    def aggregate_resamples(
        self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray], idx: np.ndarray
    ) -> dict[str, np.ndarray]:
        """:meth:`Protocol.aggregate_resamples`, leaving out the generation reading when none was asked.

        Args:
            values: metric -> per-unit values.
            groups: tag -> per-unit tag values.
            idx: ``[B, n]`` unit indices, one resample per row.
        """
        return super().aggregate_resamples(asked_readings(values), groups, idx)
