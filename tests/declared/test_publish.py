"""Publishing what spotdiff synthesizes (items 9-11 of issue 46): the Hub layout (parquet shards with Image and
Video features, one config per subset, a card with licence, task categories, configs, provenance and review, and
the declaration that rebuilds the cases), checked before anything runs, one line when a push fails after writing;
and the round trip through the loopback hub: `datasets.load_dataset` reads the pushed set, and `spotdiff eval
--benchmark hf:ORG/NAME@REVISION` gives the metrics of evaluating the folder, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from spotdiff.api import load_benchmark
from spotdiff.cli import main
from spotdiff.publish.card import declaration
from spotdiff.publish.shards import write_shards
from spotdiff.testing.hub_server import HubServer, hub_environment

QUIET = ["--no-store", "--no-cache", "--n-boot", "50", "--workers", "0", "--quiet"]


@pytest.fixture
def token(monkeypatch, tmp_path):
    """A hub token in HF_TOKEN (the loopback hub takes any as user ``me``'s write token), and no saved login."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-token"))


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    from spotdiff.testing.tiny_models import make_tiny_clip

    return f"hf-clip:{make_tiny_clip(tmp_path_factory.mktemp('clip') / 'clip')}"


def _same_cases(a, b) -> None:
    assert [(c.id, c.subset, c.texts, c.truth.tolist(), c.tags, c.roles, [r.key for r in c.images]) for c in a] == [
        (c.id, c.subset, c.texts, c.truth.tolist(), c.tags, c.roles, [r.key for r in c.images]) for c in b]  # fmt: skip


def test_publish_writes_the_hub_layout_with_its_card_and_review(tmp_path: Path, capsys) -> None:
    """Two reviewers on six EqBen pairs: the card gives their agreement (alice AAARRR, bob AARRRR: p_o = 5/6,
    p_e = 1/2 * 1/3 + 1/2 * 2/3 = 1/2, Cohen's kappa = (5/6 - 1/2) / (1/2) = 2/3)."""
    from spotdiff.review.session import ReviewSession

    folder, layout = tmp_path / "eqben", tmp_path / "layout"
    assert main(["synth", "eqben", "--out", str(folder), "--n", "2", "--image-size", "64", "-q"]) == 0
    for name, votes in (("alice", "AAARRR"), ("bob", "AARRRR")):
        session = ReviewSession(folder, name)
        for k, vote in enumerate(votes):
            session.decide(f"{k:05d}", "accept" if vote == "A" else "reject")
    before = sorted((p.relative_to(folder), p.read_bytes()) for p in folder.rglob("*") if p.is_file())
    assert main(["synth", "publish", str(folder), "--out", str(layout), "--license", "cc-by-4.0"]) == 0
    assert "6 cases in 3 configs" in capsys.readouterr().out
    configs = sorted(p.name for p in layout.iterdir() if p.is_dir() and p.name != "review")
    assert len(configs) == 3 and all((layout / c / "test-00000-of-00001.parquet").is_file() for c in configs)
    schema = pq.read_schema(layout / configs[0] / "test-00000-of-00001.parquet")
    features = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    assert features["images"] == {"feature": {"_type": "Image"}, "_type": "List"}
    text = (layout / "README.md").read_text()
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["license"] == "cc-by-4.0" and front["task_categories"] == ["image-to-text", "text-to-image"]
    assert [c["config_name"] for c in front["configs"]] == ["all", *_order(layout)]
    assert "Engine `eqben`; seed `0`" in text and "reviewers: alice, bob" in text
    assert "Cohen's kappa 0.667, observed agreement 0.833" in text
    assert sorted(p.name for p in (layout / "review").iterdir()) == ["review.alice.csv", "review.bob.csv", "review.csv"]
    _same_cases(load_benchmark(str(layout / "spotdiff.yaml")), load_benchmark("eqben", folder))
    after = sorted((p.relative_to(folder), p.read_bytes()) for p in folder.rglob("*") if p.is_file())
    assert after == before  # the synthesized folder is read, never written


def _order(layout: Path) -> list[str]:
    """The configs in the declaration's order (the cases' order)."""
    decl = yaml.safe_load((layout / "spotdiff.yaml").read_text())
    return [entry["path"].split("/")[0] for entry in decl["data"]]


def test_videos_are_published_as_video_features_with_their_windows(tmp_path: Path) -> None:
    """Clips (VITATECS's, and a window of one) as rows of Video features: read back by the declaration, each clip
    keeps its content key and window."""
    import dataclasses

    from spotdiff.testing.videos import write_vitatecs

    cases = list(load_benchmark("vitatecs", write_vitatecs(tmp_path / "v")))
    cases[0] = dataclasses.replace(cases[0], images=(dataclasses.replace(cases[0].images[0], start=0.5, end=1.5),))
    out = tmp_path / "layout"
    configs, kind, prompts = write_shards(cases, out)
    assert kind == "videos" and not prompts
    meta = load_benchmark("vitatecs", tmp_path / "v").metadata
    (out / "spotdiff.yaml").write_text(declaration(meta, name="clips", engine="eqben-video", configs=configs,
                                                   kind=kind, prompts=False, license="cc-by-4.0"))  # fmt: skip
    features = json.loads(pq.read_schema(out / configs[0].files[0]).metadata[b"huggingface"])["info"]["features"]
    assert features["videos"]["feature"] == {"_type": "Video"}
    back = list(load_benchmark(str(out / "spotdiff.yaml")))
    _same_cases(back, cases)
    assert (back[0].images[0].start, back[0].images[0].end) == (0.5, 1.5) and back[1].images[0].start is None


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no token", "--push-to-hub me/set: no hub token"),
        ("offline", "--push-to-hub me/set: offline mode is on"),
        ("read-only token", "--push-to-hub me/set: the token is read-only"),
        ("other namespace", "--push-to-hub other/set: the token's user me can write to me, lab, not other"),
        ("bad repo id", "--push-to-hub 'me/set/x' is not a repository id"),
    ],
)
def test_a_push_is_checked_before_anything_runs(tmp_path, monkeypatch, capsys, token, case, message) -> None:
    repo = {"other namespace": "other/set", "bad repo id": "me/set/x"}.get(case, "me/set")
    out = tmp_path / "spec"
    with HubServer() as hub, hub_environment(hub.url, offline=case == "offline"):
        hub.tokens, hub.orgs = {"hf_test_token": ("me", "write")}, ("lab",)
        if case == "no token":
            monkeypatch.delenv("HF_TOKEN")
        elif case == "read-only token":
            hub.tokens = {"hf_test_token": ("me", "read")}
        assert main(["synth", "spec", "--out", str(out), "--n", "1", "--push-to-hub", repo, "-q"]) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("spotdiff")]
    assert line.startswith(f"spotdiff synth: error: {message}"), line
    assert not out.exists() and not hub.repos  # nothing synthesized, nothing pushed


