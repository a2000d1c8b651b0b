"""Plan files: a study as YAML stages of ordinary ``spotdiff`` commands (``spotdiff run PLAN.yaml``).

:func:`load_plan` reads and checks a plan file, :func:`dump_plan` writes one; every error names the
file, the stage and the field. The format: docs/plans.md.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spotdiff.errors import DataError
from spotdiff.plans.runner import Stage

_KEYS = {"name", "title", "run", "outputs", "after", "params"}
_TOP = {"name", "vars", "store", "stages"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: The most a plan may hold with its aliases (``*name``) expanded, in characters of its values plus
#: nodes: a plan is a few kilobytes, and anchors nesting anchors (an "alias bomb") expand to gigabytes.
MAX_EXPANDED = 1_000_000

#: The widest or most precise format spec a ``{variable:spec}`` may give (``{v:>1500000000}`` builds gigabytes).
MAX_FORMAT = 1000
#: What a variable is named by in a command: letters, digits and ``_`` (no attribute or index access).
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONVERSIONS: dict[str, Callable[[Any], str]] = {"r": repr, "s": str, "a": ascii}

#: Checks one stage command (argv after ``spotdiff``): None when it can run, else why not.
CommandCheck = Callable[[Sequence[str]], str | None]


@dataclass
class Plan:
    """A parsed plan: its stages in dependency order, the run store they record into, its variables."""

    name: str
    stages: list[Stage]
    store: str = "runs.sqlite"
    vars: dict[str, Any] = field(default_factory=dict)


def parse_plan(
    text: str,
    *,
    source: str = "<plan>",
    overrides: Mapping[str, str] | None = None,
    check: CommandCheck | None = None,
) -> Plan:
    """Parse and check a plan (the format: docs/plans.md); ``overrides`` replace ``vars`` values.

    Args:
        text: the plan's YAML text.
        source: the file name errors name.
        overrides: ``vars`` values given on the command line (``--set name=value``).
        check: checks each stage command (its sub-command is one ``spotdiff`` has), before any runs.
    """
    doc = _load_yaml(text, source)
    if not isinstance(doc, dict):
        raise DataError("a plan is a mapping with a 'stages' list", file=source)
    unknown = set(doc) - _TOP
    if unknown:
        raise DataError(f"unknown keys {sorted(unknown)}; a plan has {sorted(_TOP)}", file=source)
    variables = dict(doc.get("vars") or {})
    if not isinstance(doc.get("vars") or {}, dict):
        raise DataError("must be a mapping of names to values", file=source, field="vars")
    for key, value in (overrides or {}).items():
        if key not in variables:
            raise DataError(f"--set {key}: the plan has no variable {key!r} (it has {sorted(variables)})", file=source)
        variables[key] = type(variables[key])(value) if isinstance(variables[key], (int, float)) else value
    raw = doc.get("stages")
    if not isinstance(raw, list) or not raw:
        raise DataError("must be a non-empty list of stages", file=source, field="stages")
    stages: list[Stage] = []
    seen: set[str] = set()
    budget = [MAX_EXPANDED]  # the characters the plan's commands may still hold, variables in place
    for k, item in enumerate(raw):
        stage = _stage(item, k, source, variables, text, check, budget)
        if stage.name in seen:
            raise DataError("two stages have this name", file=source, record=stage.name, field="name")
        missing = [d for d in stage.deps if d not in seen]
        if missing:
            raise DataError(
                f"runs after {missing}, which are not stages listed before it", file=source, record=stage.name,
                field="after",
            )  # fmt: skip
        seen.add(stage.name)
        stages.append(stage)
    return Plan(str(doc.get("name") or Path(source).stem), stages, str(doc.get("store") or "runs.sqlite"), variables)


def load_plan(path: str | Path, overrides: Mapping[str, str] | None = None, check: CommandCheck | None = None) -> Plan:
    """Read and parse a plan file.

    Args:
        path: the plan file.
        overrides: ``vars`` values given on the command line (``--set name=value``).
        check: checks each stage command (:func:`parse_plan`).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read the plan: {exc}", file=path) from exc
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise DataError(f"line {line}: not UTF-8 text (byte {exc.object[exc.start]:#04x}); save the plan as UTF-8",
                        file=path) from None  # fmt: skip
    return parse_plan(text, source=str(path), overrides=overrides, check=check)


