"""Plain-URL downloads: resumable (HTTP Range), verified (size and checksum), a few at a time.

Files are streamed with ``httpx2`` (the HTTP client ``huggingface_hub`` itself uses) into
``<staging>/<path>.part``; an interrupted transfer, in this run or a later one, continues from the
bytes already there with a ``Range`` request. A complete file is checked against its declared size
and checksum: a mismatch deletes it and raises :class:`~spotdiff.errors.SourceError`, so nothing
corrupt is ever moved into place or marked ready.

``SPOTDIFF_URL_MIRROR=http://HOST:PORT`` sends every URL ``https://H/P`` (or ``http://H/P``) to
``http://HOST:PORT/H/P`` instead, for air-gapped sites and tests. ``HF_HUB_OFFLINE=1`` (or
``SPOTDIFF_OFFLINE=1``) forbids network access: only files already in the staging folder are used.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
from tqdm.auto import tqdm

from spotdiff.benchmarks.sources import RemoteFile
from spotdiff.data.digests import file_digests
from spotdiff.errors import SourceError

log = logging.getLogger(__name__)

RETRIES = 3
TIMEOUT = httpx2.Timeout(60.0, connect=20.0)
USER_AGENT = "spotdiff-data (+https://github.com/spotdiff)"
_TRUE = {"1", "true", "yes", "on"}


def offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``SPOTDIFF_OFFLINE`` is set to a true value (read at call time)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "SPOTDIFF_OFFLINE"))


def workers() -> int:
    """Parallel transfers: ``$SPOTDIFF_DOWNLOAD_WORKERS``, default 4."""
    return max(1, int(os.environ.get("SPOTDIFF_DOWNLOAD_WORKERS", "4")))


def mirror_url(url: str, mirror: str | None = None) -> str:
    """``url`` rewritten for the mirror ``http://HOST:PORT`` (default ``$SPOTDIFF_URL_MIRROR``; unchanged
    when there is none): ``https://H/P`` and ``http://H/P`` become ``http://HOST:PORT/H/P``.

    >>> mirror_url("https://raw.githubusercontent.com/a/b/c.json?x=1", "http://127.0.0.1:8000")
    'http://127.0.0.1:8000/raw.githubusercontent.com/a/b/c.json?x=1'
    >>> mirror_url("https://example.org/f.zip", "")
    'https://example.org/f.zip'
    """
    if mirror is None:
        mirror = os.environ.get("SPOTDIFF_URL_MIRROR", "")
    mirror = mirror.strip().rstrip("/")
    if not mirror:
        return url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return url
    rest = parts.path + (f"?{parts.query}" if parts.query else "")
    return f"{mirror}/{parts.netloc}{rest}"


def manual_route(remote: RemoteFile, staged: Path) -> str:
    check = f", {remote.checksum}" if remote.checksum else ""
    size = f", {remote.size:,} bytes" if remote.size else ""
    return (
        f"download {remote.url}{size}{check} yourself and save it as {staged}; then run the same "
        "`spotdiff data fetch` again (it is checked and unpacked as if downloaded)"
    )


@dataclass
class Progress:
    """One byte-counting bar shared by the transfers of a part (thread-safe updates)."""

    bar: tqdm
    lock: threading.Lock

    @classmethod
    def open(cls, desc: str, total: int | None, enabled: bool) -> Progress:
        bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, disable=not enabled,
                   leave=False)
        return cls(bar, threading.Lock())

    def update(self, n: int) -> None:
        with self.lock:
            self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def _is_html(response: httpx2.Response, remote: RemoteFile) -> bool:
    ctype = response.headers.get("Content-Type", "")
    return ctype.startswith("text/html") and not remote.path.endswith((".html", ".htm"))


def _announced_size(response: httpx2.Response, have: int) -> int | None:
    """The whole file's size as the response announces it (Content-Range total, or Content-Length)."""
    if response.status_code == 206:
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        return int(total) if total.isdigit() else None
    length = response.headers.get("Content-Length", "")
    encoded = response.headers.get("Content-Encoding", "identity") not in ("", "identity")
    return int(length) if length.isdigit() and not encoded else None


def _transfer(client: httpx2.Client, remote: RemoteFile, part: Path, progress: Progress) -> None:
    """One GET into ``part``, resuming from its current size; raises httpx2 errors mid-stream."""
    have = part.stat().st_size if part.exists() else 0
    if remote.size is not None and have == remote.size:
        return
    if remote.size is not None and have > remote.size:
        part.unlink()
        have = 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    url = mirror_url(remote.url)
    with client.stream("GET", url, headers=headers) as response:
        if response.status_code == 416 and have:
            total = response.headers.get("Content-Range", "").rpartition("/")[2]
            if total.isdigit() and int(total) == have:
                return  # the partial file is the whole file
            part.unlink()
            raise httpx2.RemoteProtocolError(f"range {have}- not satisfiable ({total or 'unknown'} bytes)")
        if response.status_code >= 400:
            raise SourceError(f"{remote.url}: HTTP {response.status_code} {response.reason_phrase} (from {url})")
        if _is_html(response, remote):
            raise SourceError(
                f"{remote.url} returned a web page instead of the file (a download quota, a login or a "
                "confirmation page); " + manual_route(remote, part.with_suffix(""))
            )
        announced = _announced_size(response, have)
        if remote.size is not None and announced is not None and announced != remote.size:
            part.unlink(missing_ok=True)
            raise SourceError(
                f"{remote.url}: the server has a file of {announced:,} bytes, the declaration {remote.size:,}: the "
                "source changed or the URL serves something else; nothing was installed"
            )
        mode = "ab"
        if response.status_code == 206:
            start = response.headers.get("Content-Range", "bytes -").split()[-1].split("-")[0]
            if not start.isdigit() or int(start) != have:
                part.unlink(missing_ok=True)
                raise httpx2.RemoteProtocolError(f"server resumed at byte {start}, not {have}")
        else:
            if have:
                log.info("%s: server ignored the Range request; downloading from the start", remote.url)
                progress.update(-have)
            mode = "wb"
        with open(part, mode) as f:
            for chunk in response.iter_bytes():  # as received: an interrupted body keeps what arrived
                f.write(chunk)
                progress.update(len(chunk))


