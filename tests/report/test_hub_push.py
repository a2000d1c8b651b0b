"""``eval --push-to-hub``: a run's metrics, per-case records and dataset card committed through
``huggingface_hub`` to the loopback hub server, then read back with ``hf_hub_download``; a push that
cannot succeed is refused before the evaluation, and one that fails after it is one line, the run kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff.cli import main
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.naming import safe_name
from spotdiff.report.hub import push_run
from spotdiff.testing.formats import write_winoground
from spotdiff.testing.hub_server import HubServer, hub_environment
from spotdiff.testing.tiny_models import make_tiny_clip


@pytest.fixture(autouse=True)
def token(monkeypatch, tmp_path):
    """A hub token in HF_TOKEN (the loopback hub takes any as user ``me``'s write token), and no saved login."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-token"))


def test_eval_pushes_metrics_scores_and_card(tmp_path, capsys):
    from huggingface_hub import hf_hub_download

    clip, data, out = make_tiny_clip(tmp_path / "clip"), write_winoground(tmp_path / "wino", n=2), tmp_path / "out"
    with HubServer() as hub, hub_environment(hub.url):
        args = ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "winoground", "--data", str(data),
                "--out", str(out), "--no-store", "--no-cache", "--n-boot", "0", "--workers", "0",
                "--push-to-hub", "me/results"]  # fmt: skip
        assert main(args) == 0
        repo = hub.repos[("dataset", "me/results")]
        assert repo.commits == [f"spotdiff: hf-clip:{clip} on winoground"]
        (folder,) = {p.rsplit("/", 1)[0] for p in repo.files if p != "README.md"}
        for name in ("metrics.json", "scores.jsonl"):
            path = hf_hub_download("me/results", f"{folder}/{name}", repo_type="dataset", cache_dir=tmp_path / "dl")
            assert Path(path).read_bytes() == (out / name).read_bytes()
        card = repo.files["README.md"].decode()
        metrics = json.loads((out / "metrics.json").read_text())
        assert card.startswith("---\ntags: [spotdiff, evaluation]\n---\n") and folder in card
        assert json.dumps(metrics["model_identity"], indent=2, sort_keys=True).splitlines()[1] in card
        assert repo.revision in capsys.readouterr().out  # the commit URL is printed
        push_run(out, "me/results")  # a second run (or a re-push) is a second commit to the same repository
        assert len(repo.commits) == 2
        (out / "scores.jsonl").unlink()
        with pytest.raises(ConfigError, match=r"missing .*scores\.jsonl"):
            push_run(out, "me/results")


def test_runs_push_sends_a_stored_run(tmp_path, capsys):
    clip, data, store = (
        make_tiny_clip(tmp_path / "clip"),
        write_winoground(tmp_path / "wino", n=2),
        tmp_path / "runs.sqlite",
    )
    args = ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "winoground", "--data", str(data),
            "--store", str(store), "--no-cache", "--n-boot", "0", "--workers", "0"]  # fmt: skip
    assert main(args) == 0
    (run,) = RunStore(store).runs()
    with HubServer() as hub, hub_environment(hub.url):
        assert main(["runs", run.id[:6], "--store", str(store), "--push-to-hub", "me/results"]) == 0
        files = hub.repos[("dataset", "me/results")].files
    metrics = json.loads(files[f"winoground/hf-clip_{safe_name(str(clip))}/{run.id}/metrics.json"])
    assert metrics["metrics"] == run.metrics and metrics["model_identity"] == run.model_identity
    units = files[f"winoground/hf-clip_{safe_name(str(clip))}/{run.id}/units.jsonl"].decode().splitlines()
    assert [json.loads(u)["unit_id"] for u in units] == [u["unit_id"] for u in RunStore(store).units(run.id)]
    assert len(units) == 2 and "## Provenance" in files["README.md"].decode()
    assert main(["runs", "--store", str(store), "--push-to-hub", "me/results"]) == 2  # which run?
    assert "give its id" in capsys.readouterr().err


def eval_args(tmp_path: Path, out: Path, *extra: str) -> list[str]:
    clip, data = make_tiny_clip(tmp_path / "clip"), write_winoground(tmp_path / "wino", n=2)
    return ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "winoground", "--data", str(data), "--out", str(out),
            "--no-cache", "--n-boot", "0", "--workers", "0", *extra]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no token", "--push-to-hub me/results: no hub token; set HF_TOKEN to a token with write access"),
        ("offline", "--push-to-hub me/results: offline mode is on (HF_HUB_OFFLINE or SPOTDIFF_OFFLINE)"),
        ("refused token", "--push-to-hub me/results: checking the token: the hub at {hub} answered 401"),
        ("read-only token", "--push-to-hub me/results: the token is read-only"),
        ("other namespace", "--push-to-hub other/results: the token's user me can write to me, lab, not other"),
        ("unreachable", "--push-to-hub me/results: checking the token: the hub at {dead} cannot be reached"),
        ("bad repo id", "--push-to-hub 'me/results/x' is not a repository id"),
    ],
)
def test_a_push_that_cannot_succeed_is_refused_before_the_evaluation(case, message, tmp_path, capsys, monkeypatch):
    out, repo = tmp_path / "out", {"other namespace": "other/results", "bad repo id": "me/results/x"}.get(case)
    args = eval_args(tmp_path, out, "--no-store", "--push-to-hub", repo or "me/results")
    with HubServer() as hub, HubServer() as dead:
        dead_url = dead.url
    with HubServer() as hub, hub_environment(dead_url if case == "unreachable" else hub.url, offline=case == "offline"):
        hub.tokens, hub.orgs = {"hf_test_token": ("me", "write")}, ("lab",)
        if case == "no token":
            monkeypatch.delenv("HF_TOKEN")
        elif case == "refused token":
            monkeypatch.setenv("HF_TOKEN", "hf_unknown")
        elif case == "read-only token":
            hub.tokens = {"hf_test_token": ("me", "read")}
        assert main(args) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("spotdiff")]  # one line
    assert line.startswith(f"spotdiff eval: error: {message.format(hub=hub.url, dead=dead_url)}")
    assert not out.exists()  # refused before the evaluation: nothing ran, nothing written
    assert not hub.repos


def test_a_push_that_fails_after_the_run_is_one_line_and_the_run_stays(tmp_path, capsys):
    out, store = tmp_path / "out", tmp_path / "runs.sqlite"
    with HubServer() as hub, hub_environment(hub.url):
        hub.upload_errors = [(403, "This repository is disabled")]
        assert main(eval_args(tmp_path, out, "--store", str(store), "--push-to-hub", "me/results")) == 2
        (run,) = RunStore(store).runs()
        (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("spotdiff")]
        assert line == (f"spotdiff eval: error: pushing to me/results failed: the hub at {hub.url} answered 403 "
                        f"(403 Forbidden: This repository is disabled.); the run's files stay in {out}: "
                        f"`spotdiff runs {run.id} --push-to-hub me/results` pushes it")  # fmt: skip
        assert (out / "metrics.json").is_file() and (out / "scores.jsonl").is_file()
        assert main(["runs", run.id, "--store", str(store), "--push-to-hub", "me/results"]) == 0  # as it said
        assert len(hub.repos[("dataset", "me/results")].commits) == 1
