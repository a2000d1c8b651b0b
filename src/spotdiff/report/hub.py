"""Share an evaluation run on the Hugging Face hub: its ``metrics.json``, its per-case
``scores.jsonl`` and a dataset card holding the run's provenance, committed to a dataset repository
through ``huggingface_hub`` (lm-evaluation-harness's ``--hf_hub_log_args`` convention: results and
per-sample details in a dataset repo, one folder per run). :func:`check_push` says before a run whether a
push can succeed; a push that fails is one :class:`~spotdiff.errors.ConfigError` line. Usage: docs/outputs.md.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spotdiff.data.download import offline
from spotdiff.data.hub import hub_endpoint
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.jsonio import dumps, write_json, write_jsonl
from spotdiff.naming import safe_name
from spotdiff.urls import redact_url

__all__ = ["check_push", "dataset_card", "hub_call", "push_run", "push_stored_run"]


def check_push(repo_id: str, *, token: str | None = None) -> None:
    """Refuse, before any work, a push to ``repo_id`` that cannot succeed: an invalid repository id, offline
    mode (``HF_HUB_OFFLINE``, ``SPOTDIFF_OFFLINE``), no token, a hub (``HF_ENDPOINT``) that cannot be
    reached or refuses the token, a read-only token, or a namespace the token's user cannot write to.

    Args:
        repo_id: ``namespace/name`` (or ``name``: the token's user's) of a dataset repository.
        token: a hub token (default: ``HF_TOKEN`` or the saved login).
    """
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise ConfigError(f"--push-to-hub {repo_id!r} is not a repository id ({exc}); give namespace/name") from None
    if offline():
        raise ConfigError(f"--push-to-hub {repo_id}: offline mode is on (HF_HUB_OFFLINE or SPOTDIFF_OFFLINE), so "
                          "nothing can be pushed; unset it, or drop --push-to-hub")  # fmt: skip
    token = token or get_token()
    if not token:
        raise ConfigError(f"--push-to-hub {repo_id}: no hub token; set HF_TOKEN to a token with write access, or "
                          "log in with `hf auth login`")  # fmt: skip
    api = HfApi(endpoint=hub_endpoint(), token=token)
    who = hub_call(f"--push-to-hub {repo_id}: checking the token", api.whoami)
    if (who.get("auth", {}).get("accessToken") or {}).get("role") == "read":
        raise ConfigError(f"--push-to-hub {repo_id}: the token is read-only; set HF_TOKEN to one with write access")
    namespace, _, name = repo_id.rpartition("/")
    mine = [who.get("name"), *(org.get("name") for org in who.get("orgs") or [])]
    if namespace and namespace not in mine:
        raise ConfigError(f"--push-to-hub {repo_id}: the token's user {who.get('name')} can write to "
                          f"{', '.join(str(m) for m in mine)}, not {namespace}; push to one of those "
                          f"(e.g. {who.get('name')}/{name})")  # fmt: skip


def hub_call(what: str, call: Callable[[], Any]) -> Any:
    """``call()``, a hub's refusal or an unreachable hub raised as one :class:`ConfigError` line that
    starts with ``what`` and names the endpoint (without a password or query-string key)."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    where = redact_url(hub_endpoint())
    try:
        return call()
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        if status == 401:
            reason += "; set HF_TOKEN to a valid token with write access"
        raise ConfigError(f"{what}: the hub at {where} answered {status} ({reason})") from None
    except (httpx2.HTTPError, OSError) as exc:
        raise ConfigError(f"{what}: the hub at {where} cannot be reached ({type(exc).__name__}: {exc}); "
                          "check HF_ENDPOINT and the network") from None  # fmt: skip


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
        f"files under `{folder}/`: `metrics.json`, and the per-case `scores.jsonl` or per-unit `units.jsonl` "
        "(spotdiff's docs/outputs.md).",
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
    out = Path(out)
    files = [out / "metrics.json", out / "scores.jsonl"]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(f"cannot push run {out}: missing {', '.join(missing)} (push needs eval --out)")
    metrics = json.loads(files[0].read_text(encoding="utf-8"))
    return _commit(metrics, files, repo_id, token=token, private=private)


def push_stored_run(
    store: RunStore, run_id: str, repo_id: str, *, token: str | None = None, private: bool = False
) -> str:
    """Commit a finished run of the run store: its ``metrics.json`` (the run's row: metrics,
    identity, data, environment) and its per-unit records ``units.jsonl``, with the card; the commit URL.

    Args:
        store: the open run store.
        run_id: the run's id (or a unique prefix).
        repo_id: ``namespace/name`` of a dataset repository.
        token: a hub token (default: ``HF_TOKEN`` or the saved login).
        private: create the repository private.
    """
    run = store.get(run_id)
    if run.metrics is None:
        raise ConfigError(f"run {run.id} is {run.status!r}, not finished: only a finished run is pushed")
    metrics = {
        "run_id": run.id, "benchmark": run.benchmark, "subset": run.subset, "model": run.model,
        "protocol": run.protocol, "n_cases": run.n_cases, "metrics": run.metrics, "seed": run.seed,
        "model_identity": run.model_identity, "version": run.version,
        "data": {"path": run.data_path, "digest": run.data_digest, "source": run.info.get("data_source")},
        "environment": run.info.get("environment"), "info": run.info,
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="spotdiff-push-") as tmp:
        files = [
            write_json(Path(tmp) / "metrics.json", metrics),
            write_jsonl(Path(tmp) / "units.jsonl", store.units(run.id), dump=dumps),
        ]
        return _commit(metrics, files, repo_id, token=token, private=private)


def _commit(metrics: dict, files: list[Path], repo_id: str, *, token: str | None, private: bool) -> str:
    """Create ``repo_id`` if needed and commit ``files`` under the run's folder, with the card; a failure
    is one :class:`ConfigError` line."""
    from huggingface_hub import CommitOperationAdd, HfApi

    run = metrics.get("run_id") or str(metrics.get("run_config", {}).get("data_digest", "run"))[:12]
    folder = "/".join(safe_name(p) for p in (metrics["benchmark"], metrics["model"], run))
    api = HfApi(endpoint=hub_endpoint(), token=token)
    operations = [CommitOperationAdd(f"{folder}/{f.name}", str(f)) for f in files]
    operations.append(CommitOperationAdd("README.md", dataset_card(metrics, folder).encode("utf-8")))
    message = f"spotdiff: {metrics['model']} on {metrics['benchmark']}"

    def push() -> str:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        return str(api.create_commit(repo_id, operations, repo_type="dataset", commit_message=message).commit_url)

    return hub_call(f"pushing to {repo_id} failed", push)
