"""The protocol interface: pure functions from a case's score matrix to per-unit outcomes.

A unit is what a metric averages over (a case, or a query); :func:`beats` is the one implementation of
both tie rules; ``aggregate`` and ``aggregate_resamples`` give the reported percentages and their
bootstrap resamples. Details: docs/protocols.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from spotdiff.cases import Case, check_ties
from spotdiff.errors import DataError
from spotdiff.registry import Registry, name_class

#: What a protocol needs from a scorer, and the score matrix the engine hands it:
#: "image-text": similarity ``[n_images, n_texts]``; "text-text": similarity ``[n_texts, n_texts]``;
#: "match-prob": match probability in [0, 1], ``[n_images, n_texts]``;
#: "text-prior": a text-only log-probability, ``[1, n_texts]``;
#: "choice" / "choice-text": a chat VLM's answers to lettered questions, ``[n_questions, 2, n_readings]``
#: (see :mod:`spotdiff.protocols.choice`);
#: "answer-prob": per image and question, the candidate answers' log-probabilities (and a generated
#: answer), ``[n_images, n_questions, n_answers (+ 1)]`` (see :mod:`spotdiff.protocols.vqa`; NaturalBench
#: and MMVP, :mod:`spotdiff.protocols.answer`).
NEEDS = ("image-text", "text-text", "match-prob", "text-prior", "choice", "choice-text", "answer-prob")


class Protocol(ABC):
    """Base class of every protocol; subclasses register with ``@PROTOCOLS.register(name)``.

    An instance holds its tie rule ``ties`` (:data:`spotdiff.cases.TIES`; docs/statistics.md says what each does).

    Class attributes:
        name: the registry name.
        needs: the score matrix it consumes (one of :data:`NEEDS`).
        metrics: every reported metric, in report order (per-unit means and derived ones).
        derived: the subset of ``metrics`` computed by :meth:`derive` from the others rather than
            averaged over units; these have no per-unit values.
        description: one line, with the paper and section it follows.
        ties_within_lines: True when every comparison the tie rule decides is between two entries of one
            row or of one column of the score matrix (then equal values elsewhere, such as the mirrored
            halves of a symmetric text-text matrix, cannot change an outcome).
    """

    name: ClassVar[str] = ""
    needs: ClassVar[str] = "image-text"
    metrics: ClassVar[tuple[str, ...]] = ()
    derived: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""
    ties_within_lines: ClassVar[bool] = False

    def __init__(self, ties: str = "strict") -> None:
        self.ties = check_ties(ties)

    # ----------------------------------------------------------------------------- per case
    @abstractmethod
    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        """Per-unit metric values for one case (one dict per unit)."""

    def unit_ids(self, case: Case, n_units: int) -> list[str]:
        """Names of a case's units; the case id when there is one unit."""
        return [case.id] if n_units == 1 else [f"{case.id}/{k}" for k in range(n_units)]

    def units(self, case: Case, scores: np.ndarray) -> list[tuple[str, dict[str, float]]]:
        """``(unit id, outcome)`` pairs for one case."""
        out = self.outcomes(case, scores)
        ids = self.unit_ids(case, len(out))
        if len(ids) != len(out):  # pragma: no cover - a protocol bug, not a data problem
            raise RuntimeError(f"protocol {self.name}: {len(ids)} unit ids for {len(out)} units")
        return list(zip(ids, out, strict=True))

    def tied_units(self, case: Case, scores: np.ndarray, outcomes: list[dict[str, float]]) -> list[bool]:
        """Per unit, whether a tie among the scores that decide it changes its outcome: its outcomes
        under the ``strict`` and ``argmax`` tie rules differ (the run's tie rate counts these).

        Args:
            case: the case.
            scores: its score matrix.
            outcomes: :meth:`outcomes` of the case under this protocol's own tie rule.
        """
        if _all_distinct(scores, self.ties_within_lines):  # the rules differ only where scores are equal
            return [False] * len(outcomes)
        other = type(self)("argmax" if self.ties == "strict" else "strict")
        return [
            any(not _same(value, alt.get(m)) for m, value in own.items())
            for own, alt in zip(outcomes, other.outcomes(case, scores), strict=True)
        ]

    def nan_scores(self, case: Case, scores: np.ndarray) -> bool:
        """Whether the model gave NaN where a score is expected (a diverged model, or float16 overflow):
        the run counts such cases and fails unless told to score them as failures (``--nan-as-failure``).

        Args:
            case: the case.
            scores: its score matrix.

        >>> Protocol.nan_scores(None, None, np.array([[0.3, np.nan]])), Protocol.nan_scores(None, None, [[0.3, 0.1]])
        (True, False)
        """
        return bool(np.isnan(np.asarray(scores, dtype=np.float64)).any())

    def answer_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(answers, unparseable answers)`` of an answer-based case; None for score-based protocols.

        Args:
            case: the case.
            scores: the answers the protocol reads.
        """
        return None

    def judge_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int, int, int, int] | None:
        """``(judged, unparsed, failed, compared, agreed)``: a judge's verdicts on a case's generated answers
        (``--judge``); None where no judge was asked or the protocol reads no generated answers.

        Args:
            case: the case.
            scores: the answers the protocol reads.
        """
        return None

    def yes_counts(self, case: Case, scores: np.ndarray) -> tuple[int, int] | None:
        """``(yes/no answers, "yes" answers)`` of a case of yes/no questions; None otherwise.

        Args:
            case: the case.
            scores: the scores the protocol reads.
        """
        return None

    @property
    def unit_metrics(self) -> tuple[str, ...]:
        """The metrics that have per-unit values (averaged over units)."""
        return tuple(m for m in self.metrics if m not in self.derived)

    # ----------------------------------------------------------------------------- aggregation
    def derive(self, means: dict[str, Any]) -> dict[str, Any]:
        """Derived metrics from the per-unit means (percentages).

        Must work elementwise, on floats and on ``[B]`` arrays alike (use ``np.minimum``, not
        ``min``). The default derives nothing.
        """
        return {}

    def aggregate(self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray]) -> dict[str, float]:
        """Reported metrics (percentages) from unit values.

        Args:
            values: metric name -> float array over units (NaN where undefined for a unit).
            groups: tag name -> array of the units' tag values (for macro averages); always holds
                ``"case"`` and ``"subset"``.
        """
        out: dict[str, Any] = {}
        for metric in self.unit_metrics:
            v = values.get(metric)
            if v is None:
                continue
            v = np.asarray(v, dtype=float)
            v = v[~np.isnan(v)]
            out[metric] = float(v.mean() * 100.0) if v.size else float("nan")
        for metric, value in self.derive(out).items():
            out[metric] = float(value)
        return {m: out[m] for m in self.metrics if m in out}

    def aggregate_resamples(
        self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray], idx: np.ndarray
    ) -> dict[str, np.ndarray]:
        """``aggregate`` for each row of ``idx`` (``[B, n]`` unit indices), as ``[B]`` arrays.

        The default is exact for mean metrics and their derivations and fully vectorised.

        Args:
            values: metric -> per-unit values.
            groups: tag -> per-unit tag values (``"case"``, ``"subset"``, the benchmark's tags).
            idx: ``[B, n]`` unit indices, one resample per row.
        """
        out: dict[str, Any] = {}
        counts: dict[bytes, np.ndarray] = {}  # resampled defined-unit counts, per NaN pattern
        for metric in self.unit_metrics:
            v = values.get(metric)
            if v is None:
                continue
            out[metric] = resampled_mean(np.asarray(v, dtype=float), idx, counts) * 100.0
        out.update(self.derive(out))
        return {m: np.asarray(out[m], dtype=float) for m in self.metrics if m in out}


def _same(a: Any, b: Any) -> bool:
    """Equal outcomes, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return bool(a == b)


def resampled_mean(v: np.ndarray, idx: np.ndarray, cache: dict[bytes, np.ndarray] | None = None) -> np.ndarray:
    """Mean of ``v`` over each row of ``idx`` ignoring NaN (NaN where a row has no defined unit).

    ``cache`` shares the per-row defined counts between metrics with the same NaN pattern.

    Args:
        v: per-unit values, NaN where undefined.
        idx: ``[B, n]`` unit indices.
        cache: per-row defined counts by NaN pattern, filled and reused across calls.
    """
    defined = ~np.isnan(v)
    if defined.all():
        return v[idx].mean(axis=1)
    filled = np.where(defined, v, 0.0)
    sums = filled[idx].sum(axis=1)
    key = np.packbits(defined).tobytes()
    counts = None if cache is None else cache.get(key)
    if counts is None:
        counts = defined[idx].sum(axis=1)
        if cache is not None:
            cache[key] = counts
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


# --------------------------------------------------------------------------------- helpers
def _all_distinct(scores: np.ndarray, within_lines: bool = False) -> bool:
    """Whether a score matrix is numeric, without NaN, and holds no two equal values (so no tie rule
    can change an outcome); with ``within_lines``, no two equal values in one row or one column.

    >>> _all_distinct(np.array([[0.1, 0.2], [0.3, 0.4]])), _all_distinct(np.array([0.1, 0.1]))
    (True, False)
    >>> symmetric = np.array([[1.0, 0.2], [0.2, 1.0]])
    >>> _all_distinct(symmetric), _all_distinct(symmetric, within_lines=True)
    (False, True)
    """
    try:
        values = np.asarray(scores, dtype=float)
    except (TypeError, ValueError):
        return False
    if np.isnan(values).any():
        return False
    if within_lines and values.ndim == 2 and values.size <= 256:  # a case's matrix: sets beat numpy's call costs
        rows = values.tolist()
        return all(len(set(line)) == len(line) for line in (*rows, *zip(*rows, strict=True)))
    if within_lines and values.ndim == 2:
        return all(bool((np.diff(np.sort(values, axis=a), axis=a) != 0).all()) for a in (0, 1))
    flat = values.ravel()
    return np.unique(flat).size == flat.size


def beats(scores: np.ndarray, pos: np.ndarray, neg: np.ndarray, ties: str) -> bool:
    """True when every candidate in ``pos`` wins against every candidate in ``neg``.

    ``scores`` is a 1-D vector over candidates in their published order, ``pos`` / ``neg`` index
    arrays into it. ``"strict"``: ``s[p] > s[n]``. ``"argmax"``: a tie goes to the candidate listed
    first, ``s[p] > s[n]`` when ``n`` comes before ``p`` and ``s[p] >= s[n]`` when it comes after
    (for one positive, exactly "``argmax(scores)`` is the positive"). A NaN score on either side loses.

    Args:
        scores: one score per candidate, in the published order.
        pos: indices of the true candidates.
        neg: indices of the false candidates.
        ties: ``"strict"`` or ``"argmax"``.

    >>> import numpy as np
    >>> s = np.array([0.5, 0.5, 0.1])
    >>> beats(s, np.array([0]), np.array([1, 2]), "strict"), beats(s, np.array([0]), np.array([1, 2]), "argmax")
    (False, True)
    >>> beats(s, np.array([1]), np.array([0, 2]), "argmax")  # the tied false candidate 0 is listed first
    False
    """
    sp = scores[pos][:, None]
    sn = scores[neg][None, :]
    with np.errstate(invalid="ignore"):
        ok = sp > sn
        if ties == "argmax":
            ok |= (sp == sn) & (np.asarray(pos)[:, None] < np.asarray(neg)[None, :])
    return bool(ok.all())


def as_scores(case: Case, scores: Any, shape: tuple[int, int], what: str) -> np.ndarray:
    """``scores`` as a float array of exactly ``shape``; a 1-D vector is accepted for one row.

    Args:
        case: the case the scores belong to (named in errors).
        scores: the score matrix the engine handed over.
        shape: the shape the protocol needs.
        what: the kind of scores, named in errors (``"image-text"``, ...).
    """
    s = np.asarray(scores)
    if s.ndim == 1 and shape[0] == 1:
        s = s.reshape(1, -1)
    if s.shape != shape:
        raise DataError(f"case {case.id}: expected a {what} score matrix of shape {shape}, got {s.shape}")
    if not np.issubdtype(s.dtype, np.floating):
        s = s.astype(np.float64)
    return s


def one_row_positive(case: Case, protocol: str, allow_alone: bool = False) -> tuple[int, np.ndarray]:
    """The single positive text of a one-row case and the indices of its negatives.

    Args:
        case: a one-image case.
        protocol: the protocol's name, for errors.
        allow_alone: accept a positive with no negative (CREPE's code ranks such a caption first).
    """
    truth = case.truth
    if truth.shape[0] != 1:
        raise DataError(
            f"case {case.id}: protocol {protocol!r} needs one image (or a text-only case), "
            f"got {truth.shape[0]} images; use 'spec' or 'group' for several images"
        )
    pos = np.flatnonzero(truth[0])
    if pos.size != 1:
        raise DataError(f"case {case.id}: protocol {protocol!r} needs exactly one positive text, got {pos.size}")
    neg = np.flatnonzero(~truth[0])
    if neg.size == 0 and not allow_alone:
        raise DataError(f"case {case.id}: protocol {protocol!r} needs at least one negative text")
    return int(pos[0]), neg


PROTOCOLS: Registry[type[Protocol]] = Registry(
    "protocol", "spotdiff.protocols", entry_points="spotdiff.protocols", on_register=name_class
)


def get_protocol(name: str, ties: str = "strict") -> Protocol:
    """An instance of the protocol registered under ``name``, deciding ties by ``ties``."""
    return PROTOCOLS.get(name)(ties)
