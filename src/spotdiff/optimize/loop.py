"""Fine-tune (or train from a config) a dual encoder: :func:`train`, a :class:`Trainer` and its callbacks.

The loss is built once (:func:`~spotdiff.optimize.objective.create_loss`); logging, evaluation and
checkpoints are callbacks (:mod:`spotdiff.optimize.callbacks`). docs/training.md describes the batch,
the losses, resumption and distributed runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from spotdiff.cases import Case
from spotdiff.errors import ConfigError, writing
from spotdiff.jsonio import write_json
from spotdiff.optimize.callbacks import Callback, Checkpoints, Evaluation, StepLog, StepOutput, TrackerLog
from spotdiff.optimize.checkpoint import (
    TRAINING_MARKER,
    CheckpointUnreadable,
    TrainingLock,
    check_rng_states,
    checkpoint_dir,
    claim_training_dir,
    latest_checkpoint,
    list_checkpoints,
    load_rng_state,
    load_trainer_state,
    prune_checkpoints,
    read_checked,
    save_checkpoint,
    saved_options,
    weight_files,
)
from spotdiff.optimize.config import CHANGED_ON_RESUME, KEPT_ON_RESUME, RESUME_KEYS, TrainConfig, TrainResult
from spotdiff.optimize.data import Batch, EpochSampler, Pair, PixelCache, PreparedCase, build_batch, prepare_cases
from spotdiff.optimize.models import DualEncoder, build_clip_from_config, load_dual_encoder
from spotdiff.optimize.objective import create_loss
from spotdiff.optimize.optim import adamw_cosine
from spotdiff.scorers.factory import hf_name, parse_open_clip_spec
from spotdiff.seeding import seed_everything

log = logging.getLogger(__name__)

__all__ = ["TrainConfig", "TrainResult", "Trainer", "TrainingInterrupted", "train"]


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a training at the end of a step; the message says what was saved and
    where ``--resume`` continues."""


# ---------------------------------------------------------------------------------------- encoding


def _shard(n: int, world: int, rank: int) -> list[int]:
    """Rank ``rank``'s contiguous share of ``range(n)``, padded to ``ceil(n / world)`` items."""
    per = max(1, math.ceil(n / world))
    own = list(range(rank * per, min((rank + 1) * per, n)))
    return own + [n - 1] * (per - len(own))


class _AllGatherWithGrad(torch.autograd.Function):
    """``all_gather`` along dim 0 whose backward sums the gradients of every rank's copy and hands
    each rank the slice of its own input (an all-reduce then a slice: a reduce-scatter)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        ctx.rank, ctx.rows = dist.get_rank(), x.shape[0]
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def _gather(x: torch.Tensor, n: int, world: int) -> torch.Tensor:
    if world == 1:
        return x[:n]
    return _AllGatherWithGrad.apply(x)[:n]


def encode_batch(
    model: Any, core: DualEncoder, batch: Batch, cache: PixelCache, device: torch.device, world: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Embeddings of all images and texts of the global batch (this rank encodes its share), the
    temperature and the bias (None for a softmax-trained model).

    Args:
        model: the (possibly DDP-wrapped) model whose forward runs.
        core: the unwrapped :class:`~spotdiff.optimize.models.DualEncoder` (preprocessing, tokenizer).
        batch: the global batch.
        cache: preprocessed pixels of images already seen.
        device: where the model runs.
        world, rank: the number of processes and this one's rank.
    """
    img_idx = _shard(len(batch.images), world, rank)
    txt_idx = _shard(len(batch.texts), world, rank)
    pixels = cache.pixels([batch.images[i] for i in img_idx], core.preprocess_images).to(device)
    tokens = core.tokenize([batch.texts[i] for i in txt_idx])
    image, text, scale, bias = model(pixels, tokens["input_ids"].to(device), tokens["attention_mask"].to(device))
    return _gather(image, len(batch.images), world), _gather(text, len(batch.texts), world), scale, bias


# --------------------------------------------------------------------------------------- monitoring


