"""Answer-based minimal-pair evaluation of chat VLMs, with both candidate orders (EqBen Sec. 5.5).

From a chat VLM's answers (:class:`spotdiff.scorers.chat.AnswerChooser`) to caption and image questions
asked in the case's order and reversed: text, image and group scores per order (EqBen Table 7), order
consistency and unanswered questions. The score layout and the metrics: docs/protocols.md.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from spotdiff.cases import ANY_OPTION, Case
from spotdiff.errors import DataError
from spotdiff.protocols.base import PROTOCOLS, Protocol
from spotdiff.protocols.group import _permutation


def right(choices: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Which answers are right: the true candidate, or :data:`~spotdiff.cases.ANY_OPTION` (an answer naming every
    option, which its benchmark's authors count right); NaN (no answer) is wrong.

    >>> right(np.array([0.0, 1.0, -2.0, np.nan]), np.array([0, 0, 1, 1])).tolist()
    [True, False, True, False]
    """
    return (choices == truth) | (choices == ANY_OPTION)


def _reading(choices: np.ndarray, truth: np.ndarray, k: int, image_questions: bool) -> dict[str, float]:
    """Metrics of one reading: ``choices`` [n_questions, 2] (NaN = no answer), ``truth`` [n_questions]."""
    correct = right(choices, truth[:, None])
    text = correct[:k]
    out = {
        "text": float(text.all()),
        "consistency": float(np.mean(choices[:, 0] == choices[:, 1])),
        "no_answer": float(np.isnan(choices).mean()),
    }
    if not image_questions:
        out.update(text_orig=float(text[:, 0].all()), text_swap=float(text[:, 1].all()))
        return out
    image = correct[k:]
    both = text.all(axis=0) & image.all(axis=0)  # per order
    out.update(
        image=float(image.all()),
        group=float(text.all() and image.all()),
        group_orig=float(both[0]),
        group_swap=float(both[1]),
    )
    return out


def asked_readings(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The unit values without the generation reading's metrics (and a judge's) when no case had one."""
    return {
        m: v
        for m, v in values.items()
        if not (
            (m.startswith(("gen_", "judge_")) or m == "unparsed") and np.isnan(np.asarray(v, dtype=float)).all()
        )
    }


class ReadingsProtocol(Protocol):
    """Base of the answer-based protocols: a metric of the generation reading (``gen_*``, ``unparsed``)
    is aggregated only when some case had that reading (:meth:`asked`)."""

    def asked(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The metrics to aggregate: :func:`asked_readings` (a subclass may leave out more)."""
        return asked_readings(values)

    def aggregate(self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray]) -> dict[str, float]:
        return super().aggregate(self.asked(values), groups)

    def aggregate_resamples(
        self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray], idx: np.ndarray
    ) -> dict[str, np.ndarray]:
        """:meth:`Protocol.aggregate_resamples` of the metrics :meth:`asked` keeps.

        Args:
            values: metric -> per-unit values.
            groups: tag -> per-unit tag values.
            idx: ``[B, n]`` unit indices, one resample per row.
        """
        return super().aggregate_resamples(self.asked(values), groups, idx)