def test_a_push_that_fails_after_writing_is_one_line_and_the_set_stays(tmp_path, capsys, token) -> None:
    folder = tmp_path / "spec"
    assert main(["synth", "spec", "--out", str(folder), "--n", "1", "--subsets", "count", "-q"]) == 0
    before = sorted((p.relative_to(folder), p.read_bytes()) for p in folder.rglob("*") if p.is_file())
    with HubServer() as hub, hub_environment(hub.url):
        hub.upload_errors = [(500, "the hub is down")] * 3
        assert main(["synth", "publish", str(folder), "--push-to-hub", "me/set"]) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("spotdiff")]
    assert line.startswith("spotdiff synth: error: pushing to me/set failed: the hub at ") and "500" in line
    assert line.endswith(f"the synthesized set stays in {folder}: `spotdiff synth publish {folder} --push-to-hub "
                         "me/set` pushes it")  # fmt: skip
    assert sorted((p.relative_to(folder), p.read_bytes()) for p in folder.rglob("*") if p.is_file()) == before


def test_round_trip_through_the_hub(tmp_path, home, capsys, clip, token, monkeypatch) -> None:
    """`synth spec --push-to-hub` publishes; datasets reads it back; `eval --benchmark hf:me/spec-set@REV` gives the
    folder's metrics byte for byte, recording the hub repository and commit it read."""
    datasets = pytest.importorskip("datasets", reason="the test extra installs datasets (make test)")
    folder = tmp_path / "spec"
    with HubServer() as hub, hub_environment(hub.url):
        assert main(["synth", "spec", "--out", str(folder), "--n", "2", "--subsets", "count,relative_spatial",
                     "--image-size", "64", "-q", "--push-to-hub", "me/spec-set", "--license", "cc-by-4.0"]) == 0
        repo = hub.repos[("dataset", "me/spec-set")]
        assert f"pushed: {hub.url}/datasets/me/spec-set/commit/{repo.revision}" in capsys.readouterr().out
        loaded = datasets.load_dataset("me/spec-set", "count", split="test", cache_dir=str(tmp_path / "ds"))
        assert loaded.num_rows == 2 and loaded[0]["images"][0].size == (64, 64) and loaded[0]["subset"] == "count"
        assert loaded[0]["truth"] == [[k == j for k in range(len(loaded[0]["texts"]))] for j in range(
            len(loaded[0]["images"]))]  # fmt: skip
        hub_out, folder_out = tmp_path / "hub-run", tmp_path / "folder-run"
        assert main(["eval", "--model", clip, "--benchmark", f"hf:me/spec-set@{repo.revision}", "--out",
                     str(hub_out), *QUIET]) == 0  # fmt: skip
    assert main(["eval", "--model", clip, "--benchmark", "spec", "--data", str(folder), "--out", str(folder_out),
                 *QUIET]) == 0  # fmt: skip
    hub_metrics, folder_metrics = (json.loads((d / "metrics.json").read_text()) for d in (hub_out, folder_out))
    for key in ("metrics", "aggregates", "n_cases"):
        assert json.dumps(hub_metrics[key]) == json.dumps(folder_metrics[key])
    source = hub_metrics["data"]["source"]["parts"]["repo"]
    assert source["source"]["repo_id"] == "me/spec-set" and source["revision"] == repo.revision
    assert hub_metrics["declaration"]["name"] == "me--spec-set"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub now: the snapshot fetched above, by the repository's name
    assert main(["eval", "--model", clip, "--benchmark", "hf:me/spec-set", "--out", str(tmp_path / "offline"),
                 *QUIET]) == 0  # fmt: skip
    # train --cases takes the published set too, a subset after the name (issue 46: "hf" was read as the name)
    from spotdiff.commands.train import _load_cases

    cases = _load_cases([f"hf:me/spec-set@{repo.revision}:count", "hf:me/spec-set"], None)
    subsets = [c.tags["subset"] for c in cases]
    assert subsets[:2] == ["count"] * 2 and sorted(subsets[2:]) == ["count"] * 2 + ["relative_spatial"] * 2


