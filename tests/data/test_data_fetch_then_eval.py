"""Fetch, then evaluate with no --data: the official sources served by the loopback servers (the real
VISLA file at its pinned GitHub URL; hub repositories in the real Winoground, SPEC and MTEB layouts),
real models (MiniLM; tiny CLIPs built from configs), and the source recorded with every run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from spotdiff.cli import main
from spotdiff.data import benchmark_sources
from spotdiff.diagnose.store import RunStore
from spotdiff.testing.hub_repos import mteb_order_repo, mteb_vg_repo, spec_repo, winoground_repo
from spotdiff.testing.tiny_models import make_tiny_clip


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory) -> str:
    return "hf-clip:" + str(make_tiny_clip(tmp_path_factory.mktemp("clip")))


def _eval(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out"
    argv = ["eval", *args, "--out", str(out), "--no-cache", "--store", str(tmp_path / "runs.sqlite"), "-q",
            "--n-boot", "50"]
    assert main(argv) == 0
    return json.loads((out / "metrics.json").read_text())


def _serve_hub(hub, name: str, files: dict[str, bytes], part: str | None = None, **kwargs):
    decl = benchmark_sources(name)
    source = decl.part(part).source if part else decl.parts[0].source
    return hub.add_repo(source.repo_id, files, revision=source.revision, **kwargs)


def test_visla_fetched_from_its_repository_then_evaluated_without_data(files, home, tmp_path, shared_data):
    source = benchmark_sources("visla-generic").part("annotations").source
    remote = source.files[0]
    files.add_url(remote.url, shared_data / "visla" / "Generic_VISLA.tsv")
    assert main(["data", "fetch", "visla-generic", "--annotations-only", "-q"]) == 0
    fetched = home / "visla-generic" / "Generic_VISLA.tsv"
    assert hashlib.sha256(fetched.read_bytes()).hexdigest() == remote.checksum.value

    metrics = _eval(tmp_path, "--model", "minilm", "--benchmark", "visla-generic", "--protocol", "t2t",
                    "--limit", "20")
    reference = _eval(tmp_path / "ref", "--model", "minilm", "--benchmark", "visla-generic", "--protocol", "t2t",
                      "--limit", "20", "--data", str(shared_data / "visla"))
    assert metrics["n_cases"] == 20
    assert metrics["metrics"] == reference["metrics"]
    assert metrics["data"]["digest"] == reference["data"]["digest"]
    assert metrics["data"]["path"] == str(home.resolve() / "visla-generic")
    part = metrics["data"]["source"]["parts"]["annotations"]
    assert part["revision"] == source.revision
    assert part["source"]["files"][0]["url"] == remote.url
    assert part["files"]["Generic_VISLA.tsv"] == remote.checksum.value
    assert reference["data"]["source"] is None  # a folder not fetched records no source
    with RunStore(tmp_path / "runs.sqlite") as store:
        run = store.get(metrics["run_id"])
    assert run.info["data_source"]["parts"]["annotations"]["revision"] == source.revision


def test_winoground_parquet_fetched_with_a_token_then_evaluated(hub, home, tmp_path, tiny_clip, monkeypatch):
    _serve_hub(hub, "winoground", winoground_repo(n=6), gated=True, granted_tokens=("hf_ok",))
    monkeypatch.setenv("HF_TOKEN", "hf_ok")
    assert main(["data", "fetch", "Winoground", "-q"]) == 0  # MTEB's name
    metrics = _eval(tmp_path, "--model", tiny_clip, "--benchmark", "Winoground")
    assert metrics["benchmark"] == "winoground" and metrics["protocol"] == "group"
    assert metrics["n_cases"] == 6
    assert set(metrics["metrics"]) == {"all", "subset_mean", "Object", "Relation", "Both"}
    source = metrics["data"]["source"]["parts"]["data"]
    assert source["source"]["repo_id"] == "facebook/winoground"
    assert source["revision"] == benchmark_sources("winoground").parts[0].source.revision
    lines = (tmp_path / "out" / "scores.jsonl").read_text().splitlines()
    assert len(lines) == 6 and all(len(json.loads(line)["scores"]) == 2 for line in lines)


def test_spec_data_zip_fetched_unpacked_then_evaluated(hub, home, tmp_path, tiny_clip):
    _serve_hub(hub, "spec", spec_repo(n=1))
    assert main(["data", "fetch", "spec", "-q"]) == 0
    folder = home / "spec"
    assert {p.name for p in folder.iterdir() if p.is_dir()} >= {"count", "existence", "absolute_size"}
    assert not (folder / "data.zip").exists()
    metrics = _eval(tmp_path, "--model", tiny_clip, "--benchmark", "spec")
    assert metrics["n_cases"] == 6  # one candidate set per subset
    digest = metrics["data"]["source"]["parts"]["data"]["trees"]["."]  # the unpacked tree's sha256
    assert len(digest) == 64


def test_mteb_order_mirror_gives_fixed_perturbations(hub, home, tmp_path, tiny_clip):
    repo = _serve_hub(hub, "aro-coco-order", mteb_order_repo(n=6), part="mieb")
    assert main(["data", "fetch", "AROCocoOrder", "--part", "mieb", "-q"]) == 0
    assert (home / "aro-coco-order" / "mieb" / "data" / "test-00000-of-00001.parquet").read_bytes() == (
        repo.files["data/test-00000-of-00001.parquet"]
    )
    metrics = _eval(tmp_path, "--model", tiny_clip, "--benchmark", "aro-coco-order", "-o", "perturbations=mieb")
    assert metrics["n_cases"] == 6
    assert metrics["load_report"]["skipped"] == {
        "order: perturbation identical to the true caption (ARO's argmax scores it for the true one)": 1
    }
    rows = [json.loads(line) for line in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    assert [len(r["scores"][0]) for r in rows] == [4, 5, 5, 5, 5, 5]
    assert rows[0]["tags"]["perturbations"] == "mieb"


def test_mteb_vg_mirror_is_cropped_as_aro_or_kept_whole_as_mteb(hub, home, tmp_path, tiny_clip):
    _serve_hub(hub, "aro-vg-relation", mteb_vg_repo("relation", n=8), part="mieb")
    assert main(["data", "fetch", "AROVisualRelation", "--part", "mieb", "-q"]) == 0
    crop = _eval(tmp_path / "a", "--model", tiny_clip, "--benchmark", "aro-vg-relation", "--protocol", "i2t-top1")
    whole = _eval(tmp_path / "b", "--model", tiny_clip, "--benchmark", "aro-vg-relation", "--protocol", "i2t-top1",
                  "-o", "crop=false")
    assert crop["n_cases"] == whole["n_cases"] == 8
    a = [json.loads(x)["scores"] for x in (tmp_path / "a" / "out" / "scores.jsonl").read_text().splitlines()]
    b = [json.loads(x)["scores"] for x in (tmp_path / "b" / "out" / "scores.jsonl").read_text().splitlines()]
    assert a != b  # the crop changes what the model sees


def test_eval_without_data_says_where_it_looked(home, capsys):
    assert main(["eval", "--model", "minilm", "--benchmark", "crepe", "--no-store"]) == 2
    err = capsys.readouterr().err
    assert f"looked in {home / 'crepe'}" in err and "spotdiff data fetch crepe" in err


def test_vinoground_gated_fetched_once_linked_then_evaluated_with_a_video_model(hub, home, tmp_path, monkeypatch):
    """The gated hub dataset (csv, prompts, two video archives) lands once in the shared folder, is linked into
    the benchmark's folder as Vinoground/, and a tiny X-CLIP scores its videos from there."""
    from spotdiff.benchmarks.shared import COLLECTIONS
    from spotdiff.testing.hub_repos import vinoground_repo
    from spotdiff.testing.tiny_models import make_tiny_xclip

    source = COLLECTIONS["vinoground-hub"].source
    hub.add_repo(source.repo_id, vinoground_repo(n=3), revision="c" * 40, gated=True, granted_tokens=("hf_ok",))
    assert main(["data", "fetch", "vinoground", "-q"]) == 2  # gated: no token yet
    monkeypatch.setenv("HF_TOKEN", "hf_ok")
    assert main(["data", "fetch", "vinoground", "-q"]) == 0
    shared = home / "_shared" / "vinoground-hub"
    assert (shared / "vinoground_videos" / "2_neg.mp4").is_file()
    assert (shared / "vinoground_videos_concated" / "1_reverse.mp4").is_file()
    assert (home / "vinoground" / "Vinoground").resolve() == shared.resolve()
    model = "xclip:" + str(make_tiny_xclip(tmp_path / "xclip"))
    metrics = _eval(tmp_path, "--model", model, "--benchmark", "vinoground")
    assert metrics["n_cases"] == 3 and metrics["protocol"] == "group"
    assert set(metrics["metrics"]) == {"all", "subset_mean", "action", "object", "viewpoint"}
    part = metrics["data"]["source"]["parts"]["data"]
    assert part["collections"]["vinoground-hub"]["source"]["repo_id"] == "HanSolo9682/Vinoground"
