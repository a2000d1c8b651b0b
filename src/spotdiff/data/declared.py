"""Declared benchmarks as commands name them, and their data: a YAML file, the declarations of a folder
(``--include-path DIR``, ``$SPOTDIFF_INCLUDE_PATH``), or a hub dataset spotdiff published
(``hf:ORG/NAME[@REVISION]``, its declaration ``spotdiff.yaml`` beside its parquet shards).

:func:`resolve_benchmark` turns any of those into the registered name every command and the Python API then
use; a declaration read here is also checked against the registered protocols (its protocols exist, its main
score is one of its protocol's metrics). A hub dataset is fetched into the data home at its commit with the
fetch code of every benchmark (resumable, checked against the hub's listing, offline once fetched);
:func:`fetch_media` brings the image and video URLs a declared benchmark's rows name into its folder there.
Usage: docs/declared.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from spotdiff.benchmarks import BENCHMARKS, Benchmark, canonical_benchmark
from spotdiff.benchmarks.declaration import Declaration, read_declaration
from spotdiff.benchmarks.declared import DeclaredBenchmark, declared_benchmark, url_media_name
from spotdiff.benchmarks.sources import HubSource, RemoteFile, UrlSource
from spotdiff.data.download import offline
from spotdiff.data.fetch import PartOutcome, fetch_source
from spotdiff.data.home import READY, Manifest, benchmark_dir, data_home, locked, source_state
from spotdiff.data.hub import resolve_revision
from spotdiff.errors import ConfigError, DataError, SourceError
from spotdiff.naming import safe_name

#: The environment variable listing folders of declarations (``os.pathsep`` between them), as ``--include-path``.
INCLUDE_ENV = "SPOTDIFF_INCLUDE_PATH"
#: The prefix of a hub dataset's name.
HUB_PREFIX = "hf:"
#: The declaration a hub dataset spotdiff published carries at its top.
DECLARATION_FILE = "spotdiff.yaml"
#: Where hub datasets are fetched in the data home: ``<home>/hf/<org>--<name>/<commit>``.
HUB_FOLDER = "hf"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SUFFIXES = (".yaml", ".yml")


def check_protocols(decl: Declaration) -> None:
    """Refuse a declaration naming a protocol that is not registered, or a main score that is not one of its
    protocol's metrics (a DataError naming the file and the key)."""
    from spotdiff.protocols import PROTOCOLS, get_protocol

    for k, name in enumerate(decl.metadata.protocols):
        if name not in PROTOCOLS:
            raise DataError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS.names())}", file=decl.path,
                            field=f"protocols[{k}]")  # fmt: skip
    protocol, metric = decl.metadata.main_score
    metrics = get_protocol(protocol).metrics
    if metric not in metrics:
        raise DataError(f"protocol {protocol!r} has no metric {metric!r}; its metrics: {', '.join(metrics)}",
                        file=decl.path, field="main_score")  # fmt: skip


def load_declared(path: str | Path, versions: Path | None = None) -> type[DeclaredBenchmark]:
    """The benchmark the YAML file ``path`` declares, checked and registered under its name (its media folder:
    ``<data home>/<name>/media``; ``versions``: :func:`~spotdiff.benchmarks.declared.declared_benchmark`'s)."""
    decl = read_declaration(path)
    check_protocols(decl)
    return declared_benchmark(decl, benchmark_dir(decl.name) / "media", versions)


def include_folders(folders: Iterable[str | Path] = ()) -> list[str]:
    """Register the declarations (``*.yaml``, ``*.yml``) of ``folders`` and of :data:`INCLUDE_ENV`'s; their names.

    Args:
        folders: folders given on the command line (``--include-path``).
    """
    listed = [f for f in os.environ.get(INCLUDE_ENV, "").split(os.pathsep) if f.strip()]
    names = []
    for folder in [*map(str, folders), *listed]:
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise ConfigError(f"include path {path} is not a folder of benchmark declarations")
        for file in sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file()):
            names.append(load_declared(file).name)
    return names


def is_declaration(name: str) -> bool:
    """Whether a benchmark name given to a command is a declaration's file (a ``.yaml`` or ``.yml`` path)."""
    return name.endswith(_SUFFIXES) or (Path(name).is_file() and name not in BENCHMARKS)


def resolve_benchmark(name: str) -> str:
    """The registered name of the benchmark ``name`` gives: a declaration's file (read and registered), a hub
    dataset ``hf:ORG/NAME[@REVISION]`` (fetched, its declaration registered), or a name (one a folder of
    :data:`INCLUDE_ENV` declares, or a built-in's or an alias, returned as given).

    Args:
        name: what the user gave.
    """
    if name.startswith(HUB_PREFIX):
        return hub_benchmark(name).name
    if is_declaration(name):
        return load_declared(name).name
    if canonical_benchmark(name)[0] not in BENCHMARKS:
        include_folders()
    return name


