"""A loopback server speaking the part of the Hugging Face hub HTTP API that downloads and small
uploads use.

``huggingface_hub.snapshot_download`` and ``hf_hub_download`` work against it unchanged; repositories
are added with :meth:`HubServer.add_repo`, or created and committed to by ``create_repo`` and
``create_commit`` / ``upload_folder`` (files as regular blobs). What it answers: docs/testing.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from spotdiff.testing.http_server import LoopbackServer, send_bytes

#: Files at least this large are served as LFS files (sha256 ETag and ``lfs`` listing), as on the hub.
LFS_THRESHOLD = 1024


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    revision: str
    files: dict[str, bytes]
    gated: bool = False
    granted_tokens: set[str] = field(default_factory=set)
    #: The summaries of the commits pushed to it, in order.
    commits: list[str] = field(default_factory=list)

    def entry(self, path: str) -> dict:
        data = self.files[path]
        info = {"type": "file", "path": path, "size": len(data), "oid": git_blob_id(data)}
        if len(data) >= LFS_THRESHOLD:
            sha = hashlib.sha256(data).hexdigest()
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()
            info.update(oid=git_blob_id(pointer), lfs={"oid": sha, "size": len(data), "pointerSize": len(pointer)})
        return info


    def tree(self, folder: str, recursive: bool) -> list[dict]:
        """``/api/{type}s/{repo}/tree/{rev}/{folder}``: the files and folders in ``folder`` ("": the top), or below
        it with ``recursive``, as the hub lists them (a folder: ``{"type": "directory", "path", "oid", "size": 0}``)."""
        prefix = folder + "/" if folder else ""
        below = [p for p in sorted(self.files) if p.startswith(prefix)]
        folders = sorted({p[:i] for p in below for i in range(len(prefix), len(p)) if p[i] == "/"})
        if not recursive:
            below = [p for p in below if "/" not in p[len(prefix):]]
            folders = [f for f in folders if "/" not in f[len(prefix):]]
        dirs = [{"type": "directory", "path": f, "oid": git_blob_id(f.encode()), "size": 0} for f in folders]
        return dirs + [self.entry(p) for p in below]


class HubServer(LoopbackServer):
    """See docs/testing.md. ``HF_ENDPOINT`` for it is :attr:`url`."""

    def __init__(self) -> None:
        super().__init__()
        self.repos: dict[tuple[str, str], Repo] = {}
        #: The tokens the hub knows, token -> (user, role: ``write`` or ``read``); None: any token is
        #: user ``me``'s write token. ``/api/whoami-v2`` answers with them; uploads need a write token.
        self.tokens: dict[str, tuple[str, str]] | None = None
        #: The organisations every user belongs to (whoami's ``orgs``).
        self.orgs: tuple[str, ...] = ()
        #: What the next upload requests get instead of an answer, one each: ``(status, message)``.
        self.upload_errors: list[tuple[int, str]] = []

    def add_repo(self, repo_id: str, files: dict[str, bytes], *, revision: str, repo_type: str = "dataset",
                 gated: bool = False, granted_tokens: tuple[str, ...] = ()) -> Repo:
        """Serve the repository ``repo_id`` with ``files`` ({path: bytes}) at the commit ``revision``.

        Args:
            repo_id: ``owner/name``.
            files: its files, path -> bytes.
            revision: the commit id it is served at (any id is accepted as the one commit).
            repo_type: ``dataset`` or ``model``.
            gated: answer 401/403 unless a granted token is sent.
            granted_tokens: the tokens a gated repository accepts.
        """
        repo = Repo(repo_id, repo_type, revision, dict(files), gated, set(granted_tokens))
        self.repos[(repo_type, repo_id)] = repo
        return repo

    # ------------------------------------------------------------------------------------------
    def _error(self, handler: BaseHTTPRequestHandler, status: int, code: str, message: str,
               commit: str | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("X-Error-Code", code)
        handler.send_header("X-Error-Message", message)
        if commit:
            handler.send_header("X-Repo-Commit", commit)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    def _json(self, handler: BaseHTTPRequestHandler, payload: object) -> None:
        send_bytes(handler, json.dumps(payload).encode(), content_type="application/json")

    def _find(self, repo_type: str, rest: str) -> tuple[Repo, str] | None:
        """The repository whose id starts ``rest`` ("namespace/name/..."), and what follows it."""
        parts = rest.split("/")
        for n in (2, 1):
            repo = self.repos.get((repo_type, "/".join(parts[:n])))
            if repo is not None:
                return repo, "/".join(parts[n:])
        return None

    def _allowed(self, handler: BaseHTTPRequestHandler, repo: Repo) -> bool:
        if not repo.gated:
            return True
        auth = handler.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        if token in repo.granted_tokens:
            return True
        if token:
            self._error(handler, 403, "GatedRepo", f"Access to dataset {repo.repo_id} is restricted and you are "
                        "not in the authorized list. Visit the dataset page to ask for access.")
        else:
            self._error(handler, 401, "GatedRepo", f"Access to dataset {repo.repo_id} is restricted. You must "
                        "have access to it and be authenticated to access it. Please log in.")
        return False

    def _user(self, handler: BaseHTTPRequestHandler) -> tuple[str, str] | None:
        """The (user, role) of the request's bearer token; None (a 401 sent) when the hub knows no such token."""
        auth = handler.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        known = ("me", "write") if token and self.tokens is None else (self.tokens or {}).get(token)
        if known is None:
            self._error(handler, 401, "Unauthorized", "Invalid credentials in Authorization header")
        return known

    def _whoami(self, handler: BaseHTTPRequestHandler) -> None:
        """``/api/whoami-v2``: the token's user, organisations and role, as the hub answers."""
        known = self._user(handler)
        if known is not None:
            user, role = known
            token = {"displayName": "test", "role": role}
            self._json(handler, {"type": "user", "name": user, "orgs": [{"name": o} for o in self.orgs],
                                 "auth": {"type": "access_token", "accessToken": token}})  # fmt: skip

    def _upload(self, handler: BaseHTTPRequestHandler, path: str, body: bytes) -> bool:
        """The upload routes ``huggingface_hub``'s ``create_repo`` and ``create_commit`` use (every file
        a regular git blob, no LFS; a write token needed); True when ``path`` was one of them."""
        head, _, rest = path.removeprefix("/api/").partition("/")
        found = self._find(head.removesuffix("s"), rest) if path.startswith("/api/") else None
        is_commit = found is not None and found[1].split("/")[0] in ("preupload", "commit")
        if path not in ("/api/repos/create", "/api/validate-yaml") and not is_commit:
            return False
        known = self._user(handler)
        if known is None:
            return True
        with self._lock:
            error = self.upload_errors.pop(0) if self.upload_errors else None
        if error is not None or known[1] != "write":
            status, message = error or (403, "You don't have the rights to write with a read token")
            self._error(handler, status, "Forbidden" if status == 403 else "Error", message)
            return True
        if path == "/api/repos/create":
            req = json.loads(body)
            namespace = req.get("organization") or known[0]
            repo_id, repo_type = f"{namespace}/{req['name']}", req.get("type") or "model"
            url = f"{self.url}/{repo_type}s/{repo_id}"
            if namespace not in (known[0], *self.orgs):
                self._error(handler, 403, "Forbidden", f"You don't have the rights to create a {repo_type} under "
                            f"the namespace {namespace!r}")  # fmt: skip
            elif (repo_type, repo_id) in self.repos:  # as the hub: a 409 that still names the repository
                data = json.dumps({"error": "You already created this repo", "url": url}).encode()
                handler.send_response(409)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
            else:
                self.add_repo(repo_id, {}, revision="0" * 40, repo_type=repo_type)
                self._json(handler, {"url": url})
            return True
        if path == "/api/validate-yaml":
            self._json(handler, {"errors": [], "warnings": []})
            return True
        assert found is not None  # a commit route
        repo, tail = found
        if tail.startswith("preupload/"):
            files = json.loads(body)["files"]
            self._json(handler, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                           for f in files]})  # fmt: skip
            return True
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        for line in lines:
            if line["key"] == "file":
                repo.files[line["value"]["path"]] = base64.b64decode(line["value"]["content"])
        repo.revision = hashlib.sha1(body + repo.revision.encode(), usedforsecurity=False).hexdigest()
        repo.commits.append(lines[0]["value"].get("summary", ""))
        self._json(handler, {"commitUrl": f"{self.url}/{head}/{repo.repo_id}/commit/{repo.revision}",
                             "commitOid": repo.revision})  # fmt: skip
        return True

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        path = unquote(url.path)
        form: dict = {}
        if handler.command == "POST":
            length = int(handler.headers.get("Content-Length") or 0)
            body = handler.rfile.read(length) if length else b""
            if self._upload(handler, path, body):
                return None
            form = parse_qs(body.decode()) if body else {}
        if path == "/api/whoami-v2":
            return self._whoami(handler)
        if path.startswith("/api/"):
            head, _, rest = path[len("/api/"):].partition("/")
            repo_type = head.removesuffix("s")
            found = self._find(repo_type, rest)
            if found is None:
                return self._error(handler, 401, "RepoNotFound", "Repository not found")
            repo, tail = found
            if not self._allowed(handler, repo):
                return None
            action, _, tail = tail.partition("/")
            revision, _, sub = tail.partition("/")
            if not action:  # /api/datasets/{repo}: the default branch (HfApi.repo_info with no revision)
                action, revision = "revision", "main"
            if revision not in (repo.revision, "main"):
                return self._error(handler, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
            if action == "revision":
                return self._json(handler, {
                    "id": repo.repo_id, "sha": repo.revision, "private": False, "gated": repo.gated,
                    "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                })
            if action == "tree":
                recursive = parse_qs(url.query).get("recursive", ["false"])[0].lower() == "true"
                return self._json(handler, repo.tree(sub.rstrip("/"), recursive))
            if action == "paths-info":
                wanted = form.get("paths", [])
                return self._json(handler, [repo.entry(p) for p in wanted if p in repo.files])
            return self._error(handler, 404, "NotFound", f"unknown API {action!r}")
        # /{type}s/{repo}/resolve/{rev}/{file} (models have no prefix)
        repo_type, rest = "model", path.lstrip("/")
        for kind in ("dataset", "space"):
            if rest.startswith(f"{kind}s/"):
                repo_type, rest = kind, rest[len(kind) + 2:]
        found = self._find(repo_type, rest)
        if found is None:
            return self._error(handler, 401, "RepoNotFound", "Repository not found")
        repo, tail = found
        action, _, tail = tail.partition("/")
        revision, _, filename = tail.partition("/")
        if action != "resolve":
            return self._error(handler, 404, "NotFound", "not a resolve URL")
        if not self._allowed(handler, repo):
            return None
        if revision not in (repo.revision, "main"):
            return self._error(handler, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        if filename not in repo.files:
            return self._error(handler, 404, "EntryNotFound", f"{filename} does not exist", repo.revision)
        entry = repo.entry(filename)
        headers = {"X-Repo-Commit": repo.revision}
        if "lfs" in entry:
            etag = entry["lfs"]["oid"]
            headers.update({"ETag": f'"{etag}"', "X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(entry["size"])})
        else:
            headers["ETag"] = f'"{entry["oid"]}"'
        send_bytes(handler, repo.files[filename], headers)
        return None


@contextmanager
def hub_environment(endpoint: str, *, offline: bool = False) -> Iterator[None]:
    """Make this process behave as if started with ``HF_ENDPOINT=endpoint`` (and ``HF_HUB_OFFLINE``).

    huggingface_hub reads both when it is imported (``constants.ENDPOINT``, the resolve URL template,
    ``constants.HF_HUB_OFFLINE``); a test process imported it long before, so the values it would have
    computed are set here, and restored on exit; so are ``datasets``' own copies (``datasets.config``), when it
    is imported. Every request huggingface_hub makes (downloads, and its agent-registry lookup at
    ``{ENDPOINT}/api/agent-harnesses``) then goes to ``endpoint``.
    """
    from huggingface_hub import constants

    saved_env = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_HUB_OFFLINE")}
    saved = (constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_OFFLINE)
    datasets_config = sys.modules.get("datasets.config")
    names = ("HF_ENDPOINT", "HUB_DATASETS_URL", "HF_HUB_OFFLINE")
    saved_datasets = {n: getattr(datasets_config, n) for n in names} if datasets_config is not None else {}
    template = endpoint.rstrip("/") + "/datasets/{repo_id}/resolve/{revision}/{path}"
    for name, value in zip(names, (endpoint.rstrip("/"), template, offline), strict=True):
        if datasets_config is not None:
            setattr(datasets_config, name, value)
    os.environ["HF_ENDPOINT"] = endpoint
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    else:
        os.environ.pop("HF_HUB_OFFLINE", None)
    constants.ENDPOINT = endpoint.rstrip("/")
    constants.HUGGINGFACE_CO_URL_TEMPLATE = constants.ENDPOINT + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HUB_OFFLINE = offline
    try:
        yield
    finally:
        constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_OFFLINE = saved
        for name, value in saved_datasets.items():
            setattr(datasets_config, name, value)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
