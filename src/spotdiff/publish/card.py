"""What a published set says about itself: the declaration spotdiff rebuilds its cases from (``spotdiff.yaml``),
and the dataset card (``README.md``) whose YAML front matter declares its licence, task categories and configs
(``huggingface_hub``'s ``DatasetCardData``), and whose text gives its provenance and how to evaluate it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from spotdiff.benchmarks.metadata import BenchmarkMetadata
from spotdiff.publish.shards import SPLIT, Config
from spotdiff.version import __version__

#: The task categories of a set, by the media its cases hold (the hub's task names).
TASKS = {"images": ["image-to-text", "text-to-image"], "videos": ["video-text-to-text"]}
#: The keys of an engine's summary that name the models it ran (shown under "Models").
MODEL_KEYS = ("model", "weights", "llm", "pipeline")


class _Dumper(yaml.SafeDumper):
    """Plain YAML, as a declaration must be: no anchors or aliases, multi-line texts as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_Dumper.add_representer(
    str, lambda dump, text: dump.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)
)


def declaration(meta: BenchmarkMetadata, *, name: str, engine: str, configs: list[Config], kind: str, prompts: bool,
                license: str) -> str:  # fmt: skip
    """``spotdiff.yaml``: the declaration reading the shards back to the cases they were written from (the format's
    paper, protocols, main score and groupings; the configs in the cases' order).

    Args:
        meta: the metadata of the format the set was written in (the built-in benchmark that read it).
        name: the declared benchmark's name.
        engine: the synthesis engine.
        configs: the configs written, in order.
        kind: ``images`` or ``videos``.
        prompts: whether the rows hold prompt templates.
        license: the set's licence.
    """
    cases: dict[str, Any] = {"id": "{{ id }}", "subset": "{{ subset }}"}
    if kind == "videos":
        cases |= {"videos": "{{ videos }}", "window": {"start": "{{ starts }}", "end": "{{ ends }}"}}
    else:
        cases["images"] = "{{ images }}"
    cases |= {"texts": "{{ texts }}", "truth": {"matrix": "{{ truth }}"}, "roles": "{{ roles }}", "tags": "{{ tags }}"}
    if prompts:
        cases["prompts"] = "{{ prompts }}"
    decl: dict[str, Any] = {
        "spotdiff": 1, "name": name, "title": f"{meta.title}: a set synthesized by spotdiff synth {engine}",
        "description": f"synthesized by `spotdiff synth {engine}` in the format of {meta.description}",
        "paper": meta.paper, "reference": meta.reference, "citation": meta.citation, "license": license,
        "protocols": list(meta.protocols), "main_score": list(meta.main_score),
        "subsets": list(meta.subsets) or [c.subset for c in configs],
    }  # fmt: skip
    if meta.groups:
        decl |= {"groups": {g: list(m) for g, m in meta.groups}, "groups_source": meta.groups_source}
    if meta.ties:
        decl["ties"] = meta.ties
    decl |= {"data": [{"path": f"{c.name}/{SPLIT}-*.parquet"} for c in configs], "cases": cases}
    head = "# The declaration spotdiff reads this set with (docs/declared.md): spotdiff eval --benchmark hf:ORG/NAME\n"
    return head + yaml.dump(decl, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)


