"""VisualGPTScore's language-prior correction: P(t) estimates, PMI, alpha-debiasing and tuning.

VisualGPTScore (Lin et al.) factorises the generative score (Sec. 4, Eq. 3-5)::

    VisualGPTScore(t, i) = P(t|i) = P(t) * pmi(t, i),     pmi(t, i) = P(t|i) / P(t)

and, since the marginal P(t) of the training captions need not match the test set's (Sec. 5,
Eq. 7-12), interpolates between the raw score (alpha = 0, optimal when P_test(t) = P_train(t),
Eq. 10) and PMI (alpha = 1, optimal when P_test(t) is uniform as in Winoground/EqBen, Eq. 11)::

    log VisualGPTScore_alpha(t, i) = log VisualGPTScore(t, i) - alpha * log P(t),  alpha in [0, 1]   (Eq. 12)

(the PMI^k family with k = 1/alpha, Eq. 13-15). Everything here works on log scores, the pair
score ``vgpt:`` returns (Eq. 2, length-normalised).

P(t) is estimated by Monte Carlo over images (Eq. 6), ``P(t) ~ 1/n sum_k VisualGPTScore(t, i_k)``:

* ``"null"``: content-free Gaussian-noise images (Sec. 4; App. 8 "Details of gaussian noise
  samples"). Paper defaults: mean 1.0, std 0.25, a fixed seed, n = 100 for Winoground, 30 for
  EqBen and 10 for the other benchmarks (:data:`NULL_DEFAULTS`, :data:`NULL_N_BY_BENCHMARK`;
  Table 2a used 3 images of mean 0.4). The paper does not say in which units the mean and std
  are; here they are pixel intensities in [0, 1] (clipped), see :func:`null_images`.
* ``"images"``: a set of real images (the Monte Carlo "oracle" of Sec. 4, LAION in Table 5).
* ``"gallery"``: each case's own images, i.e. the retrieval gallery (App. 8, Table 6: for
  COCO/Flickr30K the test-set images give a better estimate at no extra cost).

Alpha is tuned by grid search with step 0.001 on a validation split (Sec. 6, "Tuning alpha through
cross validation"): Table 4a samples half of the data as validation set, picks ``alpha*_val``, reports
the other half, and repeats 10 times (mean and std of the test score and of alpha*). Ties between
alphas go to the smallest. :func:`cross_validate_alpha` does all splits and all 1,001 alphas with
two matrix products; see ``benchmarks/alpha_tuning_speed.py``.

The alpha curve of a protocol metric is exact on the grid: every protocol in scope compares score
entries, and each comparison of ``S - alpha * q`` changes at most once in alpha, so a case's
outcome is piecewise constant; :func:`alpha_curves` evaluates the protocol once per piece.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import logsumexp

from spotdiff.cases import Case, ImageRef, NoiseImage
from spotdiff.errors import ConfigError

log = logging.getLogger(__name__)

__all__ = [
    "ALPHA_STEP",
    "NULL_DEFAULTS",
    "NULL_N_BY_BENCHMARK",
    "DebiasConfig",
    "DebiasResult",
    "alpha_curves",
    "alpha_grid",
    "cross_validate_alpha",
    "debias",
    "debias_variants",
    "gallery_log_prior",
    "i2t_alpha_curve",
    "log_prior_from_scores",
    "null_images",
    "pmi",
    "tune_alpha",
]

#: Null-image defaults of App. 8 ("Unless otherwise specified ... mean of 1.0 and a standard
#: deviation of 0.25 ... 10 images for the rest of the benchmarks ... fix the sampling seed").
NULL_DEFAULTS: dict[str, Any] = {"n": 10, "mean": 1.0, "std": 0.25, "seed": 0}

#: App. 8: "By default, we use 100 images for Winoground, 30 images for EqBen".
NULL_N_BY_BENCHMARK: dict[str, int] = {"winoground": 100, "eqben": 30}

#: Grid step of the alpha search (Sec. 6 and Table 5: "a step size of 0.001").
ALPHA_STEP = 0.001

#: Cases with more score entries than this get their alpha curve on a coarse grid (see alpha_curves).
MAX_EXACT_ENTRIES = 4096


# --------------------------------------------------------------------------------- P(t)
def null_images(
    n: int = NULL_DEFAULTS["n"],
    *,
    seed: int = NULL_DEFAULTS["seed"],
    mean: float = NULL_DEFAULTS["mean"],
    std: float = NULL_DEFAULTS["std"],
    size: tuple[int, int] | None = None,
) -> list[NoiseImage]:
    """``n`` Gaussian-noise "null" images (Sec. 4, App. 8), deterministic for ``seed``.

    Image ``k`` gets its own seed from ``numpy.random.SeedSequence(seed).spawn``, so the first
    images are the same whatever ``n``. Pixels are ``N(mean, std)`` in [0, 1] intensity units,
    clipped and quantised by :class:`spotdiff.cases.NoiseImage`. ``size`` (width, height) should be
    the model's input size (``VisualGPTScorer.image_size``) so that resizing does not smooth the
    noise; None keeps NoiseImage's default.
    """
    if n < 1:
        raise ConfigError(f"the number of null images must be at least 1, got {n}")
    if std < 0:
        raise ConfigError(f"null-image std must be >= 0, got {std}")
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(n)]
    extra = {"size": tuple(size)} if size is not None else {}
    return [NoiseImage(seed=s, mean=float(mean), std=float(std), **extra) for s in seeds]


def log_prior_from_scores(log_scores: np.ndarray) -> np.ndarray:
    """Monte Carlo ``log P(t) = log (1/n) sum_k VisualGPTScore(t, i_k)`` (Eq. 6).

    ``log_scores`` is ``[n_images, n_texts]`` of log VisualGPTScores; returns ``[n_texts]``.
    The average is over the scores themselves (not their logs), as Eq. 6 writes it.
    """
    s = np.asarray(log_scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] == 0:
        raise ValueError(f"expected a non-empty [n_images, n_texts] matrix, got shape {s.shape}")
    return logsumexp(s, axis=0) - math.log(s.shape[0])


def gallery_log_prior(matrix: np.ndarray) -> np.ndarray:
    """P(t) from a case's own images (App. 8, Table 6): Eq. 6 over the gallery's rows."""
    return log_prior_from_scores(matrix)


def debias(log_vgs: np.ndarray, log_prior: np.ndarray, alpha: float) -> np.ndarray:
    """``log VisualGPTScore - alpha * log P(t)`` (Eq. 12); ``log_prior`` broadcasts over rows."""
    if not 0.0 <= float(alpha) <= 1.0:
        raise ConfigError(f"alpha must lie in [0, 1] (Eq. 12), got {alpha}")
    return np.asarray(log_vgs, dtype=np.float64) - float(alpha) * np.asarray(log_prior, dtype=np.float64)


def pmi(log_vgs: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """``log pmi(t, i) = log P(t|i) - log P(t)`` (Eq. 5): the alpha = 1 member (Eq. 11)."""
    return debias(log_vgs, log_prior, 1.0)


def alpha_grid(step: float = ALPHA_STEP) -> np.ndarray:
    """``0, step, ..., 1`` (1,001 values for the paper's step 0.001), exactly representable ends."""
    n = round(1.0 / step)
    if n < 1 or not math.isclose(n * step, 1.0, rel_tol=1e-9):
        raise ConfigError(f"alpha step must divide 1, got {step}")
    return np.arange(n + 1, dtype=np.float64) / n


# --------------------------------------------------------------------------------- curves
def i2t_alpha_curve(
    pos: np.ndarray, neg: np.ndarray, pos_prior: np.ndarray, neg_prior: np.ndarray, alphas: np.ndarray
) -> np.ndarray:
    """Top-1 correctness of one positive against its negatives for every alpha, vectorised.

    Args:
        pos, pos_prior: ``[n]`` log score and log prior of each case's positive text.
        neg, neg_prior: ``[n, M]`` the same for its negatives (NaN pads unequal M; a NaN score,
            like a tie, is a failure, as in the protocols).
        alphas: ``[A]``.

    Returns ``[n, A]`` float 0/1: ``pos - a*pos_prior > max_j(neg_j - a*neg_prior_j)`` strictly.
    """
    pos = np.asarray(pos, dtype=np.float64)[:, None]
    pos_prior = np.asarray(pos_prior, dtype=np.float64)[:, None]
    neg = np.asarray(neg, dtype=np.float64)
    neg_prior = np.asarray(neg_prior, dtype=np.float64)
    a = np.asarray(alphas, dtype=np.float64)[None, :]
    p = pos - a * pos_prior  # [n, A], the same arithmetic as debias() on the matrix
    ok = np.ones(p.shape, dtype=bool)
    nj = np.empty_like(p)
    cmp = np.empty(p.shape, dtype=bool)
    for j in range(neg.shape[1]):
        col, qcol = neg[:, j : j + 1], neg_prior[:, j : j + 1]
        np.multiply(a, qcol, out=nj)
        np.subtract(col, nj, out=nj)
        np.greater(p, nj, out=cmp)  # NaN on either side compares False: a failure
        pad = np.isnan(col[:, 0]) & np.isnan(qcol[:, 0])
        if pad.any():
            cmp[pad] = True
        ok &= cmp
    if (neg.shape[1] and np.isnan(neg).all(axis=1).any()) or not neg.shape[1]:
        ok &= ~np.isnan(p)  # a case with no real negative still fails on a NaN positive
    return ok.astype(np.float64)


def _grid_alphas(alphas: np.ndarray, n_entries: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Alphas at which a big case is evaluated, and each grid alpha's nearest evaluated index."""
    if n_entries <= MAX_EXACT_ENTRIES or len(alphas) <= 101:
        return alphas, None
    coarse = np.linspace(alphas[0], alphas[-1], 101)
    nearest = np.abs(alphas[:, None] - coarse[None, :]).argmin(axis=1)
    return coarse, nearest


def alpha_curves(
    protocol: Any,
    cases: Sequence[Case],
    matrices: Sequence[np.ndarray],
    log_priors: Sequence[np.ndarray],
    alphas: np.ndarray,
) -> dict[str, np.ndarray]:
    """Per-unit outcomes of ``protocol`` on ``S - alpha * log P(t)`` for every alpha (Eq. 12).

    Returns metric -> ``[n_units, A]`` (units in :func:`spotdiff.protocols.evaluate` order, NaN where
    a metric is undefined). Exact on the grid: the outcome of a case changes only where two of its
    debiased entries cross, so the protocol runs once per stretch of alphas between crossings.
    Cases with more than :data:`MAX_EXACT_ENTRIES` entries (whole retrieval galleries) are evaluated
    on 101 alphas and each grid alpha takes its nearest one's outcome (logged).
    """
    from spotdiff.protocols.top1 import ImageToTextTop1

    alphas = np.asarray(alphas, dtype=np.float64)
    metrics = tuple(protocol.unit_metrics)
    if isinstance(protocol, ImageToTextTop1) and all(c.truth.shape[0] == 1 and c.truth.sum() == 1 for c in cases):
        fast = _top1_fast(cases, matrices, log_priors, alphas)
        if fast is not None:
            return {m: fast for m in metrics if m == "accuracy"}
    columns: dict[str, list[np.ndarray]] = {m: [] for m in metrics}
    warned = False
    for case, s, q in zip(cases, matrices, log_priors, strict=True):
        s = np.asarray(s, dtype=np.float64)
        s = s.reshape(1, -1) if s.ndim == 1 else s
        q = np.asarray(q, dtype=np.float64).reshape(1, -1)
        evals, nearest = _grid_alphas(alphas, s.size)
        if nearest is not None and not warned:
            log.info("alpha curve: cases with > %d entries are evaluated on 101 alphas", MAX_EXACT_ENTRIES)
            warned = True
        if nearest is None:
            stack = s[None, :, :] - evals[:, None, None] * q[None, :, :]  # [A, r, t]
            # the protocols rank entries, so an outcome can only change where the entries' order
            # (or a tie) changes: compare the stable sort order and the tie pattern alpha to alpha
            flat = stack.reshape(len(evals), -1)
            order = np.argsort(flat, axis=1, kind="stable")
            ranked = np.take_along_axis(flat, order, axis=1)
            ties = ranked[:, 1:] == ranked[:, :-1]
            change = np.ones(len(evals), dtype=bool)
            change[1:] = np.any(order[1:] != order[:-1], axis=1) | np.any(ties[1:] != ties[:-1], axis=1)
            starts = np.flatnonzero(change)
            runs = [protocol.outcomes(case, stack[k]) for k in starts]
        else:  # a whole gallery: one debiased matrix at a time
            starts = np.arange(len(evals))
            runs = [protocol.outcomes(case, s - a * q) for a in evals]
        lengths = np.diff(np.append(starts, len(evals)))
        n_units = len(runs[0])
        for m in metrics:
            vals = np.array([[float(r[u].get(m, np.nan)) for r in runs] for u in range(n_units)])
            col = np.repeat(vals, lengths, axis=1)
            if nearest is not None:
                col = col[:, nearest]
            columns[m].append(col)
    return {m: (np.concatenate(v) if v else np.zeros((0, len(alphas)))) for m, v in columns.items()}


def _top1_fast(cases, matrices, log_priors, alphas) -> np.ndarray | None:
    n = len(cases)
    width = max((len(c.texts) for c in cases), default=0) - 1
    if width < 1:
        return None
    pos = np.empty(n)
    pos_q = np.empty(n)
    neg = np.full((n, width), np.nan)
    neg_q = np.full((n, width), np.nan)
    for k, (c, s, q) in enumerate(zip(cases, matrices, log_priors, strict=True)):
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        p = int(np.flatnonzero(c.truth[0])[0])
        others = np.flatnonzero(~c.truth[0])
        pos[k], pos_q[k] = s[p], q[p]
        neg[k, : len(others)] = s[others]
        neg_q[k, : len(others)] = q[others]
        # a NaN score must fail, not look like padding: give it a NaN-free marker that wins
        bad = np.isnan(neg[k, : len(others)])
        if bad.any():
            neg[k, : len(others)][bad] = np.inf
            neg_q[k, : len(others)][bad] = 0.0
    return i2t_alpha_curve(pos, neg, pos_q, neg_q, alphas)


# --------------------------------------------------------------------------------- tuning
def _curve_scores(curve: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """NaN-aware mean of each column of ``curve`` under 0/1 ``weights`` [S, n] -> [S, A] percent."""
    defined = ~np.isnan(curve)
    filled = np.where(defined, curve, 0.0)
    sums = weights @ filled
    counts = weights @ defined.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1e-300), np.nan) * 100.0


def tune_alpha(curve: np.ndarray, alphas: np.ndarray) -> tuple[float, float]:
    """``(alpha*, score)``: the grid alpha with the best mean outcome (ties: the smallest alpha)."""
    scores = _curve_scores(np.asarray(curve, dtype=np.float64), np.ones((1, len(curve))))[0]
    k = int(np.nanargmax(scores)) if np.isfinite(scores).any() else 0
    return float(alphas[k]), float(scores[k])


def cross_validate_alpha(
    curve: np.ndarray,
    alphas: np.ndarray,
    *,
    n_splits: int = 10,
    val_fraction: float = 0.5,
    seed: int = 0,
) -> dict[str, Any]:
    """Table 4a's protocol: tune alpha on a random half, test on the other half, ``n_splits`` times.

    Args:
        curve: ``[n_units, A]`` per-unit outcomes for every alpha (0/1, NaN where undefined).
        alphas: the ``[A]`` grid.
        n_splits: random splits (the paper: 10); val_fraction: share of units used for tuning.
        seed: seed of ``numpy.random.default_rng`` for the splits.

    Returns a JSON-ready dict: per split ``alpha_star``, ``val_score``, ``test_score``, and their
    ``*_mean`` / ``*_std`` (population std, ddof=0) over splits. Scores are percentages.
    Fully vectorised: one ``[n_splits, n] @ [n, A]`` product (two when some outcomes are NaN);
    the test half's sums are the totals minus the validation sums.
    """
    curve = np.asarray(curve, dtype=np.float64)
    n = curve.shape[0]
    if n < 2:
        raise ConfigError(f"cross-validating alpha needs at least 2 units, got {n}")
    n_val = min(n - 1, max(1, round(n * val_fraction)))
    rng = np.random.default_rng(seed)
    ranks = np.argsort(rng.random((n_splits, n)), axis=1)
    val = np.zeros((n_splits, n))
    np.put_along_axis(val, ranks[:, :n_val], 1.0, axis=1)
    defined = ~np.isnan(curve)
    if defined.all():
        filled = curve
        val_counts = np.full((n_splits, 1), float(n_val))
        test_counts = np.full((n_splits, 1), float(n - n_val))
    else:
        filled = np.where(defined, curve, 0.0)
        val_counts = val @ defined.astype(np.float64)
        test_counts = defined.sum(axis=0, dtype=np.float64)[None, :] - val_counts
    val_sums = val @ filled  # the one big product: [n_splits, n] @ [n, A]
    test_sums = filled.sum(axis=0)[None, :] - val_sums
    with np.errstate(invalid="ignore", divide="ignore"):
        val_scores = np.where(val_counts > 0, val_sums / np.maximum(val_counts, 1e-300), np.nan) * 100.0
        test_scores = np.where(test_counts > 0, test_sums / np.maximum(test_counts, 1e-300), np.nan) * 100.0
    filled = np.where(np.isnan(val_scores), -np.inf, val_scores)
    k = filled.argmax(axis=1)  # first maximum: the smallest alpha among ties
    rows = np.arange(n_splits)
    a_star = alphas[k]
    v_best = val_scores[rows, k]
    t_best = test_scores[rows, k]
    return {
        "n_splits": n_splits,
        "val_fraction": val_fraction,
        "seed": seed,
        "alpha_star": a_star.tolist(),
        "val_score": v_best.tolist(),
        "test_score": t_best.tolist(),
        "alpha_star_mean": float(a_star.mean()),
        "alpha_star_std": float(a_star.std()),
        "test_score_mean": float(np.nanmean(t_best)),
        "test_score_std": float(np.nanstd(t_best)),
        "val_score_mean": float(np.nanmean(v_best)),
    }


# --------------------------------------------------------------------------------- pipeline
@dataclass
class DebiasConfig:
    """How ``spotdiff eval --debias ... --alpha ...`` corrects a generative score.

    Attributes:
        prior: ``"null"`` (Gaussian-noise images, Sec. 4), ``"images"`` (Monte Carlo over
            ``images``, Eq. 6), ``"gallery"`` (each case's own images, App. 8) or ``"none"``.
        alpha: a fixed alpha in [0, 1], or ``"tune"`` (grid search + Table 4a cross-validation).
        n_null, null_mean, null_std, null_seed: null-image settings (None: App. 8 defaults,
            with n from :data:`NULL_N_BY_BENCHMARK` when ``benchmark`` names one).
        null_size: null-image (width, height); None: the scorer's input size when it says.
        images: real images for ``prior="images"``.
        step: alpha grid step (0.001); n_splits, val_fraction, seed: the cross-validation.
        metric: the unit metric to tune (None: the protocol's first unit metric, e.g. ``text``
            for Winoground's group protocol, ``accuracy`` for top-1).
        benchmark: benchmark name, for the null-image count default.
    """

    prior: str = "null"
    alpha: float | str = "tune"
    n_null: int | None = None
    null_mean: float | None = None
    null_std: float | None = None
    null_seed: int | None = None
    null_size: tuple[int, int] | None = None
    images: Sequence[ImageRef] = ()
    step: float = ALPHA_STEP
    n_splits: int = 10
    val_fraction: float = 0.5
    seed: int = 0
    metric: str | None = None
    benchmark: str | None = None

    def null_settings(self) -> dict[str, Any]:
        n = self.n_null
        if n is None:
            n = NULL_N_BY_BENCHMARK.get(self.benchmark or "", NULL_DEFAULTS["n"])
        return {
            "n": int(n),
            "mean": float(NULL_DEFAULTS["mean"] if self.null_mean is None else self.null_mean),
            "std": float(NULL_DEFAULTS["std"] if self.null_std is None else self.null_std),
            "seed": int(NULL_DEFAULTS["seed"] if self.null_seed is None else self.null_seed),
        }


@dataclass
class DebiasResult:
    """What :func:`debias_variants` returns.

    Attributes:
        variants: name -> one score matrix per case: ``"raw"`` (alpha = 0, Eq. 2), ``"alpha=1"``
            (PMI, Eq. 11), ``"blind"`` (log P(t) alone, broadcast over the case's images: the
            text-only baseline of Table 2a), and ``"tuned"`` (alpha = mean cross-validated
            alpha*_val, rounded to the grid) or ``"alpha=A"`` for a fixed alpha. Only ``"raw"``
            when ``prior="none"``.
        log_priors: per case, ``[n_texts]`` log P(t) (None when ``prior="none"``).
        alphas: the grid; curves: unit metric -> ``[A]`` score over all units (percent).
        metric: the tuned metric; alpha: the alpha of the ``tuned``/``alpha=A`` variant.
        cv: :func:`cross_validate_alpha`'s dict (Table 4a) when tuning, else None.
        alpha_star_all: alpha* and its score tuned on all units (Table 5's alpha*_test; optimistic).
        prior_info: how P(t) was estimated (method, null-image settings, image count).
    """

    variants: dict[str, list[np.ndarray]]
    log_priors: list[np.ndarray] | None = None
    alphas: np.ndarray | None = None
    curves: dict[str, np.ndarray] = field(default_factory=dict)
    metric: str | None = None
    alpha: float | None = None
    cv: dict[str, Any] | None = None
    alpha_star_all: tuple[float, float] | None = None
    prior_info: dict[str, Any] = field(default_factory=dict)

    def curve_data(self) -> dict[str, Any]:
        """The alpha curve and tuning record, JSON-ready (``eval`` saves it as ``alpha_curve.json``)."""
        return {
            "prior": self.prior_info,
            "metric": self.metric,
            "alpha": self.alpha,
            "alphas": [] if self.alphas is None else [round(float(a), 6) for a in self.alphas],
            "curves": {m: [None if np.isnan(v) else round(float(v), 4) for v in c] for m, c in self.curves.items()},
            "alpha_star_all": None
            if self.alpha_star_all is None
            else {"alpha": self.alpha_star_all[0], "score": self.alpha_star_all[1]},
            "cross_validation": self.cv,
        }

    def save_curve(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.curve_data(), indent=1), encoding="utf-8")
        return path


