"""Hugging Face hub downloads through ``huggingface_hub`` at a pinned revision.

A source declared without a revision is first resolved to the commit its default branch points at
(:func:`resolve_revision`), and that commit is downloaded and recorded.

``snapshot_download`` fetches the declared file patterns into a staging folder (``local_dir``), which
makes an interrupted download resume with a Range request on the next run. ``HF_ENDPOINT``,
``HF_TOKEN`` and ``HF_HUB_OFFLINE`` are read when the fetch runs. Every downloaded file is then
checked against the hub's own listing (``get_paths_info``): the sha256 of LFS files, the git blob id
of the others. Hub errors become :class:`~spotdiff.errors.SourceError` s that name the repository,
the revision and the way around (accepting a licence, a token, the manual route).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from dataclasses import replace
from pathlib import Path

from spotdiff.benchmarks.sources import HubSource
from spotdiff.data.digests import file_digests
from spotdiff.data.download import offline
from spotdiff.errors import SourceError

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"[0-9a-f]{40}")


def hub_endpoint() -> str:
    """``$HF_ENDPOINT`` when set (read now, not at import), else huggingface_hub's default."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def manual_route(source: HubSource, staging: Path) -> str:
    return (
        f"download {', '.join(source.files)} from {source.url}/tree/{source.revision or 'main'} yourself "
        "(keeping their paths) "
        f"into {staging}; then run the same `spotdiff data fetch` again"
    )


def _gated_message(source: HubSource, token: bool, staging: Path) -> str:
    what = (
        "the token in HF_TOKEN has no access to it yet"
        if token
        else "no Hugging Face token was found (HF_TOKEN or `hf auth login`)"
    )
    return (
        f"{source.repo_id} is gated and {what}: log in at {source.url}, accept its conditions, create a read "
        f"token at https://huggingface.co/settings/tokens and set HF_TOKEN, then run the fetch again. "
        f"Manual route: {manual_route(source, staging)}"
    )


def _staged_files(staging: Path, source: HubSource) -> list[str]:
    out = []
    for path in sorted(staging.rglob("*")):
        rel = path.relative_to(staging).as_posix()
        if path.is_file() and not rel.startswith(".cache/") and any(fnmatch.fnmatch(rel, p) for p in source.files):
            out.append(rel)
    return out


def resolve_revision(source: HubSource, staging: Path) -> HubSource:
    """``source`` at the commit its default branch points at now, when it declares no revision (or the commit
    a branch or tag it names points at).

    Offline, or with a commit declared, ``source`` comes back as it is (an offline fetch of an
    unpinned source reads the staged files and records no commit).

    Args:
        source: the declared source.
        staging: where its files are downloaded (named in the manual route of an error).
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError
    from huggingface_hub.utils import get_token

    if (source.revision is not None and _COMMIT.fullmatch(source.revision)) or offline():
        return source
    endpoint = hub_endpoint()
    try:
        info = HfApi(endpoint=endpoint).repo_info(source.repo_id, repo_type=source.repo_type, revision=source.revision)
    except (GatedRepoError, RepositoryNotFoundError) as exc:
        if source.gated or isinstance(exc, GatedRepoError):
            raise SourceError(_gated_message(source, bool(get_token()), staging)) from exc
        raise SourceError(f"hub repository {source.repo_id} not found at {endpoint} (or private): {exc}") from exc
    except (HfHubHTTPError, OSError) as exc:
        raise SourceError(f"cannot read the commit of {source.repo_id}@{source.revision or 'main'} at {endpoint}: "
                          f"{exc}") from exc
    return replace(source, revision=info.sha)


def fetch_hub(source: HubSource, staging: Path, *, progress: bool = True) -> dict[str, dict]:
    """Download ``source`` into ``staging``; return ``{path: {"sha256", "size", "checked_against"}}``."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import get_token
    from tqdm.auto import tqdm

    class _Quiet(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    endpoint = hub_endpoint()
    where = f"{source.repo_id}@{source.revision or 'main'} ({endpoint})"
    is_offline = offline()
    token = get_token()
    staging.mkdir(parents=True, exist_ok=True)
    try:
        snapshot_download(
            source.repo_id,
            repo_type=source.repo_type,
            revision=source.revision or "main",
            allow_patterns=list(source.files),
            local_dir=staging,
            endpoint=endpoint,
            local_files_only=is_offline,
            tqdm_class=None if progress else _Quiet,
        )
    except GatedRepoError as exc:
        raise SourceError(_gated_message(source, bool(token), staging)) from exc
    except RepositoryNotFoundError as exc:
        if source.gated:
            raise SourceError(_gated_message(source, bool(token), staging)) from exc
        raise SourceError(f"hub repository {where} not found (or private): {exc}") from exc
    except RevisionNotFoundError as exc:
        raise SourceError(f"revision {source.revision} of {source.repo_id} not found at {endpoint}") from exc
    except LocalEntryNotFoundError as exc:
        why = "offline (HF_HUB_OFFLINE set)" if is_offline else f"the hub cannot be reached ({exc.__cause__ or exc})"
        raise SourceError(f"{why}: cannot download {where}. Manual route: {manual_route(source, staging)}") from exc
    except HfHubHTTPError as exc:
        raise SourceError(f"hub error for {where}: {exc}. Manual route: {manual_route(source, staging)}") from exc
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot download {where}: {exc}. Manual route: {manual_route(source, staging)}") from exc
    files = _staged_files(staging, source)
    if not files:
        raise SourceError(f"no file of {where} matches {', '.join(source.files)}")
    listing: dict = {}
    if not is_offline:
        try:
            infos = HfApi(endpoint=endpoint).get_paths_info(
                source.repo_id, files, revision=source.revision or "main", repo_type=source.repo_type
            )
            listing = {i.path: i for i in infos}
        except HfHubHTTPError as exc:
            log.warning("%s: cannot read the hub listing to check the files (%s)", where, exc)
    out = {}
    for rel in files:
        digests = file_digests(staging / rel, ("sha256", "git-blob-sha1"))
        info = listing.get(rel)
        checked = "not checked: no hub listing (offline)"
        if info is not None:
            lfs = getattr(info, "lfs", None)
            if lfs:
                expected, got, what = lfs.sha256, digests["sha256"], "LFS sha256"
            else:
                expected, got, what = info.blob_id, digests["git-blob-sha1"], "git blob id"
            if expected != got:
                (staging / rel).unlink()
                raise SourceError(f"{where}: {rel} has {what} {got}, the hub lists {expected}; the file was deleted")
            checked = f"hub listing {what}"
        out[rel] = {"sha256": digests["sha256"], "size": (staging / rel).stat().st_size, "checked_against": checked}
    return out