def card(meta: BenchmarkMetadata, *, repo: str, record: dict, configs: list[Config], kind: str, license: str,
         review: dict[str, Any]) -> str:  # fmt: skip
    """``README.md``: front matter (licence, task categories, tags, the configs with their data files, one per
    subset and ``all``) and the text: what the set is, how to evaluate it, its provenance and review.

    Args:
        meta: the format's metadata.
        repo: the dataset repository (``ORG/NAME``).
        record: the synthesis run's ``synth.json``.
        configs: the configs written, in order.
        kind: ``images`` or ``videos``.
        license: the set's licence.
        review: :func:`review_record`'s summary of the review sheets.
    """
    from huggingface_hub import DatasetCardData

    every = [f for c in configs for f in c.files]
    files = [{"config_name": "all", "default": True, "data_files": [{"split": SPLIT, "path": every}]}]
    files += [{"config_name": c.name, "data_files": [{"split": SPLIT, "path": f"{c.name}/{SPLIT}-*.parquet"}]}
              for c in configs]  # fmt: skip
    engine, total = record["engine"], sum(c.cases for c in configs)
    data = DatasetCardData(license=license, task_categories=TASKS[kind], tags=["spotdiff", "minimal-pairs", engine],
                           pretty_name=f"{repo} (spotdiff synth {engine})", configs=files)  # fmt: skip
    lines = [
        "---", data.to_yaml(), "---", f"# {repo}", "",
        f"{total} cases synthesized by `spotdiff synth {engine}` (spotdiff {record.get('spotdiff', __version__)}) "
        f"in the format of {meta.description}.", "",
        "| config (subset) | cases |", "| --- | --- |", *(f"| `{c.name}` ({c.subset}) | {c.cases} |" for c in configs),
        "", "## Evaluate it", "", "```bash",
        f"spotdiff eval --model MODEL --benchmark hf:{repo}        # hf:{repo}@REVISION pins a commit", "```", "",
        "```python", "import datasets", "",
        f'cases = datasets.load_dataset("{repo}", "{configs[0].name}", split="{SPLIT}")', "```", "",
        "`spotdiff.yaml` is the declaration spotdiff rebuilds the cases from (ids, subsets, images or videos, texts, "
        "truth, roles, tags), with the format's protocols and main score "
        f"(`{meta.main_score[1]}` of `{meta.main_score[0]}`).", "",
        *_provenance(record), *_review(review),
        "## Citation of the format", "", "```bibtex", meta.citation.strip(), "```", "",
    ]  # fmt: skip
    return "\n".join(lines)


def _provenance(record: dict) -> list[str]:
    """The engine, its options (the seed among them), library versions and the models it ran (synth.json)."""
    options = record.get("options", {})
    summary = record.get("summary", {})
    models = {k: v for k, v in summary.items() if any(m in k for m in MODEL_KEYS)}
    lines = ["## Provenance", "", f"Engine `{record['engine']}`; seed `{options.get('seed')}`; options:", ""]
    lines += [f"- `{k}`: `{json.dumps(v)}`" for k, v in options.items()]
    versions = {k: v for k, v in record.items() if k not in ("engine", "options", "summary")}
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".", ""]
    if models:
        lines += ["Models (identities and weight digests as the engine recorded them):", "", "```json",
                  json.dumps(models, indent=2, sort_keys=True), "```", ""]  # fmt: skip
    lines += ["The run's whole record (`synth.json`):", "", "```json", json.dumps(record, indent=2), "```", ""]
    return lines


def review_record(folder: Path) -> dict[str, Any]:
    """The review of a synthesized folder: its sheets (``review.csv``, ``review.<name>.csv``), the reviewers, and
    with two or more of them their agreement (:func:`spotdiff.review.agreement.agreement`)."""
    from spotdiff.review.agreement import agreement
    from spotdiff.review.sheet import CSV_NAME, reviewer_sheets

    sheets = reviewer_sheets(folder)
    out: dict[str, Any] = {"sheets": sorted(p.name for p in ([folder / CSV_NAME] if (folder / CSV_NAME).is_file()
                                                             else []) + list(sheets.values())),
                           "reviewers": list(sheets), "agreement": None}  # fmt: skip
    if len(sheets) >= 2:
        found = agreement(folder)
        out["agreement"] = {k: found[k] for k in ("method", "kappa", "observed", "compared", "accepted")}
    return out


def _review(review: dict[str, Any]) -> list[str]:
    if not review["sheets"]:
        return ["## Review", "", "No review sheet: the engine's output as written.", ""]
    lines = ["## Review", "", f"Sheets (under `review/`): {', '.join(f'`{s}`' for s in review['sheets'])}; reviewers: "
             f"{', '.join(review['reviewers']) or 'none'}.", ""]  # fmt: skip
    if review["agreement"] is not None:
        a = review["agreement"]
        kappa = "undefined" if a["kappa"] is None else f"{a['kappa']:.3f}"
        observed = "-" if a["observed"] is None else f"{a['observed']:.3f}"
        lines += [f"Agreement over the {a['compared']} items every reviewer decided: {a['method']} {kappa}, observed "
                  f"agreement {observed}; accepted: {json.dumps(a['accepted'])}.", ""]  # fmt: skip
    return lines
