"""Training losses as pure functions of similarity matrices (torch): CLIP's InfoNCE, SigLIP's sigmoid
loss, SPEC's hard-negative terms (Eq. 6-9) and EqBen's EqSim (Sec. 3, App. C), each with its sigmoid
form for SigLIP-style models. Conventions and the paper mapping: docs/training.md.
"""

from __future__ import annotations

import functools
from typing import Literal

import torch
import torch.nn.functional as F

Reduction = Literal["mean", "sum", "none"]
ScoreKind = Literal["cosine", "itm", "sigmoid", "raw"]
EqSimVariant = Literal["v1", "v2", "hybrid", "reference"]

__all__ = [
    "clip_contrastive_loss",
    "close_pair_mask",
    "contrastive_loss",
    "contrastive_name",
    "eqsim_loss",
    "eqsim_pair_scores",
    "eqsim_reference",
    "eqsim_v1",
    "eqsim_v2",
    "normalize_scores",
    "reference_close_pairs",
    "siglip_hn_loss",
    "siglip_loss",
    "spec_hn_i2t",
    "spec_hn_loss",
    "spec_hn_t2i",
    "spec_loss",
]


def _reduce(values: torch.Tensor, reduction: Reduction) -> torch.Tensor:
    if reduction == "mean":
        return values.mean() if values.numel() else values.sum()
    if reduction == "sum":
        return values.sum()
    if reduction == "none":
        return values
    raise ValueError(f"unknown reduction {reduction!r}; use 'mean', 'sum' or 'none'")


def _check_square(similarity: torch.Tensor, name: str = "similarity") -> int:
    if similarity.ndim != 2 or similarity.shape[0] != similarity.shape[1]:
        shape = tuple(similarity.shape)
        raise ValueError(f"{name} must be a square [N, N] matrix of matched pairs, got {shape}")
    return similarity.shape[0]


# --------------------------------------------------------------------------------------------------
# CLIP


def clip_contrastive_loss(
    similarity: torch.Tensor, logit_scale: float | torch.Tensor = 1.0, *, reduction: Reduction = "mean"
) -> torch.Tensor:
    """CLIP's symmetric InfoNCE loss (Radford et al. 2021, Fig. 3 pseudo-code).

    ``L = (CE(z, diag) + CE(z^T, diag)) / 2`` with ``z = logit_scale * similarity``: the mean of the
    image-to-text cross-entropy over rows and the text-to-image cross-entropy over columns.
    With ``reduction="none"`` returns the per-pair average of the two terms, shape ``[N]``.

    Args:
        similarity: ``[N, N]`` cosines, matched pairs on the diagonal.
        logit_scale: the multiplicative temperature.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """
    n = _check_square(similarity)
    logits = similarity * logit_scale
    target = torch.arange(n, device=similarity.device)
    i2t = F.cross_entropy(logits, target, reduction="none")
    t2i = F.cross_entropy(logits.t(), target, reduction="none")
    return _reduce((i2t + t2i) / 2, reduction)


# --------------------------------------------------------------------------------------------------
# SigLIP (Zhai et al. 2023)


def _log_sigmoid_pairs(
    similarity: torch.Tensor, logit_scale: float | torch.Tensor, logit_bias: float | torch.Tensor, sign: float
) -> torch.Tensor:
    """``-log sigmoid(sign * (logit_scale * similarity + logit_bias))`` elementwise."""
    return -F.logsigmoid(sign * (similarity * logit_scale + logit_bias))


def siglip_loss(
    similarity: torch.Tensor,
    logit_scale: float | torch.Tensor = 1.0,
    logit_bias: float | torch.Tensor = 0.0,
    *,
    reduction: Reduction = "mean",
) -> torch.Tensor:
    """SigLIP's pairwise sigmoid loss (Zhai et al. 2023, Sec. 3.1 Eq. 1 and Algorithm 1).

    ``L = -1/N sum_i sum_j log sigmoid(z_ij * (t * cos(x_i, y_j) + b))`` with ``z_ij = 1`` for the
    matched pair (``i = j``) and ``-1`` otherwise, ``t = logit_scale`` (the multiplicative
    temperature, ``exp(t')``) and ``b = logit_bias`` the learned bias (initialised at -10 in the
    paper). Every image-text pair is an independent binary problem, so no softmax normalises over
    the batch. With ``reduction="none"`` returns each image's row sum, shape ``[N]`` (their mean is
    the paper's loss).

    Args:
        similarity: ``[N, N]`` cosines, matched pairs on the diagonal.
        logit_scale: the multiplicative temperature ``t``.
        logit_bias: the learned bias ``b``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """
    n = _check_square(similarity)
    eye = torch.eye(n, dtype=torch.bool, device=similarity.device)
    pos = _log_sigmoid_pairs(similarity, logit_scale, logit_bias, 1.0)
    neg = _log_sigmoid_pairs(similarity, logit_scale, logit_bias, -1.0)
    return _reduce(torch.where(eye, pos, neg).sum(dim=1), reduction)