def training_id(out: Path, resumed: bool, is_main: bool) -> str:
    """The id of this training run: kept in ``OUT/training.json``, the same across resumptions.

    Args:
        out: the training folder.
        resumed: whether the run resumes (then the saved id is kept).
        is_main: whether this process writes ``training.json``.
    """
    path = out / TRAINING_MARKER
    if resumed and path.is_file():
        return str(json.loads(path.read_text(encoding="utf-8"))["id"])
    new = uuid.uuid4().hex[:12]
    if is_main:
        write_json(path, {"id": new, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return new


# -------------------------------------------------------------------------------------------- setup


def _check_data(config: TrainConfig, pairs: Sequence[Pair], prepared: Sequence[PreparedCase]) -> None:
    n_pairs = len(pairs) if config.batch_size else 0
    n_cases = len(prepared) if config.cases_per_step else 0
    if n_pairs == 0 and n_cases == 0:
        raise ConfigError("no training data: give captions (--captions) and/or cases with images (--cases)")
    if config.loss == "spec-hn" and n_cases == 0:
        log.warning("--loss spec-hn without cases: only the L_clip term of SPEC Eq. 9 is trained")


def _resume_candidates(config: TrainConfig) -> list[Path]:
    """The checkpoints to resume from, newest first (``--resume CKPT``: that one; none: a fresh run); a
    fresh run into a folder with checkpoints is refused."""
    paths: list[Path] = []
    if isinstance(config.resume, str) and config.resume not in ("", "latest", "auto"):
        paths = [Path(config.resume)]
        if not (paths[0] / "trainer_state.pt").is_file():
            raise ConfigError(f"--resume {paths[0]}: not a spotdiff training checkpoint (no trainer_state.pt)")
    elif config.resume:
        paths = [path for _, path in reversed(list_checkpoints(Path(config.out)))]
        if not paths:
            log.warning("--resume: no complete checkpoint in %s; training starts at step 0", config.out)
    if not paths and list_checkpoints(Path(config.out)):
        raise ConfigError(
            f"{config.out} already holds checkpoints of another run; pass --resume to continue it or choose a new --out"
        )
    return paths


def _warn_changed_options(config: TrainConfig, resume_from: Path, step: int) -> None:
    """Say which options differ from the checkpoint's, and which value the resumed run uses (docs/training.md)."""
    old = saved_options(resume_from)
    changed = {k: (old[k], getattr(config, k)) for k in RESUME_KEYS if k in old and old[k] != getattr(config, k)}
    if changed:
        log.warning(
            "resuming %s with changed options %s; the run will not match an uninterrupted one", resume_from, changed
        )
    for key in (*KEPT_ON_RESUME, *CHANGED_ON_RESUME):
        if key in old and old[key] != getattr(config, key):
            flag, new = "--" + key.replace("_", "-"), getattr(config, key)
            if key in KEPT_ON_RESUME:
                log.warning("--resume: %s %s is not applied: the checkpoint's %s continues with its optimiser state "
                            "(as Hugging Face Trainer resumes); start a new --out to train with %s %s",
                            flag, new, old[key], flag, new)  # fmt: skip
            else:
                log.warning("--resume: %s changed from %s to %s; the new value applies from step %d on",
                            flag, old[key], new, step)  # fmt: skip


def _model_dirs(spec: str | None) -> list[Path]:
    """The local folders holding the model of ``spec`` (none for a hub id or a preset)."""
    if not spec:
        return []
    family, _, rest = spec.partition(":")
    if family == "open-clip":
        name, pretrained = parse_open_clip_spec(rest)
        paths = [name.removeprefix("local-dir:"), pretrained or ""]
    else:
        paths = [hf_name(spec)]
    return [Path(p) for p in paths if p and Path(p).is_dir()]


def _build_model(config: TrainConfig) -> DualEncoder:
    if config.from_config is not None:
        return build_clip_from_config(config.from_config, tokenizer=config.tokenizer, seed=config.seed)
    return load_dual_encoder(config.model or "")


# -------------------------------------------------------------------------------------------- train


class Trainer:
    """One training run (minGPT's ``Trainer``): the model, its optimiser and schedule, the data samplers
    and the step reached; :meth:`run` steps until ``steps`` (or ``stop_after``) and tells the callbacks.

    Args:
        config: the options (validated here).
        pairs: ordinary image-caption pairs.
        cases: candidate sets; their anchors and hard negatives join each step.
    """

    def __init__(self, config: TrainConfig, pairs: Sequence[Pair] = (), cases: Sequence[Case] = ()) -> None:
        from accelerate import Accelerator

        config.validate()
        self.config, self.pairs, self.cases = config, pairs, prepare_cases(cases)
        _check_data(config, pairs, self.cases)
        self.accelerator = Accelerator(cpu=config.device == "cpu", mixed_precision=config.mixed_precision)
        self.is_main, self.device = self.accelerator.is_main_process, self.accelerator.device
        self.out = Path(config.out)
        claim_training_dir(self.out, _model_dirs(config.model))
        self.barrier()  # every rank has looked at the folder before rank 0 writes into it
        self.lock = None
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            self.lock = TrainingLock(self.out)
        self.stop_signal: str | None = None
        try:
            self.setup(config, pairs)
        except BaseException:
            if self.lock is not None:
                self.lock.release()  # at once, not when the failed Trainer is collected
            raise

    def setup(self, config: TrainConfig, pairs: Sequence[Pair]) -> None:
        """The model (built, or restored from the checkpoint resumed), optimiser, schedule and samplers."""
        seed_everything(config.seed)
        candidates = _resume_candidates(config)
        if config.batch_size > len(pairs) > 0 or config.cases_per_step > len(self.cases) > 0:
            log.warning("a step asks for more items than the data holds; some repeat within a step")
        self.core = _build_model(config)
        self.loss_fn = create_loss(config, self.core.objective)
        self.optimizer, self.scheduler = adamw_cosine(self.core, lr=config.lr, weight_decay=config.weight_decay,
                                                      warmup=config.warmup, steps=config.steps)  # fmt: skip
        resume_from, self.step = self.restore_newest(candidates) if candidates else (None, 0)
        self.first_step = self.step
        if resume_from is not None:
            _warn_changed_options(config, resume_from, self.step)
        # the scheduler is stepped by hand: accelerate's wrapper would step it once per process
        self.model, self.optimizer = self.accelerator.prepare(self.core, self.optimizer)
        self.core = self.accelerator.unwrap_model(self.model)
        self.cap_sampler = EpochSampler(len(pairs), config.seed, stream=1)
        self.case_sampler = EpochSampler(len(self.cases), config.seed, stream=2)
        self.pixel_cache = PixelCache()
        self.end = config.steps if config.stop_after is None else min(config.steps, self.step + config.stop_after)
        self.options = config.options()
        self.ident = training_id(self.out, resume_from is not None, self.is_main)
        self.losses: list[float] = []
        self.eval_s = 0.0
        self.callbacks: list[Callback] = []

    def restore_newest(self, candidates: Sequence[Path]) -> tuple[Path, int]:
        """Restore the first of ``candidates`` (newest first) whose files all load; one warning names each
        checkpoint skipped and why, and an error names every file when none loads. Returns it and its step."""
        reasons = []
        for directory in candidates:
            try:
                return directory, self.restore(directory)
            except CheckpointUnreadable as exc:
                reasons.append(f"{directory}: {exc}")
                if directory != candidates[-1]:
                    log.warning("--resume: skipping %s, which does not load (%s); trying the one before it",
                                directory, exc)  # fmt: skip
        raise ConfigError(f"--resume: no checkpoint loads ({'; '.join(reasons)}); move the damaged ones aside to "
                          "resume from an older one or start at step 0, or choose a new --out")  # fmt: skip

    def restore(self, directory: Path) -> int:
        """Load the weights, optimiser and scheduler states and this rank's RNG state; return the step.
        Every file is read before any state is set: a damaged one raises :class:`CheckpointUnreadable`."""
        state = load_trainer_state(directory)
        check_rng_states(directory)
        read_checked(directory, self.core.load_weights, weight_files(directory))
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        load_rng_state(directory, self.accelerator.process_index)
        log.info("resumed from %s at step %d", directory, int(state["step"]))
        return int(state["step"])

    @property
    def finished(self) -> bool:
        return self.step >= self.config.steps

    def barrier(self) -> None:
        self.accelerator.wait_for_everyone()

    def emit(self, event: str, *args: Any) -> None:
        """Call ``event`` on every callback (``on_close`` in reverse order)."""
        callbacks = reversed(self.callbacks) if event == "on_close" else self.callbacks
        for callback in callbacks:
            getattr(callback, event)(*args)

    def batch(self) -> Batch:
        """The global batch of the current step (a pure function of the seed and the step)."""
        c = self.config
        pairs = [self.pairs[i] for i in self.cap_sampler.take(self.step, c.batch_size)]
        cases = [self.cases[i] for i in self.case_sampler.take(self.step, c.cases_per_step)]
        return build_batch(pairs, cases)

    def train_step(self) -> StepOutput:
        """One optimiser step on the current step's global batch."""
        batch = self.batch()
        acc = self.accelerator
        image, text, scale, bias = encode_batch(self.model, self.core, batch, self.pixel_cache, self.device,
                                                acc.num_processes, acc.process_index)  # fmt: skip
        bias = None if bias is None else bias.float()
        terms = self.loss_fn(batch, image.float(), text.float(), scale.float(), bias)
        acc.backward(terms["total"])
        grad_norm = None
        if self.config.max_grad_norm and self.config.max_grad_norm > 0:
            grad_norm = float(acc.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return StepOutput(
            step=self.step,
            terms={k: v.item() for k, v in terms.items()},
            lr=self.scheduler.get_last_lr()[0],
            logit_scale=scale.item(),
            logit_bias=None if bias is None else float(bias.detach().reshape(-1)[0]),
            pairs=batch.n_pairs,
            grad_norm=grad_norm,
        )

    def checkpoint(self) -> None:
        """Save a checkpoint of the current step (every rank calls it) and prune the old ones."""
        acc = self.accelerator
        save_checkpoint(checkpoint_dir(self.out, self.step), model=self.core, optimizer=self.optimizer,
                        scheduler=self.scheduler, step=self.step, options=self.options, is_main=self.is_main,
                        rank=acc.process_index, barrier=acc.wait_for_everyone)  # fmt: skip
        if self.is_main:
            prune_checkpoints(self.out, self.config.keep_checkpoints)

    def run(self) -> TrainResult:
        """Train from the current step to the end; save the finished model and the run's summary.

        SIGINT or SIGTERM stops at the end of the current step, saves a checkpoint and raises
        :class:`TrainingInterrupted`; a second signal stops at once. The folder's lock is released.
        """
        try:
            with self.stop_on_signals():
                result = self.train_to_end()
        except BaseException:
            self.emit("on_abort", self)
            raise
        finally:
            if self.lock is not None:
                self.lock.release()
        if self.stop_signal is not None and not result.finished:
            raise TrainingInterrupted(self.interrupted_message())
        return result

    def train_to_end(self) -> TrainResult:
        """The loop of :meth:`run`: steps until the end or a stop signal, then the callbacks' end."""
        self.emit("on_start", self)
        t_start, t_after_first, eval_before = time.perf_counter(), None, self.eval_s
        self.model.train()
        while self.step < self.end and not self.stop_requested():
            out = self.train_step()
            self.losses.append(out.loss)
            t_after_first = t_after_first or time.perf_counter()
            self.emit("on_step", self, out)
        elapsed = time.perf_counter() - (t_after_first or t_start) - (self.eval_s - eval_before)
        done = self.step - self.first_step
        steps_per_s = (done - 1) / elapsed if done > 1 and elapsed > 0 else float("nan")
        self.emit("on_end", self)
        eval_spec = None
        if self.finished:
            if self.is_main:
                with writing(self.out):
                    self.core.save(self.out)
            eval_spec = self.core.eval_spec(self.out)
        self.emit("on_close", self)
        if self.is_main:
            self.write_summary(steps_per_s, eval_spec)
        self.barrier()
        return TrainResult(self.out, self.step, self.finished, self.losses, steps_per_s, eval_spec)

    def stop_requested(self) -> bool:
        """Whether a stop signal reached any rank (every rank asks at every step, so all stop together)."""
        if self.stop_signal is not None:
            self.accelerator.set_trigger()
        stop = self.accelerator.check_trigger()
        if stop and self.stop_signal is None:
            self.stop_signal = "a stop signal to another rank"
        return stop

    @contextlib.contextmanager
    def stop_on_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM set :attr:`stop_signal` (a second one raises KeyboardInterrupt at once)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(signum: int, frame: object) -> None:
            if self.stop_signal is not None:
                raise KeyboardInterrupt
            self.stop_signal = signal.Signals(signum).name
            log.warning("%s: stopping after step %d to save a checkpoint (send it again to stop at once)",
                        self.stop_signal, self.step + 1)  # fmt: skip

        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, signal.SIG_DFL if handler is None else handler)

    def interrupted_message(self) -> str:
        """What an interruption saved and where ``--resume`` continues."""
        saved = latest_checkpoint(self.out)
        step = int(saved.name.rpartition("-")[2]) if saved is not None else 0
        what = f"checkpoint saved in {saved}" if saved is not None and step == self.step else "no step saved"
        where = f"{self.stop_signal} at step {self.step}/{self.config.steps}"
        return f"{where}: {what}; --resume continues from step {step}"

    def write_summary(self, steps_per_s: float, eval_spec: str | None) -> None:
        """``OUT/train_summary.json``."""
        summary = {
            "step": self.step,
            "finished": self.finished,
            "final_loss": self.losses[-1] if self.losses else None,
            "steps_per_s": steps_per_s,
            "world_size": self.accelerator.num_processes,
            "eval_spec": eval_spec,
            "training_id": self.ident,
            "objective": self.core.objective,
            "eval_s": self.eval_s,
            "options": self.options,
        }
        (self.out / "train_summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")


def default_callbacks(trainer: Trainer) -> list[Callback]:
    """The train log and the trackers (rank 0), checkpoints, and the evaluations of ``--eval``."""
    callbacks: list[Callback] = []
    if trainer.is_main:
        callbacks.append(StepLog())
        callbacks.append(TrackerLog(trainer))
    callbacks.append(Checkpoints())
    if trainer.config.evals:
        callbacks.append(Evaluation(trainer))
    return callbacks


def train(config: TrainConfig, pairs: Sequence[Pair] = (), cases: Sequence[Case] = ()) -> TrainResult:
    """Run (or resume) training; returns where the model went (docs/training.md).

    Args:
        config: the options, the ``spotdiff train`` flags.
        pairs: ordinary image-caption pairs (:func:`~spotdiff.optimize.data.read_captions`).
        cases: candidate sets from any benchmark loader.
    """
    trainer = Trainer(config, pairs, cases)
    trainer.callbacks = default_callbacks(trainer)
    return trainer.run()
