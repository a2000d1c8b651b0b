"""Fixtures for the data-home tests: an empty data home, and the loopback servers that stand in for
the official hosts (a plain file server reached through SPOTDIFF_URL_MIRROR, a hub server reached
through HF_ENDPOINT). No test here touches the internet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spotdiff.testing.http_server import FileServer
from spotdiff.testing.hub_server import HubServer, hub_environment


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data home ($SPOTDIFF_DATA), no token, no mirror, not offline."""
    path = tmp_path / "home"
    monkeypatch.setenv("SPOTDIFF_DATA", str(path))
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "SPOTDIFF_URL_MIRROR", "SPOTDIFF_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))  # no stored token
    return path


@pytest.fixture
def files(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FileServer]:
    """A file server every non-hub URL is mirrored to."""
    with FileServer() as server:
        monkeypatch.setenv("SPOTDIFF_URL_MIRROR", server.url)
        yield server


@pytest.fixture
def hub(home: Path) -> Iterator[HubServer]:
    """A hub server that huggingface_hub talks to, as if HF_ENDPOINT pointed at it from the start."""
    with HubServer() as server, hub_environment(server.url):
        yield server
