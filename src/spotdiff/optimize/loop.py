"""Fine-tune (or train from a config) a dual encoder with the losses of :mod:`spotdiff.optimize.losses`.

One step takes a *global batch*: ``batch_size`` ordinary image-caption pairs and
``cases_per_step`` whole candidate sets (see :mod:`spotdiff.optimize.data`); which ones is a pure
function of ``(seed, step)``. The loss (``--loss``):

The contrastive term follows the model's own objective (:attr:`DualEncoder.objective`): CLIP's
softmax InfoNCE for CLIP-style models, SigLIP's pairwise sigmoid loss with its learned bias for
SigLIP-style models (Zhai et al. 2023); the hard-negative and EqSim terms take the matching form
(:func:`~spotdiff.optimize.losses.siglip_hn_loss`, EqSim on ``sigmoid(t * cos + b)``), and the log
names the term ``clip`` or ``siglip``.

* ``clip``: CLIP's symmetric InfoNCE over all matched pairs of the step (caption pairs and the
  cases' anchor pairs alike; the case-mates are in-batch negatives like any other).
* ``spec-hn``: SPEC Eq. 9, ``L_clip(caption pairs) + lambda * L_hn(case anchors)``. For ``L_hn``
  (Eq. 7-8) an anchor's trivial negatives are the anchors of the *other* cases of the step and its
  hard negatives are its own case's false candidates (both modalities); ``L_hn`` is averaged over
  anchors. Without captions the ``L_clip`` term is absent.
* ``eqsim``: ``L_clip(all pairs) + beta * EqSim`` (EqBen Sec. 3), EqSim on the softmax-normalised
  similarity of all matched pairs (App. C), variant v1 / v2 / hybrid (the default) / reference; the
  close pairs are the top-``k`` pairs (hybrid) or ``k`` pairs sampled as EqBen's code does
  (reference), plus every two anchors of one case. The temperature (and bias) inside EqSim's
  normalisation is detached: it is learnt by the contrastive term only (otherwise EqSim could be
  minimised by flattening the softmax).

Optimisation: AdamW (betas 0.9/0.98, eps 1e-6 as in CLIP; no weight decay on biases, norms and the
temperature), linear warm-up then cosine decay (``transformers.get_cosine_schedule_with_warmup``),
gradient-norm clipping. Checkpoints every ``save_every`` steps and at the end (see
:mod:`spotdiff.optimize.checkpoint`); the finished model is also saved at the top of ``out`` so
``spotdiff eval --model hf-clip:OUT`` loads it.

Resumption (``--resume``) restores the weights, AdamW and scheduler states, the step and each rank's
RNG states from the last complete checkpoint; since the data order is a function of the step, a run
stopped (``--stop-after``) and resumed ends with the same weights, bit for bit on CPU, as one run
straight through. A fresh run into a folder that holds checkpoints is refused.

Evaluation during training (``--eval``, ``--eval-every``, ``--keep best:METRIC``;
:mod:`spotdiff.optimize.evaluation`): ordinary runs recorded in the run store with the training id
(``OUT/training.json``) and the step, ``OUT/eval_log.jsonl``, and the retention curves
``OUT/retention.json`` / ``.png`` (:mod:`spotdiff.optimize.retention`). Losses (each term apart),
learning rate, temperature and the evaluations go to TensorBoard (``OUT/tensorboard``) and, with
``--wandb PROJECT``, to Weights & Biases (:mod:`spotdiff.optimize.trackers`).

Distributed: run under ``accelerate launch --num_processes N [--cpu] -m spotdiff train ...`` or
``torchrun --nproc_per_node N -m spotdiff train ...`` (gloo on CPU, NCCL on GPUs; multi-node with
the launchers' usual node flags). Each rank encodes its share of the step's images and texts;
embeddings are all-gathered with gradients so every rank computes the loss of the *whole* global
batch, and DDP's gradient average then equals the single-process gradient. A run on N processes
thus follows the single-process run up to floating-point summation order (the global batch does not
grow with N; tested: 2 CPU processes end within 1e-4 of, in practice ~2e-6 from, one process).
Rank 0 writes the model, logs and checkpoints; every rank writes its RNG state.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from spotdiff.cases import Case
from spotdiff.errors import ConfigError
from spotdiff.jsonio import iter_jsonl, write_json, write_jsonl
from spotdiff.optimize.checkpoint import (
    checkpoint_dir,
    latest_checkpoint,
    list_checkpoints,
    load_rng_state,
    load_trainer_state,
    prune_checkpoints,
    save_checkpoint,
    saved_options,
)
from spotdiff.optimize.data import Batch, EpochSampler, Pair, PixelCache, build_batch, prepare_cases
from spotdiff.optimize.evaluation import EvalTarget, KeepBest, TrainingEvaluator
from spotdiff.optimize.losses import clip_contrastive_loss, eqsim_loss, siglip_hn_loss, siglip_loss, spec_hn_loss
from spotdiff.optimize.models import DualEncoder, build_clip_from_config, load_dual_encoder
from spotdiff.optimize.retention import write_retention
from spotdiff.optimize.trackers import Trackers
from spotdiff.seeding import seed_everything

log = logging.getLogger(__name__)

LOSSES = ("clip", "spec-hn", "eqsim")
EQSIM_VARIANTS = ("v1", "v2", "hybrid", "reference")
# options that must match for a resumed run to continue the same run
_RESUME_KEYS = ("seed", "batch_size", "cases_per_step", "loss", "model", "from_config")


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
    out: Path
    step: int
    finished: bool
    losses: list[float] = field(default_factory=list)
    steps_per_s: float = float("nan")
    eval_spec: str | None = None


# -------------------------------------------------------------------------------------------- loss


def compute_loss(
    config: TrainConfig,
    batch: Batch,
    image: torch.Tensor,
    text: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The step's loss from the global batch's embeddings (unit rows), temperature and, for a
    sigmoid-trained model, bias; returns the loss and each term's value (for the logs)."""
    sim = image @ text.t()
    sigmoid = bias is not None
    name = "siglip" if sigmoid else "clip"

    def contrastive(s: torch.Tensor) -> torch.Tensor:
        return siglip_loss(s, scale, bias) if sigmoid else clip_contrastive_loss(s, scale)

    all_img = torch.cat([batch.cap_img, batch.case_img]).to(sim.device)
    all_txt = torch.cat([batch.cap_txt, batch.case_txt]).to(sim.device)
    parts: dict[str, float] = {}
    if config.loss == "clip":
        loss = contrastive(sim[all_img][:, all_txt])
        parts[name] = loss.item()
    elif config.loss == "spec-hn":
        n_cap = len(batch.cap_img)
        zero = sim.new_zeros(())
        # SPEC Eq. 9 (spotdiff.optimize.losses.spec_loss), with the two terms kept apart for the log
        clip_term = contrastive(sim[all_img[:n_cap]][:, all_txt[:n_cap]]) if n_cap else zero
        hn_term = zero
        if len(batch.case_img):
            ci, ct = batch.case_img.to(sim.device), batch.case_txt.to(sim.device)
            group = batch.case_group.to(sim.device)
            hn_term = (siglip_hn_loss if sigmoid else spec_hn_loss)(
                sim[ci][:, ct],
                sim[ci[:, None], batch.hn_text.to(sim.device)],
                sim[batch.hn_image.to(sim.device), ct[:, None]],
                logit_scale=scale,
                trivial_mask=group[:, None] != group[None, :],  # other cases' anchors; the diagonal is added
                hn_text_mask=batch.hn_text_mask.to(sim.device),
                hn_image_mask=batch.hn_image_mask.to(sim.device),
                **({"logit_bias": bias} if sigmoid else {}),
            )
            parts["hn"] = hn_term.item()
        if n_cap:
            parts[name] = clip_term.item()
        loss = clip_term + config.lam * hn_term
    else:  # eqsim
        pair_sim = sim[all_img][:, all_txt]
        n_cap = len(batch.cap_img)
        group = torch.cat([torch.full((n_cap,), -1, dtype=torch.long), batch.case_group]).to(sim.device)
        close = (group[:, None] == group[None, :]) & (group[:, None] >= 0)
        clip_term = contrastive(pair_sim)
        eq_term = eqsim_loss(
            pair_sim,
            variant=config.eqsim_variant,
            alpha=config.eqsim_alpha,
            beta=config.eqsim_beta,
            k=config.eqsim_k,
            score="sigmoid" if sigmoid else "cosine",
            logit_scale=scale.detach(),
            logit_bias=bias.detach() if sigmoid else 0.0,
            close=close,
        )
        loss = clip_term + eq_term
        parts[name], parts["eqsim"] = clip_term.item(), eq_term.item()
    return loss, parts


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
    temperature and the bias (None for a softmax-trained model)."""
    img_idx = _shard(len(batch.images), world, rank)
    txt_idx = _shard(len(batch.texts), world, rank)
    pixels = cache.pixels([batch.images[i] for i in img_idx], core.preprocess_images).to(device)
    tokens = core.tokenize([batch.texts[i] for i in txt_idx])
    image, text, scale, bias = model(pixels, tokens["input_ids"].to(device), tokens["attention_mask"].to(device))
    return _gather(image, len(batch.images), world), _gather(text, len(batch.texts), world), scale, bias


# --------------------------------------------------------------------------------------- monitoring


def training_id(out: Path, resumed: bool, is_main: bool) -> str:
    """The id of this training run: kept in ``OUT/training.json``, the same across resumptions."""
    path = out / "training.json"
    if resumed and path.is_file():
        return str(json.loads(path.read_text(encoding="utf-8"))["id"])
    new = uuid.uuid4().hex[:12]
    if is_main:
        write_json(path, {"id": new, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return new


class _Monitor:
    """Rank 0's trackers, evaluations during training and retention curves (inactive on other ranks)."""

    def __init__(
        self, config: TrainConfig, out: Path, ident: str, label: str, start: int, options: dict, active: bool
    ) -> None:
        self.active = active
        self.out, self.ident, self.label = out, ident, label
        self.eval_s = 0.0
        self.evaluator: TrainingEvaluator | None = None
        self.trackers: Trackers | None = None
        if config.evals:
            self.evaluator = TrainingEvaluator(
                config.evals,
                out=out,
                training_id=ident,
                model_label=self.label,
                store=config.store,
                seed=config.seed,
                n_boot=config.eval_n_boot,
                batch_size=config.eval_batch_size,
                keep=KeepBest.parse(config.keep, config.evals) if config.keep else None,
            )
            if active:
                self.evaluator.truncate(start if start else -1)
        if active:
            self.trackers = Trackers(out, training_id=ident, config=options, start_step=start,
                                     tensorboard=config.tensorboard, wandb_project=config.wandb)  # fmt: skip

    def log_step(self, record: dict, parts: dict[str, float], bias: torch.Tensor | None) -> None:
        if self.trackers is None:
            return
        values = {"loss/total": record["loss"], **{f"loss/{k}": v for k, v in parts.items()}}
        values.update({"train/lr": record["lr"], "train/logit_scale": record["logit_scale"]})
        values["train/grad_norm"] = record.get("grad_norm")
        values["train/logit_bias"] = None if bias is None else float(bias.detach().float().reshape(-1)[0])
        self.trackers.scalars(record["step"], values)

    def evaluate(self, core: DualEncoder, step: int, device: torch.device, barrier) -> None:
        """Evaluate on rank 0 (the others wait), unless this step was evaluated already."""
        if self.evaluator is None:
            return
        t0 = time.perf_counter()
        if self.active and not any(r["step"] == step for r in self.evaluator.records()):
            records = self.evaluator(core, step, device)
            if self.trackers is not None:
                self.trackers.evaluation(step, records)
            write_retention(self.out, self.evaluator.records(), training_id=self.ident, model=self.label, png=False)
        barrier()
        self.eval_s += time.perf_counter() - t0

    def close(self) -> None:
        if self.active and self.evaluator is not None:
            write_retention(self.out, self.evaluator.records(), training_id=self.ident, model=self.label)
        if self.trackers is not None:
            self.trackers.close()


