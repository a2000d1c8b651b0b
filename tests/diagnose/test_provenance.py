"""The ``environment`` block: versions, git commit, device, and hub revisions of model and data read
from a Hugging Face hub cache laid out as ``huggingface_hub`` writes it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spotdiff import __version__
from spotdiff.cli import main
from spotdiff.provenance import environment, git_state, hub_revision, model_source, snapshot_revision
from spotdiff.testing.formats import write_spec
from spotdiff.testing.tiny_models import make_tiny_clip

MODEL_SHA = "0123456789abcdef0123456789abcdef01234567"
DATA_SHA = "fedcba9876543210fedcba9876543210fedcba98"


def _cache_entry(hub: Path, kind: str, repo: str, sha: str, source: Path) -> Path:
    """``<hub>/<kind>s--org--name/snapshots/<sha>`` holding ``source``'s files, ``refs/main`` -> sha."""
    entry = hub / f"{kind}s--{repo.replace('/', '--')}"
    snapshot = entry / "snapshots" / sha
    shutil.copytree(source, snapshot)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(sha)
    return snapshot


def test_model_source_from_identities() -> None:
    assert model_source({"name_or_path": "openai/clip-vit-base-patch32"}) == "openai/clip-vit-base-patch32"
    assert model_source({"spec": "vgpt:Salesforce/blip-image-captioning-large?prompt=x"}) == (
        "Salesforce/blip-image-captioning-large"
    )
    assert model_source({"spec": "open-clip:ViT-B-32@hf-hub:laion/CLIP-ViT-B-32"}) == "laion/CLIP-ViT-B-32"
    assert hub_revision("not/cached-anywhere") is None and hub_revision("minilm") is None


def test_versions_and_git_state() -> None:
    env = environment(device="cpu")
    assert env["packages"]["spotdiff"] == __version__ and env["packages"]["numpy"]
    git = git_state()
    if git is not None:  # run from a checkout (CI): the commit is a 40-digit hash
        assert len(git["commit"]) == 40 and isinstance(git["dirty"], bool)
    assert snapshot_revision("/tmp/elsewhere") is None


def test_eval_records_hub_revisions_of_model_and_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    hub = tmp_path / "hub"
    _cache_entry(hub, "model", "acme/tiny-clip", MODEL_SHA, make_tiny_clip(tmp_path / "clip"))
    spec = write_spec(tmp_path / "spec", n=1, subsets=("existence",))
    data = _cache_entry(hub, "dataset", "acme/spec-mini", DATA_SHA, spec)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    assert hub_revision("acme/tiny-clip") == {"repo": "acme/tiny-clip", "revision": MODEL_SHA}
    out = tmp_path / "out"
    argv = ["eval", "--model", "hf-clip:acme/tiny-clip", "--benchmark", "spec", "--data", str(data),
            "--out", str(out), "--no-store", "--no-cache", "--n-boot", "20", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    env = json.loads((out / "metrics.json").read_text())["environment"]
    assert env["model_hub"] == {"repo": "acme/tiny-clip", "revision": MODEL_SHA}
    assert env["data_hub"] == {"repo": "acme/spec-mini", "revision": DATA_SHA}


def test_torch_version_keeps_its_build_tag(monkeypatch) -> None:
    import torch

    from spotdiff.provenance import package_versions

    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    assert package_versions()["torch"] == "2.14.1+cu130"
