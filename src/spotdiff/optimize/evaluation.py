"""Evaluation during training: the weights being trained, through the ordinary engine, protocols and recorder.

Each evaluation is an ordinary run linked to the training run and step, scored in memory by
:class:`TrainingScorer` without touching the training's RNG; ``--keep best:METRIC`` saves the best
model to ``OUT/best``. docs/training.md describes the files and guarantees.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import numpy as np
import torch
from PIL import Image

from spotdiff.benchmarks.base import CaseSelection
from spotdiff.diagnose.runner import EvalConfig, resolve, run_eval
from spotdiff.errors import ConfigError, writing
from spotdiff.jsonio import dumps, iter_jsonl, write_json, write_jsonl
from spotdiff.scorers.base import EmbeddingScorer, ScorerOptions
from spotdiff.scorers.weights import state_dict_digest

log = logging.getLogger(__name__)


@dataclass
class EvalTarget(CaseSelection):
    """One ``--eval NAME=DIR[:SUBSET][?KEY=VALUE&...]``: the cases (:class:`CaseSelection`), a label and options."""

    label: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        return self.label.replace(":", "-").replace("/", "-")

    def config(self, **run: Any) -> EvalConfig:
        """The :class:`~spotdiff.diagnose.runner.EvalConfig` of an evaluation of this target.

        Args:
            run: the other fields of the run (``model`` at least).
        """
        cases = {f.name: getattr(self, f.name) for f in fields(CaseSelection)}
        return EvalConfig(**cases, options=dict(self.options), **run)


def parse_eval_target(text: str) -> EvalTarget:
    """Parse ``NAME=DIR[:SUBSET][?KEY=VALUE&...]`` and check the benchmark, subset and protocol.

    A ``:`` ends the folder only when what follows names no existing path and holds no ``/``.
    """
    spec, _, query = text.partition("?")
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise ConfigError(f"--eval {text!r}: expected NAME=DIR[:SUBSET][?KEY=VALUE&...]")
    data, subset = rest, None
    head, colon, tail = rest.rpartition(":")
    if colon and head and tail and "/" not in tail and not Path(rest).exists():
        data, subset = head, tail
    options = dict(parse_qsl(query, keep_blank_values=True))
    protocol = options.pop("protocol", None)
    limit = options.pop("limit", None)
    try:
        limit_n = int(limit) if limit is not None else None
    except ValueError as exc:
        raise ConfigError(f"--eval {text!r}: limit must be an integer") from exc
    target = EvalTarget(label=f"{name}:{subset}" if subset else name, benchmark=name, data=Path(data), subset=subset,
                        protocol=protocol, limit=limit_n, options=options)  # fmt: skip
    resolve(target.config(model=""))
    return target


class TrainingScorer(EmbeddingScorer):
    """The dual encoder being trained, as an embedding scorer: encodes with the weights in memory.

    Images go through the model's own preprocessing and texts through its own tokenizer, exactly as the
    scorer of the saved checkpoint would; the rows are L2-normalised float32.

    Args:
        core: the :class:`~spotdiff.optimize.models.DualEncoder` being trained.
        spec: the model label of the runs (``<label>@step<N>``).
        device: where it encodes.
        batch_size: items per forward pass.
        info: recorded in the scorer's identity (the training id and step).
    """

    capabilities = frozenset({"image-text", "text-text"})

    def __init__(self, core: Any, spec: str, *, device: torch.device, batch_size: int, info: dict) -> None:
        super().__init__(spec, ScorerOptions(device=str(device), dtype="float32", batch_size=batch_size))
        self.core = core
        self.device = device
        self.info = info
        self._identity: dict | None = None

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            model = getattr(self.core, "model", self.core)
            self._identity = {
                "spec": self.spec,
                "family": "training",
                "class": type(model).__name__,
                "weights_sha256": state_dict_digest(model),
                "dtype": "float32",
                "device": str(self.device),
                **self.info,
            }
        return dict(self._identity)

    def _encode(self, items: list, encode) -> np.ndarray:
        size = max(1, int(self.options.batch_size))
        out = []
        with torch.inference_mode():
            for start in range(0, len(items), size):
                out.append(encode(items[start : start + size]).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        def encode(chunk: list) -> torch.Tensor:
            return self.core.encode_image(self.core.preprocess_images(chunk).to(self.device))

        return self._encode([im.convert("RGB") for im in images], encode)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        def encode(chunk: list) -> torch.Tensor:
            tokens = self.core.tokenize(chunk)
            return self.core.encode_text(tokens["input_ids"].to(self.device), tokens["attention_mask"].to(self.device))

        return self._encode(list(texts), encode)


def _rng_states() -> dict[str, Any]:
    states = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _restore_rng(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["random"])
    if "cuda" in states:
        torch.cuda.set_rng_state_all(states["cuda"])


@dataclass
class KeepBest:
    """``--keep best:METRIC``: which evaluation's metric decides, and the best value so far."""

    label: str
    metric: str
    value: float = float("-inf")
    step: int | None = None

    @classmethod
    def parse(cls, text: str, targets: Sequence[EvalTarget]) -> KeepBest:
        kind, _, name = text.partition(":")
        if kind != "best" or not name:
            raise ConfigError(f"--keep {text!r}: expected best:METRIC or best:LABEL/METRIC")
        label, slash, metric = name.rpartition("/")
        labels = [t.label for t in targets]
        if not slash:
            if len(targets) != 1:
                raise ConfigError(f"--keep {text!r}: name the evaluation, best:LABEL/{name}; labels: {labels}")
            label, metric = labels[0], name
        target = next((t for t in targets if t.label == label), None)
        if target is None:
            raise ConfigError(f"--keep {text!r}: no --eval labelled {label!r}; labels: {labels}")
        _, protocol = resolve(target.config(model=""))
        if metric not in protocol.metrics:
            raise ConfigError(f"--keep {text!r}: protocol {protocol.name} has no metric {metric!r}; "
                              f"it has {', '.join(protocol.metrics)}")  # fmt: skip
        return cls(label, metric)


