"""One synthesis run in one output folder: owned, resumable, with a progress bar.

:func:`synthesize` is what ``spotdiff synth ENGINE`` calls. It claims ``--out`` with a marker
(``.synth-run.json``) holding the run's identity (engine, the options that change the bytes, library
versions), runs the engine and writes ``synth.json`` last. Engines make their items (sets, pairs,
videos, triplets) through :func:`make_items`, which journals each finished item under
``out/.partial/``: an interrupted or failed run, started again with the same options, keeps what was
finished and makes the rest, and its files equal a clean run's byte for byte (every item's record goes
through the journal, resumed or not).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import PIL

from spotdiff.errors import ConfigError, DataError
from spotdiff.naming import slugify
from spotdiff.ranks import DistEnv, Group, detect, owner, rank_device, step
from spotdiff.synth import SynthEngine
from spotdiff.synth.output import atomic_write_text, dumps, parallel_map, progress, progress_enabled, write_json
from spotdiff.urls import redact_values
from spotdiff.version import __version__

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

#: the journal of an unfinished run's finished items, and the marker of an unfinished run
PARTIAL = ".partial"
MARKER = ".synth-run.json"
RECORD = "synth.json"
#: the libraries whose versions are part of a run's identity (recorded in synth.json)
VERSIONS = ("spotdiff", "pillow", "numpy")


#: the launch this process is a rank of, while :func:`synthesize` runs (None: alone)
_LAUNCH: contextvars.ContextVar[tuple[DistEnv, Group] | None] = contextvars.ContextVar(
    "spotdiff_synth_launch", default=None
)


def _item_path(out: Path, key: str) -> Path:
    """The journal file of one item: readable name, made unique by the key's hash (slugs may collide)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(out) / PARTIAL / "items" / f"{slugify(key)[:80]}-{digest}.json"


class _Journaled:
    """``fn`` of one task, its record journaled as soon as it is made (in the worker that made it)."""

    def __init__(self, fn: Callable[[T], Any], out: Path, key: Callable[[T], str]) -> None:
        self.fn, self.out, self.key = fn, out, key

    def __call__(self, task: T) -> Any:
        record = json.loads(dumps(self.fn(task)))  # JSON types, as a resumed run reads them back
        key = self.key(task)
        atomic_write_text(_item_path(self.out, key), dumps({"key": key, "sha256": _digest(record), "record": record}))
        return record


def _digest(record: Any) -> str:
    """What a journal entry holds to check its record when read back: the SHA-256 of its JSON text."""
    return hashlib.sha256(dumps(record).encode()).hexdigest()


def make_items(
    out: Path,
    fn: Callable[[T], Any],
    tasks: Sequence[T],
    *,
    key: Callable[[T], str],
    workers: int = 1,
    desc: str = "items",
    until: Callable[[list[Any]], bool] | None = None,
    prepare: Callable[[list[T]], Any] | None = None,
) -> list[Any]:
    """``[fn(t) for t in tasks]`` as JSON records, resumable: finished items are read back, not made again.

    Each record is written to the journal (``out/.partial/items/<key>.json``) by the process that made
    it, as soon as it is made, so a run killed at any point keeps every finished item.

    Args:
        out: the output folder.
        fn: makes one item (writing its files under ``out``) and returns its record (JSON-serialisable).
        tasks: the items to make, in output order.
        key: a task's unique, stable name in the journal.
        workers: forked worker processes (the records do not depend on them).
        desc: what the progress bar counts.
        until: given the records so far, whether enough are made: the tasks are then made a few at a time
            (one per worker and rank), in order, and the rest left (a caller keeps the records it needs, in
            order, so the output does not depend on the workers or ranks).
        prepare: called with the tasks this process is about to make, before it makes them (to batch work
            they share ahead: the generative backend's backgrounds).
    """
    from tqdm.auto import tqdm

    keys = [key(t) for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("make_items: task keys must be unique")
    journaled = _Journaled(fn, Path(out), key)
    launch = _LAUNCH.get()
    share = 1 if launch is None else launch[0].world_size
    records: list[Any] = []
    with tqdm(total=len(tasks), desc=desc, unit="item", disable=not progress_enabled()) as bar:
        for chunk in _chunks(list(zip(tasks, keys, strict=True)), share * max(1, workers) if until else len(tasks)):
            found = {k: _read_item(out, k) for _t, k in chunk}
            damaged = [k for k, v in found.items() if v is _DAMAGED]
            if damaged:
                log.warning("%d journal entries in %s are not what was journaled for their items (the first: %s): "
                            "they are made again", len(damaged), Path(out) / PARTIAL, damaged[0])  # fmt: skip
                found.update(dict.fromkeys(damaged))
            todo = [t for t, k in chunk if found[k] is None and _mine(k)]
            bar.update(len(chunk) - len(todo))
            if prepare is not None and todo:
                prepare(todo)
            _on_every_rank(lambda todo=todo: parallel_map(journaled, todo, workers, on_result=lambda _r: bar.update()))
            records += [found[k] if found[k] is not None else _made(out, k) for _t, k in chunk]
            if until is not None and until(records):
                break
    return records


def _mine(key: str) -> bool:
    """Whether this process makes the item ``key``: always alone; in a launch, when its rank owns the key."""
    launch = _LAUNCH.get()
    return launch is None or owner(key, launch[0].world_size) == launch[0].rank


def _on_every_rank(fn: Callable[[], Any]) -> Any:
    """``fn()``; in a launch, on every rank, each then waiting for the others (one failing fails all)."""
    launch = _LAUNCH.get()
    return fn() if launch is None else step(launch[1], fn)


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + max(1, size)] for i in range(0, len(items), max(1, size))] if items else []


