"""Plain-URL sources against a loopback file server: resumption with Range, checksums, unpacking,
the URL mirror, offline mode."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from spotdiff.benchmarks.sources import Checksum, RemoteFile, Unpack, UrlSource
from spotdiff.data.download import RETRIES, mirror_url
from spotdiff.data.fetch import fetch_source
from spotdiff.data.home import STAGING
from spotdiff.errors import SourceError

URL = "https://example.org/datasets/blob.bin"
PATH = "/example.org/datasets/blob.bin"


def _blob(n: int = 300_000) -> bytes:
    return bytes((i * 7919) % 251 for i in range(n))


def _source(data: bytes, *, checksum: str | None = "auto", unpack: Unpack | None = None, path: str = "blob.bin",
            url: str = URL) -> UrlSource:
    check = Checksum("sha256", hashlib.sha256(data).hexdigest(), "test") if checksum == "auto" else (
        Checksum.parse(checksum, "test") if checksum else None)
    return UrlSource((RemoteFile(url, path, check, len(data), unpack),), origin="test")


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_mirror_maps_https_and_http(monkeypatch):
    monkeypatch.setenv("SPOTDIFF_URL_MIRROR", "http://127.0.0.1:9/")
    assert mirror_url("https://a.org/x/y.zip?dl=1") == "http://127.0.0.1:9/a.org/x/y.zip?dl=1"
    assert mirror_url("http://images.cocodataset.org/zips/val2017.zip") == (
        "http://127.0.0.1:9/images.cocodataset.org/zips/val2017.zip"
    )
    monkeypatch.delenv("SPOTDIFF_URL_MIRROR")
    assert mirror_url("https://a.org/x") == "https://a.org/x"


def test_interrupted_transfer_resumes_with_a_range_request(files, tmp_path):
    data = _blob()
    files.add(PATH, data)
    files.drop_after(PATH, 100_000)  # the first transfer stops after 100,000 bytes
    record = fetch_source(_source(data), tmp_path / "t", "part", progress=False)
    assert (tmp_path / "t" / "blob.bin").read_bytes() == data
    gets = [r for r in files.requests_for(PATH) if r.method == "GET"]
    assert len(gets) == 2
    assert "range" not in gets[0].headers
    assert gets[1].headers["range"] == "bytes=100000-"
    assert record["files"]["blob.bin"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert not (tmp_path / "t" / STAGING).exists()


def test_a_fetch_killed_midway_resumes_in_the_next_run(files, tmp_path):
    data = _blob()
    files.add(PATH, data)
    files.drop_after(PATH, 50_000, times=RETRIES + 1)  # every attempt of the first run is cut short
    target = tmp_path / "t"
    with pytest.raises(SourceError, match="run the fetch again to resume"):
        fetch_source(_source(data), target, "part", progress=False)
    partial = target / STAGING / "part" / "blob.bin.part"
    kept = partial.stat().st_size
    assert 0 < kept < len(data)
    assert not (target / "blob.bin").exists()
    fetch_source(_source(data), target, "part", progress=False)
    assert (target / "blob.bin").read_bytes() == data
    last = [r for r in files.requests_for(PATH) if r.method == "GET"][-1]
    assert last.headers["range"] == f"bytes={kept}-"


def test_checksum_mismatch_is_rejected_and_nothing_is_installed(files, tmp_path):
    data = _blob(5000)
    files.add(PATH, data[:-1] + b"\x00")  # one byte differs, same size
    target = tmp_path / "t"
    with pytest.raises(SourceError, match="checksum mismatch") as info:
        fetch_source(_source(data), target, "part", progress=False)
    assert URL in str(info.value)
    assert not (target / "blob.bin").exists()
    leftovers = list((target / STAGING).rglob("*")) if (target / STAGING).exists() else []
    assert not [p for p in leftovers if p.is_file()]  # the corrupt download was deleted


def test_git_blob_checksum_checks_raw_repository_files(files, tmp_path):
    data = b'{"0": {"filename": "x.jpg"}}\n'
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    files.add(PATH, data)
    fetch_source(_source(data, checksum=f"git:{blob}"), tmp_path / "ok", "p", progress=False)
    with pytest.raises(SourceError, match="git-blob-sha1"):
        fetch_source(_source(data, checksum="git:" + "0" * 40), tmp_path / "bad", "p", progress=False)


def test_archive_unpacks_its_content_root_into_place(files, tmp_path):
    archive = _zip({"val2017/000000000001.jpg": b"a", "val2017/000000000002.jpg": b"b", "__MACOSX/._x": b""})
    files.add(PATH, archive)
    target = tmp_path / "t"
    record = fetch_source(_source(archive, unpack=Unpack("images", ("000000000001.jpg",)), path="v.zip"), target,
                          "p", progress=False)
    assert sorted(p.name for p in (target / "images").iterdir()) == ["000000000001.jpg", "000000000002.jpg"]
    tree = record["trees"]["images"]
    assert tree["files"] == 2 and tree["entries"] == ["images"]
    assert tree["archive"]["sha256"] == hashlib.sha256(archive).hexdigest()
    assert not (target / STAGING).exists()


def _tar(members: list[tuple[str, str | bytes]]) -> bytes:
    """A tar.gz of ``(name, content)`` in order: bytes make a file, a str a symbolic link to it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                tf.addfile(info)
            else:
                info.size = len(content)
                tf.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def test_a_link_chain_that_leads_out_once_in_place_is_refused(files, tmp_path):
    """Issue 44: each link of a chain passed tarfile's 'data' filter where it was extracted (its target not
    there yet), and once in place ``images/escape`` pointed at ``/``. Links are checked where they end up, as
    a whole tree: one that leads out of the folder it unpacks into is refused and nothing is unpacked."""
    chain = [(f"images/l{k}", f"l{k - 1}/..") for k in range(40, 0, -1)]  # each extracted before its target
    archive = _tar([("images/a.png", b"png"), ("images/escape", "l40"), *chain, ("images/l0", ".")])
    files.add(PATH, archive)
    target = tmp_path / "t"
    with pytest.raises(SourceError, match=r"member 'images/escape' is a link \(to 'l40'\) that leads out of the "
                                          r"folder it unpacks into"):  # fmt: skip
        fetch_source(_source(archive, unpack=Unpack("images", ("a.png",)), path="v.tar.gz"), target, "p",
                     progress=False)  # fmt: skip
    assert not (target / "images").exists() and not (target / "images").is_symlink()
    inside = _tar([("images/a.png", b"png"), ("images/same", "a.png"), ("images/sub/up", "../a.png")])
    files.add(PATH, inside)
    fetch_source(_source(inside, unpack=Unpack("images", ("a.png",)), path="v.tar.gz"), target, "q", progress=False)
    assert (target / "images" / "sub" / "up").read_bytes() == b"png"  # links inside the folder are kept


