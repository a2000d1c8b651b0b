"""Unpacking downloaded archives into place, and digests of unpacked trees.

:func:`extract` implements :class:`~spotdiff.benchmarks.sources.Unpack`: the archive is extracted into a
temporary folder beside its destination, its *content root* is found, the declared ``expect`` paths
are checked, and the content is renamed into place (one atomic rename when the destination does not
exist yet). A corrupt or unsafe archive (a member that would land outside the destination, a link that
leads out of it once in place) is a :class:`~spotdiff.errors.SourceError` and leaves the destination
untouched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from spotdiff.benchmarks.sources import Unpack
from spotdiff.errors import SourceError

#: Entries ignored when looking for an archive's content root and when linking or hashing trees.
JUNK = frozenset({"__MACOSX", ".DS_Store", "Thumbs.db"})


def _safe_members(names: list[str], archive: Path) -> None:
    for name in names:
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or ".." in parts or (parts and parts[0].endswith(":")):
            raise SourceError(f"archive {archive} has an unsafe member path {name!r}; nothing was unpacked")


def _extract_all(archive: Path, into: Path) -> None:
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                _safe_members(zf.namelist(), archive)
                bad = zf.testzip()
                if bad is not None:
                    raise SourceError(f"archive {archive} is corrupt: member {bad!r} fails its CRC check")
                zf.extractall(into)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                _safe_members(tf.getnames(), archive)
                tf.extractall(into, filter="data")
        else:
            raise SourceError(f"{archive} is neither a zip nor a tar archive (the download may be an error page)")
    except tarfile.FilterError as exc:  # a member the rule refuses: not damage
        raise SourceError(
            f"archive {archive}: member {exc.tarinfo.name!r} is refused by the extraction rule (tarfile's 'data' "
            f"filter: no absolute path, no link out of the folder, no device file): {exc}; nothing was unpacked"
        ) from exc
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise SourceError(f"archive {archive} is corrupt or truncated: {exc}") from exc


def _leads_out(root: Path, link: PurePosixPath) -> bool:
    """Whether the symbolic link ``link`` (relative to ``root``) leads out of ``root`` once every link on
    its way is followed, as it will be wherever ``root`` is moved: an absolute target, a ``..`` above
    ``root``, or a chain of more than 40 links (a loop, as the system counts) leads out."""
    resolved: list[str] = []
    todo, hops = list(link.parts), 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return True
            resolved.pop()
            continue
        here = root.joinpath(*resolved, part)
        if not here.is_symlink():
            resolved.append(part)
            continue
        hops += 1
        target = os.readlink(here)
        if hops > 40 or os.path.isabs(target):
            return True
        todo = list(PurePosixPath(target.replace("\\", "/")).parts) + todo
    return False


def _refuse_links_out(root: Path, archive: Path) -> None:
    """Refuse the unpacked tree ``root`` when a link in it leads out of it (:func:`_leads_out`): checked on
    the whole tree, where the links end up, since tarfile's filter checks each link as it is extracted
    (a link to a link not yet there passes it)."""
    for folder, dirs, names in os.walk(root):  # links to folders are listed in dirs, not followed
        for name in sorted((*dirs, *names)):
            path = Path(folder) / name
            rel = PurePosixPath(path.relative_to(root).as_posix())
            if path.is_symlink() and _leads_out(root, rel):
                member = PurePosixPath(root.name) / rel
                raise SourceError(
                    f"archive {archive}: member {str(member)!r} is a link (to {os.readlink(path)!r}) that leads out "
                    "of the folder it unpacks into; links in an archive must stay inside it; nothing was unpacked"
                )


def content_root(folder: Path) -> Path:
    """Descend through levels that hold exactly one folder (ignoring :data:`JUNK`)."""
    while True:
        entries = [e for e in folder.iterdir() if e.name not in JUNK]
        if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
            folder = entries[0]
        else:
            return folder


def _replace(src: Path, dst: Path, scratch: Path) -> None:
    """Rename ``src`` to ``dst``, moving an existing ``dst`` aside first and deleting it after."""
    if dst.is_symlink() or dst.exists():
        old = scratch / f".old-{dst.name}"
        os.replace(dst, old)
        os.replace(src, dst)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    else:
        os.replace(src, dst)


def extract(archive: Path, target: Path, rule: Unpack, scratch: Path) -> list[str]:
    """Unpack ``archive`` into ``target / rule.dest``; return the top-level entries placed (relative to target).

    ``scratch`` is a folder on the same file system as ``target`` for the temporary extraction.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = scratch / f"extract-{archive.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        _extract_all(archive, tmp)
        root = content_root(tmp)
        _refuse_links_out(root, archive)
        missing = [p for p in rule.expect if not (root / p).exists()]
        if missing:
            found = sorted(e.name for e in root.iterdir())[:10]
            raise SourceError(
                f"archive {archive.name} does not have the declared layout: {', '.join(missing)} missing from its "
                f"content root (which holds {', '.join(found) or 'nothing'}); nothing was unpacked"
            )
        dest = target / rule.dest if rule.dest else target
        if rule.dest and not dest.exists() and not dest.is_symlink():
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(root, dest)  # one atomic rename
            return [rule.dest]
        dest.mkdir(parents=True, exist_ok=True)
        placed = []
        for entry in sorted(root.iterdir()):
            if entry.name in JUNK:
                continue
            _replace(entry, dest / entry.name, scratch)
            placed.append(str(Path(rule.dest) / entry.name) if rule.dest else entry.name)
        return placed
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tree_digest(target: Path, entries: list[str]) -> dict:
    """sha256 over the sorted ``(path, sha256 of the file)`` lines of every file under ``entries``.

    Returns ``{"digest", "files", "bytes", "entries"}``; symbolic links are followed.
    """
    lines = []
    total = 0
    for entry in entries:
        base = target / entry
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in paths:
            rel = path.relative_to(target).as_posix()
            if any(part in JUNK for part in PurePosixPath(rel).parts):
                continue
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
            total += path.stat().st_size
            lines.append(f"{rel}\t{h.hexdigest()}\n")
    lines.sort()
    digest = hashlib.sha256("".join(lines).encode()).hexdigest()
    return {"digest": digest, "files": len(lines), "bytes": total, "entries": sorted(entries)}
