"""``eval --push-to-hub``: a run's metrics, per-case records and dataset card committed through
``huggingface_hub`` to the loopback hub server, then read back with ``hf_hub_download``."""

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
