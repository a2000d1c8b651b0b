"""Experiment trackers of ``spotdiff train``: TensorBoard event files and, when asked, Weights & Biases
(the scalars each receives: docs/training.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError


class Trackers:
    """The trackers of one training run; a context manager that closes them.

    Args:
        out: the training folder (TensorBoard writes to ``out/tensorboard``).
        training_id: names the Weights & Biases run.
        config: the training options, recorded by Weights & Biases.
        start_step: a resumed run's step; TensorBoard drops the events after it.
        tensorboard: write TensorBoard events.
        wandb_project: log to this Weights & Biases project too.
    """

    def __init__(
        self,
        out: Path,
        *,
        training_id: str,
        config: Mapping[str, Any],
        start_step: int = 0,
        tensorboard: bool = True,
        wandb_project: str | None = None,
    ) -> None:
        self._tb = None
        self._wandb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(Path(out) / "tensorboard"), purge_step=start_step or None)
        if wandb_project:
            try:
                import wandb
            except ImportError as exc:
                raise ConfigError("--wandb needs the wandb package: pip install 'spotdiff[wandb]'") from exc
            self._wandb = wandb.init(
                project=wandb_project, id=training_id, name=training_id, dir=str(out), config=dict(config),
                resume="allow",
            )  # fmt: skip

    def scalars(self, step: int, values: Mapping[str, float | None]) -> None:
        """Log finite ``values`` (tag -> number) at ``step``."""
        clean = {k: float(v) for k, v in values.items() if v is not None and math.isfinite(float(v))}
        if self._tb is not None:
            for tag, value in clean.items():
                self._tb.add_scalar(tag, value, step)
        if self._wandb is not None and clean:
            self._wandb.log(clean, step=step)

    def evaluation(self, step: int, records: list[dict]) -> None:
        """Log the ``all`` metrics of evaluation records (:class:`~spotdiff.optimize.evaluation.TrainingEvaluator`)."""
        values: dict[str, float | None] = {}
        for r in records:
            for metric, value in ((r.get("metrics") or {}).get("all") or {}).items():
                if metric.endswith("_ci95"):
                    lo, hi = value or (None, None)
                    values[f"eval/{r['label']}/{metric[: -len('_ci95')]}/ci_low"] = lo
                    values[f"eval/{r['label']}/{metric[: -len('_ci95')]}/ci_high"] = hi
                else:
                    values[f"eval/{r['label']}/{metric}"] = value
        self.scalars(step, values)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

    def __enter__(self) -> Trackers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
