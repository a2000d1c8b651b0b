"""Experiment trackers of ``spotdiff train``: TensorBoard event files and, when asked, Weights & Biases.

Every logged step sends the same scalars to each tracker: ``loss/total`` and each loss term on its
own (``loss/clip`` or ``loss/siglip``, ``loss/hn``, ``loss/eqsim``), ``train/lr``,
``train/logit_scale``, ``train/logit_bias`` (sigmoid models), ``train/grad_norm``, and after each
evaluation ``eval/<label>/<metric>`` with ``.../ci_low`` and ``.../ci_high``. TensorBoard writes
through ``torch.utils.tensorboard`` into ``OUT/tensorboard`` (``tensorboard --logdir OUT``); a
resumed run purges the events after its step, so the curves hold exactly the trained steps. Weights &
Biases (``--wandb PROJECT``) needs the ``wandb`` package (``pip install spotdiff[wandb]``); the run
is named by the training id and resumed under it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError


class Trackers:
    """The trackers of one training run; a context manager that closes them."""

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
