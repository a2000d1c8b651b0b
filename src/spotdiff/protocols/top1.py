"""Image-to-text top-1 (R@1) of ARO, Crepe, SugarCrepe and VL-CheckList, and ARO's macro accuracy.

One image x M texts with one true text (VisualGPTScore Sec. 4); the positive must beat every negative
strictly unless ``ties="argmax"``. ``aro-macro`` adds ARO's per-relation and per-attribute-pair macro
averages. The definitions: docs/protocols.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spotdiff.cases import SET_TAG, SLOT_TAG, Case
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores, beats, one_row_positive, resampled_mean

#: Relations ARO leaves out of the VG-Relation macro accuracy (ARO notebook, verbatim list).
ARO_SYMMETRIC_RELATIONS = frozenset(
    [
        "adjusting", "attached to", "between", "bigger than", "biting", "boarding", "brushing",
        "chewing", "cleaning", "climbing", "close to", "coming from", "coming out of", "contain",
        "crossing", "dragging", "draped over", "drinking", "drinking from", "driving",
        "driving down", "driving on", "eating from", "eating in", "enclosing", "exiting", "facing",
        "filled with", "floating in", "floating on", "flying", "flying above", "flying in",
        "flying over", "flying through", "full of", "going down", "going into", "going through",
        "grazing in", "growing in", "growing on", "guiding", "hanging from", "hanging in",
        "hanging off", "hanging over", "higher than", "holding onto", "hugging", "in between",
        "jumping off", "jumping on", "jumping over", "kept in", "larger than", "leading",
        "leaning over", "leaving", "licking", "longer than", "looking in", "looking into",
        "looking out", "looking over", "looking through", "lying next to", "lying on top of",
        "making", "mixed with", "mounted on", "moving", "on the back of", "on the edge of",
        "on the front of", "on the other side of", "opening", "painted on", "parked at",
        "parked beside", "parked by", "parked in", "parked in front of", "parked near",
        "parked next to", "perched on", "petting", "piled on", "playing", "playing in",
        "playing on", "playing with", "pouring", "reaching for", "reading", "reflected on",
        "riding on", "running in", "running on", "running through", "seen through",
        "sitting behind", "sitting beside", "sitting by", "sitting in front of", "sitting near",
        "sitting next to", "sitting under", "skiing down", "skiing on", "sleeping in",
        "sleeping on", "smiling at", "sniffing", "splashing", "sprinkled on", "stacked on",
        "standing against", "standing around", "standing behind", "standing beside",
        "standing in front of", "standing near", "standing next to", "staring at", "stuck in",
        "surrounding", "swimming in", "swinging", "talking to", "topped with", "touching",
        "traveling down", "traveling on", "tying", "typing on", "underneath", "wading in",
        "waiting for", "walking across", "walking by", "walking down", "walking next to",
        "walking through", "working in", "working on", "worn on", "wrapped around", "wrapped in",
        "by", "of", "near", "next to", "with", "beside", "on the side of", "around",
    ]
)  # fmt: skip

#: VG-Attribution macro accuracy keeps attribute pairs with at least this many cases (ARO code).
ARO_MIN_ATTRIBUTE_COUNT = 25


def top1_correct(case: Case, scores: np.ndarray, protocol: str, what: str, ties: str = "strict") -> float:
    """1.0 when the case's single positive text beats every negative under ``ties``, else 0.0. A
    positive with no negative is ranked first, as CREPE's ``get_one2many_rank`` ranks a caption alone.

    Args:
        case: a one-image case with exactly one true text.
        scores: its score matrix.
        protocol: the protocol's name, for errors.
        what: the kind of scores, for errors.
        ties: ``"strict"`` or ``"argmax"``.
    """
    pos, neg = one_row_positive(case, protocol, allow_alone=True)
    s = as_scores(case, scores, case.truth.shape, what)[0]
    return float(beats(s, np.array([pos]), neg, ties))


@PROTOCOLS.register("i2t-top1")
class ImageToTextTop1(Protocol):
    """I2T R@1 with one positive among M captions; strict (VisualGPTScore Sec. 4).

    >>> import numpy as np
    >>> from spotdiff.cases import ArrayImage, Case
    >>> case = Case("c", ("the horse eats the grass", "the grass eats the horse"), np.array([[True, False]]),
    ...             (ArrayImage(np.zeros((2, 2, 3), np.uint8)),), {"subset": "s"})
    >>> ImageToTextTop1().outcomes(case, np.array([[0.31, 0.30]]))
    [{'accuracy': 1.0}]
    >>> ImageToTextTop1().outcomes(case, np.array([[0.3, 0.3]]))  # a tie fails
    [{'accuracy': 0.0}]
    >>> ImageToTextTop1("argmax").outcomes(case, np.array([[0.3, 0.3]]))  # ... unless the first listed wins
    [{'accuracy': 1.0}]
    """

    needs = "image-text"
    ties_within_lines = True
    metrics = ("accuracy",)
    description = (
        "image-to-text top-1 (R@1) over one positive and M-1 negatives (ARO/Crepe/SugarCrepe/VL-CheckList)"
    )

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        return [{"accuracy": top1_correct(case, scores, self.name, self.needs, self.ties)}]


@PROTOCOLS.register("blind-top1")
class BlindTop1(ImageToTextTop1):
    """The same top-1 on a text-only score (``P(t)``): the "blind" language-prior baseline.

    VisualGPTScore Sec. 5 / Table 2(a): ranking the candidates by the marginal ``P(text)`` alone,
    without the image, already solves much of ARO/Crepe/VL-CheckList.
    """

    needs = "text-prior"
    description = "top-1 of the positive among M captions by a text-only prior P(t) (VisualGPTScore Table 2a)"


def _group_tag(groups: dict[str, np.ndarray]) -> str | None:
    for tag in ("relation", "attributes", "attribute"):
        if tag in groups and np.any(np.asarray(groups[tag]).astype(str) != ""):
            return tag
    return None


class _ResampledAggregate(ImageToTextTop1):
    """A protocol whose metrics are defined by ``aggregate_resamples``: the reported value is the one
    resample that takes every unit once."""

    def aggregate(self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray]) -> dict[str, float]:
        idx = np.arange(len(values["accuracy"]))[None, :]
        return {m: float(v[0]) for m, v in self.aggregate_resamples(values, groups, idx).items()}


@PROTOCOLS.register("aro-macro")
class AroMacro(_ResampledAggregate):
    """ARO VG-Relation / VG-Attribution: top-1 per unit, macro average over relations or attributes."""

    needs = "image-text"
    metrics = ("macro_accuracy", "accuracy")
    derived = ("macro_accuracy",)
    description = (
        "ARO macro accuracy over relations (VG-Relation) or attribute pairs (VG-Attribution), and micro"
    )

    def _codes(self, groups: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-unit group code and a per-group 'eligible' flag (before the count rule)."""
        tag = _group_tag(groups)
        if tag is None:
            return None
        names, codes = np.unique(np.asarray(groups[tag]).astype(str), return_inverse=True)
        eligible = names != ""
        if tag == "relation":
            eligible &= ~np.isin(names, list(ARO_SYMMETRIC_RELATIONS))
        return codes.reshape(-1), eligible

    def _min_count(self, groups: dict[str, np.ndarray]) -> int:
        return 1 if _group_tag(groups) == "relation" else ARO_MIN_ATTRIBUTE_COUNT


    def aggregate_resamples(
        self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray], idx: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The micro ``accuracy`` and ARO's ``macro_accuracy`` of each resample.

        Args:
            values: metric -> per-unit values.
            groups: tag -> per-unit tag values (``"relation"`` or ``"attributes"``).
            idx: ``[B, n]`` unit indices, one resample per row.
        """
        v = np.asarray(values["accuracy"], dtype=float)
        out: dict[str, Any] = {"accuracy": resampled_mean(v, idx) * 100.0}
        coded = self._codes(groups)
        if coded is None:
            out["macro_accuracy"] = np.full(idx.shape[0], np.nan)
        else:
            codes, eligible = coded
            g = len(eligible)
            b = idx.shape[0]
            defined = ~np.isnan(v)
            # per (resample, group) sums and counts via one bincount on offset codes
            flat = (codes[idx] + g * np.arange(b)[:, None]).ravel()
            sums = np.bincount(flat, weights=np.where(defined, v, 0.0)[idx].ravel(), minlength=b * g)
            counts = np.bincount(flat, weights=defined[idx].ravel().astype(float), minlength=b * g)
            sums, counts = sums.reshape(b, g), counts.reshape(b, g)
            # the count rule is decided on the full sample (so resamples keep the same groups),
            # counting distinct cases (a paired permutation stacks each unit twice)
            if "case" in groups:
                case_codes = np.unique(np.asarray(groups["case"]).astype(str), return_inverse=True)[1]
                pairs = np.unique(np.stack([codes[defined], case_codes.reshape(-1)[defined]]), axis=1)
                full = np.bincount(pairs[0], minlength=g)
            else:
                full = np.bincount(codes, weights=defined.astype(float), minlength=g)
            keep = (eligible & (full >= self._min_count(groups)))[None, :] & (counts > 0)
            with np.errstate(invalid="ignore", divide="ignore"):
                acc = np.where(keep, sums / np.maximum(counts, 1), 0.0)
                n_keep = keep.sum(axis=1)
                out["macro_accuracy"] = (
                    np.where(n_keep > 0, acc.sum(axis=1) / np.maximum(n_keep, 1), np.nan) * 100
                )
        return {m: np.asarray(out[m], dtype=float) for m in self.metrics}


#: What'sUp's pairs of opposite prepositions within a set (``evaluate_scores`` of ``Controlled_Images``).
OPPOSITES = {"left": "right", "right": "left", "on": "under", "under": "on", "in-front": "behind", "behind": "in-front"}


def set_outcomes(correct: np.ndarray, groups: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per unit, whether its pair and its set of four are right, as What'sUp's ``evaluate_scores``
    counts them (``dataset_zoo/aro_datasets.py``, ``Controlled_Images``, commit 7c1f255); NaN for a unit
    in no set.

    The authors keep the last image of each (set, preposition) (a dict entry written in file order) and
    count a pair when both its prepositions are right and a set when all four are, a missing one wrong;
    pair accuracy is the pairs right over N / 2 and set accuracy the sets right over N / 4. Here the
    last unit of each slot carries its pair's and its set's outcome and the others 0, so the mean over
    the N units is exactly those two ratios. Units stacked twice (a paired test) are two copies, each
    counted on its own.

    Args:
        correct: per-unit top-1 outcomes (0/1; NaN counts wrong).
        groups: tag -> per-unit values: ``subset``, ``case``, :data:`SET_TAG`, :data:`SLOT_TAG`.
    """
    n = len(correct)
    sets = np.asarray(groups.get(SET_TAG, np.full(n, "")), dtype=str)
    slots = np.asarray(groups.get(SLOT_TAG, np.full(n, "")), dtype=str)
    subsets = np.asarray(groups.get("subset", np.full(n, "")), dtype=str)
    cases = np.asarray(groups.get("case", np.arange(n)), dtype=str)
    copies: dict[str, int] = {}
    last: dict[tuple[int, str, str, str], int] = {}  # (copy, subset, set, slot) -> the unit written last
    for u in range(n):
        copy = copies[cases[u]] = copies.get(cases[u], -1) + 1
        if sets[u]:
            last[copy, subsets[u], sets[u], slots[u]] = u
    right = np.nan_to_num(np.asarray(correct, dtype=float)) == 1.0
    pair_ok = np.where(sets != "", 0.0, np.nan)
    set_ok = pair_ok.copy()
    members: dict[tuple[int, str, str], list[int]] = {}
    for (copy, subset, name, slot), u in last.items():
        members.setdefault((copy, subset, name), []).append(u)
        partner = last.get((copy, subset, name, OPPOSITES.get(slot, "")))
        pair_ok[u] = float(partner is not None and right[u] and right[partner])
    for units in members.values():
        if len(units) == 4 and right[units].all():
            set_ok[units] = 1.0
    return pair_ok, set_ok