def _prior_for_cases(engine: Any, cases: Sequence[Case], matrices: Sequence[np.ndarray], config: DebiasConfig):
    """Per-case log P(t) and a description of the estimate."""
    method = config.prior
    if method == "gallery":
        return [gallery_log_prior(m) for m in matrices], {"method": "gallery"}
    if method == "null":
        settings = config.null_settings()
        size = config.null_size or getattr(engine.scorer, "image_size", None)
        refs: Sequence[ImageRef] = null_images(
            settings["n"], seed=settings["seed"], mean=settings["mean"], std=settings["std"], size=size
        )
        info = {"method": "null", **settings, "size": list(size) if size else None}
    elif method == "images":
        refs = list(config.images)
        if not refs:
            raise ConfigError("--debias images needs a set of real images for the Monte Carlo estimate (Eq. 6)")
        info = {"method": "images", "n": len(refs)}
    else:
        raise ConfigError(f"unknown prior estimate {method!r}; use null, images, gallery or none")
    texts = list(dict.fromkeys(t for c in cases for t in c.texts))
    prior = log_prior_from_scores(engine.image_text(list(refs), texts))
    by_text = dict(zip(texts, prior.tolist(), strict=True))
    return [np.array([by_text[t] for t in c.texts]) for c in cases], info


