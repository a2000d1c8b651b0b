"""Shared fixtures: where ../shared is, and whether its absence skips or fails a test; a headless Chromium; the
tiny generative models (built once per test session); an empty data home and the loopback servers that stand in
for the official hosts (a plain file server reached through SPOTDIFF_URL_MIRROR, a hub server reached through
HF_ENDPOINT): no test touches the internet."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from spotdiff.testing.http_server import FileServer
from spotdiff.testing.hub_server import HubServer, hub_environment

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
#: Debian's Chromium and its driver (`make browser` installs them; no browser download is possible here)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout; skip without it, fail when SPOTDIFF_REQUIRE_SHARED=1."""
    if not (SHARED / "data").is_dir():
        message = f"../shared not found at {SHARED}"
        if os.environ.get("SPOTDIFF_REQUIRE_SHARED") == "1":
            pytest.fail(message + " (SPOTDIFF_REQUIRE_SHARED=1)")
        pytest.skip(message)
    return SHARED


@pytest.fixture(scope="session")
def shared_data(shared_dir: Path) -> Path:
    return shared_dir / "data"


@pytest.fixture
def chromium() -> Iterator:
    """A Selenium driver of headless Chromium with a fresh profile; skip without Chromium, chromedriver or
    selenium (`make browser` installs them), fail instead when SPOTDIFF_REQUIRE_BROWSER=1 (CI sets it)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("python package selenium")
    if missing:
        message = f"headless browser test needs {', '.join(missing)} (make browser)"
        if os.environ.get("SPOTDIFF_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " (SPOTDIFF_REQUIRE_BROWSER=1)")
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="spotdiff-chromium-")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_t2i(tmp_path_factory) -> str:
    """The folder of a tiny Stable Diffusion text-to-image pipeline."""
    if importlib.util.find_spec("diffusers") is None:
        pytest.skip("the generate extra (diffusers) is not installed")
    from spotdiff.testing import tiny_diffusion

    return str(tiny_diffusion.make_tiny_stable_diffusion(tmp_path_factory.mktemp("tiny-t2i") / "sd"))


@pytest.fixture(scope="session")
def tiny_generative(tiny_t2i, tmp_path_factory) -> SimpleNamespace:
    """Folders of tiny Stable Diffusion (text-to-image, inpainting), Grounding DINO and SAM models."""
    from spotdiff.testing import tiny_diffusion

    root = tmp_path_factory.mktemp("tiny-generative")
    return SimpleNamespace(
        t2i=tiny_t2i,
        inpaint=str(tiny_diffusion.make_tiny_stable_diffusion(root / "sd-inpaint", inpaint=True)),
        detector=str(tiny_diffusion.make_tiny_grounding_dino(root / "gdino")),
        segmenter=str(tiny_diffusion.make_tiny_sam(root / "sam")),
    )


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


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker gets one torch thread, so two workers share two cores fairly (and the
    evaluations' thread budget, which honours ``OMP_NUM_THREADS``, keeps it: a process that ran torch on two
    threads and then forks a plan's stage would hang in GNU OpenMP)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        import torch

        torch.set_num_threads(1)