def resumable(write: Callable[..., R]) -> Callable[..., R]:
    """Mark a ``write_<engine>(out, ...)`` function that makes its items with :func:`make_items`: when it
    returns, its journal of finished items is dropped (an interrupted call keeps it, to resume from)."""

    @functools.wraps(write)
    def wrapper(out: Path, *args: Any, **kwargs: Any) -> R:
        result = write(out, *args, **kwargs)
        _on_every_rank(lambda: None)  # in a launch: every rank has read the journal
        if _LAUNCH.get() is None or _LAUNCH.get()[0].is_main:  # type: ignore[index]
            drop_journal(Path(out))
        return result

    return wrapper


def drop_journal(out: Path) -> None:
    """Remove the journal of finished items and what a killed earlier attempt was writing (the temporary
    files of :func:`spotdiff.jsonio.temporary_path`: no writer of this run is left)."""
    shutil.rmtree(Path(out) / PARTIAL, ignore_errors=True)
    for stale in Path(out).rglob(".*.*.tmp"):
        stale.unlink()


#: What :func:`_read_item` returns for an entry that is not what was journaled (removed: its item is made again).
_DAMAGED = object()


def _read_item(out: Path, key: str) -> Any:
    """A journaled item's record; None when it is not made yet; :data:`_DAMAGED` (the entry removed) when
    the entry does not read, names another item or holds a record its digest does not match."""
    path = _item_path(out, key)
    if not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        entry = None
    if isinstance(entry, dict) and entry.get("key") == key and entry.get("sha256") == _digest(entry.get("record")):
        return entry["record"]
    path.unlink(missing_ok=True)
    return _DAMAGED


def _made(out: Path, key: str) -> Any:
    """The record of an item made in this step (by this process or another rank), read from its entry."""
    record = _read_item(out, key)
    if record is None or record is _DAMAGED:
        raise DataError("the item was made but its entry does not read back; run the command again to make it",
                        file=_item_path(out, key))  # fmt: skip
    return record


def identity(engine: SynthEngine) -> dict[str, Any]:
    """What a run in a folder is: engine, the options that change the bytes, and the library versions."""
    return {
        "engine": engine.name,
        "options": redact_values(engine.config.options()),  # a model's URL is recorded without its password
        "versions": dict(zip(VERSIONS, (__version__, PIL.__version__, np.__version__), strict=True)),
    }


