"""What a training run reports, as callbacks of :class:`~spotdiff.optimize.loop.Trainer`: the JSON-lines
train log and console lines, TensorBoard / Weights & Biases, evaluations during training."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from spotdiff.jsonio import iter_jsonl, write_jsonl
from spotdiff.optimize.config import TrainConfig
from spotdiff.optimize.evaluation import KeepBest, TrainingEvaluator
from spotdiff.optimize.retention import write_retention
from spotdiff.optimize.trackers import Trackers

log = logging.getLogger("spotdiff.optimize.loop")  # the loop's messages, under the loop's name


@dataclass
class StepOutput:
    """What one optimiser step reports: the loss terms (``"total"`` first), learning rate, temperature,
    bias (None for a softmax model), matched pairs and gradient norm (None without clipping)."""

    step: int
    terms: dict[str, float]
    lr: float
    logit_scale: float
    logit_bias: float | None
    pairs: int
    grad_norm: float | None

    @property
    def loss(self) -> float:
        return self.terms["total"]

    @property
    def parts(self) -> dict[str, float]:
        """The terms apart from the total."""
        return {k: v for k, v in self.terms.items() if k != "total"}

    def record(self) -> dict[str, Any]:
        """The step's line of ``train_log.jsonl``."""
        record = {"step": self.step, "loss": self.loss, **self.parts, "lr": self.lr,
                  "logit_scale": self.logit_scale, "pairs": self.pairs}  # fmt: skip
        if self.grad_norm is not None:
            record["grad_norm"] = self.grad_norm
        if self.logit_bias is not None:
            record["logit_bias"] = self.logit_bias
        return record


class Trainer(Protocol):
    """What callbacks see of :class:`spotdiff.optimize.loop.Trainer`."""

    config: TrainConfig
    out: Path
    ident: str
    options: dict[str, Any]
    core: Any
    device: torch.device
    is_main: bool
    step: int
    first_step: int
    end: int
    eval_s: float

    @property
    def finished(self) -> bool: ...

    def barrier(self) -> None: ...

    def checkpoint(self) -> None: ...

    def emit(self, event: str, *args: Any) -> None: ...


class Callback:
    """Hooks of a training run; each does nothing unless overridden. ``on_close`` runs in reverse order."""

    def on_start(self, trainer: Trainer) -> None: ...

    def on_step(self, trainer: Trainer, out: StepOutput) -> None: ...

    def on_evaluation(self, step: int, records: list[dict]) -> None: ...

    def on_end(self, trainer: Trainer) -> None: ...

    def on_close(self, trainer: Trainer) -> None: ...

    def on_abort(self, trainer: Trainer) -> None:
        """The run stops with an error (a full disk, a bug): release what the callback holds, writing
        nothing more; it must not raise."""


class StepLog(Callback):
    """``OUT/train_log.jsonl``, one line a step, holding exactly the steps of the model being trained; a
    console line every ``log_every`` steps and at the last."""

    def on_start(self, trainer: Trainer) -> None:
        self.path = trainer.out / "train_log.jsonl"
        kept = []
        if trainer.step and self.path.is_file():
            kept = [row for _, row in iter_jsonl(self.path) if row.get("step", 0) <= trainer.step]
        write_jsonl(self.path, kept, dump=json.dumps)

    def on_step(self, trainer: Trainer, out: StepOutput) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(out.record()) + "\n")
        every = trainer.config.log_every
        if every and (out.step % every == 0 or out.step == trainer.end):
            parts = " ".join(f"{k} {v:.4f}" for k, v in out.parts.items())
            log.info("step %d/%d loss %.4f %s lr %.3g", out.step, trainer.config.steps, out.loss, parts, out.lr)