def test_two_revisions_of_a_published_set_load_in_one_process(tmp_path, home, token) -> None:
    """Issue 46's gap: a second revision of one hub dataset, read after the first in the same process, was refused
    ("the name is already the declaration ...'s", its snapshot being another folder); the one read last is used."""
    from spotdiff.benchmarks import BENCHMARKS
    from spotdiff.data.declared import resolve_benchmark

    folder = tmp_path / "spec"
    with HubServer() as hub, hub_environment(hub.url):
        assert main(["synth", "spec", "--out", str(folder), "--n", "1", "--subsets", "count", "--image-size", "64",
                     "-q", "--push-to-hub", "me/two", "--license", "cc-by-4.0"]) == 0  # fmt: skip
        first = hub.repos[("dataset", "me/two")].revision
        assert resolve_benchmark(f"hf:me/two@{first}") == "me--two"
        assert main(["synth", "publish", str(folder), "--push-to-hub", "me/two", "--license", "mit"]) == 0
        second = hub.repos[("dataset", "me/two")].revision
        assert second != first and resolve_benchmark(f"hf:me/two@{second}") == "me--two"
        assert f"/{second}/" in BENCHMARKS.get("me--two").declaration_record()["path"]
        assert resolve_benchmark(f"hf:me/two@{first}") == "me--two"  # and back
        assert f"/{first}/" in BENCHMARKS.get("me--two").declaration_record()["path"]
