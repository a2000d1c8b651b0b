"""The loss of ``spotdiff train``, built once from the configuration (open_clip's ``create_loss``).

:func:`create_loss` picks the ``--loss`` and the model's own contrastive form; the callable it returns
maps one global batch's embeddings to named terms (:mod:`spotdiff.optimize.losses` computes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from spotdiff.errors import ConfigError
from spotdiff.optimize.config import LOSSES, TrainConfig
from spotdiff.optimize.data import Batch
from spotdiff.optimize.losses import contrastive_loss, contrastive_name, eqsim_loss, spec_loss


class TrainingLoss(Protocol):
    """What :func:`create_loss` returns (open_clip's loss modules with ``output_dict=True``)."""

    def __call__(
        self, batch: Batch, image: torch.Tensor, text: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        """``{"total": the loss, TERM: value, ...}`` from the embeddings (unit rows) of ``batch``'s images
        and texts, the temperature and, for a sigmoid-trained model, the bias."""
        ...


def _matched(batch: Batch, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Image and text rows of every matched pair of the step: the caption pairs, then the cases' anchors."""
    return torch.cat([batch.cap_img, batch.case_img]).to(device), torch.cat([batch.cap_txt, batch.case_txt]).to(device)


def _bias(bias: torch.Tensor | None, sigmoid: bool) -> torch.Tensor | None:
    """The bias the loss uses: the model's for a sigmoid loss, None (CLIP's softmax forms) otherwise."""
    return bias if sigmoid else None


@dataclass(frozen=True)
class ClipLoss:
    """``clip``: the model's contrastive loss over all matched pairs of the step (the case-mates are
    in-batch negatives like any other)."""

    sigmoid: bool

    def __call__(self, batch, image, text, scale, bias):
        bias = _bias(bias, self.sigmoid)
        img, txt = _matched(batch, image.device)
        term = contrastive_loss((image @ text.t())[img][:, txt], scale, bias)
        return {"total": term, contrastive_name(bias): term}


@dataclass(frozen=True)
class SpecLoss:
    """``spec-hn``: SPEC Eq. 9 (:func:`~spotdiff.optimize.losses.spec_loss`), ``L_clip`` on the caption
    pairs and ``L_hn`` on the cases' anchors, whose trivial negatives are the other cases' anchors and
    whose hard negatives are their own case's false candidates."""

    sigmoid: bool
    lam: float

    def __call__(self, batch, image, text, scale, bias):
        bias = _bias(bias, self.sigmoid)
        sim = image @ text.t()
        dev = sim.device
        n_cap = len(batch.cap_img)
        ci, ct, group = batch.case_img.to(dev), batch.case_txt.to(dev), batch.case_group.to(dev)
        return spec_loss(
            sim[batch.cap_img.to(dev)][:, batch.cap_txt.to(dev)] if n_cap else None,
            sim[ci][:, ct] if len(ci) else None,
            sim[ci[:, None], batch.hn_text.to(dev)],
            sim[batch.hn_image.to(dev), ct[:, None]],
            lam=self.lam,
            hn_text_mask=batch.hn_text_mask.to(dev),
            hn_image_mask=batch.hn_image_mask.to(dev),
            trivial_mask=group[:, None] != group[None, :],  # other cases' anchors; the diagonal is added
            logit_scale=scale,
            logit_bias=bias,
            output_dict=True,
        )


@dataclass(frozen=True)
class EqSimLoss:
    """``eqsim``: the contrastive loss over all matched pairs plus ``beta * EqSim`` (EqBen Sec. 3) on
    their normalised similarity, every two anchors of one case counted close. The temperature (and
    bias) inside EqSim is detached: only the contrastive term learns it."""

    sigmoid: bool
    variant: str
    alpha: float
    beta: float
    k: int

    def __call__(self, batch, image, text, scale, bias):
        bias = _bias(bias, self.sigmoid)
        img, txt = _matched(batch, image.device)
        pair_sim = (image @ text.t())[img][:, txt]
        n_cap = len(batch.cap_img)
        group = torch.cat([torch.full((n_cap,), -1, dtype=torch.long), batch.case_group]).to(pair_sim.device)
        clip_term = contrastive_loss(pair_sim, scale, bias)
        eq_term = eqsim_loss(
            pair_sim,
            variant=self.variant,
            alpha=self.alpha,
            beta=self.beta,
            k=self.k,
            score="cosine" if bias is None else "sigmoid",
            logit_scale=scale.detach(),
            logit_bias=0.0 if bias is None else bias.detach(),
            close=(group[:, None] == group[None, :]) & (group[:, None] >= 0),
        )
        return {"total": clip_term + eq_term, contrastive_name(bias): clip_term, "eqsim": eq_term}


def create_loss(config: TrainConfig, objective: str) -> TrainingLoss:
    """The training loss of ``config`` for a model
    trained with ``objective`` (:attr:`~spotdiff.optimize.models.DualEncoder.objective`: ``"softmax"``
    or ``"sigmoid"``, which picks CLIP's or SigLIP's form of every term)."""
    sigmoid = objective == "sigmoid"
    if config.loss == "clip":
        return ClipLoss(sigmoid)
    if config.loss == "spec-hn":
        return SpecLoss(sigmoid, config.lam)
    if config.loss == "eqsim":
        return EqSimLoss(sigmoid, config.eqsim_variant, config.eqsim_alpha, config.eqsim_beta, config.eqsim_k)
    raise ConfigError(f"unknown --loss {config.loss!r}; choose from {', '.join(LOSSES)}")
