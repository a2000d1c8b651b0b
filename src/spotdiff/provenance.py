"""Where a number comes from: the software, the machine, and the hub revisions of model and data.

:func:`environment` is the ``"environment"`` block that every run records: package versions, the git
commit, the device, and hub revisions read from what is cached (nothing here touches the network).
Its fields: docs/architecture.md.
"""

from __future__ import annotations

import importlib.util
import platform
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

#: The distributions whose versions every run records.
PACKAGES = (
    "spotdiff",
    "torch",
    "transformers",
    "open_clip_torch",
    "sentence-transformers",
    "huggingface-hub",
    "numpy",
)
_SNAPSHOT = re.compile(r"(models|datasets|spaces)--(?P<repo>[^/\\]+)[/\\]snapshots[/\\](?P<rev>[0-9a-f]{40})")


def package_versions() -> dict[str, str | None]:
    """``{distribution: version}`` for :data:`PACKAGES` (None when not installed). torch's is
    ``torch.__version__`` with its build tag (``2.14.1+cu130``): the CUDA build changes numbers, and
    the distribution metadata of a wheel from PyPI leaves the tag out."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    if out["torch"] is not None:
        out["torch"] = _torch_version() or out["torch"]
    return out


def _torch_version() -> str | None:
    """``torch.__version__``, read from ``torch/version.py`` without importing torch (a run that computes
    nothing never imports it), or None when it cannot be read there."""
    if "torch" in sys.modules:
        return str(sys.modules["torch"].__version__)
    spec = importlib.util.find_spec("torch")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            text = (Path(root) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        if found:
            return found.group(1)
    return None


def git_state() -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the spotdiff checkout this package runs from (``dirty``: tracked
    files differ from the commit), or None for an installed package or without git."""
    where = Path(__file__).resolve().parent
    try:
        top = _git(where, "rev-parse", "--show-toplevel")
        if top is None or (Path(top) / "src" / "spotdiff").resolve() != where:
            return None
        commit = _git(where, "rev-parse", "HEAD")
        status = _git(where, "status", "--porcelain", "--untracked-files=no")
    except OSError:
        return None
    if commit is None:
        return None
    return {"commit": commit, "dirty": bool(status)}


def _git(where: Path, *args: str) -> str | None:
    proc = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def device_name(device: str | None) -> str | None:
    """A human-readable name of ``device`` (``"cuda:0"`` -> the GPU's name; ``"cpu"`` -> the CPU model)."""
    if not device:
        return None
    if device.startswith("cuda"):
        import torch

        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        return str(torch.cuda.get_device_name(index))
    if device == "cpu":
        cpuinfo = Path("/proc/cpuinfo")
        if cpuinfo.is_file():
            for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
        return platform.processor() or platform.machine() or None
    return device


def snapshot_revision(path: str | Path) -> dict[str, str] | None:
    """``{"repo", "revision"}`` when ``path`` lies in a Hugging Face hub cache snapshot folder.

    >>> snapshot_revision("/c/hub/models--openai--clip-vit-base-patch32/snapshots/" + "a" * 40 + "/config.json")
    {'repo': 'openai/clip-vit-base-patch32', 'revision': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}
    """
    m = _SNAPSHOT.search(str(Path(path).expanduser().resolve()))
    if m is None:
        m = _SNAPSHOT.search(str(path))
    if m is None:
        return None
    return {"repo": m.group("repo").replace("--", "/"), "revision": m.group("rev")}


def hub_revision(name_or_path: str, repo_type: str = "model") -> dict[str, str] | None:
    """The hub repository and commit a model (or dataset) was read from, from the local hub cache.

    A local path inside a hub snapshot folder is parsed; an existing local path elsewhere has no
    hub revision; a hub name (``org/name``) is resolved with ``huggingface_hub.snapshot_download(...,
    local_files_only=True)`` (no network), which gives the cached snapshot of its ``main`` ref.
    """
    if not name_or_path:
        return None
    path = Path(name_or_path).expanduser()
    if path.exists():
        return snapshot_revision(path)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", name_or_path):
        return None
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(name_or_path, repo_type=repo_type, local_files_only=True)
    except Exception:  # not cached, offline, or not a valid repo id: no revision to record
        return None
    found = snapshot_revision(folder)
    return found and {"repo": name_or_path, "revision": found["revision"]}


def model_source(identity: dict[str, Any]) -> str | None:
    """The hub name or path a scorer identity was loaded from (``name_or_path``, else the spec's
    part after the family prefix, without ``?options`` and open_clip's ``ARCH@`` or ``hf-hub:``)."""
    if identity.get("name_or_path"):
        return str(identity["name_or_path"])
    spec = str(identity.get("spec") or "")
    _, sep, rest = spec.partition(":")
    rest = (rest if sep else spec).split("?", 1)[0]
    rest = rest.split("@", 1)[1] if "@" in rest else rest
    return rest.removeprefix("hf-hub:") or None


def fetched_revisions(data_source: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """``{part: {"source", "revision"}}`` of the parts of fetched data that record a revision (a data
    home manifest's provenance, :func:`spotdiff.data.data_provenance`), or None."""
    parts = (data_source or {}).get("parts") or {}
    found = {
        name: {"source": part.get("source"), "revision": part.get("revision")}
        for name, part in parts.items()
        if isinstance(part, dict) and part.get("revision")
    }
    return found or None


def environment(
    *,
    device: str | None = None,
    model_identity: dict[str, Any] | None = None,
    data_path: str | Path | None = None,
    data_source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``"environment"`` block of a run (its fields: docs/architecture.md).

    Args:
        device: the device the model ran on.
        model_identity: the scorer's identity, which names the hub model or path.
        data_path: the data's folder (a hub cache snapshot gives its revision).
        data_source: the fetched data's provenance when the data came from a data home.
    """
    source = model_source(model_identity or {})
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "git": git_state(),
        "device": {"type": device, "name": device_name(device)},
        "model_hub": hub_revision(source) if source else None,
        "data_hub": (snapshot_revision(data_path) if data_path is not None else None) or fetched_revisions(data_source),
    }
