"""Hub sources through huggingface_hub against the loopback hub: gated repositories, tokens, offline
mode, the manual route, and the check of every file against the hub's own listing."""

from __future__ import annotations

import pytest

from spotdiff.cli import main
from spotdiff.data import benchmark_sources, benchmark_state, fetch_benchmark
from spotdiff.data.fetch import FetchIncomplete
from spotdiff.data.home import STAGING
from spotdiff.testing.hub_repos import winoground_repo
from spotdiff.testing.hub_server import hub_environment

WINO = benchmark_sources("winoground").parts[0].source
PARQUET = "data/test-00000-of-00001.parquet"


@pytest.fixture
def wino(hub):
    return hub.add_repo(WINO.repo_id, winoground_repo(n=3), revision=WINO.revision, gated=True,
                        granted_tokens=("hf_granted",))


def test_gated_without_a_token_names_the_licence_and_fetches_nothing(hub, wino, home, capsys):
    assert main(["data", "fetch", "winoground", "-q"]) == 2
    err = capsys.readouterr().err
    assert "facebook/winoground is gated" in err
    assert "no Hugging Face token was found" in err and "HF_TOKEN" in err
    assert "https://huggingface.co/datasets/facebook/winoground" in err and "Manual route" in err
    state = benchmark_state(benchmark_sources("winoground"))
    assert state.status == "absent"
    assert not (home / "winoground" / PARQUET).exists()
    asked = [r for r in hub.requests if "winoground" in r.path]
    assert asked and all("authorization" not in r.headers for r in asked)  # asked without a token: 401 GatedRepo


def test_a_token_without_access_is_told_so(hub, wino, home, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_not_granted")
    with pytest.raises(FetchIncomplete, match="the token in HF_TOKEN has no access to it yet"):
        fetch_benchmark("winoground", progress=False)
    auth = [r.headers.get("authorization") for r in hub.requests if "winoground" in r.path]
    assert auth and all(a == "Bearer hf_not_granted" for a in auth)


def test_a_granted_token_fetches_and_checks_against_the_hub_listing(hub, wino, home, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_granted")
    outcomes = fetch_benchmark("winoground", progress=False)
    assert [(o.part, o.status) for o in outcomes] == [("data", "fetched")]
    path = home / "winoground" / PARQUET
    assert path.read_bytes() == wino.files[PARQUET]
    record = benchmark_state(benchmark_sources("winoground")).parts["data"].record
    assert record["revision"] == WINO.revision
    assert record["files"][PARQUET]["checked_against"] == "hub listing LFS sha256"
    assert not (home / "winoground" / STAGING).exists()
    # fetching again asks nothing of the hub
    n = len(hub.requests)
    assert fetch_benchmark("winoground", progress=False)[0].status == "present"
    assert len(hub.requests) == n


def test_offline_mode_names_the_source_and_the_manual_route(hub, wino, home, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_granted")
    with hub_environment(hub.url, offline=True):
        with pytest.raises(FetchIncomplete) as info:
            fetch_benchmark("winoground", progress=False)
        message = str(info.value)
        assert "offline (HF_HUB_OFFLINE set)" in message
        assert f"{WINO.repo_id}@{WINO.revision}" in message
        staging = home / "winoground" / STAGING / "data"
        assert f"into {staging}" in message
        assert hub.requests == []
        # the manual route: files put where the message says are used, still offline
        (staging / "data").mkdir(parents=True, exist_ok=True)
        (staging / PARQUET).write_bytes(wino.files[PARQUET])
        assert fetch_benchmark("winoground", progress=False)[0].status == "fetched"
        assert hub.requests == []
    record = benchmark_state(benchmark_sources("winoground")).parts["data"].record
    assert record["files"][PARQUET]["checked_against"].startswith("not checked")


def test_a_file_that_differs_from_the_listing_is_deleted(hub, home, monkeypatch):
    spec = benchmark_sources("spec").parts[0].source
    repo = hub.add_repo(spec.repo_id, {"data.zip": b"x" * 5000}, revision=spec.revision)
    original = repo.entry

    def lying_entry(path):  # the listing announces other bytes than those served
        entry = original(path)
        entry["lfs"] = dict(entry["lfs"], oid="0" * 64)
        return entry

    monkeypatch.setattr(repo, "entry", lying_entry)
    with pytest.raises(FetchIncomplete, match="the hub lists 0000"):
        fetch_benchmark("spec", progress=False)
    assert not (home / "spec" / "data.zip").exists()
    assert benchmark_state(benchmark_sources("spec")).status == "absent"
