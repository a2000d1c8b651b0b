"""The options of ``spotdiff train`` (:class:`TrainConfig`) and what a run returns (:class:`TrainResult`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError
from spotdiff.optimize.evaluation import EvalTarget, KeepBest

LOSSES = ("clip", "spec-hn", "eqsim")
EQSIM_VARIANTS = ("v1", "v2", "hybrid", "reference")
# options that must match for a resumed run to continue the same run
RESUME_KEYS = ("seed", "batch_size", "cases_per_step", "loss", "model", "from_config")
# optimisation options a resumed run keeps from its checkpoint: they are part of the optimiser's state it
# restores (as Hugging Face Trainer's resume_from_checkpoint does); a new value is reported, not applied
KEPT_ON_RESUME = ("lr", "weight_decay")
# optimisation options a resumed run takes from the command line, from the step it resumes at
CHANGED_ON_RESUME = ("steps", "warmup_steps", "max_grad_norm")


@dataclass
class TrainConfig:
    """Options of :func:`train` (the ``spotdiff train`` flags of the same names)."""

    out: Path
    model: str | None = None
    from_config: str | None = None
    tokenizer: str | None = None
    loss: str = "clip"
    lam: float = 0.2
    eqsim_alpha: float = 0.0
    eqsim_beta: float = 0.5
    eqsim_variant: str = "hybrid"
    eqsim_k: int = 8
    steps: int = 100
    batch_size: int = 64
    cases_per_step: int = 8
    lr: float = 5e-5
    weight_decay: float = 0.1
    warmup_steps: int | None = None
    max_grad_norm: float = 1.0
    seed: int = 0
    save_every: int = 0
    keep_checkpoints: int = 2
    resume: bool | str = False
    stop_after: int | None = None
    log_every: int = 10
    device: str = "auto"
    mixed_precision: str = "no"
    evals: list[EvalTarget] = field(default_factory=list)
    eval_every: int = 0
    eval_n_boot: int = 1000
    eval_batch_size: int = 64
    keep: str | None = None
    store: Path | None = None
    tensorboard: bool = True
    wandb: str | None = None

    def validate(self) -> None:
        if (self.model is None) == (self.from_config is None):
            raise ConfigError("give exactly one of --model (a checkpoint) and --from-config (a fresh model)")
        if self.loss not in LOSSES:
            raise ConfigError(f"unknown --loss {self.loss!r}; choose from {', '.join(LOSSES)}")
        if self.eqsim_variant not in EQSIM_VARIANTS:
            raise ConfigError(f"unknown --eqsim-variant {self.eqsim_variant!r}; choose {', '.join(EQSIM_VARIANTS)}")
        if self.steps < 1:
            raise ConfigError("--steps must be at least 1")
        if self.batch_size < 0 or self.cases_per_step < 0:
            raise ConfigError("--batch-size and --cases-per-step must be >= 0")
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.steps:
            raise ConfigError("--warmup-steps must lie between 0 and --steps")
        if self.eval_every < 0:
            raise ConfigError("--eval-every must be >= 0")
        if (self.eval_every or self.keep) and not self.evals:
            raise ConfigError("--eval-every and --keep need at least one --eval NAME=DIR")
        if self.keep:
            KeepBest.parse(self.keep, self.evals)

    @property
    def warmup(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else self.steps // 10

    def options(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["out"] = str(self.out)
        return d


@dataclass
class TrainResult:
    """Where a run left the model: its folder, the step reached, whether it finished, this invocation's
    losses and speed, and the ``spotdiff eval --model`` spec of the finished model."""

    out: Path
    step: int
    finished: bool
    losses: list[float] = field(default_factory=list)
    steps_per_s: float = float("nan")
    eval_spec: str | None = None