@PROTOCOLS.register("whatsup")
class WhatsUpTop1(_ResampledAggregate):
    """What'sUp's individual accuracy (the top-1 of :class:`ImageToTextTop1`) and, on its controlled
    images, pair and set accuracy (Table 3): both images of a pair of opposite prepositions right, all
    four images of a set right (:func:`set_outcomes`)."""

    metrics = ("accuracy", "pair_accuracy", "set_accuracy")
    derived = ("pair_accuracy", "set_accuracy")
    description = (
        "What'sUp individual accuracy (image-to-text top-1) and, on the controlled sets, pair and set "
        "accuracy (Kamath et al. 2023, Table 3)"
    )


    def aggregate_resamples(
        self, values: dict[str, np.ndarray], groups: dict[str, np.ndarray], idx: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The accuracy, pair and set accuracy of each resample; a unit's pair and set outcomes are
        decided on the full sample (:func:`set_outcomes`) and resampled with it.

        Args:
            values: metric -> per-unit values.
            groups: tag -> per-unit tag values.
            idx: ``[B, n]`` unit indices, one resample per row.
        """
        v = np.asarray(values["accuracy"], dtype=float)
        pair_ok, set_ok = set_outcomes(v, groups)
        counts: dict[bytes, np.ndarray] = {}
        per_unit = zip(self.metrics, (v, pair_ok, set_ok), strict=True)
        return {m: np.asarray(resampled_mean(x, idx, counts) * 100.0, dtype=float) for m, x in per_unit}
