"""The data home: one folder per benchmark, each with a manifest of what was fetched, from where.

The home is ``$SPOTDIFF_DATA``, default ``~/.cache/spotdiff/data``. Layout and statuses:
docs/data.md.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock

from spotdiff.benchmarks.metadata import BenchmarkMetadata
from spotdiff.benchmarks.shared import COLLECTIONS, MANIFEST, SHARED
from spotdiff.benchmarks.sources import Collection, ImagesSource, ManualSource, Part, Source
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import write_json

log = logging.getLogger(__name__)

STAGING = ".spotdiff-staging"
FORMAT = 1
READY = ("ready", "verified")


def data_home(root: str | Path | None = None) -> Path:
    """``root``, else ``$SPOTDIFF_DATA``, else ``~/.cache/spotdiff/data``."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get("SPOTDIFF_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "spotdiff" / "data"


def benchmark_dir(name: str, root: str | Path | None = None) -> Path:
    return data_home(root) / name


def collection_dir(name: str, root: str | Path | None = None) -> Path:
    return data_home(root) / SHARED / name


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold an inter-process lock on ``folder`` (two fetches of one benchmark never interleave)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f".{folder.name}.lock")):
        yield


@dataclass
class Manifest:
    """``spotdiff-manifest.json`` of one folder: ``{"format", "name", "parts": {part: record}}``."""

    path: Path
    name: str
    parts: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path, name: str) -> Manifest:
        path = folder / MANIFEST
        if not path.is_file():
            return cls(path, name)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"unreadable manifest: {exc}", file=path) from exc
        if not isinstance(data, dict) or not isinstance(data.get("parts"), dict):
            raise DataError("not a spotdiff manifest (no 'parts' object)", file=path)
        return cls(path, data.get("name", name), data["parts"])

    def save(self) -> None:
        """Write atomically (a temporary file renamed over the old one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"format": FORMAT, "name": self.name, "parts": self.parts}
        write_json(self.path, payload, indent=1)


# --------------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------------


@dataclass
class PartState:
    """Where one part stands; ``detail`` says what is missing or what to do."""

    name: str
    status: str
    detail: str = ""
    record: dict | None = None


@dataclass
class BenchmarkState:
    name: str
    folder: Path
    status: str
    parts: dict[str, PartState]

    def missing(self) -> list[PartState]:
        return [p for p in self.parts.values() if p.status not in READY]


def _recorded_paths_exist(target: Path, record: dict) -> bool:
    paths = list(record.get("files", {})) + [e for t in record.get("trees", {}).values() for e in t.get("entries", [])]
    return all((target / p).exists() for p in paths)


def source_state(source: Source, target: Path, manifest: Manifest, key: str, root: str | Path | None) -> PartState:
    """The state of ``source`` fetched into ``target`` as manifest entry ``key``.

    Args:
        source: the declared source.
        target: the folder the source is fetched into.
        manifest: the benchmark folder's manifest.
        key: the source's entry in the manifest.
        root: the data home, or None for the default.
    """
    if isinstance(source, ManualSource):
        missing = [p for p in source.expect if not (target / p).exists()]
        if missing:
            return PartState(key, "manual", source.instructions.format(target=target))
        return PartState(key, "ready", "done by hand", manifest.parts.get(key))
    if isinstance(source, ImagesSource):
        problems = []
        for coll_name, folder in source.folders:
            state = collection_state(COLLECTIONS[coll_name], root)
            if state.status not in READY:
                problems.append(f"{coll_name}: {state.status}" + (f" ({state.detail})" if state.detail else ""))
            elif not (collection_dir(coll_name, root) / folder).exists():
                problems.append(f"{coll_name}: no folder {folder!r} in it")
        record = manifest.parts.get(key)
        if problems:
            status = "manual" if any(": manual" in p for p in problems) else "absent"
            return PartState(key, status, "; ".join(problems), record)
        if record is None or not (target / source.link).exists():
            return PartState(key, "absent", f"collections fetched, {source.link} not linked yet", record)
        return PartState(key, record.get("status", "ready"), "", record)
    record = manifest.parts.get(key)
    if record is None:
        return PartState(key, "absent")
    if not _recorded_paths_exist(target, record):
        return PartState(key, "absent", "files recorded in the manifest are missing", record)
    return PartState(key, record.get("status", "ready"), record.get("detail", ""), record)


def collection_state(collection: Collection, root: str | Path | None = None) -> PartState:
    folder = collection_dir(collection.name, root)
    return source_state(collection.source, folder, Manifest.load(folder, collection.name), "content", root)


def part_state(decl: BenchmarkMetadata, part: Part, root: str | Path | None = None) -> PartState:
    """The state of one part of a benchmark in the data home (its source's state, named after the part).

    Args:
        decl: the benchmark's declaration.
        part: one of its parts.
        root: the data home, or None for the default.
    """
    folder = benchmark_dir(decl.name, root)
    state = source_state(part.source, folder, Manifest.load(folder, decl.name), part.name, root)
    state.name = part.name
    return state


def benchmark_state(decl: BenchmarkMetadata, root: str | Path | None = None) -> BenchmarkState:
    """The status of every part and of the benchmark (see docs/data.md)."""
    folder = benchmark_dir(decl.name, root)
    parts = {p.name: part_state(decl, p, root) for p in decl.parts}
    required = [parts[p.name] for p in decl.required]
    if all(s.status == "verified" for s in required):
        status = "verified"
    elif all(s.status in READY for s in required):
        status = "ready"
    elif any(s.status in READY for s in parts.values()):
        status = "partial"
    else:
        status = "absent"
    return BenchmarkState(decl.name, folder, status, parts)


# --------------------------------------------------------------------------------------------------
# Finding data for a command, and saying where it came from
# --------------------------------------------------------------------------------------------------


def resolve_data(benchmark: str, data: str | Path | None = None, *, root: str | Path | None = None) -> Path:
    """The data folder a command reads: ``data`` when given, else the benchmark's folder in the data home.

    Without ``data``, a benchmark declared with local files is read where its declaration says; one that has
    not been fetched is a ConfigError that says where it looked
    and how to fetch it; a partly fetched one is used with a warning that lists the missing parts and
    their manual routes (a loader reading a missing file then fails naming it).

    Args:
        benchmark: the benchmark's name (an alias is accepted).
        data: the folder given by the user, or None.
        root: the data home, or None for the default.
    """
    if data is not None:
        return Path(data).expanduser()
    from spotdiff.benchmarks import BENCHMARKS, canonical_benchmark
    from spotdiff.data.catalog import benchmark_sources

    canonical = canonical_benchmark(benchmark)[0]
    local = BENCHMARKS.get(canonical).default_data() if canonical in BENCHMARKS else None
    if local is not None:  # a declared benchmark of local files: its declaration's folder
        return local

    decl = benchmark_sources(benchmark)
    state = benchmark_state(decl, root)
    if state.status == "absent":
        raise ConfigError(
            f"no data folder given for benchmark {decl.name!r} and none fetched (looked in {state.folder}: "
            f"{'; '.join(f'{p.name} {p.status}' for p in state.parts.values())}). Fetch it with "
            f"`spotdiff data fetch {decl.name}` (data home: $SPOTDIFF_DATA or --root), or pass --data DIR."
        )
    if state.status == "partial":
        for part in state.missing():
            optional = decl.part(part.name).optional
            if not optional:
                log.warning(
                    "%s: part %r is %s%s", decl.name, part.name, part.status, f": {part.detail}" if part.detail else ""
                )
    log.info("using %s data from %s (%s)", decl.name, state.folder, state.status)
    return state.folder


def data_provenance(path: str | Path) -> dict | None:
    """Where the data at ``path`` came from, from the data-home manifest of ``path`` or its parent.

    Returns ``{"benchmark", "manifest", "parts": {part: {"source", "status", "fetched_at", "verified_at",
    "revision", "files" (sha256 by path), "trees" (digest by folder), "collections"}}}``, or None for a
    folder that was not fetched into a data home. Recorded with every run.
    """
    path = Path(path).expanduser()
    for folder in (path, path.parent):
        manifest_path = folder / MANIFEST
        if manifest_path.is_file():
            manifest = Manifest.load(folder, folder.name)
            return {
                "benchmark": manifest.name,
                "manifest": str(manifest_path.resolve()),
                "parts": {
                    name: {
                        "source": record.get("source"),
                        "status": record.get("status"),
                        "fetched_at": record.get("fetched_at"),
                        "verified_at": record.get("verified_at"),
                        "revision": record.get("revision"),
                        "files": {k: v.get("sha256") for k, v in record.get("files", {}).items()},
                        "trees": {k: v.get("digest") for k, v in record.get("trees", {}).items()},
                        "collections": record.get("collections"),
                    }
                    for name, record in manifest.parts.items()
                },
            }
    return None