def _load_yaml(text: str, source: str) -> Any:
    """The YAML document of a plan, refused before it is built where its aliases would expand it beyond
    :data:`MAX_EXPANDED` or it nests deeper than Python's recursion limit."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {}, source)
        if size > MAX_EXPANDED:
            raise DataError(
                f"expands to {size:,} characters and nodes with its aliases (*name) in place, more than the "
                f"{MAX_EXPANDED:,} a plan may hold; write the plan out without nesting anchors in anchors",
                file=source,
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise DataError(f"not valid YAML: {exc}", file=source) from exc
    except RecursionError:
        raise DataError("nested too deeply to read; a plan is a mapping of a few levels", file=source) from None
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, sizes: dict[int, int | None], source: str) -> int:
    """Characters of the values plus nodes of ``node`` with every alias expanded; ``sizes`` holds those of
    the nodes counted already (an alias is the node it names: counted once, added wherever it appears)."""
    if id(node) in sizes:
        size = sizes[id(node)]
        if size is None:
            raise DataError(f"line {node.start_mark.line + 1}: an alias (*name) inside the node it names; "
                            "a plan cannot refer to itself", file=source)  # fmt: skip
        return size
    sizes[id(node)] = None  # being counted
    if isinstance(node, yaml.ScalarNode):
        size = 1 + len(node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(item, sizes, source) for item in node.value)
    else:
        size = 1 + sum(_expanded_size(k, sizes, source) + _expanded_size(v, sizes, source) for k, v in node.value)
    sizes[id(node)] = size
    return size


def _stage(
    item: Any,
    index: int,
    source: str,
    variables: Mapping[str, Any],
    text: str,
    check: CommandCheck | None,
    budget: list[int],
) -> Stage:
    record = f"stage {index + 1}"
    if not isinstance(item, dict):
        raise DataError("a stage is a mapping (name, run, outputs, after, title, params)", file=source, record=record)
    unknown = set(item) - _KEYS
    if unknown:
        raise DataError(f"unknown keys {sorted(unknown)}; a stage has {sorted(_KEYS)}", file=source, record=record)
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise DataError("a stage needs a name of letters, digits, '.', '_' or '-'", file=source, record=record,
                        field="name")  # fmt: skip
    run = item.get("run")
    lines = [run] if isinstance(run, str) else run
    if not isinstance(lines, list) or not lines or not all(isinstance(x, str) and x.strip() for x in lines):
        raise DataError("one command or a list of commands", file=source, record=name, field="run")
    commands = []
    for k, line in enumerate(lines):
        try:
            commands.append(shlex.split(_substitute(line, variables, source, name, budget)))
        except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
            if isinstance(exc, DataError):
                raise
            raise DataError(f"line {_run_line(text, index, k)}: {exc} in {line!r}", file=source, record=name,
                            field="run") from None  # fmt: skip
        why = check(commands[-1]) if check is not None else None
        if why is not None:
            raise DataError(f"line {_run_line(text, index, k)}: {why}", file=source, record=name, field="run")
    outputs = item.get("outputs") or []
    after = item.get("after") or []
    for key, value in (("outputs", outputs), ("after", after)):
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise DataError("a list of strings", file=source, record=name, field=key)
    params = item.get("params") or {}
    if not isinstance(params, dict):
        raise DataError("a mapping", file=source, record=name, field="params")
    title = str(item.get("title") or " ".join(commands[0][:2]))
    control = next((c for c in str(item.get("title") or "") if not c.isprintable()), None)
    if control is not None:  # a title is a comment line of plan_commands.sh and a console line
        raise DataError(f"holds a control character ({control!r}); a title is one line of text", file=source,
                        record=name, field="title")  # fmt: skip
    return Stage(name, title, commands, list(outputs), deps=tuple(after), params=dict(params))


def _run_line(text: str, stage: int, command: int) -> int:
    """The line of the plan file where the ``command``-th command of the ``stage``-th stage starts."""

    def value(mapping: yaml.Node, key: str) -> yaml.Node:
        return next(v for k, v in mapping.value if k.value == key)

    run = value(value(yaml.compose(text), "stages").value[stage], "run")
    return (run.value[command] if isinstance(run, yaml.SequenceNode) else run).start_mark.line + 1


def _substitute(line: str, variables: Mapping[str, Any], source: str, stage: str, budget: list[int]) -> str:
    """``line`` with its ``{name}`` fields replaced as ``str.format`` does (a format spec and ``!r``, ``!s``,
    ``!a`` included), bounded: a field names a variable (no attribute or index), its spec holds no field and
    no width or precision above :data:`MAX_FORMAT`, so no piece outgrows its value by more than that; and the
    plan's commands together hold at most :data:`MAX_EXPANDED` characters (``budget``: what is left)."""

    def refuse(why: str) -> DataError:
        return DataError(why, file=source, record=stage, field="run")

    try:
        fields = list(string.Formatter().parse(line))
    except ValueError as exc:
        raise refuse(f"bad {{variable}} in {line!r}: {exc}") from None
    pieces: list[str] = []
    for literal, name, spec, conversion in fields:
        pieces.append(literal)
        if name is not None:
            pieces.append(_field(name, spec or "", conversion, variables, refuse))
        budget[0] -= len(literal) + (len(pieces[-1]) if name is not None else 0)
        if budget[0] < 0:
            raise refuse(f"builds more than {MAX_EXPANDED:,} characters with its variables in place, more than a "
                         "plan may hold")  # fmt: skip
    return "".join(pieces)