@PROTOCOLS.register("choice")
class AnswerChoice(ReadingsProtocol):
    """Text / image / group scores from a chat VLM's answers in both orders (EqBen Sec. 5.5).

    A 2 x 2 case whose model always answers "A" (the first option) gets every question right in
    one order and wrong in the other:

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    >>> case = Case("c", ("a mug in some grass", "some grass in a mug"), np.eye(2), images, {"subset": "s"})
    >>> says_a = np.array([[0, 1], [0, 1], [0, 1], [0, 1]], float)[..., None]  # orig: A = 0; swap: A = 1
    >>> out = AnswerChoice().outcomes(case, says_a)[0]
    >>> out["text"], out["group_orig"], out["group_swap"], out["consistency"], out["no_answer"]
    (0.0, 0.0, 0.0, 0.0, 0.0)
    >>> right = np.array([[0, 0], [1, 1], [0, 0], [1, 1]], float)[..., None]
    >>> out = AnswerChoice().outcomes(case, right)[0]
    >>> out["text"], out["image"], out["group"], out["consistency"]
    (1.0, 1.0, 1.0, 1.0)
    """

    needs = "choice"
    image_questions: ClassVar[bool] = True
    metrics = (
        "text", "image", "group", "group_orig", "group_swap", "consistency", "no_answer",
        "gen_text", "gen_image", "gen_group", "gen_group_orig", "gen_group_swap", "gen_consistency", "unparsed",
    )  # fmt: skip
    description = (
        "EqBen Sec. 5.5 answer-based text/image/group scores of a chat VLM, both candidate orders, "
        "order consistency; no answer fails"
    )

    #: the orders each question is asked in: 2 (both candidate orders, EqBen Sec. 5.5) or 1 (once)
    orders: ClassVar[int] = 2
    #: what a wrong shape of answers suggests, after the expected shape
    shape_hint: ClassVar[str] = ""

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        t_of = _permutation(case)  # true text of each image
        k = len(t_of)
        truth = np.concatenate([t_of, np.argsort(t_of)]) if self.image_questions else t_of
        c = np.asarray(scores, dtype=np.float64)
        if c.ndim != 3 or c.shape[:2] != (len(truth), self.orders) or c.shape[2] not in (1, 2):
            raise DataError(
                f"case {case.id}: protocol {self.name!r} expects answers of shape ({len(truth)}, {self.orders}, "
                f"1 or 2), got {c.shape}{self.shape_hint}"
            )
        out: dict[str, Any] = self.read(c[..., 0], truth, k)
        if c.shape[2] == 2:
            gen = self.read(c[..., 1], truth, k)
            gen["unparsed"] = gen.pop("no_answer")
            out.update({m if m == "unparsed" else f"gen_{m}": v for m, v in gen.items()})
        return [out]

    def read(self, answers: np.ndarray, truth: np.ndarray, k: int) -> dict[str, Any]:
        """One reading's outcomes from its answers, ``[n_questions, orders]``."""
        return _reading(answers, truth, k, self.image_questions)

    def tied_units(self, case: Case, scores: np.ndarray, outcomes: list[dict[str, float]]) -> list[bool]:
        """The likelihood reading gives no answer on a tie of the options' log-probabilities (or NaN):
        the case's unit is tied when any of its questions has no likelihood answer.

        Args:
            case: the case.
            scores: its answers, ``[n_questions, 2, n_readings]``.
            outcomes: its outcomes (unused: the answers say it).
        """
        return [bool(np.isnan(np.asarray(scores, dtype=np.float64)[..., 0]).any())]

    def nan_scores(self, case: Case, scores: np.ndarray) -> bool:
        """Always False: these scores are answers, and NaN is an unanswered question (a tie of the options'
        log-probabilities, or NaN ones, of which the chat scorer warns: ``NanCounter``), counted in
        ``no_answer`` and ``unparsed``.

        Args:
            case: the case.
            scores: its answers, ``[n_questions, 2, n_readings]``.
        """
        return False

    def answer_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(answers, unparseable)`` of the generation reading, when asked (``generate > 0``).

        Args:
            case: the case.
            scores: its answers, ``[n_questions, 2, n_readings]``.
        """
        c = np.asarray(scores, dtype=np.float64)
        if c.ndim != 3 or c.shape[2] != 2:
            return None
        return c[..., 1].size, int(np.isnan(c[..., 1]).sum())

@PROTOCOLS.register("choice-text")
class AnswerChoiceText(AnswerChoice):
    """The caption questions of :class:`AnswerChoice` only (models that take one image per prompt)."""

    needs = "choice-text"
    image_questions = False
    metrics = (
        "text", "text_orig", "text_swap", "consistency", "no_answer",
        "gen_text", "gen_text_orig", "gen_text_swap", "gen_consistency", "unparsed",
    )  # fmt: skip
    description = "EqBen Sec. 5.5 answer-based text score of a chat VLM, both caption orders, order consistency"


def _one_order(choices: np.ndarray, truth: np.ndarray, k: int, image_questions: bool) -> dict[str, float]:
    """Metrics of one reading of questions asked once: ``choices`` [n_questions] (NaN = no answer)."""
    correct = right(choices, truth)
    out = {"text": float(correct[:k].all()), "no_answer": float(np.isnan(choices).mean())}
    if image_questions:
        out.update(image=float(correct[k:].all()), group=float(correct.all()))
    return out


@PROTOCOLS.register("mllm")
class AuthorsChoice(AnswerChoice):
    """Text / image / group scores of a chat VLM asked a benchmark's authors' questions, once, in the
    case's order (VisMin's ``compute_mllm_score_itg``, ColorSwap's ``vlm_eval.py``): the text score needs
    every caption question right, the image score every image question, the group score both. The case's
    tag ``prompts`` names the wording and how answers are read (:data:`spotdiff.cases.PROMPT_STYLES`).

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> images = (ArrayImage(np.zeros((2, 2, 3), np.uint8)), ArrayImage(np.ones((2, 2, 3), np.uint8)))
    >>> tags = {"subset": "s", "prompts": "vismin-authors"}
    >>> case = Case("c", ("a red cup", "a blue cup"), np.eye(2), images, tags)
    >>> said = np.array([[0, 0], [1, np.nan], [0, -2], [1, 1]], float)[:, None, :]  # [question, order, reading]
    >>> out = AuthorsChoice().outcomes(case, said)[0]  # -2: an answer naming both options, right as the authors read it
    >>> out["group"], out["gen_text"], out["gen_image"], out["unparsed"]
    (1.0, 0.0, 1.0, 0.25)
    """

    metrics = ("text", "image", "group", "no_answer", "gen_text", "gen_image", "gen_group", "unparsed")
    description = (
        "the authors' MLLM questions of VisMin and ColorSwap (their wording, asked once): text, image and group "
        "score of a chat VLM's answers; no answer fails"
    )

    orders = 1
    shape_hint = " (questions asked once: does its tag prompts name a style asked in both orders?)"

    def read(self, answers: np.ndarray, truth: np.ndarray, k: int) -> dict[str, Any]:
        return _one_order(answers[:, 0], truth, k, self.image_questions)


@PROTOCOLS.register("mllm-text")
class AuthorsChoiceText(AuthorsChoice):
    """The caption questions of :class:`AuthorsChoice` only (models that take one image per prompt)."""

    needs = "choice-text"
    image_questions = False
    metrics = ("text", "no_answer", "gen_text", "unparsed")
    description = "the authors' MLLM caption questions of VisMin and ColorSwap (asked once): text score"
