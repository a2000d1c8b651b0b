"""Gallery image-text retrieval, R@1/5/10 both ways (COCO / Flickr30K; EqBen Table 2, VisualGPTScore Table 4).

One case is the whole gallery and its queries are the units; a false candidate tied with the truth
ranks above it unless ``ties="argmax"``; ranks are counted in chunks of rows. The definitions:
docs/protocols.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spotdiff.cases import Case
from spotdiff.protocols.base import PROTOCOLS, Protocol, as_scores

KS = (1, 5, 10)
I2T = tuple(f"i2t_r{k}" for k in KS)
T2I = tuple(f"t2i_r{k}" for k in KS)
NAN = float("nan")


def _queries(truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.flatnonzero(truth.any(axis=1) & ~truth.all(axis=1))
    cols = np.flatnonzero(truth.any(axis=0) & ~truth.all(axis=0))
    return rows, cols


def retrieval_ranks(
    scores: np.ndarray, truth: np.ndarray, chunk: int | None = None, ties: str = "strict"
) -> tuple[np.ndarray, np.ndarray]:
    """0-based ranks of the best true candidate: ``(i2t [N], t2i [T])``.

    ``rank = #false candidates scoring >= the best true score`` (plus NaN candidates); ``inf``
    where the query has no usable true score. Under ``ties="argmax"`` a false candidate with the
    same score counts only when its index is lower than the first true candidate with the best
    score. Processes ``chunk`` image rows at a time.

    Args:
        scores: ``[N, T]`` image-text scores.
        truth: ``[N, T]`` booleans, True where text ``t`` belongs to image ``i``.
        chunk: image rows per step (default: about two million entries).
        ties: ``"strict"`` or ``"argmax"``.
    """
    n, t = scores.shape
    if chunk is None:
        chunk = max(1, min(n, 2_000_000 // max(t, 1)))
    argmax = ties == "argmax"
    dtype = scores.dtype if np.issubdtype(scores.dtype, np.floating) else np.float64
    i2t = np.empty(n, dtype=float)
    best_t = np.full(t, -np.inf, dtype=dtype)  # best true-image score per text (NaN ignored)
    first_t = np.zeros(t, dtype=np.int64)  # the first image row reaching it (argmax ties)
    cols = np.arange(t)
    for r0 in range(0, n, chunk):
        s = np.asarray(scores[r0 : r0 + chunk], dtype=dtype)
        tr = truth[r0 : r0 + chunk]
        nan = np.isnan(s)
        has_nan = bool(nan.any())
        true_s = np.where(tr & ~nan if has_nan else tr, s, -np.inf)
        pos = true_s.max(axis=1)
        above = s > pos[:, None]
        tied = s == pos[:, None]
        if argmax:  # only tied candidates listed before the first best true text count
            tied &= cols[None, :] < np.argmax(true_s == pos[:, None], axis=1)[:, None]
        above |= tied
        if has_nan:
            above |= nan
        above &= ~tr
        i2t[r0 : r0 + chunk] = np.where(pos > -np.inf, above.sum(axis=1), np.inf)
        col_best = true_s.max(axis=0)
        better = col_best > best_t
        first_t[better] = r0 + np.argmax(true_s == col_best[None, :], axis=0)[better]
        np.maximum(best_t, col_best, out=best_t)
    t2i = np.zeros(t, dtype=np.int64)
    for r0 in range(0, n, chunk):
        s = np.asarray(scores[r0 : r0 + chunk], dtype=dtype)
        tr = truth[r0 : r0 + chunk]
        tied = s == best_t[None, :]
        if argmax:
            tied &= (r0 + np.arange(s.shape[0]))[:, None] < first_t[None, :]
        above = (s > best_t[None, :]) | tied
        nan = np.isnan(s)
        if nan.any():
            above |= nan
        above &= ~tr
        t2i += above.sum(axis=0)
    t2i = t2i.astype(float)
    t2i[best_t == -np.inf] = np.inf
    return i2t, t2i


@PROTOCOLS.register("retrieval")
class Retrieval(Protocol):
    """Gallery retrieval recall R@1/5/10 for image and text queries; pessimistic ties."""

    needs = "image-text"
    ties_within_lines = True
    metrics = (*I2T, *T2I, "rsum")
    derived = ("rsum",)
    description = (
        "gallery retrieval R@1/5/10 image-to-text and text-to-image (COCO/Flickr30K); ties rank above"
    )

    def outcomes(self, case: Case, scores: np.ndarray) -> list[dict[str, float]]:
        truth = case.truth
        s = as_scores(case, scores, truth.shape, self.needs)
        rows, cols = _queries(truth)
        i2t, t2i = retrieval_ranks(s, truth, ties=self.ties)
        out: list[dict[str, float]] = []
        empty_t = dict.fromkeys(T2I, NAN)
        empty_i = dict.fromkeys(I2T, NAN)
        for r in i2t[rows]:
            out.append({**{m: float(r < k) for m, k in zip(I2T, KS, strict=True)}, **empty_t})
        for r in t2i[cols]:
            out.append({**empty_i, **{m: float(r < k) for m, k in zip(T2I, KS, strict=True)}})
        return out

    def unit_ids(self, case: Case, n_units: int) -> list[str]:
        rows, cols = _queries(case.truth)
        return [f"{case.id}/i2t/{i}" for i in rows] + [f"{case.id}/t2i/{t}" for t in cols]

    def derive(self, means: dict[str, Any]) -> dict[str, Any]:
        if all(m in means for m in (*I2T, *T2I)):
            return {"rsum": sum(means[m] for m in (*I2T, *T2I))}
        return {}
