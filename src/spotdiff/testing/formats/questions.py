"""Fixture writers of question benchmarks: MMVP's ``Questions.csv`` and images."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from spotdiff.testing.formats._common import _save_image

MMVP_HEADER = ("Index", "Question", "Options", "Correct Answer")


def mmvp_rows(n: int = 300) -> list[list[str]]:
    """``n`` rows in the schema of MMVP's ``Questions.csv`` (github.com/tsb0601/MMVP; rows 279 and 280 as
    MMVP issue 14 quotes them): pairs of rows share a question and options, answers (a) then (b).

    Args:
        n: the number of rows (questions).
    """
    rows = []
    for i in range(1, n + 1):
        pair = (i + 1) // 2
        if i in (279, 280):
            question, options = "Is the elderly person standing or sitting in the picture?", "(a) Standing (b) Sitting"
        elif pair % 2:
            question, options = f"Are the butterfly's feet visible? ({pair})", "(a) Yes (b) No"
        else:
            question = f"Is the bus driving towards or away from the camera? ({pair})"
            options = "(a) Towards the camera (b) Away from the camera"
        rows.append([str(i), question, options, "(a)" if i % 2 else "(b)"])
    return rows


def write_mmvp(root: Path, rows: list[list[str]] | None = None, images: int = 0, seed: int = 4) -> Path:
    """MMVP's ``Questions.csv`` (header :data:`MMVP_HEADER`, ``rows`` or :func:`mmvp_rows`) and the first
    ``images`` images ``MMVP Images/<n>.jpg``, as evaluate_mllm.py reads them. Returns ``root``.

    Args:
        rows: the CSV rows below the header.
        images: how many images to write (rows 1, 2, ...).
        seed: the images' random seed.
    """
    root.mkdir(parents=True, exist_ok=True)
    with (root / "Questions.csv").open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([MMVP_HEADER, *(mmvp_rows() if rows is None else rows)])
    rng = np.random.default_rng(seed)
    for k in range(images):
        _save_image(root / "MMVP Images" / f"{k + 1}.jpg", rng)
    return root