def test_a_member_the_extraction_filter_refuses_names_the_rule(files, tmp_path):
    """Issue 44: a member tarfile's 'data' filter refuses (an absolute link) was reported as "corrupt or
    truncated"."""
    archive = _tar([("images/a.png", b"png"), ("images/abs", "/etc/passwd")])
    files.add(PATH, archive)
    with pytest.raises(SourceError) as info:
        fetch_source(_source(archive, unpack=Unpack("images"), path="v.tar.gz"), tmp_path / "t", "p", progress=False)
    message = str(info.value)
    assert "corrupt" not in message and "images/abs" in message and "is refused by the extraction rule" in message
    assert not (tmp_path / "t" / "images").exists()


def test_archive_with_another_layout_or_corrupt_is_rejected(files, tmp_path):
    archive = _zip({"other/1.jpg": b"a", "other/2.jpg": b"b"})
    files.add(PATH, archive)
    with pytest.raises(SourceError, match="does not have the declared layout"):
        fetch_source(_source(archive, unpack=Unpack("images", ("000000000001.jpg",)), path="v.zip"),
                     tmp_path / "a", "p", progress=False)
    assert not (tmp_path / "a" / "images").exists()
    broken = archive[: len(archive) // 2]
    files.add(PATH, broken)
    with pytest.raises(SourceError, match=r"neither a zip nor a tar|corrupt"):
        fetch_source(_source(broken, unpack=Unpack("images"), path="v.zip"), tmp_path / "b", "p", progress=False)
    assert not (tmp_path / "b" / "images").exists()


def test_offline_names_the_source_and_the_manual_route(files, tmp_path, monkeypatch):
    data = _blob(2000)
    files.add(PATH, data)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    target = tmp_path / "t"
    with pytest.raises(SourceError) as info:
        fetch_source(_source(data), target, "part", progress=False)
    message = str(info.value)
    assert "offline" in message and URL in message
    staged = target / STAGING / "part" / "blob.bin"
    assert f"save it as {staged}" in message
    assert files.requests == []  # nothing was sent
    # the manual route: the file put where the message says is checked and installed, still offline
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(data)
    fetch_source(_source(data), target, "part", progress=False)
    assert (target / "blob.bin").read_bytes() == data
    assert files.requests == []


def test_an_error_page_instead_of_the_file_is_reported(files, tmp_path):
    files.add(PATH, b"<html>quota exceeded</html>", content_type="text/html; charset=utf-8")
    source = UrlSource((RemoteFile(URL, "blob.bin"),), origin="test")
    with pytest.raises(SourceError, match="returned a web page instead of the file"):
        fetch_source(source, tmp_path / "t", "part", progress=False)
    assert not (tmp_path / "t" / "blob.bin").exists()


def test_a_source_without_checksum_is_fetched_on_trust_and_its_sha256_recorded(files, tmp_path):
    data = _blob(3000)
    files.add(PATH, data)
    record = fetch_source(UrlSource((RemoteFile(URL, "blob.bin"),), origin="test"), tmp_path / "t", "p",
                          progress=False)
    info = record["files"]["blob.bin"]
    assert info["checksum"] is None and info["checksum_origin"].startswith("none declared")
    assert info["sha256"] == hashlib.sha256(data).hexdigest() and info["size"] == len(data)


def test_parallel_transfers_all_land(files, tmp_path):
    blobs = {f"f{i}.bin": _blob(20_000 + i) for i in range(6)}
    remotes = []
    for name, data in blobs.items():
        url = f"https://example.org/many/{name}"
        files.add_url(url, data)
        remotes.append(RemoteFile(url, f"sub/{name}", Checksum("sha256", hashlib.sha256(data).hexdigest()),
                                  len(data)))
    record = fetch_source(UrlSource(tuple(remotes), origin="test"), tmp_path / "t", "p", progress=False)
    for name, data in blobs.items():
        assert (tmp_path / "t" / "sub" / name).read_bytes() == data
    assert len(record["files"]) == 6


def test_fetch_source_keeps_going_from_a_path_that_exists(tmp_path: Path, files):
    """Installing over an existing file replaces it (a forced re-fetch)."""
    data = _blob(1000)
    files.add(PATH, data)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "blob.bin").write_bytes(b"old")
    fetch_source(_source(data), tmp_path / "t", "p", progress=False)
    assert (tmp_path / "t" / "blob.bin").read_bytes() == data


