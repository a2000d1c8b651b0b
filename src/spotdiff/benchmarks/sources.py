"""The types a benchmark declares its data sources with: plain, validated values (no downloading).

A declaration lists named :class:`Part` s, each with one source (:class:`UrlSource`,
:class:`HubSource`, :class:`ImagesSource`, :class:`ManualSource`); :mod:`spotdiff.data` fetches them.
Details: docs/data.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import ClassVar, Literal

from spotdiff.errors import ConfigError

Role = Literal["annotations", "images", "both"]

ALGORITHMS = ("sha256", "md5", "git-blob-sha1")
_PREFIX = {"sha256": "sha256", "md5": "md5", "git": "git-blob-sha1"}
MEASURED = "measured here on a byte-identical copy (git blob id matches the repository tree)"
GIT_TREE = "git blob id listed by the repository tree at the pinned commit"


@dataclass(frozen=True)
class Checksum:
    """An expected digest of a file's bytes and where the value comes from.

    ``git-blob-sha1`` is git's object id of the file, ``sha1(b"blob <size>\\0" + bytes)``: the id
    that a repository's tree lists for every file, so a raw file at a pinned commit can be checked
    even when no copy of it could be read here.
    """

    algorithm: str
    value: str
    origin: str = ""

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown checksum algorithm {self.algorithm!r}; known: {', '.join(ALGORITHMS)}")

    @classmethod
    def parse(cls, text: str, origin: str = "") -> Checksum:
        """``"sha256:<hex>"``, ``"md5:<hex>"`` or ``"git:<hex>"`` (a git blob id)."""
        prefix, sep, value = text.partition(":")
        if not sep or prefix not in _PREFIX or not value:
            raise ConfigError(f"checksum {text!r} must look like sha256:<hex>, md5:<hex> or git:<hex>")
        return cls(_PREFIX[prefix], value.lower(), origin)

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.value}"


@dataclass(frozen=True)
class Unpack:
    """Extract a downloaded archive (zip, tar, tar.gz) into the folder ``dest``.

    The archive's *content root* is what lands in ``dest``: starting at the archive's top, a level
    that holds exactly one folder (ignoring ``__MACOSX`` and ``.DS_Store``) is descended into, so
    ``val2017.zip`` (one ``val2017/`` folder) puts its images directly in ``dest``, and an archive
    without a top folder lands as it is. ``expect`` names paths (relative to ``dest``) that must exist
    afterwards; a missing one means the archive's layout differs from the declaration, an error.
    Extraction goes to a temporary folder beside ``dest`` and is renamed into place when complete.
    """

    dest: str
    expect: tuple[str, ...] = ()


@dataclass(frozen=True)
class RemoteFile:
    """One file at a URL: where it lands (relative to the target folder), its size and checksum.

    With ``unpack`` the file is an archive: it is downloaded under ``path`` in the staging folder,
    checked, extracted as :class:`Unpack` says, and removed.
    """

    url: str
    path: str
    checksum: Checksum | None = None
    size: int | None = None
    unpack: Unpack | None = None


class Source:
    """Base of every source kind; ``describe()`` is the one-line form shown by ``spotdiff data list``."""

    kind: ClassVar[str] = ""

    @property
    def size(self) -> int | None:
        """Bytes to download, when every part of it is known; None otherwise."""
        return None

    def describe(self) -> str:
        raise NotImplementedError

    def as_dict(self) -> dict:
        """A JSON-able description, recorded in the manifest and with every run."""
        raise NotImplementedError


@dataclass(frozen=True)
class UrlSource(Source):
    """Files at plain URLs. ``origin`` says whose distribution it is (e.g. a repository at a commit)."""

    files: tuple[RemoteFile, ...]
    origin: str
    revision: str | None = None

    kind: ClassVar[str] = "url"

    @property
    def size(self) -> int | None:
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]

    def describe(self) -> str:
        pinned = sum(f.checksum is not None for f in self.files)
        n = len(self.files)
        what = self.files[0].url if n == 1 else f"{n} files from {self.origin}"
        check = "checksum pinned" if pinned == n else f"{pinned}/{n} checksums pinned" if pinned else "no checksum"
        return f"{what} ({check})"

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "origin": self.origin,
            "revision": self.revision,
            "files": [
                {"url": f.url, "path": f.path, "checksum": str(f.checksum) if f.checksum else None, "size": f.size}
                for f in self.files
            ],
        }


@dataclass(frozen=True)
class HubSource(Source):
    """Files of a Hugging Face repository at a pinned revision, fetched with ``huggingface_hub``.

    ``files`` are glob patterns (``allow_patterns``); they land under ``dest`` keeping their paths,
    except those named in ``unpack`` (archives), which are extracted and removed. ``revision=None``
    declares a repository whose commit could not be read when it was declared: the fetch resolves the
    default branch to its commit first, downloads that commit, and records it in the manifest.
    """

    repo_id: str
    revision: str | None
    files: tuple[str, ...]
    repo_type: str = "dataset"
    dest: str = ""
    unpack: tuple[tuple[str, Unpack], ...] = ()
    total_bytes: int | None = None
    gated: bool = False

    kind: ClassVar[str] = "hub"

    @property
    def size(self) -> int | None:
        return self.total_bytes

    @property
    def url(self) -> str:
        prefix = "" if self.repo_type == "model" else f"{self.repo_type}s/"
        return f"https://huggingface.co/{prefix}{self.repo_id}"

    def describe(self) -> str:
        gated = ", gated: accept the licence and set HF_TOKEN" if self.gated else ""
        at = self.revision[:12] if self.revision else "main (unpinned: the commit fetched is recorded)"
        return f"hub {self.repo_type} {self.repo_id}@{at} {', '.join(self.files)}{gated}"

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "repo_id": self.repo_id,
            "repo_type": self.repo_type,
            "revision": self.revision,
            "files": list(self.files),
            "gated": self.gated,
        }


@dataclass(frozen=True)
class ManualSource(Source):
    """A step a person must take. ``expect`` lists paths (relative to the target folder) that exist once
    it is done; ``url`` is where to start."""

    what: str
    url: str
    instructions: str
    expect: tuple[str, ...]

    kind: ClassVar[str] = "manual"

    def describe(self) -> str:
        return f"manual: {self.what} ({self.url})"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "what": self.what, "url": self.url, "expect": list(self.expect)}


@dataclass(frozen=True)
class Collection:
    """An image collection shared by several benchmarks, fetched once into ``<home>/_shared/<name>``."""

    name: str
    title: str
    source: UrlSource | HubSource | ManualSource
    license: str


@dataclass(frozen=True)
class ImagesSource(Source):
    """Shared image collections linked into the benchmark folder at ``link``.

    ``folders`` are ``(collection name, folder inside it)`` pairs. One pair: ``link`` is a symbolic
    link to that folder. Several: ``link`` is a folder of per-file links to every file of each folder
    (a benchmark that expects one flat image folder drawn from several datasets, e.g. VALSE).
    """

    folders: tuple[tuple[str, str], ...]
    link: str

    kind: ClassVar[str] = "images"

    def describe(self) -> str:
        names = ", ".join(f"{c}/{d}" if d else c for c, d in self.folders)
        return f"shared images {names} -> {self.link}"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "folders": [list(p) for p in self.folders], "link": self.link}


@dataclass(frozen=True)
class Part:
    """One named piece of a benchmark's data. Optional parts are fetched only when named
    (``spotdiff data fetch NAME --part PART``); the benchmark is ready without them."""

    name: str
    role: Role
    source: Source
    optional: bool = False
    license: str = ""
    note: str = ""


def github_raw(repo: str, commit: str, path: str) -> str:
    """The raw.githubusercontent.com URL of a file of a GitHub repository at a commit.

    Args:
        repo: ``owner/name``.
        commit: the commit (40 hex digits).
        path: the file's path in the repository.
    """
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def google_drive(file_id: str) -> str:
    """The direct-download URL of a public Google Drive file (the endpoint ``gdown`` uses)."""
    return f"https://drive.usercontent.google.com/download?id={file_id}&export=download&confirm=t"


def pinned_files(name: str, strip: str = "") -> list[tuple[str, str, int | None, str]]:
    """The files pinned in ``pins/<name>.tsv`` (path in the repository, size or ``-``, checksum text) as
    :func:`github_files` takes them; each lands at its path less the prefix ``strip``."""
    text = resources.files("spotdiff.benchmarks").joinpath(f"pins/{name}.tsv").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            path, size, check = line.split("\t")
            rows.append((path, path.removeprefix(strip), None if size == "-" else int(size), check))
    return rows


def github_files(repo: str, commit: str, files: list[tuple[str, str, int | None, str]]) -> UrlSource:
    """Files of a GitHub repository at a commit, each with its checksum (origin: measured here, or the tree's
    git blob id for ``git:`` values).

    Args:
        repo: ``owner/name``.
        commit: the commit (40 hex digits).
        files: (path in the repository, local path, size or None, checksum text as :meth:`Checksum.parse` reads).
    """
    return UrlSource(
        files=tuple(
            RemoteFile(
                github_raw(repo, commit, path),
                local,
                Checksum.parse(check, GIT_TREE if check.startswith("git:") else MEASURED),
                size,
            )
            for path, local, size, check in files
        ),
        origin=f"github.com/{repo}",
        revision=commit,
    )
