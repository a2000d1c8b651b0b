"""The demo as a plan: the bundled ``plan.yaml`` (every stage a list of ordinary ``spotdiff`` commands)
with the vars of a profile and seed.

:func:`plan` returns the stages of one demo run in dependency order; :func:`plan_file` the plan file a
user can copy, edit and run with ``spotdiff run`` (``spotdiff demo --plan``); :func:`stage_results`
reads what each stage wrote (metrics, training summaries, alpha curves) for the findings.
"""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

from spotdiff.benchmarks.spec import SPEC_K
from spotdiff.demo.profiles import CLIP_MODELS, FINETUNES, DemoConfig
from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl
from spotdiff.plans import Stage
from spotdiff.plans.file import parse_plan

#: the demo's plan file, shipped with the package
PLAN_FILE = "plan.yaml"


def plan_vars(config: DemoConfig) -> dict[str, Any]:
    """The plan's vars for a profile, seed and worker count (the data sets use seed + 1 ... seed + 5;
    the ungrouped fine-tunes see as many image-caption pairs per step as those with SPEC cases)."""
    p, s = config.profile, config.seed
    pairs_per_case = sum(SPEC_K.values()) / len(SPEC_K)  # anchors per SPEC case, on average
    return {
        "profile": p.name,
        "seed": s,
        "seed_heldout_spec": s + 1,
        "seed_train_spec": s + 2,
        "seed_heldout_eqben": s + 3,
        "seed_heldout_aro": s + 4,
        "seed_heldout_zeroshot": s + 5,
        "workers": config.workers,
        "image_size": p.image_size,
        "corpus_n": p.corpus_n,
        "spec_test_n": p.spec_test_n,
        "spec_train_n": p.spec_train_n,
        "eqben_n": p.eqben_n,
        "aro_n": p.aro_n,
        "zs_n": p.zs_n,
        "base_steps": p.base_steps,
        "base_batch": p.base_batch,
        "base_lr": p.base_lr,
        "base_warmup": p.base_warmup,
        "ft_steps": p.ft_steps,
        "ft_batch": p.ft_batch,
        "plain_batch": p.ft_batch + round(p.ft_cases * pairs_per_case),
        "ft_cases": p.ft_cases,
        "ft_lr": p.ft_lr,
        "ft_warmup": p.ft_warmup,
        "ft_eval_every": p.ft_eval_every,
        "cap_steps": p.cap_steps,
        "cap_batch": p.cap_batch,
        "cap_lr": p.cap_lr,
        "n_boot": p.n_boot,
    }


def _template() -> str:
    return files("spotdiff.demo").joinpath(PLAN_FILE).read_text(encoding="utf-8")


def plan(config: DemoConfig) -> list[Stage]:
    """The stages of a demo run, in an order that respects their dependencies."""
    return parse_plan(_template(), source=f"spotdiff/demo/{PLAN_FILE}", overrides=plan_vars(config)).stages


def plan_file(config: DemoConfig) -> str:
    """The bundled plan file with its ``vars`` set for ``config`` (comments kept), for ``spotdiff run``."""
    values = plan_vars(config)
    out, in_vars = [], False
    for line in _template().splitlines():
        if line.startswith("vars:"):
            in_vars = True
        elif in_vars and not line.startswith("  "):
            in_vars = False
        match = re.match(r"^  (\w+): +\S+(?: +(#.*))?$", line) if in_vars else None
        if match and match.group(1) in values:
            name, comment = match.groups()
            line = f"  {name}: {values[name]}" + (f"  {comment}" if comment else "")
        out.append(line)
    return "\n".join(out).replace(
        "# The vars below are the full profile with seed 0.",
        f"# The vars below are the {config.profile.name} profile with seed {config.seed}.",
    ) + "\n"


def stage_results(out: Path) -> dict[str, dict]:
    """What the stages of a demo folder wrote, read from their outputs (not from the runner's records,
    so a plan run by ``spotdiff run`` gives the same findings): per stage name, its results."""
    results: dict[str, dict] = {}
    for model in CLIP_MODELS:
        keys = ["spec", "cls", "eqben", *(["cls_attr"] if model == "base" else [])]
        results[f"eval-{model}"] = {k: _metrics_file(out / f"evals/{model}-{k.replace('_', '-')}") for k in keys}
    results["train-base"] = _train_summary(out / "models/base")
    for name, _ in FINETUNES:
        folder = out / f"models/ft-{name}"
        results[f"train-ft-{name}"] = {**_train_summary(folder), "retention": _retention(folder)}
    results["train-captioner"] = _json(out / "models/captioner/captioner_train.json", summary=True)
    for name in ("eqben", "aro"):
        results[f"vgpt-{name}"] = _debias_file(out / f"evals/vgpt-{name}")
    return results


def _json(path: Path, summary: bool = False) -> dict:
    if not path.is_file():
        raise DataError(f"{path.name} is missing (has its demo stage run?); run `spotdiff demo` first", file=path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if summary:
        data = {k: v for k, v in data.items() if k not in ("losses",)}
    return data


def _metrics_file(folder: Path) -> dict:
    data = _json(folder / "metrics.json")
    return {"run_id": data.get("run_id"), "n_cases": data.get("n_cases"), "metrics": data.get("metrics", {})}


def _debias_file(folder: Path) -> dict:
    """What ``spotdiff eval --debias`` wrote: per variant its run id and metrics, alpha*, the prior."""
    data = _json(folder / "metrics.json")
    deb = data.get("debias") or {}
    cv = {k: v for k, v in (deb.get("cross_validation") or {}).items() if not isinstance(v, list)}
    return {
        "protocol": data.get("protocol"),
        "metric": deb.get("metric"),
        "n_cases": data.get("n_cases"),
        "load_report": data.get("load_report"),
        "alpha_tuned": deb.get("alpha"),
        "alpha_star_all": deb.get("alpha_star_all"),
        "cross_validation": cv,
        "prior": deb.get("prior"),
        "variants": {
            name: {"run_id": (deb.get("run_ids") or {}).get(name), "metrics": metrics}
            for name, metrics in (deb.get("variants") or {}).items()
        },
    }


def _retention(folder: Path) -> dict:
    """Per evaluated set, the run ids at the first and the last evaluation (``OUT/eval_log.jsonl``)."""
    log = folder / "eval_log.jsonl"
    rows = [row for _, row in iter_jsonl(log)]
    out: dict[str, dict] = {}
    for row in sorted(rows, key=lambda r: r["step"]):
        entry = out.setdefault(row["label"], {"start": row["run_id"], "start_step": row["step"]})
        entry.update(end=row["run_id"], end_step=row["step"])
    return out


def _train_summary(folder: Path) -> dict:
    data = _json(folder / "train_summary.json")
    log = folder / "train_log.jsonl"
    first = None
    if log.is_file():
        first = next((row.get("loss") for _, row in iter_jsonl(log)), None)
    return {
        "steps": data.get("step"),
        "first_loss": first,
        "final_loss": data.get("final_loss"),
        "steps_per_s": data.get("steps_per_s"),
    }