def test_a_redirect_loop_or_a_false_encoding_is_one_line_and_the_other_parts_are_fetched(files, home, capsys):
    """Issue 44: ``data fetch eqben`` ended in a traceback on a redirect loop (TooManyRedirects) or a false
    ``Content-Encoding`` (DecodingError), and the parts after it were never tried. Each is one line naming
    the URL, under its part, and every other part is fetched."""
    from spotdiff.cli import main
    from spotdiff.data import benchmark_sources

    parts = {p.name: p.source.files[0] for p in benchmark_sources("eqben").parts}
    annotations, images = parts["annotations"], parts["images"]
    files.redirect_url(annotations.url, annotations.url)  # a redirect to itself, for ever
    files.add_url(images.url, b"not gzip at all", headers={"Content-Encoding": "gzip"})
    vllm = _zip({"eqben_vllm/all_select.json": b"[]", "eqben_vllm/images/a.png": b"png"})
    files.add_url(parts["vllm"].url, vllm)
    parts_asked = ["--part", "annotations", "--part", "images", "--part", "vllm"]
    assert main(["data", "fetch", "eqben", *parts_asked, "-q"]) == 2
    said = capsys.readouterr()
    assert "Traceback" not in said.err and "eqben/vllm: fetched" in said.out
    assert (home / "eqben" / "vllm" / "all_select.json").is_file()
    lines = said.err.strip().splitlines()
    assert lines[0] == "eqben: 2 of 3 parts could not be fetched (the rest is in place):" and len(lines) == 3, lines
    assert lines[1].startswith(f"  - annotations: cannot download {annotations.url}: too many redirects")
    assert lines[2].startswith(f"  - images: cannot download {images.url}: the body does not decode")