def declared_class(name: str) -> type[DeclaredBenchmark] | None:
    """The loader of a registered declared benchmark, None for a built-in one."""
    cls: type[Benchmark] = BENCHMARKS.get(canonical_benchmark(name)[0])
    return cls if issubclass(cls, DeclaredBenchmark) else None


def _hub_folder(repo: str, commit: str) -> Path:
    return _hub_repo_folder(repo) / commit


def _hub_repo_folder(repo: str) -> Path:
    """Where the snapshots of hub dataset ``repo`` are fetched, one folder per commit."""
    return data_home() / HUB_FOLDER / safe_name(repo.replace("/", "--"))


def _snapshot(repo: str, revision: str | None) -> Path:
    """The folder of a fetched snapshot of ``repo`` at ``revision`` (a commit, a branch, a tag; None: the main
    branch): offline, the commit asked for, else the last one fetched; online, fetched now if not yet."""
    if offline() and (revision is None or not _COMMIT.fullmatch(revision)):
        folder = _hub_repo_folder(repo)
        fetched = sorted((p for p in folder.glob("*") if (p / DECLARATION_FILE).is_file()),
                         key=lambda p: (p / DECLARATION_FILE).stat().st_mtime)  # fmt: skip
        if not fetched:
            raise SourceError(f"offline (HF_HUB_OFFLINE set) and {repo} was never fetched: fetch it once online, or "
                              "give its commit")  # fmt: skip
        return fetched[-1]
    source = resolve_revision(HubSource(repo, revision, ("*",)), data_home() / HUB_FOLDER / ".staging")
    commit = source.revision or "main"
    target = _hub_folder(repo, commit)
    with locked(target):
        state = source_state(source, target, Manifest.load(target, repo), "repo", None)
        if state.status not in READY:
            record = fetch_source(source, target, "repo", label=f"{HUB_PREFIX}{repo}")
            manifest = Manifest.load(target, repo)
            manifest.parts["repo"] = record
            manifest.save()
    return target


def hub_benchmark(name: str) -> type[DeclaredBenchmark]:
    """The benchmark a hub dataset published by spotdiff declares (``hf:ORG/NAME[@REVISION]``): its snapshot
    fetched into the data home (:func:`_snapshot`), its ``spotdiff.yaml`` read and registered; the snapshot is
    the benchmark's data folder, and its manifest records the repository and the commit every run records.

    Args:
        name: ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION``.
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    repo, _, revision = name[len(HUB_PREFIX):].partition("@")
    try:
        validate_repo_id(repo)
    except HFValidationError as exc:
        raise ConfigError(f"benchmark {name!r}: {repo!r} is not a hub repository id ({exc})") from None
    folder = _snapshot(repo, revision or None)
    declaration = folder / DECLARATION_FILE
    if not declaration.is_file():
        raise SourceError(f"the hub dataset {repo} has no {DECLARATION_FILE} (spotdiff synth publish writes one): "
                          "declare it yourself in a YAML file with a hub: data entry (docs/declared.md)")  # fmt: skip
    return load_declared(declaration, versions=_hub_repo_folder(repo))  # another revision read later replaces it


def fetch_media(name: str, *, progress: bool = True) -> PartOutcome | None:
    """Fetch the image and video URLs the rows of declared benchmark ``name`` name, each once, into its media
    folder in the data home (resumable; recorded as the part ``media`` of its manifest); None when its rows
    name no URL.

    Args:
        name: a registered declared benchmark.
        progress: show the download's progress bar.
    """
    from spotdiff.data.home import resolve_data

    cls = declared_class(name)
    if cls is None:
        return None
    bench = cls(resolve_data(cls.name))
    urls = bench.media_urls()
    if not urls:
        return None
    folder = benchmark_dir(cls.name)
    missing = [u for u in urls if not (folder / "media" / url_media_name(u)).is_file()]
    files = tuple(RemoteFile(u, f"media/{url_media_name(u)}") for u in missing)
    if not files:
        return PartOutcome("media", "present", f"{len(urls)} URLs")
    with locked(folder):
        record = fetch_source(UrlSource(files, origin="the URLs its rows name"), folder, "media", progress=progress,
                              label=f"{cls.name}/media")  # fmt: skip
        manifest = Manifest.load(folder, cls.name)
        manifest.parts.setdefault("media", {"kind": "url", "status": "ready", "files": {}})
        manifest.parts["media"]["files"].update(record["files"])
        manifest.save()
    return PartOutcome("media", "fetched", f"{len(files)} of {len(urls)} URLs")
