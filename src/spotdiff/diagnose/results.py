"""Reading a result folder written by ``spotdiff eval --out DIR`` back as a run and its units.

``DIR/metrics.json`` gives the run's identity (benchmark, protocol, model, seed, data digest, tie
rule, bootstrap size, version, environment) and ``DIR/scores.jsonl`` one line per case with its
per-unit outcomes (``"unit"`` + ``"correct"`` for a one-unit case, ``"units"`` otherwise; files
written before the ``"unit"`` field existed name a one-unit case's unit by the case id). Together
they are what a paired comparison needs, so a colleague's results compare without their run store
(``spotdiff compare DIR_A DIR_B``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spotdiff.diagnose.store import Run
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import iter_jsonl


def is_result_dir(ref: str | Path) -> bool:
    """True when ``ref`` is a folder holding ``metrics.json`` and ``scores.jsonl``."""
    path = Path(ref).expanduser()
    return (path / "metrics.json").is_file() and (path / "scores.jsonl").is_file()


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read it as JSON ({exc})", file=path) from None
    if not isinstance(data, dict):
        raise DataError("expected a JSON object", file=path)
    return data


def read_result_dir(folder: str | Path) -> tuple[Run, list[dict[str, Any]]]:
    """The run a result folder records (``id`` = the folder path) and its unit records
    ``{"unit_id", "case_id", "subset", "outcomes", "tags"}``."""
    folder = Path(folder).expanduser()
    if not is_result_dir(folder):
        raise ConfigError(f"{folder} is not a result folder of `spotdiff eval --out` (metrics.json + scores.jsonl)")
    meta_path = folder / "metrics.json"
    meta = _read_json(meta_path)
    for key in ("benchmark", "protocol", "model"):
        if not isinstance(meta.get(key), str):
            raise DataError("missing or not a string", file=meta_path, field=key)
    data = meta.get("data") or {}
    run = Run(
        id=str(folder),
        created="",
        status="done",
        benchmark=meta["benchmark"],
        subset=meta.get("subset"),
        protocol=meta["protocol"],
        model=meta["model"],
        model_identity=meta.get("model_identity") or {},
        data_path=str(data.get("path", "")),
        data_digest=str(data.get("digest", "")),
        seed=int(meta.get("seed", 0)),
        version=str(meta.get("version", "")),
        n_cases=meta.get("n_cases"),
        metrics=meta.get("metrics"),
        info={
            "ties": meta.get("ties", "strict"),
            "n_boot": meta.get("n_boot", 1000),
            "aggregates": meta.get("aggregates"),
            "environment": meta.get("environment"),
        },
    )
    return run, read_scores(folder / "scores.jsonl")


def read_scores(path: Path) -> list[dict[str, Any]]:
    """The unit records of a ``scores.jsonl`` file; a malformed line is a :class:`DataError` naming it."""
    units: list[dict[str, Any]] = []
    for n, rec in iter_jsonl(path):
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            raise DataError("expected an object with a string 'id'", file=path, record=f"line {n}")
        tags = rec.get("tags") or {"subset": rec.get("subset", "")}
        if "units" in rec:
            parts = rec["units"]
            if not isinstance(parts, list) or not all(isinstance(u, dict) and "unit" in u for u in parts):
                raise DataError("expected objects with a 'unit'", file=path, record=rec["id"], field="units")
            pairs = [(str(u["unit"]), {k: v for k, v in u.items() if k != "unit"}) for u in parts]
        elif isinstance(rec.get("correct"), dict):
            pairs = [(str(rec.get("unit", rec["id"])), rec["correct"])]
        else:
            raise DataError("no per-unit outcomes ('correct' or 'units')", file=path, record=rec["id"])
        for unit_id, outcomes in pairs:
            units.append(
                {
                    "unit_id": unit_id,
                    "case_id": rec["id"],
                    "subset": str(rec.get("subset", tags.get("subset", ""))),
                    "outcomes": outcomes,
                    "tags": tags,
                }
            )
    if not units:
        raise DataError("no units", file=path)
    return units
