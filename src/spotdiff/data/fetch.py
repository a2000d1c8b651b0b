"""Fetching a benchmark: each part from its declared source into the data home, checked, then recorded.

A part is recorded as ready in the manifest only after all its files are downloaded, checked and in
place; a part that fails leaves the manifest as it was (its partial downloads stay in the staging
folder, ``<folder>/.spotdiff-staging/<part>/``, for the next run to resume). Parts that fail do not
stop the others: every part that can be fetched is, and the error raised at the end lists, part by
part, what is missing and the route around it (a token, a licence, a form, a manual download).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spotdiff.benchmarks.metadata import BenchmarkMetadata
from spotdiff.benchmarks.shared import COLLECTIONS
from spotdiff.benchmarks.sources import (
    Collection,
    HubSource,
    ImagesSource,
    ManualSource,
    Part,
    Source,
    UrlSource,
)
from spotdiff.data.archive import JUNK, _replace, extract, tree_digest
from spotdiff.data.catalog import benchmark_sources
from spotdiff.data.download import download_all
from spotdiff.data.home import (
    MANIFEST,
    READY,
    STAGING,
    Manifest,
    benchmark_dir,
    collection_dir,
    locked,
    now,
    source_state,
)
from spotdiff.data.hub import fetch_hub, resolve_revision
from spotdiff.errors import ConfigError, SourceError

ROLES = ("annotations", "images")
LINKS_MARK = ".spotdiff-links"


@dataclass
class PartOutcome:
    """What one fetch did to one part: ``fetched``, ``present`` (already there), or ``missing`` + why."""

    part: str
    status: str
    message: str = ""


class FetchIncomplete(SourceError):
    """Some parts could not be fetched; ``outcomes`` holds every part's outcome."""

    def __init__(self, benchmark: str, outcomes: list[PartOutcome]) -> None:
        self.outcomes = outcomes
        missing = [o for o in outcomes if o.status == "missing"]
        lines = [f"{benchmark}: {len(missing)} of {len(outcomes)} parts could not be fetched (the rest is in place):"]
        lines += [f"  - {o.part}: {o.message}" for o in missing]
        super().__init__("\n".join(lines))


def select_parts(decl: BenchmarkMetadata, parts: Sequence[str] | None = None, role: str | None = None) -> list[Part]:
    """The parts a fetch covers: the named ones, else the required ones; ``role`` keeps annotations or images
    (a part holding both, such as a parquet file with image bytes, counts as either)."""
    if role is not None and role not in ROLES:
        raise ConfigError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    chosen = [decl.part(p) for p in parts] if parts else list(decl.required)
    if role is not None:
        chosen = [p for p in chosen if p.role in (role, "both")]
    return chosen


def fetch_benchmark(
    name: str,
    *,
    root: str | Path | None = None,
    parts: Sequence[str] | None = None,
    role: str | None = None,
    force: bool = False,
    progress: bool = True,
) -> list[PartOutcome]:
    """Fetch benchmark ``name`` (an alias is accepted) into the data home; see the module docstring.

    Raises :class:`FetchIncomplete` (a SourceError) when any chosen part is still missing at the end.
    """
    decl = benchmark_sources(name)
    target = benchmark_dir(decl.name, root)
    target.mkdir(parents=True, exist_ok=True)
    outcomes = []
    with locked(target):
        for part in select_parts(decl, parts, role):
            state = source_state(part.source, target, Manifest.load(target, decl.name), part.name, root)
            if state.status in READY and not force:
                outcomes.append(PartOutcome(part.name, "present", state.status))
                continue
            try:
                record = fetch_source(part.source, target, part.name, root=root, progress=progress,
                                      label=f"{decl.name}/{part.name}", force=force)
            except SourceError as exc:
                outcomes.append(PartOutcome(part.name, "missing", str(exc)))
                continue
            manifest = Manifest.load(target, decl.name)
            manifest.parts[part.name] = record
            manifest.save()
            declared = getattr(part.source, "revision", None)
            resolved = f", fetched commit {record['revision']}" if record.get("revision") != declared else ""
            outcomes.append(PartOutcome(part.name, "fetched", part.source.describe() + resolved))
    if any(o.status == "missing" for o in outcomes):
        raise FetchIncomplete(decl.name, outcomes)
    return outcomes


def _base_record(source: Source) -> dict:
    from spotdiff.version import __version__

    return {
        "kind": source.kind,
        "source": source.as_dict(),
        "status": "ready",
        "fetched_at": now(),
        "verified_at": None,
        "spotdiff_version": __version__,
        "files": {},
        "trees": {},
    }


