"""A synthesized folder published as a Hub dataset: :func:`publish` writes its layout (the shards of
:mod:`.shards`, the declaration and the card of :mod:`.card`, the review sheets) and commits it to a dataset
repository through ``huggingface_hub``.

A push is checked before anything runs (the repository id, offline mode, the token, its write role and the
namespace: :func:`spotdiff.report.hub.check_push`, as ``eval --push-to-hub`` is); a push that fails after the
layout is written is one :class:`~spotdiff.errors.ConfigError` line, the synthesized folder left as it was.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spotdiff.benchmarks import get_benchmark
from spotdiff.errors import ConfigError, DataError
from spotdiff.publish.card import card, declaration, review_record
from spotdiff.publish.shards import Config, write_shards
from spotdiff.report.hub import check_push, hub_call
from spotdiff.synth import ENGINES
from spotdiff.synth.run import MARKER, RECORD

#: The declaration a published set carries at its top (:data:`spotdiff.data.declared.DECLARATION_FILE`).
DECLARATION = "spotdiff.yaml"
REVIEW_FOLDER = "review"


@dataclass
class Published:
    """What :func:`publish` wrote and pushed: the layout's folder (None once a temporary one is removed), the
    configs, the declared name, and the commit's URL (None without a push)."""

    out: Path | None
    configs: list[Config]
    name: str
    commit_url: str | None


def _record(folder: Path) -> dict:
    """The synthesis run's ``synth.json``; a folder without one (or with an unfinished run) is refused."""
    if (folder / MARKER).is_file():
        raise ConfigError(f"{folder} holds an unfinished synth run: finish it (run the same command again) first")
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{folder} is not a finished spotdiff synth output (no readable {RECORD}: {exc})") from None
    if not isinstance(record, dict) or "engine" not in record:
        raise DataError("not a synth record (no engine)", file=folder / RECORD)
    return record


def declared_name(repo: str) -> str:
    """The benchmark name a published set declares: its repository, lowercased.

    >>> declared_name("SpotLab/SPEC-synth")
    'spotlab--spec-synth'
    """
    return re.sub(r"[^a-z0-9._-]+", "-", repo.lower().replace("/", "--")).strip("-.")[:64] or "synthesized"


def write_layout(folder: Path, out: Path, *, repo: str, license: str) -> tuple[list[Config], str]:
    """The Hub layout of the synthesized ``folder`` in ``out``: shards, ``spotdiff.yaml``, ``README.md`` and
    ``review/``; the configs and the declared name.

    Args:
        folder: a finished ``spotdiff synth`` output.
        out: the folder to write the layout in (empty or new).
        repo: the repository it is meant for (``ORG/NAME``; named in the card and the declared name).
        license: the set's licence (the card's front matter and the declaration).
    """
    record = _record(folder)
    engine = record["engine"]
    benchmark = record.get("summary", {}).get("benchmark") or getattr(ENGINES.get(engine), "benchmark", None)
    if not benchmark:
        raise ConfigError(f"engine {engine!r} writes no benchmark (a training corpus): there are no cases to publish")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty: give a new or empty folder for the published layout")
    bench = get_benchmark(benchmark)(folder)
    configs, kind, prompts = write_shards(bench.confined_cases(), out)
    name = declared_name(repo)
    meta = bench.metadata
    (out / DECLARATION).write_text(declaration(meta, name=name, engine=engine, configs=configs, kind=kind,
                                               prompts=prompts, license=license), encoding="utf-8")  # fmt: skip
    review = review_record(folder)
    for sheet in review["sheets"]:
        (out / REVIEW_FOLDER).mkdir(exist_ok=True)
        shutil.copyfile(folder / sheet, out / REVIEW_FOLDER / sheet)
    (out / "README.md").write_text(card(meta, repo=repo, record=record, configs=configs, kind=kind, license=license,
                                        review=review), encoding="utf-8")  # fmt: skip
    return configs, name


def push_layout(out: Path, repo: str, *, message: str, private: bool = False) -> str:
    """Commit every file of ``out`` to the dataset repository ``repo`` (created if needed); the commit's URL."""
    from huggingface_hub import CommitOperationAdd, HfApi

    from spotdiff.data.hub import hub_endpoint

    api = HfApi(endpoint=hub_endpoint())
    operations = [CommitOperationAdd(p.relative_to(out).as_posix(), str(p)) for p in sorted(out.rglob("*"))
                  if p.is_file()]  # fmt: skip

    def push() -> str:
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        return str(api.create_commit(repo, operations, repo_type="dataset", commit_message=message).commit_url)

    return hub_call(f"pushing to {repo} failed", push)


def publish(folder: str | Path, *, repo: str | None = None, out: str | Path | None = None, license: str = "unknown",
            private: bool = False) -> Published:  # fmt: skip
    """Publish the synthesized ``folder``: its Hub layout written to ``out`` (a temporary folder when None) and,
    with ``repo``, committed there; the push is checked before anything is written.

    Args:
        folder: a finished ``spotdiff synth`` output.
        repo: the dataset repository to push to (``ORG/NAME``), or None to write the layout only.
        out: where the layout is written (kept); None: a temporary folder, removed afterwards.
        license: the set's licence, as the hub names licences (``cc-by-4.0``, ...; ``unknown`` by default).
        private: create the repository private.
    """
    folder = Path(folder)
    if repo is None and out is None:
        raise ConfigError("give where the published layout goes (--out DIR), or a repository to push to")
    if repo is not None:
        check_push(repo)  # token, hub, offline mode: before anything is written
    with tempfile.TemporaryDirectory(prefix="spotdiff-publish-") as tmp:
        target = Path(out) if out is not None else Path(tmp) / "layout"
        configs, name = write_layout(folder, target, repo=repo or f"local/{folder.name}", license=license)
        url = None
        if repo is not None:
            message = f"spotdiff synth {_record(folder)['engine']}: {sum(c.cases for c in configs)} cases"
            try:
                url = push_layout(target, repo, message=message, private=private)
            except ConfigError as exc:
                where = f"; the layout stays in {out}" if out is not None else ""
                raise ConfigError(f"{exc}; the synthesized set stays in {folder}{where}: `spotdiff synth publish "
                                  f"{folder} --push-to-hub {repo}` pushes it") from None  # fmt: skip
    return Published(Path(out) if out is not None else None, configs, name, url)