# -------------------------------------------------------------------------------------------- train


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW parameter groups: weight decay on matrices, none on biases, norms and scalars (as CLIP)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _resume_dir(config: TrainConfig) -> Path | None:
    if not config.resume:
        return None
    if isinstance(config.resume, str) and config.resume not in ("", "latest", "auto"):
        path = Path(config.resume)
        if not (path / "trainer_state.pt").is_file():
            raise ConfigError(f"--resume {path}: not a spotdiff training checkpoint (no trainer_state.pt)")
        return path
    path = latest_checkpoint(config.out)
    if path is None:
        log.info("no checkpoint under %s; starting from step 0", config.out)
    return path


def train(config: TrainConfig, pairs: Sequence[Pair] = (), cases: Sequence[Case] = ()) -> TrainResult:
    """Run (or resume) training; see the module docstring. Returns where the model went."""
    from accelerate import Accelerator
    from transformers import get_cosine_schedule_with_warmup

    config.validate()
    prepared = prepare_cases(cases)
    n_pairs = len(pairs) if config.batch_size else 0
    n_cases = len(prepared) if config.cases_per_step else 0
    if n_pairs == 0 and n_cases == 0:
        raise ConfigError("no training data: give captions (--captions) and/or cases with images (--cases)")
    if config.loss == "spec-hn" and n_cases == 0:
        log.warning("--loss spec-hn without cases: only the L_clip term of SPEC Eq. 9 is trained")

    accelerator = Accelerator(cpu=config.device == "cpu", mixed_precision=config.mixed_precision)
    world, rank, is_main = accelerator.num_processes, accelerator.process_index, accelerator.is_main_process
    out = Path(config.out)
    if is_main:
        out.mkdir(parents=True, exist_ok=True)
    seed_everything(config.seed)

    resume_from = _resume_dir(config)
    if resume_from is None and list_checkpoints(out):
        raise ConfigError(
            f"{out} already holds checkpoints of another run; pass --resume to continue it or choose a new --out"
        )
    if config.batch_size > len(pairs) > 0 or config.cases_per_step > len(prepared) > 0:
        log.warning("a step asks for more items than the data holds; some repeat within a step")
    if resume_from is not None:
        old = saved_options(resume_from)
        changed = {k: (old[k], getattr(config, k)) for k in _RESUME_KEYS if k in old and old[k] != getattr(config, k)}
        if changed:
            log.warning(
                "resuming %s with changed options %s; the run will not match an uninterrupted one", resume_from, changed
            )
    if config.from_config is not None:
        core = build_clip_from_config(config.from_config, tokenizer=config.tokenizer, seed=config.seed)
    else:
        core = load_dual_encoder(config.model or "")
    optimizer = torch.optim.AdamW(param_groups(core, config.weight_decay), lr=config.lr, betas=(0.9, 0.98), eps=1e-6)
    scheduler = get_cosine_schedule_with_warmup(optimizer, config.warmup, config.steps)
    step = 0
    if resume_from is not None:
        core.load_weights(resume_from)
        state = load_trainer_state(resume_from)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step = int(state["step"])
        load_rng_state(resume_from, rank)
        log.info("resumed from %s at step %d", resume_from, step)

    # the scheduler is stepped by hand: accelerate's wrapper would step it once per process
    model, optimizer = accelerator.prepare(core, optimizer)
    core_ref: DualEncoder = accelerator.unwrap_model(model)
    device = accelerator.device
    cap_sampler = EpochSampler(len(pairs), config.seed, stream=1)
    case_sampler = EpochSampler(len(prepared), config.seed, stream=2)
    cache = PixelCache()
    log_path = out / "train_log.jsonl"
    if is_main:  # the log holds exactly the steps of the model being trained
        kept = []
        if step and log_path.is_file():
            kept = [row for _, row in iter_jsonl(log_path) if row.get("step", 0) <= step]
        write_jsonl(log_path, kept, dump=json.dumps)
    options = config.options()
    ident = training_id(out, resume_from is not None, is_main)
    monitor = _Monitor(config, out, ident, core_ref.eval_spec(out.resolve()), step, options, is_main)

    def checkpoint(at: int) -> None:
        save_checkpoint(
            checkpoint_dir(out, at),
            model=core_ref,
            optimizer=optimizer,
            scheduler=scheduler,
            step=at,
            options=options,
            is_main=is_main,
            rank=rank,
            barrier=accelerator.wait_for_everyone,
        )
        if is_main:
            prune_checkpoints(out, config.keep_checkpoints)

    end = config.steps if config.stop_after is None else min(config.steps, step + config.stop_after)
    losses: list[float] = []
    if step == 0:
        monitor.evaluate(core_ref, 0, device, accelerator.wait_for_everyone)
    t_start, t_after_first, eval_before = time.perf_counter(), None, monitor.eval_s
    first = step
    model.train()
    while step < end:
        batch = build_batch(
            [pairs[i] for i in cap_sampler.take(step, config.batch_size)],
            [prepared[i] for i in case_sampler.take(step, config.cases_per_step)],
        )
        image, text, scale, bias = encode_batch(model, core_ref, batch, cache, device, world, rank)
        bias = None if bias is None else bias.float()
        loss, parts = compute_loss(config, batch, image.float(), text.float(), scale.float(), bias)
        accelerator.backward(loss)
        grad_norm = None
        if config.max_grad_norm and config.max_grad_norm > 0:
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        losses.append(loss.item())
        if t_after_first is None:
            t_after_first = time.perf_counter()
        if is_main:
            record = {
                "step": step,
                "loss": losses[-1],
                **parts,
                "lr": scheduler.get_last_lr()[0],
                "logit_scale": scale.item(),
                "pairs": batch.n_pairs,
            }
            if grad_norm is not None:
                record["grad_norm"] = float(grad_norm)
            if bias is not None:
                record["logit_bias"] = float(bias.detach().reshape(-1)[0])
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            monitor.log_step(record, parts, bias)
            if config.log_every and (step % config.log_every == 0 or step == end):
                log.info(
                    "step %d/%d loss %.4f %s lr %.3g",
                    step,
                    config.steps,
                    losses[-1],
                    " ".join(f"{k} {v:.4f}" for k, v in parts.items()),
                    record["lr"],
                )
        if config.save_every and step % config.save_every == 0 and step < end:
            checkpoint(step)
        if config.eval_every and step % config.eval_every == 0 and step < config.steps:
            monitor.evaluate(core_ref, step, device, accelerator.wait_for_everyone)
    elapsed = time.perf_counter() - (t_after_first or t_start) - (monitor.eval_s - eval_before)
    done = step - first
    steps_per_s = (done - 1) / elapsed if done > 1 and elapsed > 0 else float("nan")
    if done:
        checkpoint(step)
    finished = step >= config.steps
    eval_spec = None
    if finished:
        monitor.evaluate(core_ref, step, device, accelerator.wait_for_everyone)
        if is_main:
            core_ref.save(out)
        eval_spec = core_ref.eval_spec(out)
    monitor.close()
    if is_main:
        summary = {
            "step": step,
            "finished": finished,
            "final_loss": losses[-1] if losses else None,
            "steps_per_s": steps_per_s,
            "world_size": world,
            "eval_spec": eval_spec,
            "training_id": ident,
            "objective": core_ref.objective,
            "eval_s": monitor.eval_s,
            "options": options,
        }
        (out / "train_summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    accelerator.wait_for_everyone()
    return TrainResult(out, step, finished, losses, steps_per_s, eval_spec)
