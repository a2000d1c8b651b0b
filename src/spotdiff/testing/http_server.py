"""A plain HTTP file server on the loopback address, with Range requests and a way to drop a transfer.

It stands in for the hosts of benchmark files through ``SPOTDIFF_URL_MIRROR``. Usage:
docs/testing.md.
"""

from __future__ import annotations

import re
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


@dataclass(frozen=True)
class Request:
    """One request as the server saw it (header names in lower case)."""

    method: str
    path: str
    headers: dict[str, str]


def send_bytes(handler: BaseHTTPRequestHandler, data: bytes, headers: dict[str, str] | None = None,
               content_type: str = "application/octet-stream", drop_after: int | None = None) -> None:
    """Answer ``handler``'s GET or HEAD with ``data``, honouring a ``Range: bytes=N-[M]`` header.

    ``drop_after``: announce the full length but close the connection after that many body bytes.

    Args:
        handler: the request being answered.
        data: the body.
        headers: further response headers, or None.
        content_type: the ``Content-Type``.
        drop_after: close the connection after this many body bytes; None: send them all.
    """
    total = len(data)
    start, end, status = 0, total - 1, 200
    match = _RANGE.match(handler.headers.get("Range", "").strip())
    if match:
        start = int(match.group(1))
        end = min(int(match.group(2)), total - 1) if match.group(2) else total - 1
        if start >= total:
            handler.send_response(416)
            handler.send_header("Content-Range", f"bytes */{total}")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        status = 206
    body = data[start : end + 1]
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.send_header("Accept-Ranges", "bytes")
    if status == 206:
        handler.send_header("Content-Range", f"bytes {start}-{end}/{total}")
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    if handler.command == "HEAD":
        return
    if drop_after is not None and drop_after < len(body):
        handler.wfile.write(body[:drop_after])
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)
        return
    handler.wfile.write(body)


class _Server(ThreadingHTTPServer):
    """A thread per connection; a listen queue for a client's burst of concurrent connections (the default,
    5, drops the others' first packets: they wait a second for the retry)."""

    daemon_threads = True
    request_queue_size = 256


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (a free port), run in a background thread while in a ``with``."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                return

            def _dispatch(self) -> None:
                with server._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    server.requests.append(Request(self.command, self.path, headers))
                server.handle(self)

            do_GET = do_HEAD = do_POST = _dispatch

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def requests_for(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if urlsplit(r.path).path == path]

    def __enter__(self) -> LoopbackServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()


class FileServer(LoopbackServer):
    """Serves registered paths (GET / HEAD, with Range); anything else is a 404. A path registered with a
    query string (``/H/P?id=1``) is told apart from the same path with another query."""

    def __init__(self) -> None:
        super().__init__()
        self._files: dict[str, tuple[bytes | Path, str, dict[str, str]]] = {}
        self._redirects: dict[str, str] = {}
        self._drops: dict[str, list[int]] = {}

    def add(
        self,
        path: str,
        content: bytes | str | Path,
        content_type: str = "application/octet-stream",
        headers: dict[str, str] | None = None,
    ) -> str:
        """Serve ``content`` (bytes, or a file read at request time) at ``path``; return its URL here.

        Args:
            path: the URL path (``/H/P``), with a query string when one tells the file apart.
            content: bytes, text (a str), or a Path to a file read at request time.
            content_type: the ``Content-Type``.
            headers: further response headers (a ``Content-Encoding`` the body does not have, say).
        """
        if isinstance(content, str):
            content = content.encode()
        self._files["/" + path.lstrip("/")] = (content, content_type, dict(headers or {}))
        return self.url + "/" + path.lstrip("/")

    def add_url(self, url: str, content: bytes | str | Path, **options: Any) -> str:
        """Serve ``content`` where ``SPOTDIFF_URL_MIRROR`` maps ``url`` (``https://H/P?Q`` -> ``/H/P?Q``).

        Args:
            url: the URL the code under test requests.
            content: bytes, text (a str), or a Path to a file read at request time.
            options: :meth:`add`'s ``content_type`` and ``headers``.
        """
        return self.add(_mirrored(url), content, **options)

    def redirect_url(self, url: str, to: str) -> None:
        """Answer a GET of ``url`` (as mirrored) with a redirect (302) to ``to`` (as mirrored: ``url`` itself
        makes a redirect loop).

        Args:
            url: the URL the code under test requests.
            to: the URL it is sent to.
        """
        self._redirects["/" + _mirrored(url)] = self.url + "/" + _mirrored(to)

    def drop_after(self, path: str, n_bytes: int, times: int = 1) -> None:
        """The next ``times`` GETs of ``path`` close the connection after ``n_bytes`` body bytes.

        Args:
            path: the URL path.
            n_bytes: body bytes sent before the connection is closed.
            times: how many GETs are cut short.
        """
        self._drops.setdefault("/" + path.lstrip("/"), []).extend([n_bytes] * times)

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        path = unquote(parts.path)
        full = f"{path}?{parts.query}"
        key = full if parts.query and (full in self._files or full in self._redirects) else path
        if key in self._redirects:
            handler.send_response(302)
            handler.send_header("Location", self._redirects[key])
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        entry = self._files.get(key)
        if entry is None:
            body = b"not found"
            handler.send_response(404)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(body)
            return
        content, content_type, headers = entry
        data = content.read_bytes() if isinstance(content, Path) else content
        drops = self._drops.get(key)
        drop = drops.pop(0) if drops and handler.command == "GET" else None
        send_bytes(handler, data, headers, content_type=content_type, drop_after=drop)


def _mirrored(url: str) -> str:
    """``https://H/P?Q`` as ``SPOTDIFF_URL_MIRROR`` maps it onto a server, less its leading ``/``: ``H/P?Q``."""
    parts = urlsplit(url)
    return f"{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")