class TrackerLog(Callback):
    """Each step's loss terms, learning rate, temperature, bias and gradient norm, and every evaluation,
    to TensorBoard (``OUT/tensorboard``) and Weights & Biases (:class:`~spotdiff.optimize.trackers.Trackers`)."""

    def __init__(self, trainer: Trainer) -> None:
        config = trainer.config
        self.trackers = Trackers(trainer.out, training_id=trainer.ident, config=trainer.options,
                                 start_step=trainer.step, tensorboard=config.tensorboard,
                                 wandb_project=config.wandb)  # fmt: skip

    def on_step(self, trainer: Trainer, out: StepOutput) -> None:
        values = {f"loss/{k}": v for k, v in out.terms.items()}
        values.update({"train/lr": out.lr, "train/logit_scale": out.logit_scale})
        values.update({"train/grad_norm": out.grad_norm, "train/logit_bias": out.logit_bias})
        self.trackers.scalars(out.step, values)

    def on_evaluation(self, step: int, records: list[dict]) -> None:
        self.trackers.evaluation(step, records)

    def on_close(self, trainer: Trainer) -> None:
        self.trackers.close()

    def on_abort(self, trainer: Trainer) -> None:
        """Stop the trackers' writers (TensorBoard's thread would outlive the run, and a process forked
        later could inherit its locks)."""
        try:
            self.trackers.close()
        except Exception as exc:  # the error that stops the run (often the same full disk) is the one to report
            log.warning("the trackers of %s could not be closed: %s", trainer.out, exc)


class Evaluation(Callback):
    """``--eval``: evaluations at step 0, every ``eval_every`` steps and at the end, on rank 0 (the others
    wait), with the retention curves (:mod:`spotdiff.optimize.evaluation`, :mod:`spotdiff.optimize.retention`)."""

    def __init__(self, trainer: Trainer) -> None:
        config = trainer.config
        self.label = trainer.core.eval_spec(trainer.out.resolve())
        keep = KeepBest.parse(config.keep, config.evals) if config.keep else None
        self.evaluator = TrainingEvaluator(config.evals, out=trainer.out, training_id=trainer.ident,
                                           model_label=self.label, store=config.store, seed=config.seed,
                                           n_boot=config.eval_n_boot, batch_size=config.eval_batch_size,
                                           keep=keep)  # fmt: skip
        if trainer.is_main:
            self.evaluator.truncate(trainer.step if trainer.step else -1)

    def on_start(self, trainer: Trainer) -> None:
        if trainer.step == 0:
            self.evaluate(trainer)

    def on_step(self, trainer: Trainer, out: StepOutput) -> None:
        every = trainer.config.eval_every
        if every and out.step % every == 0 and out.step < trainer.config.steps:
            self.evaluate(trainer)

    def on_end(self, trainer: Trainer) -> None:
        if trainer.finished:
            self.evaluate(trainer)

    def evaluate(self, trainer: Trainer) -> None:
        """Evaluate at the trainer's step, unless that step was evaluated already."""
        t0, step = time.perf_counter(), trainer.step
        if trainer.is_main and not any(r["step"] == step for r in self.evaluator.records()):
            records = self.evaluator(trainer.core, step, trainer.device)
            trainer.emit("on_evaluation", step, records)
            self.write_retention(trainer, png=False)
        trainer.barrier()
        trainer.eval_s += time.perf_counter() - t0

    def write_retention(self, trainer: Trainer, png: bool) -> None:
        records = self.evaluator.records()
        write_retention(trainer.out, records, training_id=trainer.ident, model=self.label, png=png)

    def on_close(self, trainer: Trainer) -> None:
        if trainer.is_main:
            self.write_retention(trainer, png=True)


class Checkpoints(Callback):
    """A checkpoint every ``save_every`` steps (not at the last of this invocation) and at the end."""

    def on_step(self, trainer: Trainer, out: StepOutput) -> None:
        every = trainer.config.save_every
        if every and out.step % every == 0 and out.step < trainer.end:
            trainer.checkpoint()

    def on_end(self, trainer: Trainer) -> None:
        if trainer.step > trainer.first_step:
            trainer.checkpoint()