def contrastive_loss(
    similarity: torch.Tensor, logit_scale: float | torch.Tensor = 1.0, logit_bias: float | torch.Tensor | None = None
) -> torch.Tensor:
    """A model's own contrastive loss: :func:`siglip_loss` with ``logit_bias`` (a sigmoid-trained model,
    SigLIP), :func:`clip_contrastive_loss` without (CLIP); the train log names it :func:`contrastive_name`.

    Args:
        similarity: ``[N, N]`` cosines, matched pairs on the diagonal.
        logit_scale: the multiplicative temperature.
        logit_bias: SigLIP's learned bias, or None for CLIP's softmax loss.
    """
    if logit_bias is None:
        return clip_contrastive_loss(similarity, logit_scale)
    return siglip_loss(similarity, logit_scale, logit_bias)


def contrastive_name(logit_bias: float | torch.Tensor | None) -> str:
    """The name of :func:`contrastive_loss`'s term: ``"clip"`` or, with a bias, ``"siglip"``."""
    return "clip" if logit_bias is None else "siglip"


# --------------------------------------------------------------------------------------------------
# SPEC, Sec. 5.1


def _trivial(trivial_mask: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """``trivial_mask`` as a bool ``[n, n]`` tensor, checked; None stays None."""
    if trivial_mask is None:
        return None
    if trivial_mask.shape != (n, n):
        raise ValueError(f"trivial_mask must have shape {(n, n)}, got {tuple(trivial_mask.shape)}")
    return trivial_mask.to(torch.bool)


def _hard_negatives(
    hn: torch.Tensor | None, mask: torch.Tensor | None, n: int, name: str
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """Hard-negative similarities ``[n, H]`` and their bool mask, checked; None when there are none."""
    if hn is None or not hn.numel():
        return None
    if hn.ndim != 2 or hn.shape[0] != n:
        raise ValueError(f"hard-negative {name}similarities must have shape [{n}, H], got {tuple(hn.shape)}")
    if mask is not None and mask.shape != hn.shape:
        raise ValueError(f"hard-negative {name}mask and similarities must have the same shape")
    return hn, None if mask is None else mask.to(torch.bool)


def _hn_term(
    similarity: torch.Tensor,
    hn_similarity: torch.Tensor | None,
    hn_mask: torch.Tensor | None,
    trivial_mask: torch.Tensor | None,
    logit_scale: float | torch.Tensor,
    *,
    columns: bool = False,
) -> torch.Tensor:
    """Per-anchor ``-log(s_ii / (sum_{j trivial} s_ij + sum_{k hn} s_ik))`` with ``s = exp(z)``, over rows
    (Eq. 7), or with ``columns`` over the columns of ``similarity`` and ``trivial_mask`` (Eq. 8)."""
    if columns:
        similarity = similarity.t()
        trivial_mask = None if trivial_mask is None else trivial_mask.t()
    n = _check_square(similarity)
    logits = similarity * logit_scale
    eye = torch.eye(n, dtype=torch.bool, device=similarity.device)
    trivial = _trivial(trivial_mask, n)
    if trivial is not None:
        logits = logits.masked_fill(~(trivial | eye), float("-inf"))  # the positive is always in its denominator
    checked = _hard_negatives(hn_similarity, hn_mask, n, "")
    if checked is not None:
        hn, mask = checked
        hn_logits = hn * logit_scale
        if mask is not None:
            hn_logits = hn_logits.masked_fill(~mask, float("-inf"))
        logits = torch.cat([logits, hn_logits], dim=1)
    positive = similarity.diagonal() * logit_scale
    return torch.logsumexp(logits, dim=1) - positive


def spec_hn_i2t(
    similarity: torch.Tensor,
    hn_text_similarity: torch.Tensor | None = None,
    *,
    hn_text_mask: torch.Tensor | None = None,
    trivial_mask: torch.Tensor | None = None,
    logit_scale: float | torch.Tensor = 1.0,
    reduction: Reduction = "mean",
) -> torch.Tensor:
    """SPEC Eq. 7, the image-to-text hard-negative-aware term.

    ``L_i2t = -sum_i log[ s(I_i,T_i) / (sum_{T_j in T} s(I_i,T_j) + sum_{T_k^hn in T^hn_i} s(I_i,T_k^hn)) ]``
    with ``s(I, T) = exp(logit_scale * cos(e_I, e_T))`` (Eq. 6; the paper prints squared norms in the
    cosine's denominator, read here as a typo for CLIP's cosine).

    Args:
        similarity: ``[N, N]`` cosines of the trivial pairs, ``similarity[i, j] = cos(I_i, T_j)``; the
            trivial texts ``T`` of anchor ``i`` are the columns (restricted by ``trivial_mask``).
        hn_text_similarity: ``[N, H]``, ``cos(I_i, T^hn_{i,k})``: anchor ``i``'s hard-negative texts
            (for SPEC, the other candidates of ``I_i``'s candidate set). Padding is masked out by
            ``hn_text_mask`` (``[N, H]`` bool, True = a real hard negative).
        trivial_mask: optional ``[N, N]`` bool, True where text ``j`` is a trivial negative of image
            ``i`` (the diagonal is always kept). Use it to keep a negative that is already counted as
            a hard negative out of the trivial sum.
        reduction: ``"mean"`` (default) averages over anchors; ``"sum"`` is Eq. 7's literal sum.
    """
    values = _hn_term(similarity, hn_text_similarity, hn_text_mask, trivial_mask, logit_scale)
    return _reduce(values, reduction)


def spec_hn_t2i(
    similarity: torch.Tensor,
    hn_image_similarity: torch.Tensor | None = None,
    *,
    hn_image_mask: torch.Tensor | None = None,
    trivial_mask: torch.Tensor | None = None,
    logit_scale: float | torch.Tensor = 1.0,
    reduction: Reduction = "mean",
) -> torch.Tensor:
    """SPEC Eq. 8, the text-to-image hard-negative-aware term.

    ``L_t2i = -sum_i log[ s(I_i,T_i) / (sum_{I_j in I} s(I_j,T_i) + sum_{I_k^hn in I^hn_i} s(I_k^hn,T_i)) ]``.

    ``similarity`` is the same ``[N, N]`` image-by-text matrix as in :func:`spec_hn_i2t` (the columns
    are the anchors here); ``hn_image_similarity[i, k] = cos(I^hn_{i,k}, T_i)`` holds text ``i``'s
    hard-negative images; ``trivial_mask[j, i]`` (image ``j``, text ``i``) as in :func:`spec_hn_i2t`.

    ``similarity``, ``trivial_mask``, ``logit_scale`` and ``reduction`` as in :func:`spec_hn_i2t`
    (``reduction="sum"`` is Eq. 8's literal sum).

    Args:
        hn_image_similarity: ``[N, H]``, text ``i``'s hard-negative images.
        hn_image_mask: ``[N, H]`` bool, True = a real hard negative.
    """
    values = _hn_term(similarity, hn_image_similarity, hn_image_mask, trivial_mask, logit_scale, columns=True)
    return _reduce(values, reduction)


def spec_hn_loss(
    similarity: torch.Tensor,
    hn_text_similarity: torch.Tensor | None = None,
    hn_image_similarity: torch.Tensor | None = None,
    *,
    hn_text_mask: torch.Tensor | None = None,
    hn_image_mask: torch.Tensor | None = None,
    trivial_mask: torch.Tensor | None = None,
    logit_scale: float | torch.Tensor = 1.0,
    reduction: Reduction = "mean",
) -> torch.Tensor:
    """SPEC Sec. 5.1: ``L_hn = L_hn^i2t + L_hn^t2i`` (Eq. 7 + Eq. 8); arguments as there.

    Without hard negatives (and without ``trivial_mask``) this is twice :func:`clip_contrastive_loss`.

    Args:
        similarity: ``[N, N]`` image-by-text cosines of the anchor pairs.
        hn_text_similarity, hn_image_similarity: ``[N, H]`` hard-negative cosines (Eq. 7, Eq. 8).
        hn_text_mask, hn_image_mask: ``[N, H]`` bool, True = a real hard negative.
        trivial_mask: ``[N, N]`` bool, the trivial pairs (the diagonal is always kept).
        logit_scale: the multiplicative temperature.
        reduction: ``"mean"`` over anchors (default), ``"sum"`` or ``"none"``.
    """
    common = {"trivial_mask": trivial_mask, "logit_scale": logit_scale, "reduction": reduction}
    i2t = spec_hn_i2t(similarity, hn_text_similarity, hn_text_mask=hn_text_mask, **common)
    return i2t + spec_hn_t2i(similarity, hn_image_similarity, hn_image_mask=hn_image_mask, **common)


def siglip_hn_loss(
    similarity: torch.Tensor,
    hn_text_similarity: torch.Tensor | None = None,
    hn_image_similarity: torch.Tensor | None = None,
    *,
    hn_text_mask: torch.Tensor | None = None,
    hn_image_mask: torch.Tensor | None = None,
    trivial_mask: torch.Tensor | None = None,
    logit_scale: float | torch.Tensor = 1.0,
    logit_bias: float | torch.Tensor = 0.0,
    reduction: Reduction = "mean",
) -> torch.Tensor:
    """SPEC's hard-negative term (Sec. 5.1, Eq. 7-8) for sigmoid scores (SigLIP).

    With ``l(I, T) = logit_scale * cos(I, T) + logit_bias`` and ``-log sigmoid`` as the pairwise loss
    of :func:`siglip_loss`, anchor ``i`` contributes::

        -log s(l(I_i, T_i)) + sum_{j trivial} -log s(-l(I_i, T_j))
                            + sum_k -log s(-l(I_i, T^hn_ik)) + sum_k -log s(-l(I^hn_ik, T_i))

    i.e. the SigLIP loss over the anchor pairs (restricted to ``trivial_mask``, the diagonal always
    kept) with each anchor's hard-negative texts (Eq. 7's ``T^hn``) and hard-negative images (Eq. 8's
    ``I^hn``) added as extra negative pairs. A sigmoid loss has no normaliser to put them in, so the
    softmax's two directions become one sum: each trivial pair ``(i, j)`` is counted once, as in
    :func:`siglip_loss`, rather than once per direction. Without hard negatives and mask it equals
    :func:`siglip_loss`. Arguments as in :func:`spec_hn_loss`; ``"mean"`` averages over anchors.

    Args:
        similarity, hn_text_similarity, hn_image_similarity, hn_text_mask, hn_image_mask, trivial_mask,
            logit_scale, reduction: as in :func:`spec_hn_loss`.
        logit_bias: the learned bias of :func:`siglip_loss`.
    """
    n = _check_square(similarity)
    eye = torch.eye(n, dtype=torch.bool, device=similarity.device)
    neg = _log_sigmoid_pairs(similarity, logit_scale, logit_bias, -1.0)
    trivial = _trivial(trivial_mask, n)
    if trivial is not None:
        neg = neg.masked_fill(~trivial, 0.0)
    pos = _log_sigmoid_pairs(similarity, logit_scale, logit_bias, 1.0)
    values = torch.where(eye, pos, neg).sum(dim=1)
    for hn, mask, name in ((hn_text_similarity, hn_text_mask, "text "), (hn_image_similarity, hn_image_mask, "image ")):
        checked = _hard_negatives(hn, mask, n, name)
        if checked is not None:
            extra = _log_sigmoid_pairs(checked[0], logit_scale, logit_bias, -1.0)
            if checked[1] is not None:
                extra = extra.masked_fill(~checked[1], 0.0)
            values = values + extra.sum(dim=1)
    return _reduce(values, reduction)


def spec_loss(
    clip_similarity: torch.Tensor | None,
    hn_similarity: torch.Tensor | None,
    hn_text_similarity: torch.Tensor | None = None,
    hn_image_similarity: torch.Tensor | None = None,
    *,
    lam: float = 0.2,
    hn_text_mask: torch.Tensor | None = None,
    hn_image_mask: torch.Tensor | None = None,
    trivial_mask: torch.Tensor | None = None,
    logit_scale: float | torch.Tensor = 1.0,
    logit_bias: float | torch.Tensor | None = None,
    output_dict: bool = False,
) -> torch.Tensor | dict[str, torch.Tensor]:
    """SPEC Eq. 9: ``L = L_clip + lambda * L_hn``.

    ``L_clip`` (:func:`clip_contrastive_loss`) is computed on the ordinary image-text pairs
    (``clip_similarity``, LAION in the paper), ``L_hn`` (:func:`spec_hn_loss`, mean over anchors) on
    the hard-negative data; either may be ``None`` (its term is then 0). The paper uses
    ``lambda = 0.2`` (Sec. 5.2). With ``logit_bias`` (a sigmoid-trained model) the terms take their
    sigmoid forms, :func:`siglip_loss` and :func:`siglip_hn_loss`.

    Args:
        clip_similarity: ``[N, N]`` cosines of the ordinary pairs, or None.
        hn_similarity: ``[M, M]`` cosines of the hard-negative data's anchor pairs, or None.
        hn_text_similarity, hn_image_similarity, hn_text_mask, hn_image_mask, trivial_mask: the
            anchors' hard negatives, as in :func:`spec_hn_loss`.
        lam: the weight ``lambda`` of ``L_hn``.
        logit_scale: the multiplicative temperature.
        logit_bias: SigLIP's learnt bias; None (the default) for CLIP's softmax losses.
        output_dict: return the named terms, ``{"total": L, "hn": L_hn, "clip": L_clip}`` (``"siglip"``
            for the sigmoid form; an absent term is left out), instead of ``L`` alone.
    """
    ref = clip_similarity if clip_similarity is not None else hn_similarity
    if ref is None:
        raise ValueError("spec_loss needs clip_similarity or hn_similarity")
    terms: dict[str, torch.Tensor] = {}
    total = ref.new_zeros(())
    if clip_similarity is not None and clip_similarity.numel():
        clip = contrastive_loss(clip_similarity, logit_scale, logit_bias)
        terms[contrastive_name(logit_bias)] = clip
        total = total + clip
    if hn_similarity is not None and hn_similarity.numel():
        hn_loss = spec_hn_loss if logit_bias is None else functools.partial(siglip_hn_loss, logit_bias=logit_bias)
        hn = hn_loss(
            hn_similarity,
            hn_text_similarity,
            hn_image_similarity,
            hn_text_mask=hn_text_mask,
            hn_image_mask=hn_image_mask,
            trivial_mask=trivial_mask,
            logit_scale=logit_scale,
        )
        terms = {"hn": hn, **terms}  # the train log's order
        total = total + lam * hn
    return {"total": total, **terms} if output_dict else total


# --------------------------------------------------------------------------------------------------
# EqSim, EqBen Sec. 3 and App. C


def normalize_scores(
    scores: torch.Tensor,
    kind: ScoreKind = "cosine",
    *,
    logit_scale: float | torch.Tensor = 1.0,
    logit_bias: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """The similarity ``s`` EqSim regularises (EqBen App. C).

    * ``"cosine"`` (dual encoders with ITC): the cosine, scaled by ``logit_scale`` and "normalized by
      a softmax function" over each image's row of texts: ``softmax(logit_scale * scores, dim=-1)``.
    * ``"itm"`` (fusion encoders with an ITM head): the ITM logit through a sigmoid.
    * ``"sigmoid"`` (SigLIP): the model's own match probability
      ``sigmoid(logit_scale * scores + logit_bias)``, the quantity its loss (:func:`siglip_loss`)
      trains, normalised by a sigmoid as App. C does for ITM scores.
    * ``"raw"``: the scores unchanged.

    Args:
        scores: the ``[N, N]`` scores.
        kind: ``"cosine"``, ``"itm"``, ``"sigmoid"`` or ``"raw"``.
        logit_scale: the multiplicative temperature (``cosine``, ``sigmoid``).
        logit_bias: the bias (``sigmoid``).
    """
    if kind == "cosine":
        return torch.softmax(scores * logit_scale, dim=-1)
    if kind == "itm":
        return torch.sigmoid(scores)
    if kind == "sigmoid":
        return torch.sigmoid(scores * logit_scale + logit_bias)
    if kind == "raw":
        return scores
    raise ValueError(f"unknown score kind {kind!r}; use 'cosine', 'itm', 'sigmoid' or 'raw'")


def _hinge_mse(diff: torch.Tensor, alpha: float) -> torch.Tensor:
    if diff.numel() == 0:
        return diff.sum()
    return torch.clamp(diff.pow(2).mean() - alpha, min=0.0)


def eqsim_v1(s12: torch.Tensor, s21: torch.Tensor, alpha: float = 0.0) -> torch.Tensor:
    """EqSim v1 (EqBen Eq. 6 and Sec. 3): ``[ ||s12 - s21||^2 - alpha ]_+``.

    ``s12 = s(I_1, T_2)`` and ``s21 = s(I_2, T_1)`` are the cross scores of pairs of matched
    pairs, any shape; the squared norm is the mean squared error over the pairs (the paper "adopts
    MSE loss"), and the hinge with margin ``alpha`` applies to that mean. No pairs give 0.

    Args:
        s12, s21: the cross scores, any shape (alike).
        alpha: the margin.
    """
    return _hinge_mse(s12 - s21, alpha)


def eqsim_v2(
    s11: torch.Tensor, s12: torch.Tensor, s21: torch.Tensor, s22: torch.Tensor, alpha: float = 0.0
) -> torch.Tensor:
    """EqSim v2 (EqBen Eq. 6): both differences of ``s11 - s12 = s22 - s21, s11 - s21 = s22 - s12``.

    ``[ ||(s11 - s12) - (s22 - s21)||^2 - alpha ]_+ + [ ||(s11 - s21) - (s22 - s12)||^2 - alpha ]_+``
    (image-side and text-side margins; each squared norm a mean over the pairs, each with its own
    hinge, as in the EqBen reference implementation). No pairs give 0.

    Args:
        s11, s12, s21, s22: the four scores of each pair of matched pairs, any shape (alike).
        alpha: the margin.
    """
    return _hinge_mse((s11 - s12) - (s22 - s21), alpha) + _hinge_mse((s11 - s21) - (s22 - s12), alpha)


def eqsim_pair_scores(
    scores: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(s11, s12, s21, s22)`` for the pairs of matched pairs ``(first[p], second[p])`` of a batch.

    ``scores[i, j]`` is image ``i`` against text ``j`` with matched pairs on the diagonal, so for
    ``a = first[p]``, ``b = second[p]``: ``s11 = S[a, a]``, ``s12 = S[a, b]``, ``s21 = S[b, a]``,
    ``s22 = S[b, b]``.

    Args:
        scores: ``[N, N]``, matched pairs on the diagonal.
        first, second: ``[P]`` indices of the pairs of matched pairs.
    """
    return scores[first, first], scores[first, second], scores[second, first], scores[second, second]


def close_pair_mask(similarity: torch.Tensor, k: int = 8, *, close: torch.Tensor | None = None) -> torch.Tensor:
    """The "semantically close" pairs of a batch for EqSim-hybrid (EqBen Sec. 3, App. C).

    For each matched pair ``i``, the ``k`` texts with the highest ``similarity[i, :]`` and the ``k``
    images with the highest ``similarity[:, i]`` (excluding ``i`` itself) are close to ``i``
    ("images and text with top-8 s are regarded as the semantically close samples"). ``close``
    (optional ``[N, N]`` bool) adds known close pairs, for example the members of one candidate set.
    Returns a strictly upper-triangular ``[N, N]`` bool mask, each unordered pair once.

    Args:
        similarity: ``[N, N]`` raw similarities.
        k: close texts and close images per matched pair.
        close: ``[N, N]`` bool, known close pairs added.
    """
    n = _check_square(similarity)
    with torch.no_grad():
        mask = torch.zeros(n, n, dtype=torch.bool, device=similarity.device)
        kk = min(int(k), n - 1)
        if kk > 0:
            eye = torch.eye(n, dtype=torch.bool, device=similarity.device)
            s = similarity.detach().masked_fill(eye, float("-inf"))
            rows = torch.arange(n, device=similarity.device).unsqueeze(1).expand(n, kk)
            mask[rows, s.topk(kk, dim=1).indices] = True  # texts close to image i
            mask[rows, s.t().topk(kk, dim=1).indices] = True  # images close to text i
        if close is not None:
            mask |= close.to(device=mask.device, dtype=torch.bool)
        mask = mask | mask.t()
        return torch.triu(mask, diagonal=1)


def reference_close_pairs(
    logits: torch.Tensor, k: int = 8, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The close pairs of the EqBen reference code's EqSim: ``(first, second)`` ordered index pairs.

    EqBen's training code (``EqSim/FIBER``, ``compute_itm_hardneg`` with ``pairloss='hard_easy_itc'``)
    draws, for each anchor ``a``, ``sample_num`` texts with probability ``softmax(logits[a, :])`` and
    ``sample_num`` images with probability ``softmax(logits[:, a])`` (its own entry zeroed), without
    replacement, and pairs ``a`` with each draw. Here ``k`` draws per anchor split evenly between the
    two directions (``k = 8`` is the released recipe's ``sample_num = 4``; the paper's App. C says
    "top-8"). Draws use ``generator`` (default: torch's global RNG, which ``spotdiff train`` seeds and
    checkpoints). A pair may appear twice (drawn as a text and as an image), as in the reference.

    Args:
        logits: ``[N, N]`` scaled similarities.
        k: draws per anchor, split between texts and images.
        generator: the draws' generator (default: torch's global one).
    """
    n = _check_square(logits, "logits")
    kk = min(int(k), 2 * (n - 1))
    if kk <= 0:
        empty = torch.zeros(0, dtype=torch.long, device=logits.device)
        return empty, empty
    per_dir = (kk - kk // 2, kk // 2)  # (texts, images) per anchor
    with torch.no_grad():
        eye = torch.eye(n, dtype=torch.bool, device=logits.device)
        firsts, seconds = [], []
        for count, scores in zip(per_dir, (logits.detach(), logits.detach().t()), strict=True):
            count = min(count, n - 1)
            if count <= 0:
                continue
            weights = torch.softmax(scores.double(), dim=1).clamp_min(1e-300).masked_fill(eye, 0.0)
            drawn = torch.multinomial(weights, count, replacement=False, generator=generator)
            firsts.append(torch.arange(n, device=logits.device).repeat_interleave(count))
            seconds.append(drawn.reshape(-1))
        return torch.cat(firsts), torch.cat(seconds)


def eqsim_reference(
    scores: torch.Tensor, first: torch.Tensor, second: torch.Tensor, alpha: float = 0.0
) -> torch.Tensor:
    """EqSim as the EqBen reference code computes it (``pairloss='hard_easy_itc'``), without ``beta``.

    ``scores`` is the normalised ``[N, N]`` matrix (:func:`normalize_scores`), ``(first[p], second[p])``
    the close pairs (:func:`reference_close_pairs`, plus any known ones). Then:

    * EqSim-v2 (:func:`eqsim_v2`, hinge ``alpha`` on each side's mean) over the close pairs, duplicates
      kept (the reference's ``pairloss_criterion`` with both sides);
    * EqSim-v1 on the *easy* pairs only: ``mean_{i,j} E_ij (S_ij - S_ji)^2`` over all ``N^2`` entries,
      where ``E`` is 0 on the close pairs (both orders) and 1 elsewhere, so the masked entries and the
      zero diagonal count in the mean (``MSELoss(S * E, S^T * E)``), without a margin (the reference's
      ``pairloss_margin_v1`` defaults to 0).

    Args:
        scores: the normalised ``[N, N]`` matrix.
        first, second: the close pairs.
        alpha: EqSim-v2's margin.
    """
    n = _check_square(scores, "scores")
    easy = torch.ones(n, n, dtype=scores.dtype, device=scores.device)
    if first.numel():
        easy[first, second] = 0.0
        easy[second, first] = 0.0
    v1 = ((scores - scores.t()).pow(2) * easy).mean()
    return v1 + eqsim_v2(*eqsim_pair_scores(scores, first, second), alpha)


def eqsim_loss(
    similarity: torch.Tensor,
    *,
    variant: EqSimVariant = "hybrid",
    alpha: float = 0.0,
    beta: float = 1.0,
    k: int = 8,
    score: ScoreKind = "cosine",
    logit_scale: float | torch.Tensor = 1.0,
    logit_bias: float | torch.Tensor = 0.0,
    close: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``beta * L_EQ`` over the matched pairs of a batch (EqBen Sec. 3 and App. C).

    ``similarity`` is the ``[N, N]`` image-by-text matrix of the batch's matched pairs (cosines when
    ``score`` is ``"cosine"`` or ``"sigmoid"``, ITM logits when ``"itm"``); it is normalised by
    :func:`normalize_scores` first (``"sigmoid"``: ``sigmoid(logit_scale * cos + logit_bias)``, the
    SigLIP form). Every unordered pair of matched pairs ``(a, b)`` gives ``(s11, s12, s21, s22)``.

    * ``"v1"``: :func:`eqsim_v1` on all pairs (EqSim_v1-all, Table 6).
    * ``"v2"``: :func:`eqsim_v2` on all pairs (EqSim_v2-all).
    * ``"hybrid"`` (the default): EqSim_v1 on all pairs + EqSim_v2 on the top-``k`` close pairs of
      :func:`close_pair_mask` ("EqSim is equivalent to EqSim_v1-all + EqSim_v2-close", Sec. 5.4,
      with App. C's "top-8"). Closeness is read from the raw ``similarity`` (before normalisation).
    * ``"reference"``: the EqBen reference code's variant (:func:`eqsim_reference`): EqSim_v2 on close
      pairs *sampled* in proportion to the softmax of ``logit_scale * similarity``
      (:func:`reference_close_pairs`, ``k`` per anchor) and EqSim_v1 on the remaining, easy pairs
      only, averaged over all ``N^2`` entries. ``close`` pairs join the sampled ones.

    ``close`` (optional ``[N, N]`` bool) marks known close pairs, for example two anchors of one
    candidate set. The default is ``"hybrid"``: it is what the paper defines and ablates (Sec. 3,
    Sec. 5.4, Tables 6 and 10) and it is deterministic; ``"reference"`` reproduces the released
    training recipe, which departs from the text in three ways (sampled rather than top-k close
    pairs, v1 restricted to the easy pairs, v1's mean over ``N^2`` entries).

    The total loss is then ``L_Ret + beta * L_EQ`` (Sec. 3); App. C picks ``alpha`` from
    {0, 0.04, 0.1} and ``beta`` from {0.2, 0.5, 1.0}, and ``k = 8``.

    Args:
        similarity: the ``[N, N]`` matrix of the batch's matched pairs.
        variant: ``"v1"``, ``"v2"``, ``"hybrid"`` or ``"reference"``.
        alpha: the hinge margin.
        beta: the weight of ``L_EQ``.
        k: close pairs per matched pair.
        score: how ``similarity`` is normalised (:func:`normalize_scores`).
        logit_scale, logit_bias: the normalisation's temperature and bias.
        close: ``[N, N]`` bool, known close pairs.
        generator: the ``"reference"`` variant's draws.
    """
    n = _check_square(similarity)
    s = normalize_scores(similarity, score, logit_scale=logit_scale, logit_bias=logit_bias)
    first, second = torch.triu_indices(n, n, offset=1, device=similarity.device)
    if variant == "v1":
        _, s12, s21, _ = eqsim_pair_scores(s, first, second)
        loss = eqsim_v1(s12, s21, alpha)
    elif variant == "v2":
        loss = eqsim_v2(*eqsim_pair_scores(s, first, second), alpha)
    elif variant == "hybrid":
        _, s12, s21, _ = eqsim_pair_scores(s, first, second)
        loss = eqsim_v1(s12, s21, alpha)
        cf, cs = close_pair_mask(similarity, k, close=close).nonzero(as_tuple=True)
        loss = loss + eqsim_v2(*eqsim_pair_scores(s, cf, cs), alpha)
    elif variant == "reference":
        cf, cs = reference_close_pairs(similarity * logit_scale, k, generator=generator)
        if close is not None:
            kf, ks = torch.triu(close.to(device=s.device, dtype=torch.bool), diagonal=1).nonzero(as_tuple=True)
            cf, cs = torch.cat([cf, kf]), torch.cat([cs, ks])
        loss = eqsim_reference(s, cf, cs, alpha)
    else:
        raise ValueError(f"unknown EqSim variant {variant!r}; use 'v1', 'v2', 'hybrid' or 'reference'")
    return beta * loss
