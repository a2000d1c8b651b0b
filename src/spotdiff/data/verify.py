"""``spotdiff data verify``: re-hash everything a benchmark's manifest records and compare.

Every recorded file is re-hashed (sha256, and its declared checksum when the catalog pins one), every
unpacked tree's digest is recomputed (:func:`~spotdiff.data.archive.tree_digest`), shared image
collections are checked the same way and links must resolve. Parts that match become ``verified``
(with the time); parts that do not become ``corrupt`` with what differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spotdiff.benchmarks.shared import COLLECTIONS
from spotdiff.benchmarks.sources import ImagesSource, ManualSource, Source, UrlSource
from spotdiff.data.archive import tree_digest
from spotdiff.data.catalog import benchmark_sources
from spotdiff.data.digests import file_digests
from spotdiff.data.home import Manifest, benchmark_dir, collection_dir, locked, now


@dataclass
class PartCheck:
    part: str
    ok: bool | None  # None: nothing to verify (not fetched)
    message: str


def _declared_checksums(source: Source) -> dict[str, object]:
    if isinstance(source, UrlSource):
        return {f.path: f.checksum for f in source.files if f.unpack is None and f.checksum is not None}
    return {}


def check_record(source: Source, target: Path, record: dict, root: str | Path | None = None) -> list[str]:
    """Problems found re-checking ``record`` (fetched from ``source`` into ``target``); [] when all match."""
    problems = []
    if isinstance(source, ManualSource):
        problems += [f"{p} is missing" for p in source.expect if not (target / p).exists()]
        return problems
    if isinstance(source, ImagesSource):
        for name in dict(source.folders):
            folder = collection_dir(name, root)
            manifest = Manifest.load(folder, name)
            coll_record = manifest.parts.get("content")
            if coll_record is None:
                problems.append(f"shared images {name} are not fetched")
                continue
            found = check_record(COLLECTIONS[name].source, folder, coll_record, root)
            problems += [f"{name}: {p}" for p in found]
        if not (target / source.link).exists():
            problems.append(f"{source.link} does not resolve")
        return problems
    declared = _declared_checksums(source)
    for rel, info in record.get("files", {}).items():
        path = target / rel
        if not path.is_file():
            problems.append(f"{rel} is missing")
            continue
        checksum = declared.get(rel)
        algorithms = {"sha256"} | ({checksum.algorithm} if checksum else set())  # type: ignore[attr-defined]
        digests = file_digests(path, algorithms)
        if digests["sha256"] != info.get("sha256"):
            problems.append(f"{rel}: sha256 {digests['sha256']} differs from the recorded {info.get('sha256')}")
        elif checksum and digests[checksum.algorithm] != checksum.value:  # type: ignore[attr-defined]
            problems.append(f"{rel}: {checksum} declared, found {digests[checksum.algorithm]}")  # type: ignore[attr-defined]
    for dest, tree in record.get("trees", {}).items():
        missing = [e for e in tree.get("entries", []) if not (target / e).exists()]
        if missing:
            problems.append(f"{dest}: {', '.join(missing)} missing")
            continue
        again = tree_digest(target, tree.get("entries", []))
        if again["digest"] != tree.get("digest"):
            problems.append(
                f"{dest}: tree digest changed ({again['files']} files now, {tree.get('files')} recorded)"
            )
    return problems


def _verify_into(manifest: Manifest, key: str, source: Source, target: Path, root: str | Path | None) -> PartCheck:
    record = manifest.parts.get(key)
    if record is None:
        return PartCheck(key, None, "not fetched")
    problems = check_record(source, target, record, root)
    record["verified_at"] = now()
    if problems:
        record["status"] = "corrupt"
        record["detail"] = "; ".join(problems)
        return PartCheck(key, False, record["detail"])
    record["status"] = "verified"
    record.pop("detail", None)
    return PartCheck(key, True, "all files match")


def verify_benchmark(name: str, *, root: str | Path | None = None) -> list[PartCheck]:
    """Verify every fetched part of benchmark ``name`` (and the shared images it links); update the manifests."""
    decl = benchmark_sources(name)
    target = benchmark_dir(decl.name, root)
    checks = []
    for part in decl.parts:
        if isinstance(part.source, ImagesSource):
            for coll_name in dict(part.source.folders):
                folder = collection_dir(coll_name, root)
                with locked(folder):
                    manifest = Manifest.load(folder, coll_name)
                    if "content" in manifest.parts:
                        _verify_into(manifest, "content", COLLECTIONS[coll_name].source, folder, root)
                        manifest.save()
    with locked(target):
        manifest = Manifest.load(target, decl.name)
        for part in decl.parts:
            checks.append(_verify_into(manifest, part.name, part.source, target, root))
        if manifest.parts:
            manifest.save()
    return checks
