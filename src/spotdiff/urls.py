"""URLs as spotdiff records and compares them: without the secrets they may carry, and one form per endpoint.

A URL a user gives (an ``api:`` model's endpoint, ``HF_ENDPOINT``) may hold a user name and password
(``http://user:pass@host/v1``) or a key in its query string. What spotdiff writes (``metrics.json``, the
run store, reports, hub pushes, messages and log lines) holds the URL without them: docs/security.md.

>>> redact_text("api:m@http://me:s3cret@gpu1:8000/v1?spellings=exact")
'api:m@http://gpu1:8000/v1?spellings=exact'
>>> canonical_endpoint("HTTP://me:s3cret@127.0.0.1:80/v1/")
'http://localhost/v1'
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["canonical_endpoint", "is_loopback", "redact_text", "redact_url", "redact_values", "split_userinfo"]

#: A URL's scheme and its ``user:password@`` part (up to the last ``@`` before the path, as urlsplit reads it).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def redact_text(text: str) -> str:
    """``text`` (a model spec, a message) with the user name and password of every URL in it removed.

    Args:
        text: any text.
    """
    return _USERINFO.sub(r"\g<scheme>", text)


def redact_values(value: Any) -> Any:
    """``value`` with :func:`redact_text` applied to every string in it, at any depth of dicts (keys and
    values), lists and tuples (as lists): what a run records of its options and models.

    >>> redact_values({"check": "api:m@http://me:pw@h/v1", "n": 2, "all": ("a", "http://u:p@h")})
    {'check': 'api:m@http://h/v1', 'n': 2, 'all': ['a', 'http://h']}

    Args:
        value: a JSON-like value.
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_values(k): redact_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_values(v) for v in value]
    return value


def redact_url(url: str) -> str:
    """``url`` without its user name and password, each query-string value replaced by ``***`` (keys
    travel there too: ``?key=...``, ``?token=...``).

    >>> redact_url("https://me:pw@proxy.example/hub?token=abc&x=1")
    'https://proxy.example/hub?token=***&x=***'

    Args:
        url: an absolute URL.
    """
    parts = urlsplit(redact_text(url))
    query = urlencode([(k, "***") for k, _ in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit(parts._replace(query=query))


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its user name and password, and those two (percent-decoded) or None.

    >>> split_userinfo("http://me:p%40ss@host:8000/v1")
    ('http://host:8000/v1', ('me', 'p@ss'))

    Args:
        url: an absolute URL.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    user, _, password = parts.netloc.rpartition("@")[0].partition(":")
    return redact_text(url), (unquote(user), unquote(password))


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine's loopback interface (``localhost``, ``127.x.x.x``, ``::1``).

    Args:
        host: a host name or IP address (IPv6 without brackets), as ``urlsplit(...).hostname`` gives it.
    """
    if not host:
        return False
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def canonical_endpoint(url: str) -> str:
    """The endpoint a URL names, one spelling per server: scheme and host lower-cased, every loopback
    name (``localhost``, ``127.0.0.1``, ``[::1]``) as ``localhost``, the scheme's default port left out,
    and no user name, password, query, fragment or trailing ``/``.

    Args:
        url: an absolute ``http(s)`` URL.
    """
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if is_loopback(host):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))
