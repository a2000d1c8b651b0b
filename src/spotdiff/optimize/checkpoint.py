"""Checkpoints that are both a loadable model and a resumable training state (``OUT/checkpoint-NNNNNNN/``;
the files are listed in docs/training.md). A checkpoint without its ``COMPLETE`` marker is ignored on resume.
The training folder itself: which folders a run may write into (:func:`claim_training_dir`) and the lock
that keeps a second run out of it (:class:`TrainingLock`).
"""

from __future__ import annotations

import json
import logging
import pickle
import random
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError

from spotdiff.errors import ConfigError, writing
from spotdiff.locks import HeldLock

log = logging.getLogger(__name__)

_NAME = re.compile(r"^checkpoint-(\d+)$")
MARKER = "COMPLETE"
#: The file that makes a folder a spotdiff training folder (the run's id; written by the training loop).
TRAINING_MARKER = "training.json"
#: The lock a running training holds on its folder, and the file naming its holder.
LOCK, LOCK_INFO = ".spotdiff-train.lock", ".spotdiff-train.lock.json"


def checkpoint_dir(out: Path, step: int) -> Path:
    return out / f"checkpoint-{step:07d}"


def list_checkpoints(out: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``out``, by step."""
    found = []
    if out.is_dir():
        for child in out.iterdir():
            m = _NAME.match(child.name)
            if m and (child / MARKER).is_file():
                found.append((int(m.group(1)), child))
    return sorted(found)


def latest_checkpoint(out: Path) -> Path | None:
    found = list_checkpoints(out)
    return found[-1][1] if found else None


#: What reading a damaged or missing checkpoint file raises: a missing file, torch.load's zip reader
#: (RuntimeError) and unpickler, safetensors' header check, and a trainer state without its entries.
_UNREADABLE = (OSError, RuntimeError, ValueError, EOFError, KeyError, pickle.UnpicklingError, SafetensorError)


class CheckpointUnreadable(ConfigError):
    """A file of a checkpoint does not load; the message names the file and says why."""


def read_checked(path: Path, read: Callable[[Path], Any], what: str | None = None) -> Any:
    """``read(path)``, with a damaged file raised as :class:`CheckpointUnreadable` naming it.

    Args:
        path: the file (or the checkpoint folder, for a model's weights).
        read: what loads it.
        what: the file's name in the message (default: ``path``'s name).
    """
    try:
        return read(path)
    except CheckpointUnreadable:  # a reader's own message (a ValueError too): already names the file
        raise
    except _UNREADABLE as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        reason = reason if len(reason) <= 160 else reason[:157] + "..."
        raise CheckpointUnreadable(f"{what or path.name}: {type(exc).__name__}: {reason}") from exc


def weight_files(directory: Path) -> str:
    """The names of a checkpoint's weight files, for messages."""
    return ", ".join(sorted(p.name for p in directory.glob("*.safetensors"))) or "its weights (no .safetensors file)"


def rng_state() -> dict[str, Any]:
    """This process's torch, NumPy and ``random`` generator states as tensors and plain values, so that
    ``torch.load(weights_only=True)`` reads them back (a checkpoint is a file anyone may hand over:
    reading it never unpickles objects)."""
    kind, key, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "numpy": {"bit_generator": str(kind), "key": torch.from_numpy(key.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "random": {"version": int(version), "state": torch.tensor(internal, dtype=torch.int64),
                   "gauss_next": gauss_next},
    }  # fmt: skip


def set_rng_state(state: dict[str, Any]) -> None:
    """Set the generators to a state :func:`read_rng_state` read."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["random"])


def read_rng_state(path: Path) -> dict[str, Any]:
    """The generator states of ``rng_state_R.pt`` (written by :func:`rng_state`), read with
    ``torch.load(weights_only=True)`` and checked. A file holding pickled objects (as checkpoints
    before this format did) is never unpickled: :class:`CheckpointUnreadable` says what to do.

    Args:
        path: the file.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if not str(exc).startswith("Weights only load failed"):  # a damaged file, not a refused object
            raise
        raise CheckpointUnreadable(
            f"{path.name}: holds pickled objects, not tensors and plain values (written by an older spotdiff, or "
            "not by spotdiff); pickles can run code, so it is not loaded: delete the checkpoint's rng_state_*.pt "
            "files to resume with the seeded generators"
        ) from exc
    try:
        gen, py = state["numpy"], state["random"]
        key, internal = gen["key"], py["state"]
        if not (isinstance(state["torch"], torch.Tensor) and isinstance(key, torch.Tensor)
                and isinstance(internal, torch.Tensor)):  # fmt: skip
            raise TypeError("a state is not a tensor")
        numpy_state = (str(gen["bit_generator"]), key.numpy().astype(np.uint32), int(gen["pos"]),
                       int(gen["has_gauss"]), float(gen["cached_gaussian"]))  # fmt: skip
        gauss = py["gauss_next"]
        random_state = (int(py["version"]), tuple(internal.tolist()), None if gauss is None else float(gauss))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not spotdiff's RNG states ({type(exc).__name__}: {exc})") from exc
    return {"torch": state["torch"], "numpy": numpy_state, "random": random_state}


def save_checkpoint(
    directory: Path,
    *,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    step: int,
    options: dict[str, Any],
    is_main: bool,
    rank: int,
    barrier: Any,
) -> None:
    """Write a checkpoint (collective: every rank calls it; ``barrier()`` synchronises ranks).

    Args:
        directory: the checkpoint's folder (replaced if it exists).
        model: the :class:`~spotdiff.optimize.models.DualEncoder`, saved as its backend saves it.
        optimizer, scheduler: their states go to ``trainer_state.pt``.
        step: the number of finished steps.
        options: the training options, in ``trainer_state.json``.
        is_main: whether this is rank 0 (which writes all but the RNG states).
        rank: this process's rank (its ``rng_state_R.pt``).
        barrier: synchronises the ranks.
    """
    with writing(directory):  # a full disk fails torch's and safetensors' writes with their own errors
        if is_main:
            if directory.exists():
                shutil.rmtree(directory)
            directory.mkdir(parents=True)
            model.save(directory)
            torch.save(
                {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step},
                directory / "trainer_state.pt",
            )
            (directory / "trainer_state.json").write_text(
                json.dumps({"step": step, "options": options}, indent=2, default=str), encoding="utf-8"
            )
        barrier()
        torch.save(rng_state(), directory / f"rng_state_{rank}.pt")
        barrier()
        if is_main:
            (directory / MARKER).write_text(f"{step}\n", encoding="utf-8")
        barrier()


def load_trainer_state(directory: Path) -> dict[str, Any]:
    """The optimiser, schedule and step of a checkpoint (:class:`CheckpointUnreadable` if damaged)."""

    def read(path: Path) -> dict[str, Any]:
        # optimizer states hold tensors and plain Python values only; numpy RNG states are in other files
        state = torch.load(path, map_location="cpu", weights_only=True)
        missing = {"optimizer", "scheduler", "step"} - set(state if isinstance(state, dict) else ())
        if missing:
            raise KeyError(f"no {', '.join(sorted(missing))} in it")
        return state

    return read_checked(directory / "trainer_state.pt", read)


def check_rng_states(directory: Path) -> None:
    """Check that every rank's RNG state in a checkpoint loads (every rank checks all, so all ranks
    agree on which checkpoint a resumed run continues from)."""
    for path in sorted(directory.glob("rng_state_*.pt")):
        read_checked(path, read_rng_state)


def load_rng_state(directory: Path, rank: int) -> bool:
    path = directory / f"rng_state_{rank}.pt"
    if not path.is_file():
        log.warning("no RNG state for rank %d in %s; generators keep their seeded state", rank, directory)
        return False
    set_rng_state(read_checked(path, read_rng_state))
    return True


def saved_options(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((directory / "trainer_state.json").read_text(encoding="utf-8")).get("options", {})
    except (OSError, ValueError):
        return {}


def prune_checkpoints(out: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recent complete checkpoints (``keep <= 0`` keeps all)."""
    if keep <= 0:
        return
    for _, path in list_checkpoints(out)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def claim_training_dir(out: Path, model_dirs: Iterable[Path]) -> None:
    """Refuse an output folder a training run would overwrite files in that are not its own: the
    folder of the model it starts from (or one inside it), a file, or a non-empty folder that is not a
    spotdiff training folder (no ``training.json``, no checkpoint). A training folder may be written
    into: resumed with ``--resume``, or refused later if it holds checkpoints (the loop's ``--resume``
    check).

    Args:
        out: the ``--out`` folder.
        model_dirs: local folders holding the model trained from.
    """
    where = out.resolve()
    for folder in model_dirs:
        folder = folder.resolve()
        if where == folder or folder in where.parents:
            raise ConfigError(
                f"--out {out} is {'the' if where == folder else 'inside the'} folder of the model trained from "
                f"({folder}); training would overwrite its files: choose a new --out"
            )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a folder")
    if not out.is_dir() or (out / TRAINING_MARKER).is_file() or list_checkpoints(out):
        return
    others = sorted(p.name for p in out.iterdir() if p.name not in (LOCK, LOCK_INFO))
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise ConfigError(
            f"--out {out} is not empty ({shown}) and is not a spotdiff training folder (no {TRAINING_MARKER}); "
            "training would overwrite its files: choose a new or empty --out"
        )


class TrainingLock(HeldLock):
    """An exclusive lock on a training folder, held while a run trains in it; a second run is refused
    at once with the holder's pid and host (from ``OUT/.spotdiff-train.lock.json``). The operating
    system releases the lock of a process that dies."""

    def __init__(self, out: Path) -> None:
        def busy(holder: str) -> str:
            return f"--out {out} is in use by another training ({holder}); wait for it to end or choose another --out"

        super().__init__(out / LOCK, out / LOCK_INFO, busy)
