"""Short, distinct labels for the runs of a report: what tells a run apart from the others.

A model spec ``family:path/to/name [variant]`` gives the name (the last path part, more parts when
two paths end alike), the family (only when two families share a name), the variant in brackets
(``raw``, ``alpha=1``) and the loader options that differ between runs of the same model on the same
benchmark. Runs that still read alike (the same model, options, benchmark and subset run twice) get
a run id suffix. Labels are never truncated; :func:`run_labels` guarantees that two runs share a
label only when they are the same model with the same options on different benchmarks or subsets.

>>> runs = [RunKey("a1", "vgpt:models/captioner [raw]"), RunKey("b2", "vgpt:models/captioner [alpha=1]")]
>>> run_labels(runs)
{'a1': 'captioner raw', 'b2': 'captioner alpha=1'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_SPEC = re.compile(r"^(?:(?P<family>[A-Za-z0-9_.-]+):)?(?P<rest>.*?)\s*(?:\[(?P<variant>[^\]]*)\])?\s*$")


@dataclass(frozen=True)
class RunKey:
    """What a label is made from: the run id, its model spec, benchmark, subset and loader options."""

    run_id: str
    model: str
    benchmark: str = ""
    subset: str | None = None
    options: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class _Spec:
    family: str
    rest: str
    parts: tuple[str, ...]
    variant: str


def parse_spec(model: str) -> _Spec:
    """A model spec's family, path (as parts) and bracketed variant.

    >>> parse_spec("hf-clip:/runs/ft-hn/final [tuned]")
    _Spec(family='hf-clip', rest='/runs/ft-hn/final', parts=('runs', 'ft-hn', 'final'), variant='tuned')
    """
    m = _SPEC.match(model)
    family, rest, variant = (
        (m.group("family") or "", m.group("rest"), m.group("variant") or "") if m else ("", model, "")
    )
    parts = tuple(p for p in re.split(r"[/\\]", rest) if p) or (rest or family or model,)
    return _Spec(family, rest, parts, variant.strip())


def _names(specs: Mapping[str, _Spec]) -> dict[str, str]:
    """Model spec -> its shortest path tail that no other path shares, with the family where two
    families share that tail."""
    names: dict[str, str] = {}
    for model, s in specs.items():
        depth = 1
        others = [o for o in specs.values() if o.rest != s.rest]
        while depth < len(s.parts) and any(o.parts[-depth:] == s.parts[-depth:] for o in others):
            depth += 1
        names[model] = "/".join(s.parts[-depth:])
    out = {}
    for model, s in specs.items():
        families = {specs[m].family for m in specs if names[m] == names[model]}
        out[model] = f"{s.family} {names[model]}" if len(families) > 1 and s.family else names[model]
    return out


def _distinct_options(runs: Sequence[RunKey]) -> dict[str, tuple[str, ...]]:
    """Run id -> its ``key=value`` options that differ from another run of the same model and benchmark."""
    groups: dict[tuple[str, str], list[RunKey]] = {}
    for r in runs:
        groups.setdefault((r.model, r.benchmark), []).append(r)
    out: dict[str, tuple[str, ...]] = {}
    for peers in groups.values():
        keys = {k for p in peers for k in p.options}
        differ = sorted(k for k in keys if len({str(p.options.get(k)) for p in peers}) > 1)
        for r in peers:
            out[r.run_id] = tuple(f"{k}={r.options[k]}" for k in differ if k in r.options)
    return out


def _with_ids(labels: dict[str, str], runs: Sequence[RunKey]) -> dict[str, str]:
    """Add the shortest run id prefix (6 characters or more) to each label that two runs still share
    on the same benchmark and subset, or that two different model specs share. (Runs of one spec that
    share a label also share its differing options: the label holds them.)"""
    by_label: dict[str, list[RunKey]] = {}
    for r in runs:
        by_label.setdefault(labels[r.run_id], []).append(r)
    out = dict(labels)
    for label, group in by_label.items():
        places = [(r.benchmark, r.subset) for r in group]
        if len(set(places)) == len(places) and len({r.model for r in group}) == 1:
            continue
        n = 6
        while len({r.run_id[:n] for r in group}) < len(group) and n < max(len(r.run_id) for r in group):
            n += 1
        for r in group:
            out[r.run_id] = f"{label} #{r.run_id[:n]}"
    return out


def run_labels(runs: Sequence[RunKey]) -> dict[str, str]:
    """Run id -> a short label: name, differing family, variant and differing options, then a run
    id suffix where runs would still read alike.

    Args:
        runs: the report's runs (a run id given twice counts once).

    >>> run_labels([RunKey("r1", "m", "b", options={"alpha": 0}), RunKey("r2", "m", "b", options={"alpha": 1})])
    {'r1': 'm alpha=0', 'r2': 'm alpha=1'}
    >>> run_labels([RunKey("abcdef01", "hf-clip:m"), RunKey("abcdef02", "hf-clip:m")])
    {'abcdef01': 'm #abcdef01', 'abcdef02': 'm #abcdef02'}
    """
    runs = list({r.run_id: r for r in runs}.values())
    specs = {r.model: parse_spec(r.model) for r in runs}
    names = _names(specs)
    options = _distinct_options(runs)
    labels = {}
    for r in runs:
        words = [names[r.model], specs[r.model].variant, *options[r.run_id]]
        labels[r.run_id] = " ".join(w for w in words if w)
    clash: dict[str, set[str]] = {}
    for r in runs:
        clash.setdefault(labels[r.run_id], set()).add(r.model)
    for r in runs:  # two specs that read alike (e.g. "a [b]" and "a b"): the whole spec
        if len(clash[labels[r.run_id]]) > 1:
            labels[r.run_id] = " ".join(w for w in (r.model, *options[r.run_id]) if w)
    return _with_ids(labels, runs)