#: The HTTP client's errors that another try would meet again (a redirect loop, a body that does not decode as
#: its ``Content-Encoding`` says, a redirect to a scheme or URL it cannot follow).
_NOT_TRANSIENT = (httpx2.TooManyRedirects, httpx2.DecodingError, httpx2.UnsupportedProtocol, httpx2.InvalidURL)


def _why(exc: Exception) -> str:
    """What a :data:`_NOT_TRANSIENT` error means, in words."""
    if isinstance(exc, httpx2.TooManyRedirects):
        return "too many redirects (the server sends the request round in a loop)"
    if isinstance(exc, httpx2.DecodingError):
        return f"the body does not decode as its Content-Encoding says ({exc})"
    return f"{type(exc).__name__}: {exc}"


def download(client: httpx2.Client, remote: RemoteFile, staged: Path, progress: Progress,
             retries: int = RETRIES) -> dict:
    """Fetch ``remote`` to ``staged`` (resuming, verified); return ``{"sha256", "size", "url", ...}``.

    A file already at ``staged`` (a finished download, or one a person put there) is only checked.
    """
    staged.parent.mkdir(parents=True, exist_ok=True)
    if not staged.exists():
        part = staged.with_name(staged.name + ".part")
        if part.exists():
            progress.update(part.stat().st_size)
        if offline():
            raise SourceError(f"offline (HF_HUB_OFFLINE / SPOTDIFF_OFFLINE set): cannot download {remote.url}; "
                              + manual_route(remote, staged))
        for attempt in range(retries + 1):
            try:
                _transfer(client, remote, part, progress)
                got = part.stat().st_size if part.exists() else 0
                if remote.size is not None and got < remote.size:
                    raise httpx2.RemoteProtocolError(f"connection closed after {got:,} of {remote.size:,} bytes")
                break
            except _NOT_TRANSIENT as exc:  # retrying changes nothing: one line naming the URL
                raise SourceError(f"cannot download {remote.url}: {_why(exc)}. Manual route: "
                                  + manual_route(remote, staged)) from None  # fmt: skip
            except (httpx2.TransportError, httpx2.RemoteProtocolError) as exc:
                kept = part.stat().st_size if part.exists() else 0
                if attempt == retries:
                    raise SourceError(
                        f"cannot download {remote.url}: {type(exc).__name__}: {exc} ({kept:,} bytes kept in {part}; "
                        "run the fetch again to resume). Manual route: " + manual_route(remote, staged)
                    ) from exc
                log.warning("%s: %s; resuming from byte %d", remote.url, exc, kept)
                time.sleep(min(2**attempt, 10) * 0.1)
        os.replace(part, staged)
    return verify_download(remote, staged)


def verify_download(remote: RemoteFile, staged: Path) -> dict:
    """Check size and checksum of a complete download; a mismatch deletes it and raises SourceError."""
    size = staged.stat().st_size
    algorithms = {"sha256"} | ({remote.checksum.algorithm} if remote.checksum else set())
    digests = file_digests(staged, algorithms)
    problem = None
    if remote.size is not None and size != remote.size:
        problem = f"size {size:,} bytes, expected {remote.size:,}"
    elif remote.checksum and digests[remote.checksum.algorithm] != remote.checksum.value:
        problem = (f"{remote.checksum.algorithm} {digests[remote.checksum.algorithm]}, expected "
                   f"{remote.checksum.value} ({remote.checksum.origin})")
    if problem:
        staged.unlink()
        raise SourceError(f"{remote.url}: checksum mismatch: {problem}; the download was deleted and nothing was "
                          "installed. Run the fetch again; if it persists the source changed: report it")
    return {
        "url": remote.url,
        "sha256": digests["sha256"],
        "size": size,
        "checksum": str(remote.checksum) if remote.checksum else None,
        "checksum_origin": remote.checksum.origin if remote.checksum else "none declared: measured at this fetch",
    }


def download_all(files: Sequence[RemoteFile], staging: Path, desc: str, *, progress: bool = True,
                 on_done: Callable[[RemoteFile, dict], None] | None = None) -> dict[str, dict]:
    """Download ``files`` into ``staging`` with :func:`workers` parallel transfers.

    Every transfer runs to its end; then the first failure, if any, is raised (the others' partial files
    stay for the next run to resume). Returns ``{file.path: download record}``.
    """
    sizes = [f.size for f in files]
    total = None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]
    bar = Progress.open(desc, total, progress)
    results: dict[str, dict] = {}
    errors: list[SourceError] = []
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    try:
        with httpx2.Client(follow_redirects=True, timeout=TIMEOUT, headers=headers) as client:

            def one(remote: RemoteFile) -> None:
                try:
                    results[remote.path] = record = download(client, remote, staging / remote.path, bar)
                    if on_done is not None:
                        on_done(remote, record)
                except SourceError as exc:
                    errors.append(exc)

            if len(files) == 1:
                one(files[0])
            else:
                with ThreadPoolExecutor(min(workers(), len(files))) as pool:
                    list(pool.map(one, files))
    finally:
        bar.close()
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise SourceError(f"{len(errors)} of {len(files)} downloads failed:\n" + "\n".join(f"  - {e}" for e in errors))
    return results