@dataclass
class TrainingEvaluator:
    """Evaluates the model being trained on every target and records each evaluation (module docstring).

    Attributes:
        targets: the ``--eval`` benchmarks.
        out: the training folder.
        training_id: the training run's id (recorded with every evaluation).
        model_label: the model label of the runs (``<label>@step<N>`` per evaluation).
        store: the run store path (None: the default store).
        seed, n_boot, batch_size: the evaluations' seed, bootstrap resamples and batch size.
        keep: the ``--keep best:`` rule, if any.
    """

    targets: Sequence[EvalTarget]
    _: KW_ONLY
    out: Path
    training_id: str
    model_label: str
    store: Path | None = None
    seed: int = 0
    n_boot: int = 1000
    batch_size: int = 64
    keep: KeepBest | None = None

    def __post_init__(self) -> None:
        self.targets = list(self.targets)
        self.out = Path(self.out)
        self.log_path = self.out / "eval_log.jsonl"

    def records(self) -> list[dict]:
        """The evaluations logged so far (``eval_log.jsonl``)."""
        if not self.log_path.is_file():
            return []
        return [row for _, row in iter_jsonl(self.log_path)]

    def truncate(self, step: int) -> None:
        """Keep the log of the steps up to ``step`` (a resumed run continues the same curve), and the best
        value among them."""
        kept = [r for r in self.records() if r["step"] <= step]
        write_jsonl(self.log_path, kept, dump=dumps)
        best = self.out / "best" / "best.json"
        if self.keep is not None and best.is_file():
            saved = json.loads(best.read_text(encoding="utf-8"))
            if saved.get("step") is not None and saved["step"] <= step:
                self.keep.value, self.keep.step = float(saved["value"]), int(saved["step"])

    def __call__(self, core: Any, step: int, device: torch.device) -> list[dict]:
        """Evaluate ``core`` (a :class:`~spotdiff.optimize.models.DualEncoder`) at ``step``; return the records."""
        states = _rng_states()
        was_training = core.training
        core.eval()
        info = {"training": self.training_id, "step": step}
        scorer = TrainingScorer(core, f"{self.model_label}@step{step}", device=device, batch_size=self.batch_size,
                                info=info)  # fmt: skip
        records = []
        try:
            for target in self.targets:
                config = target.config(
                    model=scorer.spec,
                    out=self.out / "evals" / target.slug / f"step-{step:07d}",
                    batch_size=self.batch_size,
                    device=str(device),
                    seed=self.seed,
                    store=self.store,
                    n_boot=self.n_boot,
                    progress=False,
                    extra_info={"training": {**info, "label": target.label}},
                    training=self.training_id,
                    step=step,
                )
                result = run_eval(config, scorer=scorer)
                record = {
                    "step": step,
                    "label": target.label,
                    "benchmark": target.benchmark,
                    "subset": target.subset,
                    "protocol": resolve(config)[1].name,
                    "run_id": result.run_id,
                    "n_cases": result.n_cases,
                    "metrics": result.metrics,
                }
                with self.log_path.open("a", encoding="utf-8") as f:
                    f.write(dumps(record) + "\n")
                records.append(record)
                log.info("step %d %s: %s", step, target.label, _headline(result.metrics.get("all", {})))
        finally:
            if was_training:
                core.train()
            _restore_rng(states)
        self._keep_best(core, step, records)
        return records

    def _keep_best(self, core: Any, step: int, records: list[dict]) -> None:
        if self.keep is None:
            return
        record = next((r for r in records if r["label"] == self.keep.label), None)
        value = None if record is None else (record["metrics"].get("all") or {}).get(self.keep.metric)
        if value is None or not np.isfinite(value) or value <= self.keep.value:
            return
        self.keep.value, self.keep.step = float(value), step
        best = self.out / "best"
        with writing(best):
            core.save(best)
        write_json(best / "best.json", {"label": self.keep.label, "metric": self.keep.metric, "value": value,
                                        "step": step, "run_id": record["run_id"]})  # fmt: skip
        log.info("step %d: best %s/%s = %.4f, saved to %s", step, self.keep.label, self.keep.metric, value, best)


def _headline(metrics: dict) -> str:
    return " ".join(f"{k} {v:.2f}" for k, v in metrics.items() if not k.endswith("_ci95") and v is not None)
