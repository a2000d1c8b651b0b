"""The review page's server: a Starlette app on uvicorn, on 127.0.0.1 only, behind a random token.

As Jupyter does, the URL printed at start carries a random token (``?token=...``); the first visit with it sets a
cookie (HttpOnly, SameSite=Strict, named after the port) and redirects to the bare page, and every request without
the cookie or the token is refused (403). Requests naming another host are refused (DNS rebinding), writes must be
JSON (a cross-site form cannot send one), and the page may load nothing from elsewhere (Content-Security-Policy, on
every answer, refusals and errors too). The server serves the page's own files and the images the sheet names inside
the output folder, nothing else; it logs no request line (the token would be in it).
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
from importlib import resources
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spotdiff.errors import SpotdiffError
from spotdiff.review.session import IMAGE_SUFFIXES, ReviewSession

HOST = "127.0.0.1"
#: the largest decision accepted, in bytes: every text of a SPEC set at its longest (MAX_TEXT characters, each
#: character as a JSON escape) fits
MAX_BODY = 2 * 1024 * 1024
#: the page's own files, served from the package
STATIC = {"review.js": "text/javascript", "review.css": "text/css"}
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Headers:
    """The security headers on every answer: the app's, its refusals' (another host) and its errors'.

    Args:
        app: the whole app (its error middleware too, which answers an unexpected error itself).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(_HEADERS)
            await send(message)

        await self.app(scope, receive, send_with_headers if scope["type"] == "http" else send)


class _Guard(BaseHTTPMiddleware):
    """The token (or the cookie it set); writes from this page only, as JSON."""

    def __init__(self, app: Any, token: str, port: int) -> None:
        super().__init__(app)
        self.token, self.cookie = token, f"spotdiff-review-{port}"
        self.origins = {f"http://{HOST}:{port}", f"http://localhost:{port}"}

    def _cross_site(self, request: Request) -> bool:
        """Whether the browser says a write comes from another site (``Origin``, ``Sec-Fetch-Site``; a port of
        this machine other than the server's is another site too)."""
        origin, site = request.headers.get("origin"), request.headers.get("sec-fetch-site")
        return (origin is not None and origin not in self.origins) or site not in (None, "same-origin", "none")

    def _is_token(self, value: str) -> bool:
        """Whether ``value`` is the token, compared in constant time (as bytes: any text, ASCII or not)."""
        return secrets.compare_digest(value.encode("utf-8", "surrogatepass"), self.token.encode())

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        by_cookie = self._is_token(request.cookies.get(self.cookie, ""))
        by_url = self._is_token(request.query_params.get("token", ""))
        if request.url.path == "/favicon.ico":  # asked for by every page, the refusal too: there is none
            response: Response = Response(status_code=204)
        elif not (by_cookie or by_url):
            response = PlainTextResponse(
                "403: this review needs the token in the URL `spotdiff review` printed", status_code=403
            )
        elif request.method == "POST" and self._cross_site(request):
            response = PlainTextResponse("403: a write from another site", status_code=403)
        elif request.method == "POST" and request.headers.get("content-type", "").split(";")[0] != "application/json":
            response = PlainTextResponse("415: send JSON", status_code=415)
        elif by_url and not by_cookie and request.url.path == "/":
            response = RedirectResponse("/", status_code=303)  # the token leaves the address bar
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
        else:
            response = await call_next(request)
        return response


