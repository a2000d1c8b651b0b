"""Share an evaluation run on the Hugging Face hub: its ``metrics.json``, its per-case
``scores.jsonl`` and a dataset card holding the run's provenance, committed to a dataset repository
through ``huggingface_hub`` (lm-evaluation-harness's ``--hf_hub_log_args`` convention: results and
per-sample details in a dataset repo, one folder per run). Usage: docs/outputs.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from spotdiff.errors import ConfigError
from spotdiff.naming import safe_name

__all__ = ["dataset_card", "push_run"]


def dataset_card(metrics: dict, folder: str) -> str:
    """The repository's ``README.md``: YAML metadata, the run's main metrics and its provenance block.

    Args:
        metrics: the run's ``metrics.json``.
        folder: where the run's files are in the repository.
    """
    provenance = {k: metrics.get(k) for k in ("model_identity", "run_config", "data", "environment", "version")}
    overall = metrics.get("metrics", {}).get("all", {})
    lines = [
        "---",
        "tags: [spotdiff, evaluation]",
        "---",
        f"# spotdiff results: {metrics['model']} on {metrics['benchmark']}",
        "",
        f"Protocol `{metrics['protocol']}`, {metrics['n_cases']} cases, run `{metrics.get('run_id')}`; "
        f"files under `{folder}/` (`metrics.json`, per-case `scores.jsonl`; docs/outputs.md of spotdiff).",
        "",
        "| metric | value |",
        "| --- | --- |",
        *(f"| {k} | {v} |" for k, v in overall.items() if not isinstance(v, list | dict)),
        "",
        "## Provenance",
        "",
        "```json",
        json.dumps(provenance, indent=2, sort_keys=True, default=str),
        "```",
        "",
    ]
    return "\n".join(lines)


def push_run(out: str | Path, repo_id: str, *, token: str | None = None, private: bool = False) -> str:
    """Commit the run written to ``out`` to the dataset repository ``repo_id`` (created if needed) as
    ``<benchmark>/<model>/<run>/{metrics.json,scores.jsonl}`` and the card ``README.md``; the commit URL.

    Args:
        out: the run's output folder (``eval --out``).
        repo_id: ``namespace/name`` of a dataset repository.
        token: a hub token (default: ``HF_TOKEN`` or the saved login).
        private: create the repository private.
    """
    from huggingface_hub import CommitOperationAdd, HfApi

    out = Path(out)
    files = [out / "metrics.json", out / "scores.jsonl"]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(f"cannot push run {out}: missing {', '.join(missing)} (push needs eval --out)")
    metrics = json.loads(files[0].read_text(encoding="utf-8"))
    run = metrics.get("run_id") or str(metrics.get("run_config", {}).get("data_digest", "run"))[:12]
    folder = "/".join(safe_name(p) for p in (metrics["benchmark"], metrics["model"], run))
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    operations = [CommitOperationAdd(f"{folder}/{f.name}", str(f)) for f in files]
    operations.append(CommitOperationAdd("README.md", dataset_card(metrics, folder).encode("utf-8")))
    info = api.create_commit(
        repo_id,
        operations,
        repo_type="dataset",
        commit_message=f"spotdiff: {metrics['model']} on {metrics['benchmark']}",
    )
    return str(info.commit_url)
