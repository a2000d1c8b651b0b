"""Hub sources declared without a commit (none could be read when they were declared): the fetch
resolves the default branch to its commit, downloads that commit and records it, and a run records it
with its data source."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.data import benchmark_sources
from spotdiff.diagnose.store import RunStore
from spotdiff.testing.formats import mmvp_rows, write_mmvp, write_mmvp_vlm, write_vismin
from spotdiff.testing.hub_repos import (
    bivlc_repo,
    colorswap_repo,
    naturalbench_repo,
    naturalbench_retrieval_repo,
    png_bytes,
)
from spotdiff.testing.tiny_models import make_tiny_clip

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    "name", ["bivlc", "colorswap", "mmvp-vlm", "mmvp", "naturalbench", "naturalbench-retrieval", "vismin"]
)
def test_the_declarations_name_no_commit(name):
    source = benchmark_sources(name).part("data").source
    assert source.revision is None and "unpinned: the commit fetched is recorded" in source.describe()


def test_bivlc_fetched_at_the_commit_of_main_and_the_run_records_it(hub, home, tmp_path, capsys):
    hub.add_repo("imirandam/BiVLC", bivlc_repo(n=6), revision=COMMIT)
    assert main(["data", "fetch", "bivlc", "-q"]) == 0
    assert f"fetched commit {COMMIT}" in capsys.readouterr().out
    manifest = json.loads(next((home / "bivlc").glob("*manifest*.json")).read_text())
    record = manifest["parts"]["data"]
    assert record["revision"] == COMMIT and record["source"]["revision"] is None
    assert list(record["files"]) == ["data/test-00000-of-00001.parquet"]
    assert record["files"]["data/test-00000-of-00001.parquet"]["checked_against"] == "hub listing LFS sha256"

    clip = "hf-clip:" + str(make_tiny_clip(tmp_path / "clip"))
    out, store = tmp_path / "out", tmp_path / "runs.sqlite"
    argv = [
        "eval",
        "--model",
        clip,
        "--benchmark",
        "bivlc",
        "--out",
        str(out),
        "--no-cache",
        "--store",
        str(store),
        "-q",
        "--n-boot",
        "20",
    ]
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_cases"] == 6 and metrics["data"]["source"]["parts"]["data"]["revision"] == COMMIT
    with RunStore(store) as runs:
        assert runs.get(metrics["run_id"]).info["data_source"]["parts"]["data"]["revision"] == COMMIT


def test_gated_colorswap_needs_a_token_to_resolve_then_fetches(hub, home, monkeypatch, capsys):
    hub.add_repo("stanfordnlp/colorswap", colorswap_repo(n=4), revision=COMMIT, gated=True, granted_tokens=("hf_ok",))
    assert main(["data", "fetch", "colorswap", "-q"]) != 0
    err = capsys.readouterr().err
    assert "gated" in err and "HF_TOKEN" in err and not (home / "colorswap" / "data").exists()
    monkeypatch.setenv("HF_TOKEN", "hf_ok")
    assert main(["data", "fetch", "colorswap", "-q"]) == 0
    assert len(get_benchmark("colorswap")(home / "colorswap").load()) == 4


def test_mmvp_vlm_csv_and_image_folder_fetched(hub, home, tmp_path):
    folder = write_mmvp_vlm(tmp_path / "src")
    expected = get_benchmark("mmvp-vlm")(folder).load()
    rng = np.random.default_rng(0)
    for image in (im for c in expected for im in c.images):
        image.path.parent.mkdir(parents=True, exist_ok=True)
        image.path.write_bytes(png_bytes(rng))
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    hub.add_repo("MMVP/MMVP_VLM", files, revision=COMMIT)
    assert main(["data", "fetch", "mmvp-vlm", "-q"]) == 0
    fetched = get_benchmark("mmvp-vlm")(home / "mmvp-vlm").load()
    assert [c.id for c in fetched] == [c.id for c in expected] and len(fetched) == 16
    assert len(files) == 33  # Questions.csv and 32 images
    assert all(
        im.path.read_bytes() == files[im.path.relative_to(home / "mmvp-vlm").as_posix()]
        for c in fetched
        for im in c.images
    )


def test_naturalbench_parquet_fetched(hub, home, tmp_path):
    files = naturalbench_repo()
    hub.add_repo("BaiqiL/NaturalBench", files, revision=COMMIT)
    assert main(["data", "fetch", "naturalbench", "-q"]) == 0
    for rel, data in files.items():
        (tmp_path / "direct" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "direct" / rel).write_bytes(data)
    fetched = get_benchmark("naturalbench")(home / "naturalbench").load()
    direct = get_benchmark("naturalbench")(tmp_path / "direct").load()
    assert fetched and [(c.id, c.texts) for c in fetched] == [(c.id, c.texts) for c in direct]


def test_vismin_arrow_shards_fetched(hub, home, tmp_path):
    folder = write_vismin(tmp_path / "src", layout="arrow")
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    hub.add_repo("mair-lab/vismin-bench", files, revision=COMMIT)
    assert main(["data", "fetch", "vismin", "-q"]) == 0
    fetched = get_benchmark("vismin")(home / "vismin").load()
    direct = get_benchmark("vismin")(folder).load()
    assert len(fetched) == 8 and [(c.id, c.texts, c.subset) for c in fetched] == [
        (c.id, c.texts, c.subset) for c in direct]  # fmt: skip
    assert [c.images[0].load().tobytes() for c in fetched] == [c.images[0].load().tobytes() for c in direct]


def test_mmvp_csv_and_images_fetched(hub, home, tmp_path):
    folder = write_mmvp(tmp_path / "src", mmvp_rows(6), images=6)
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    hub.add_repo("MMVP/MMVP", files, revision=COMMIT)
    assert main(["data", "fetch", "mmvp", "-q"]) == 0
    fetched = get_benchmark("mmvp")(home / "mmvp").load()
    assert len(files) == 7 and len(fetched) == 3
    assert [c.texts for c in fetched] == [c.texts for c in get_benchmark("mmvp")(folder).load()]
    assert all(im.path.read_bytes() == files[f"MMVP Images/{im.path.name}"] for c in fetched for im in c.images)


def test_naturalbench_retrieval_zip_fetched_unpacked_and_scored(hub, home, tmp_path):
    """NaturalBench-Retrieval.zip lands unpacked (its one top folder descended into), and a tiny CLIP scores
    it with the group protocol; the archive unzipped as t2v_metrics does (the top folder kept) reads alike."""
    files = naturalbench_retrieval_repo(n=4)
    hub.add_repo("BaiqiL/NaturalBench", {**naturalbench_repo(n=2), **files}, revision=COMMIT)
    assert main(["data", "fetch", "naturalbench-retrieval", "-q"]) == 0
    folder = home / "naturalbench-retrieval"
    assert (folder / "metadata.json").is_file() and not (folder / "NaturalBench-Retrieval.zip").exists()
    fetched = get_benchmark("naturalbench-retrieval")(folder).load()
    unzipped = tmp_path / "t2v"
    with zipfile.ZipFile(io.BytesIO(files["NaturalBench-Retrieval.zip"])) as zf:
        zf.extractall(unzipped)
    direct = get_benchmark("naturalbench-retrieval")(unzipped).load()
    assert [(c.id, c.texts) for c in fetched] == [(c.id, c.texts) for c in direct] and len(fetched) == 4
    assert [r.key for c in fetched for r in c.images] == [r.key for c in direct for r in c.images]
    clip = "hf-clip:" + str(make_tiny_clip(tmp_path / "clip"))
    out = tmp_path / "out"
    argv = ["eval", "--model", clip, "--benchmark", "naturalbench-retrieval", "--out", str(out), "--no-cache",
            "--no-store", "-q", "--n-boot", "20"]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["protocol"] == "group" and metrics["n_cases"] == 4
    assert set(metrics["metrics"]["all"]) >= {"text", "image", "group"}
