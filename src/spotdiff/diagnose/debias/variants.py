"""The debiasing variants of one ``vgpt:`` evaluation: raw, PMI, blind and tuned (Sec. 5-6).

:func:`debias_variants` scores the cases once, estimates P(t) (null images, real images or the
gallery), computes the exact alpha curve of the protocol's metric, tunes alpha with Table 4a's
cross-validation (or takes a fixed alpha), and returns one score matrix per case for each variant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from spotdiff.cases import Case, ImageRef
from spotdiff.diagnose.debias.alpha import (
    ALPHA_STEP,
    aggregate_alpha_scores,
    alpha_curves,
    alpha_grid,
    cross_validate_alpha,
    curve_scores,
)
from spotdiff.diagnose.debias.blind import blind_matrices
from spotdiff.diagnose.debias.prior import debias, gallery_log_prior, pmi
from spotdiff.errors import ConfigError
from spotdiff.scorers.null_prior import (
    NULL_DEFAULTS,
    NULL_N_BY_BENCHMARK,
    log_prior_from_scores,
    null_images,
    null_normalization,
)


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
        null_space: ``"normalized"`` (the model's normalised input, the default) or ``"pixel"``
            ([0, 1] intensities): the units of null_mean / null_std (see
            :mod:`spotdiff.scorers.null_prior` for why normalised is the default); None: normalised
            when the scorer has an image processor with ``image_mean`` / ``image_std``, else pixel
            (the space used is recorded in ``DebiasResult.prior_info``).
        null_size: null-image (width, height); None: the scorer's input size when it says.
        images: real images for ``prior="images"``.
        step: alpha grid step (0.001); n_splits, val_fraction, seed: the cross-validation.
        metric: the metric to tune (None: the one the benchmark reports first, ``protocol.metrics[0]``:
            ``text`` for Winoground's group protocol, ``accuracy`` for top-1, ``macro_accuracy`` for
            ARO VG-Relation / VG-Attribution, tuned as the protocol aggregates it).
        benchmark: benchmark name, for the null-image count default.
        tune_split: the name of the split the ``tune_cases`` of :func:`debias_variants` come from
            (Table 4b: alpha tuned on COCO / Flickr30K's validation split, reported on test).
    """

    prior: str = "null"
    alpha: float | str = "tune"
    n_null: int | None = None
    null_mean: float | None = None
    null_std: float | None = None
    null_seed: int | None = None
    null_space: str | None = None
    null_size: tuple[int, int] | None = None
    images: Sequence[ImageRef] = ()
    step: float = ALPHA_STEP
    n_splits: int = 10
    val_fraction: float = 0.5
    seed: int = 0
    metric: str | None = None
    benchmark: str | None = None
    tune_split: str | None = None

    def null_settings(self) -> dict[str, Any]:
        n = self.n_null
        if n is None:
            n = NULL_N_BY_BENCHMARK.get(self.benchmark or "", NULL_DEFAULTS["n"])
        return {
            "n": int(n),
            "mean": float(NULL_DEFAULTS["mean"] if self.null_mean is None else self.null_mean),
            "std": float(NULL_DEFAULTS["std"] if self.null_std is None else self.null_std),
            "seed": int(NULL_DEFAULTS["seed"] if self.null_seed is None else self.null_seed),
            "space": str(NULL_DEFAULTS["space"] if self.null_space is None else self.null_space),
        }


