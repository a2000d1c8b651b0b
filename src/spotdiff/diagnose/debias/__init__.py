"""VisualGPTScore's language-prior correction (Lin et al., Sec. 4-6): P(t), PMI, alpha-debiasing.

* :mod:`.prior`: ``log P(t|i) - alpha log P(t)`` (Eq. 12) and PMI (Eq. 5, 11); P(t) from null
  images or real images (:mod:`spotdiff.scorers.null_prior`, Eq. 6) or the gallery (App. 8).
* :mod:`.alpha`: exact alpha curves of a protocol metric, tuning and Table 4a cross-validation.
* :mod:`.variants`: raw / PMI / blind / tuned score matrices of one evaluation.
* :mod:`.blind`: how far the text-only prior alone gets on a benchmark (Table 2a, ``spotdiff bias``).
* :mod:`.evaluate`: ``spotdiff eval --debias``, each variant recorded as a run.
"""

from spotdiff.diagnose.debias.alpha import (
    ALPHA_STEP,
    alpha_curves,
    alpha_grid,
    cross_validate_alpha,
    i2t_alpha_curve,
    tune_alpha,
)
from spotdiff.diagnose.debias.prior import debias, gallery_log_prior, pmi
from spotdiff.diagnose.debias.variants import DebiasConfig, DebiasResult, config_dict, debias_variants
from spotdiff.scorers.null_prior import NULL_DEFAULTS, NULL_N_BY_BENCHMARK, log_prior_from_scores, null_images

__all__ = [
    "ALPHA_STEP",
    "NULL_DEFAULTS",
    "NULL_N_BY_BENCHMARK",
    "DebiasConfig",
    "DebiasResult",
    "alpha_curves",
    "alpha_grid",
    "config_dict",
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
