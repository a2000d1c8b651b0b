"""Checkpoints that are both a loadable model and a resumable training state (``OUT/checkpoint-NNNNNNN/``;
the files are listed in docs/training.md). A checkpoint without its ``COMPLETE`` marker is ignored on resume.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)

_NAME = re.compile(r"^checkpoint-(\d+)$")
MARKER = "COMPLETE"


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


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["random"])


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
    # optimizer states hold tensors and plain Python values only; numpy RNG states are in other files
    return torch.load(directory / "trainer_state.pt", map_location="cpu", weights_only=True)


def load_rng_state(directory: Path, rank: int) -> bool:
    path = directory / f"rng_state_{rank}.pt"
    if not path.is_file():
        log.warning("no RNG state for rank %d in %s; generators keep their seeded state", rank, directory)
        return False
    set_rng_state(torch.load(path, weights_only=False))
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
