"""The debiasing variants of one ``vgpt:`` evaluation: raw, PMI, blind and tuned (Sec. 5-6).

:func:`debias_variants` scores the cases once, estimates P(t) (null images, real images or the
gallery), computes the exact alpha curve of the protocol's metric, tunes alpha with Table 4a's
cross-validation (or takes a fixed alpha), and returns one score matrix per case for each variant.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.cases import Case, ImageRef
from spotdiff.diagnose.debias.alpha import (
    ALPHA_STEP,
    alpha_curves,
    alpha_grid,
    cross_validate_alpha,
    curve_scores,
    tune_alpha,
)
from spotdiff.diagnose.debias.blind import blind_matrices
from spotdiff.diagnose.debias.prior import debias, gallery_log_prior, pmi
from spotdiff.errors import ConfigError
from spotdiff.scorers.null_prior import NULL_DEFAULTS, NULL_N_BY_BENCHMARK, log_prior_from_scores, null_images


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
            "alphas": [] if self.alphas is None else [float(a) for a in self.alphas],
            "curves": {m: [float(v) for v in c] for m, c in self.curves.items()},
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
        engine: a :class:`spotdiff.diagnose.engine.Engine` around an ``image-text`` scorer whose pair score
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
    curves = {m: curve_scores(c, np.ones((1, len(c))))[0] for m, c in unit_curves.items()}
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
    )


def config_dict(config: DebiasConfig) -> dict[str, Any]:
    """A JSON-ready view of a config (images as their descriptions)."""
    d = asdict(config)
    d["images"] = [r.describe() for r in config.images]
    return d