def _field(
    name: str, spec: str, conversion: str | None, variables: Mapping[str, Any], refuse: Callable[[str], DataError]
) -> str:
    """One ``{name!conversion:spec}`` field of a command, formatted (see :func:`_substitute`)."""
    shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
    if not _VARIABLE.fullmatch(name):
        raise refuse(f"{shown}: a variable is named by letters, digits and '_'")
    if name not in variables:
        raise refuse(f"uses the undefined variable {name!r}")
    if "{" in spec:
        raise refuse(f"{shown}: a format cannot hold a {{variable}}")
    if any(int(n) > MAX_FORMAT for n in re.findall(r"\d+", spec)):
        raise refuse(f"{shown}: a format wider or more precise than {MAX_FORMAT} characters")
    if conversion is not None and conversion not in _CONVERSIONS:
        raise refuse(f"{shown}: unknown conversion !{conversion} (!r, !s or !a)")
    value = variables[name] if conversion is None else _CONVERSIONS[conversion](variables[name])
    try:
        return format(value, spec)
    except (ValueError, TypeError) as exc:
        raise refuse(f"bad {{variable}} in {shown}: {exc}") from None


def dump_plan(name: str, stages: Sequence[Stage], *, store: str = "runs.sqlite") -> str:
    """A plan file with these stages (commands written out, no variables), for a user to copy and edit.

    Args:
        name: the plan's name.
        stages: its stages.
        store: the run store the stages record into, relative to the plan's folder.
    """
    doc = {
        "name": name,
        "store": store,
        "stages": [
            {
                "name": st.name,
                "title": st.title,
                **({"after": list(st.deps)} if st.deps else {}),
                "run": [shlex.join(c) for c in st.commands] if len(st.commands) > 1 else shlex.join(st.commands[0]),
                "outputs": list(st.outputs),
                **({"params": dict(st.params)} if st.params else {}),
            }
            for st in stages
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)