@dataclass
class DebiasResult:
    """What :func:`debias_variants` returns.

    Attributes:
        variants: name -> one score matrix per case: ``"raw"`` (alpha = 0, Eq. 2), ``"alpha=1"``
            (PMI, Eq. 11), ``"blind"`` (log P(t) alone, broadcast over the case's images: the
            text-only baseline of Table 2a), and ``"tuned"`` (alpha = mean cross-validated
            alpha*_val, rounded to the grid, applied to every case: an in-sample score, to be read
            after the cross-validated test score; or alpha* of the ``tune_cases``' split, Table 4b)
            or ``"alpha=A"`` for a fixed alpha. Only ``"raw"`` when ``prior="none"``.
        log_priors: per case, ``[n_texts]`` log P(t) (None when ``prior="none"``).
        alphas: the grid; curves: unit metric -> ``[A]`` score over all units (percent).
        metric: the tuned metric; alpha: the alpha of the ``tuned``/``alpha=A`` variant.
        cv: :func:`cross_validate_alpha`'s dict (Table 4a) when tuning by cross-validation, else None.
        tuned_on: when tuned on another split (Table 4b): its name, size, alpha* and score there.
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
    tuned_on: dict[str, Any] | None = None

    @property
    def tuned_label(self) -> str:
        """How tables name the tuned variant: in-sample unless alpha came from another split."""
        return f"tuned on {self.tuned_on['split']}" if self.tuned_on else "tuned, in-sample"

    def curve_data(self) -> dict[str, Any]:
        """The alpha curve and tuning record, JSON-ready (``eval`` saves it as ``alpha_curve.json``)."""
        return {
            "prior": self.prior_info,
            "metric": self.metric,
            "alpha": self.alpha,
            "alphas": [] if self.alphas is None else [float(a) for a in self.alphas],
            "curves": {m: [float(v) for v in c] for m, c in self.curves.items()},
            "alpha_star_all": None
            if self.alpha_star_all is None
            else {"alpha": self.alpha_star_all[0], "score": self.alpha_star_all[1]},
            "cross_validation": self.cv,
            "tuned_on": self.tuned_on,
        }

def _prior_for_cases(engine: Any, cases: Sequence[Case], matrices: Sequence[np.ndarray], config: DebiasConfig):
    """Per-case log P(t) and a description of the estimate."""
    method = config.prior
    if method == "gallery":
        return [gallery_log_prior(m) for m in matrices], {"method": "gallery"}
    if method == "null":
        settings = config.null_settings()
        size = config.null_size or getattr(engine.scorer, "image_size", None)
        processor = getattr(engine.scorer, "image_processor", None)
        if config.null_space is None and getattr(processor, "image_mean", None) is None:
            settings["space"] = "pixel"  # no normalised input space to draw in (recorded in the info)
        norm = null_normalization(settings["space"], processor)
        refs: Sequence[ImageRef] = null_images(
            settings["n"], seed=settings["seed"], mean=settings["mean"], std=settings["std"], size=size,
            normalization=norm,
        )  # fmt: skip
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


def _unit_curves(engine: Any, cases: Sequence[Case], protocol: Any, config: DebiasConfig, alphas: np.ndarray):
    """Score matrices, log priors, prior info, per-unit alpha curves and unit groups of ``cases``."""
    from spotdiff.protocols.stats import UnitTable

    matrices = [np.asarray(m, dtype=np.float64) for m in engine.case_matrices(cases, "image-text")]
    priors, info = _prior_for_cases(engine, cases, matrices, config)
    curves = alpha_curves(protocol, cases, matrices, priors, alphas)
    table = UnitTable()
    for case, m in zip(cases, matrices, strict=True):
        table.add_case(protocol, case, m)
    return matrices, priors, info, curves, table.arrays(protocol)[1]


def _scorer(protocol: Any, curves: dict[str, np.ndarray], groups: dict[str, np.ndarray], metric: str):
    """Unit indices ``[S, m]`` -> ``[S, A]`` scores of ``metric``, or None when it is a plain unit mean
    (then :func:`curve_scores` and the matrix-product cross-validation apply)."""
    from spotdiff.protocols.base import Protocol

    if metric in curves and type(protocol).aggregate_resamples is Protocol.aggregate_resamples:
        return None
    return lambda idx: aggregate_alpha_scores(protocol, curves, groups, metric, idx)


def debias_variants(
    engine: Any,
    cases: Iterable[Case],
    protocol: Any,
    config: DebiasConfig | None = None,
    tune_cases: Sequence[Case] | None = None,
) -> DebiasResult:
    """Raw, PMI (alpha = 1), blind and tuned (or fixed-alpha) score matrices of a ``vgpt:`` model.

    Args:
        engine: a :class:`spotdiff.diagnose.engine.Engine` around an ``image-text`` scorer whose pair score
            is a log-likelihood (``vgpt:``); P(t) images go through ``engine.image_text`` (cached).
        cases: the cases (with images).
        protocol: a protocol instance or name (its ``needs`` must be ``image-text``).
        config: see :class:`DebiasConfig`.
        tune_cases: cases of another split to tune alpha on (Table 4b); None: cross-validate on
            ``cases`` (Table 4a).

    Alpha is tuned on the metric the benchmark reports (``config.metric`` or ``protocol.metrics[0]``),
    aggregated as the protocol aggregates it (a macro average stays a macro average). Evaluate each
    variant with ``spotdiff.protocols.evaluate(protocol, cases, result.variants[name])``; for
    ``"tuned"`` without ``tune_cases`` report ``result.cv["test_score_mean"]`` / ``["test_score_std"]``
    (Table 4a) first, since the tuned alpha saw the data; ``result.curve_data()`` is the alpha curve.
    """
    from spotdiff.protocols import get_protocol

    config = config or DebiasConfig()
    if isinstance(protocol, str):
        protocol = get_protocol(protocol)
    if protocol.needs != "image-text":
        raise ConfigError(f"debiasing needs an image-text protocol, {protocol.name!r} needs {protocol.needs!r}")
    cases = list(cases)
    if config.prior == "none":
        matrices = [np.asarray(m, dtype=np.float64) for m in engine.case_matrices(cases, "image-text")]
        return DebiasResult(variants={"raw": matrices}, prior_info={"method": "none"})
    alphas = alpha_grid(config.step)
    matrices, priors, info, unit_curves, groups = _unit_curves(engine, cases, protocol, config, alphas)
    metric = config.metric or (protocol.metrics[0] if protocol.metrics else None)
    if metric not in unit_curves and metric not in protocol.metrics:
        raise ConfigError(f"protocol {protocol.name!r} has no metric {metric!r}; known: {list(protocol.metrics)}")
    scores = _scorer(protocol, unit_curves, groups, metric)
    curves = {m: curve_scores(c, np.ones((1, len(c))))[0] for m, c in unit_curves.items()}
    everything = np.arange(len(next(iter(unit_curves.values()))))[None, :]
    if scores is not None:
        curves[metric] = scores(everything)[0]
    best_all = _best(curves[metric], alphas)
    cv = tuned_on = None
    if tune_cases is not None:
        _, _, _, t_curves, t_groups = _unit_curves(engine, list(tune_cases), protocol, config, alphas)
        t_scores = _scorer(protocol, t_curves, t_groups, metric)
        t_idx = np.arange(len(next(iter(t_curves.values()))))[None, :]
        on_tune = t_scores(t_idx)[0] if t_scores else curve_scores(t_curves[metric], np.ones((1, t_idx.shape[1])))[0]
        alpha, score = _best(on_tune, alphas)
        tuned_on = {"split": config.tune_split, "n_cases": len(tune_cases), "alpha_star": alpha, "score": score}
        name = "tuned"
    elif config.alpha == "tune":
        cv = cross_validate_alpha(
            unit_curves.get(metric, next(iter(unit_curves.values()))),  # the units; `scores` aggregates
            alphas,
            n_splits=config.n_splits,
            val_fraction=config.val_fraction,
            seed=config.seed,
            scores=scores,
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
        "blind": blind_matrices(cases, priors),
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
        tuned_on=tuned_on,
    )


def _best(scores: np.ndarray, alphas: np.ndarray) -> tuple[float, float]:
    """``(alpha*, score)``: the best score on the grid (ties: the smallest alpha)."""
    k = int(np.nanargmax(scores)) if np.isfinite(scores).any() else 0
    return float(alphas[k]), float(scores[k])


def config_dict(config: DebiasConfig) -> dict[str, Any]:
    """A JSON-ready view of a config (images as their descriptions)."""
    d = asdict(config)
    d["images"] = [r.describe() for r in config.images]
    return d
