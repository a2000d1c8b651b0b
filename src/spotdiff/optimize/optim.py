"""The optimiser shared by spotdiff's trainers: AdamW without decay on biases, norms and scalars, linear
warm-up then cosine decay, and a clipped step."""

from __future__ import annotations

from typing import Any

import torch


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW parameter groups: weight decay on matrices, none on biases, norms and scalars (as CLIP)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def adamw_cosine(
    model: torch.nn.Module, *, lr: float, weight_decay: float, warmup: int, steps: int, eps: float = 1e-6
) -> tuple[torch.optim.AdamW, Any]:
    """AdamW (betas 0.9 / 0.98, as CLIP) over :func:`param_groups` and its warm-up + cosine schedule.

    Args:
        model: the parameters' module.
        lr: the peak learning rate.
        weight_decay: the decay of the matrices.
        warmup: linear warm-up steps.
        steps: total steps (the cosine reaches 0 there).
        eps: AdamW's epsilon (CLIP's 1e-6 by default).
    """
    from transformers import get_cosine_schedule_with_warmup

    optimizer = torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=(0.9, 0.98), eps=eps)
    return optimizer, get_cosine_schedule_with_warmup(optimizer, warmup, steps)


def clipped_step(loss: torch.Tensor, model: torch.nn.Module, optimizer: Any, scheduler: Any, max_norm: float) -> None:
    """Backpropagate ``loss`` from zeroed gradients, clip their norm at ``max_norm``, step the optimiser
    and the schedule.

    Args:
        loss: the step's loss.
        model: the module whose gradients are clipped.
        optimizer: the optimiser.
        scheduler: its learning-rate schedule.
        max_norm: the gradient-norm bound.
    """
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    scheduler.step()