def fetch_source(
    source: Source,
    target: Path,
    key: str,
    *,
    root: str | Path | None = None,
    progress: bool = True,
    label: str = "",
    force: bool = False,
) -> dict:
    """Fetch ``source`` into ``target``; return its manifest record. ``key`` names its staging folder."""
    staging = target / STAGING / key
    record = _base_record(source)
    if isinstance(source, ManualSource):
        missing = [p for p in source.expect if not (target / p).exists()]
        if missing:
            raise SourceError(f"manual step needed ({source.what}): {source.instructions.format(target=target)}")
        record["detail"] = "done by hand: " + ", ".join(source.expect)
        return record
    if isinstance(source, ImagesSource):
        return _link_images(source, target, record, root=root, progress=progress, force=force)
    if isinstance(source, UrlSource):
        record["revision"] = source.revision
        done = download_all(source.files, staging, label or key, progress=progress)
        for remote in source.files:
            staged = staging / remote.path
            if remote.unpack is None:
                dest = target / remote.path
                dest.parent.mkdir(parents=True, exist_ok=True)
                _replace(staged, dest, staging)
                record["files"][remote.path] = done[remote.path]
            else:
                entries = extract(staged, target, remote.unpack, staging)
                staged.unlink()
                tree = tree_digest(target, entries)
                tree["archive"] = done[remote.path]
                record["trees"][remote.unpack.dest or "."] = tree
    elif isinstance(source, HubSource):
        source = resolve_revision(source, staging)
        record["revision"] = source.revision
        files = fetch_hub(source, staging, progress=progress)
        unpack = dict(source.unpack)
        for rel, info in files.items():
            staged = staging / rel
            if rel in unpack:
                entries = extract(staged, target, unpack[rel], staging)
                staged.unlink()
                tree = tree_digest(target, entries)
                tree["archive"] = {"path": rel, **info}
                record["trees"][unpack[rel].dest or "."] = tree
            else:
                local = f"{source.dest}/{rel}" if source.dest else rel
                dest = target / local
                dest.parent.mkdir(parents=True, exist_ok=True)
                _replace(staged, dest, staging)
                record["files"][local] = info
    else:
        raise ConfigError(f"unknown source kind {type(source).__name__}")
    shutil.rmtree(staging, ignore_errors=True)
    _remove_if_empty(staging.parent)
    return record


def ensure_collection(collection: Collection, *, root: str | Path | None = None, progress: bool = True,
                      force: bool = False) -> dict:
    """Fetch a shared image collection once into ``<home>/_shared/<name>``; return its manifest record."""
    folder = collection_dir(collection.name, root)
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder):
        state = source_state(collection.source, folder, Manifest.load(folder, collection.name), "content", root)
        if state.status in READY and not force:
            return state.record or {"kind": collection.source.kind, "status": state.status}
        try:
            record = fetch_source(collection.source, folder, "content", root=root, progress=progress,
                                  label=collection.name)
        except SourceError as exc:
            raise SourceError(f"shared images {collection.name} ({collection.title}): {exc}") from exc
        manifest = Manifest.load(folder, collection.name)
        manifest.parts["content"] = record
        manifest.save()
        return record


def _relative_link(at: Path, to: Path, final_parent: Path) -> None:
    """A symbolic link at ``at`` to ``to``, relative to ``final_parent`` (where the link will end up)."""
    os.symlink(os.path.relpath(to, final_parent), at, target_is_directory=to.is_dir())


def _link_images(source: ImagesSource, target: Path, record: dict, *, root: str | Path | None, progress: bool,
                 force: bool) -> dict:
    collections = {}
    for name, _ in source.folders:
        if name not in collections:
            coll_record = ensure_collection(COLLECTIONS[name], root=root, progress=progress, force=force)
            collections[name] = {
                "source": coll_record.get("source"),
                "fetched_at": coll_record.get("fetched_at"),
                "trees": {k: {"digest": v.get("digest"), "archive": v.get("archive")}
                          for k, v in coll_record.get("trees", {}).items()},
            }
    link = target / source.link
    if link.exists() and not link.is_symlink() and not (link / LINKS_MARK).exists():
        raise SourceError(f"{link} exists and was not made by spotdiff; move it away and fetch again")
    link.parent.mkdir(parents=True, exist_ok=True)
    scratch = target / STAGING
    scratch.mkdir(parents=True, exist_ok=True)
    if len(source.folders) == 1:
        name, folder = source.folders[0]
        tmp = scratch / f"link-{link.name}"
        tmp.unlink(missing_ok=True)
        _relative_link(tmp, collection_dir(name, root) / folder, link.parent)
    else:
        tmp = scratch / f"links-{link.name}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        (tmp / LINKS_MARK).write_text("per-file links made by spotdiff data fetch\n", encoding="utf-8")
        n = 0
        for name, folder in source.folders:
            base = collection_dir(name, root) / folder
            for path in sorted(base.iterdir()):
                skip = path.name in JUNK or path.name == MANIFEST or path.name.startswith(".")
                if skip or (tmp / path.name).exists():
                    continue
                _relative_link(tmp / path.name, path, link)
                n += 1
        record["detail"] = f"{n} per-file links"
    _replace(tmp, link, scratch)
    _remove_if_empty(scratch)
    record["collections"] = collections
    record["link"] = source.link
    return record


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()