def make_app(session: ReviewSession, token: str, port: int) -> ASGIApp:
    """The review page's app for one session.

    Args:
        session: the reviewer's session.
        token: the secret every request must carry (in the URL once, then as a cookie).
        port: the port it is served on (names the cookie: browsers share cookies between a host's ports).
    """

    def page(request: Request) -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8")

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return PlainTextResponse("404", status_code=404)
        return Response(_static(name), media_type=f"{STATIC[name]}; charset=utf-8")

    def items(request: Request) -> Response:
        return JSONResponse(
            {
                "title": f"{session.kind.name} in {session.out.name}",
                "reviewer": session.reviewer,
                "file": session.file.name,
                "text_fields": list(session.kind.text_fields),
                "items": session.items(),
                "progress": session.progress(),
            }
        )

    async def decide(request: Request) -> Response:
        raw = await _body(request, MAX_BODY)
        if raw is None:
            return JSONResponse({"error": f"a decision is at most {MAX_BODY} bytes"}, status_code=413)
        try:
            body = _decision(raw)
            item = await run_in_threadpool(session.decide, body["id"], body.get("decision"), body.get("texts"))
        except (SpotdiffError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"item": item, "progress": session.progress()})

    def image(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            path = session.image_file(name)
            if path.suffix.lower() == ".npy":
                return Response(session.image_png(name), media_type="image/png")
        except SpotdiffError:
            return PlainTextResponse("404: not an image of this review", status_code=404)
        return FileResponse(path, media_type=IMAGE_SUFFIXES[path.suffix.lower()])

    def difference(request: Request) -> Response:
        k = request.path_params["index"]
        try:
            if not 0 <= k < len(session.rows):
                raise IndexError(k)
            return Response(session.difference(k), media_type="image/png")
        except (SpotdiffError, IndexError):
            return PlainTextResponse("404: no such pair", status_code=404)

    routes = [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/items", items),
        Route("/api/decide", decide, methods=["POST"]),
        Route("/files/{name:path}", image),
        Route("/difference/{index:int}", difference),
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=[HOST, "localhost"]),
        Middleware(_Guard, token=token, port=port),
    ]
    return _Headers(Starlette(routes=routes, middleware=middleware))


async def _body(request: Request, limit: int) -> bytes | None:
    """The request's body; None when it is longer than ``limit`` bytes (by its declared length, or as it arrives:
    the rest is not read)."""
    declared = request.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _decision(raw: bytes) -> dict[str, Any]:
    """A decision's JSON body, ``{id, decision, texts}``, checked for its shape (the session checks its values)."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise ValueError("not a decision: JSON nested too deep") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        raise ValueError("expected {id, decision, texts}")
    if body.get("texts") is not None and not isinstance(body["texts"], dict):
        raise ValueError("texts: expected an object")
    return body


def _static(name: str) -> bytes:
    return (resources.files("spotdiff.review") / "static" / name).read_bytes()


class ReviewServer:
    """The app served by uvicorn on 127.0.0.1 at ``port`` (0: a free port, bound before the URL is printed).

    ``run()`` serves until interrupted (Ctrl-C); ``start()`` / ``stop()`` serve from a background thread. The
    server ends its session when it stops: the reviewer's file is free for another.

    Args:
        session: the reviewer's session (closed when the server stops).
        port: the port; 0 picks a free one.
    """

    def __init__(self, session: ReviewSession, port: int = 0) -> None:
        self.session = session
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.socket.bind((HOST, port))
            self.socket.listen(128)  # a browser opening the printed URL waits in the queue, never refused
        except OSError as exc:
            self.socket.close()
            raise SpotdiffError(f"cannot serve on {HOST}:{port}: {exc.strerror}; choose another --port") from None
        self.port = self.socket.getsockname()[1]
        self.token = secrets.token_urlsafe(32)
        config = uvicorn.Config(
            make_app(session, self.token, self.port), log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address to open, with the token."""
        return f"http://{HOST}:{self.port}/?token={self.token}"

    def run(self) -> None:
        """Serve until interrupted: Ctrl-C (after uvicorn's graceful shutdown, which raises it again) returns."""
        try:
            self.server.run(sockets=[self.socket])
        except KeyboardInterrupt:
            pass
        finally:
            self.socket.close()
            self.session.close()

    def start(self, timeout: float = 30.0) -> ReviewServer:
        """Serve from a background thread; return once the server answers."""
        self._thread = threading.Thread(target=self.run, name="spotdiff-review", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise SpotdiffError("the review server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop the background server (what was decided is already saved)."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)


__all__ = ["ReviewServer", "make_app"]