def _claim(out: Path, ident: dict[str, Any], overwrite: bool) -> str:
    """Make ``out`` this run's: ``fresh``, ``resume`` (an unfinished run of the same identity) or
    ``complete`` (a finished one); refuse a folder another run or a person owns."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    marker, record = out / MARKER, out / RECORD
    if out.is_dir() and any(out.iterdir()):
        if not marker.is_file() and not record.is_file():
            raise ConfigError(
                f"--out {out} is not empty and holds no spotdiff synth output: refusing to touch it; "
                "choose an empty or new folder"
            )
        previous = _read_identity(marker if marker.is_file() else record)
        if overwrite:
            shutil.rmtree(out)
        elif previous == ident:
            return "resume" if marker.is_file() else "complete"
        else:
            what = "an unfinished run" if marker.is_file() else "a finished run"
            raise ConfigError(
                f"--out {out} holds {what} with other options ({_difference(previous, ident)}); run the same "
                "command to resume it, or pass --overwrite to replace it"
            )
    out.mkdir(parents=True, exist_ok=True)
    write_json(marker, ident)
    return "fresh"


def _read_identity(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if path.name == RECORD:  # synth.json: the identity's parts are recorded beside the summary
        versions = {k: data.get(k) for k in VERSIONS}
        return {"engine": data.get("engine"), "options": data.get("options"), "versions": versions}
    return data


def _difference(previous: dict[str, Any] | None, ident: dict[str, Any]) -> str:
    if previous is None:
        return "its record is unreadable"
    changed = []
    for section in ("engine", "options", "versions"):
        a, b = previous.get(section), ident.get(section)
        if isinstance(a, dict) and isinstance(b, dict):
            changed += [
                f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)
            ]
        elif a != b:
            changed.append(f"{section}: {a!r} -> {b!r}")
    return "; ".join(changed) or "unknown"


def synthesize(engine: SynthEngine, out: Path, *, overwrite: bool = False, quiet: bool = False) -> dict[str, Any]:
    """Run ``engine`` into ``out`` and write ``synth.json``; resume an unfinished run of the same options.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) every rank runs the engine and makes the items whose key it
    owns (:func:`spotdiff.ranks.owner`), on its own device (``cuda:LOCAL_RANK`` for ``--device auto``);
    the ranks wait for each other after each batch of items and read the others' from the journal, so
    the files are those of one process; rank 0 claims the folder and writes ``synth.json``. A rank
    that fails stops every rank; the journal keeps what was finished.

    Args:
        engine: the engine, built from its options.
        out: the output folder (new, empty, or one this engine's run with the same options left).
        overwrite: replace an earlier synth output (finished or not) in ``out``.
        quiet: no progress bars.

    Returns:
        ``synth.json``'s content, with ``"state"``: ``fresh``, ``resume`` or ``complete`` (nothing to do);
        None on a rank other than 0 of a launch.
    """
    engine.check()
    ident = identity(engine)
    env = detect()
    if env is None:
        return _synthesize(engine, Path(out), ident, overwrite, quiet)
    group = Group(env)
    token = _LAUNCH.set((env, group))
    try:
        if hasattr(engine.config, "device"):
            engine.config = replace(engine.config, device=rank_device(engine.config.device, env.local_rank))
        record = _synthesize(engine, Path(out), ident, overwrite, quiet or not env.is_main)
        group.finish()
    finally:
        _LAUNCH.reset(token)
        group.close()
    return record if env.is_main else None


def _synthesize(engine: SynthEngine, out: Path, ident: dict, overwrite: bool, quiet: bool) -> dict[str, Any]:
    """The run on this process (alone, or one rank of a launch: rank 0 claims and records)."""
    launch = _LAUNCH.get()
    main = launch is None or launch[0].is_main
    state = _on_every_rank(lambda: _claim(out, ident, overwrite) if main else None)
    state = state[0] if launch is not None else state
    if state == "complete":
        return {**json.loads((out / RECORD).read_text(encoding="utf-8")), "state": state}
    with progress(not quiet):
        summary = engine.write(out)
    _on_every_rank(lambda: None)  # every rank has written its files
    record = {**ident["versions"], "engine": engine.name, "options": ident["options"],
              "summary": redact_values(summary)}  # fmt: skip
    if main:
        write_json(out / RECORD, record)
        (out / MARKER).unlink()
    return {**record, "state": state}
