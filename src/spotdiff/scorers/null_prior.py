"""VisualGPTScore's null images and Monte Carlo language prior (Sec. 4, Eq. 6; App. 8).

P(t) is the mean VisualGPTScore over images (Eq. 6), by default Gaussian-noise null images with the
paper's defaults (:data:`NULL_DEFAULTS`, :data:`NULL_N_BY_BENCHMARK`). In which units the noise is
drawn, and why: docs/debiasing.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spotdiff.cases import NoiseImage
from spotdiff.errors import ConfigError

#: Null-image defaults of App. 8 ("Unless otherwise specified ... mean of 1.0 and a standard
#: deviation of 0.25 ... 10 images for the rest of the benchmarks ... fix the sampling seed").
NULL_DEFAULTS: dict[str, Any] = {"n": 10, "mean": 1.0, "std": 0.25, "seed": 0, "space": "normalized"}

#: The units of the null images' mean and std (see docs/debiasing.md).
NULL_SPACES = ("normalized", "pixel")

#: App. 8: "By default, we use 100 images for Winoground, 30 images for EqBen".
NULL_N_BY_BENCHMARK: dict[str, int] = {"winoground": 100, "eqben": 30}


def null_images(
    n: int = NULL_DEFAULTS["n"],
    *,
    seed: int = NULL_DEFAULTS["seed"],
    mean: float = NULL_DEFAULTS["mean"],
    std: float = NULL_DEFAULTS["std"],
    size: tuple[int, int] | None = None,
    normalization: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None,
) -> list[NoiseImage]:
    """``n`` Gaussian-noise "null" images (Sec. 4, App. 8), deterministic for ``seed``.

    Image ``k`` gets its own seed from ``numpy.random.SeedSequence(seed).spawn``, so the first
    images are the same whatever ``n``. Values are ``N(mean, std)``: [0, 1] intensities when
    ``normalization`` is None (``space="pixel"``), else values of the model's normalised input
    (:func:`null_normalization`), clipped and quantised by :class:`spotdiff.cases.NoiseImage`.
    ``size`` (width, height) should be the model's input size (``VisualGPTScorer.image_size``) so
    that resizing does not smooth the noise; None keeps NoiseImage's default.

    Args:
        n: the number of images.
        seed: the seed the images' own seeds are spawned from.
        mean: the noise's mean.
        std: its standard deviation.
        size: (width, height), the model's input size; None keeps ``NoiseImage``'s default.
        normalization: the model's ``(image_mean, image_std)``; None draws [0, 1] intensities.
    """
    if n < 1:
        raise ConfigError(f"the number of null images must be at least 1, got {n}")
    if std < 0:
        raise ConfigError(f"null-image std must be >= 0, got {std}")
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(n)]
    extra: dict[str, Any] = {"size": tuple(size)} if size is not None else {}
    if normalization is not None:
        extra["normalization"] = normalization
    return [NoiseImage(seed=s, mean=float(mean), std=float(std), **extra) for s in seeds]


def null_normalization(space: str, image_processor: Any) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """``(channel means, channel stds)`` that put null images in the model's normalised input space
    (``space="normalized"``, from the image processor's ``image_mean`` / ``image_std``), or None for
    [0, 1] pixel units (``space="pixel"``)."""
    if space not in NULL_SPACES:
        raise ConfigError(f"null-image space must be one of {', '.join(NULL_SPACES)}, got {space!r}")
    if space == "pixel":
        return None
    mean = getattr(image_processor, "image_mean", None)
    std = getattr(image_processor, "image_std", None)
    if mean is None or std is None:
        raise ConfigError(
            f"{type(image_processor).__name__} has no image_mean/image_std to define a normalised input "
            f"space; use null-image space 'pixel'"
        )
    means, stds = (tuple(float(x) for x in np.broadcast_to(np.asarray(v, dtype=float), (3,))) for v in (mean, std))
    return means, stds


def log_prior_from_scores(log_scores: np.ndarray) -> np.ndarray:
    """Monte Carlo ``log P(t) = log (1/n) sum_k VisualGPTScore(t, i_k)`` (Eq. 6).

    ``log_scores`` is ``[n_images, n_texts]`` of log VisualGPTScores; returns ``[n_texts]``.
    The average is over the scores themselves (not their logs), as Eq. 6 writes it.
    """
    from scipy.special import logsumexp  # scipy's import is a fifth of a second: only a prior pays it

    s = np.asarray(log_scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] == 0:
        raise ValueError(f"expected a non-empty [n_images, n_texts] matrix, got shape {s.shape}")
    return logsumexp(s, axis=0) - math.log(s.shape[0])