def debias_variants(
    engine: Any, cases: Iterable[Case], protocol: Any, config: DebiasConfig | None = None
) -> DebiasResult:
    """Raw, PMI (alpha = 1), blind and tuned (or fixed-alpha) score matrices of a ``vgpt:`` model.

    Args:
        engine: a :class:`spotdiff.engine.Engine` around an ``image-text`` scorer whose pair score
            is a log-likelihood (``vgpt:``); P(t) images go through ``engine.image_text`` (cached).
        cases: the cases (with images).
        protocol: a protocol instance or name (its ``needs`` must be ``image-text``).
        config: see :class:`DebiasConfig`.

    Evaluate each variant with ``spotdiff.protocols.evaluate(protocol, cases, result.variants[name])``;
    for ``"tuned"`` report ``result.cv["test_score_mean"]`` / ``["test_score_std"]`` (Table 4a) beside it,
    since the tuned alpha saw the data. ``result.save_curve(path)`` writes the alpha curve.
    """
    from spotdiff.protocols import get_protocol

    config = config or DebiasConfig()
    if isinstance(protocol, str):
        protocol = get_protocol(protocol)
    if protocol.needs != "image-text":
        raise ConfigError(f"debiasing needs an image-text protocol, {protocol.name!r} needs {protocol.needs!r}")
    cases = list(cases)
    matrices = [np.asarray(m, dtype=np.float64) for m in engine.case_matrices(cases, "image-text")]
    if config.prior == "none":
        return DebiasResult(variants={"raw": matrices}, prior_info={"method": "none"})
    priors, info = _prior_for_cases(engine, cases, matrices, config)
    alphas = alpha_grid(config.step)
    unit_curves = alpha_curves(protocol, cases, matrices, priors, alphas)
    metric = config.metric or (protocol.unit_metrics[0] if protocol.unit_metrics else None)
    if metric not in unit_curves:
        raise ConfigError(f"protocol {protocol.name!r} has no per-unit metric {metric!r}; known: {list(unit_curves)}")
    curves = {m: _curve_scores(c, np.ones((1, len(c))))[0] for m, c in unit_curves.items()}
    best_all = tune_alpha(unit_curves[metric], alphas)
    cv = None
    if config.alpha == "tune":
        cv = cross_validate_alpha(
            unit_curves[metric],
            alphas,
            n_splits=config.n_splits,
            val_fraction=config.val_fraction,
            seed=config.seed,
        )
        alpha = float(np.round(cv["alpha_star_mean"] / config.step) * config.step)
        name = "tuned"
    else:
        try:
            alpha = float(config.alpha)
        except (TypeError, ValueError):
            raise ConfigError(f"--alpha must be a number in [0, 1] or 'tune', got {config.alpha!r}") from None
        name = f"alpha={alpha:g}"
    variants = {
        "raw": matrices,
        "alpha=1": [pmi(m, q) for m, q in zip(matrices, priors, strict=True)],
        "blind": [np.broadcast_to(q, m.shape).copy() for m, q in zip(matrices, priors, strict=True)],
    }
    variants[name] = [debias(m, q, alpha) for m, q in zip(matrices, priors, strict=True)]
    return DebiasResult(
        variants=variants,
        log_priors=priors,
        alphas=alphas,
        curves=curves,
        metric=metric,
        alpha=alpha,
        cv=cv,
        alpha_star_all=best_all,
        prior_info=info,
    )


def config_dict(config: DebiasConfig) -> dict[str, Any]:
    """A JSON-ready view of a config (images as their descriptions)."""
    d = asdict(config)
    d["images"] = [r.describe() for r in config.images]
    return d
