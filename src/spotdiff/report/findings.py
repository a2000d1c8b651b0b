"""A demo folder's findings (``findings.json``, written by ``spotdiff demo``) as the report's summary.

Each finding is a claim, whether it reproduced (``holds``) and the numbers behind it: the paired
comparisons it records (difference with its 95% CI, p-value, test, cases and units) or, where it
has none, the values with their 95% CIs. The file is read as data; a finding without a claim or a
``holds`` flag is an error naming the file and the finding.

>>> view = finding_view("x", {"holds": True, "claim": "A beats B",
...     "comparison": {"difference": 4.0, "ci95": [1.0, 7.0], "p_value": 0.01, "test": "mcnemar-exact",
...                    "n_cases": 50, "n_units": 50, "scope": "all", "metric": "acc"}})
>>> view.numbers
['comparison: acc +4.0 [+1.0, +7.0] points, p = 0.01 (mcnemar-exact; all; 50 cases, 50 units)']
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotdiff.errors import DataError

#: Numbers listed per finding; the rest are counted and left to findings.json.
MAX_NUMBERS = 10


@dataclass
class FindingView:
    """One finding as the summary shows it."""

    name: str
    claim: str
    holds: bool
    numbers: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    more: int = 0  # numbers not listed
    run_ids: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # every key below the finding, for the section order


def _walk(obj: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict]]:
    """Every dict below ``obj`` with its key path (lists indexed), outermost first."""
    if isinstance(obj, dict):
        yield path, obj
        for k, v in obj.items():
            yield from _walk(v, (*path, str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, (*path, str(i)))


def _ci(ci: Any, signed: bool) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return ""
    spec = "+.1f" if signed else ".1f"
    return f" [{format(float(ci[0]), spec)}, {format(float(ci[1]), spec)}]"


def _comparison(path: str, c: dict) -> str:
    return (
        f"{path}: {c.get('metric', '')} {float(c['difference']):+.1f}{_ci(c.get('ci95'), True)} points, "
        f"p = {float(c['p_value']):.3g} ({c.get('test', '?')}; {c.get('scope', 'all')}; "
        f"{c.get('n_cases', '?')} cases, {c.get('n_units', '?')} units)"
    )


def finding_view(name: str, finding: dict, source: str = "findings.json") -> FindingView:
    """One finding's claim, verdict and numbers.

    Args:
        name: the finding's key.
        finding: its record (``holds``, ``claim`` and the numbers).
        source: the file it comes from, for errors.
    """
    for key, kind in (("holds", bool), ("claim", str)):
        if not isinstance(finding.get(key), kind):
            raise DataError(f"missing or not a {kind.__name__}", file=source, record=name, field=key)
    comparisons, entries, run_ids, keys = [], [], [], []
    for path, d in _walk(finding):
        keys += [str(k) for k in d]
        label = " / ".join(path) or name
        if isinstance(d.get("run_id"), str):
            run_ids.append(d["run_id"])
        if isinstance(d.get("difference"), (int, float)) and isinstance(d.get("p_value"), (int, float)):
            comparisons.append((label, d))
        elif isinstance(d.get("value"), (int, float)) and "ci95" in d:
            entries.append(f"{label}: {float(d['value']):.1f}{_ci(d.get('ci95'), False)}")
    numbers = [_comparison(label, c) for label, c in comparisons] or entries
    tests = sorted({str(c.get("test")) for _, c in comparisons if c.get("test")})
    if not comparisons and entries:
        tests = ["95% bootstrap intervals of single runs compared"]
    return FindingView(
        name, finding["claim"], finding["holds"], numbers[:MAX_NUMBERS], tests, max(0, len(numbers) - MAX_NUMBERS),
        run_ids, keys,
    )  # fmt: skip


def read_findings(path: str | Path) -> tuple[list[FindingView], str]:
    """The findings of a ``findings.json`` file, in file order, and its note (e.g. on the quick profile).

    Args:
        path: the file.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read findings: {exc}", file=path) from exc
    findings = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(findings, dict):
        raise DataError("missing or not an object", file=path, field="findings")
    views = []
    for name, finding in findings.items():
        if not isinstance(finding, dict):
            raise DataError("not an object", file=path, record=name)
        views.append(finding_view(name, finding, str(path)))
    return views, str(data.get("note") or "")


def findings_order(views: Sequence[FindingView], benchmark_of: dict[str, str], benchmarks: Sequence[str]) -> list[str]:
    """The benchmarks in the order the findings name them (by their runs, or keys such as
    ``eqben_group``), then the others in their given order.

    Args:
        views: the findings.
        benchmark_of: run id -> benchmark, for the report's runs.
        benchmarks: the report's benchmarks.
    """
    order: list[str] = []
    for v in views:
        named = [benchmark_of[r] for r in v.run_ids if r in benchmark_of]
        named += [b for k in v.keys for b in benchmarks if k == b or k.startswith(f"{b}_")]
        order += named
    return list(dict.fromkeys([*order, *benchmarks]))
