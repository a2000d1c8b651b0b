"""A benchmark declared in one YAML file (docs/declared.md): what it is, where its data is, how rows become cases.

The file is data, never code: it is read as YAML without tags (``!function``, ``!!python/...``, even
``!!str``), anchors or aliases, and with no key given twice; every key is checked (an unknown key, a
wrong type or a missing required one is an error naming the file and the key, with the keys allowed);
what it says about the benchmark becomes a :class:`~spotdiff.benchmarks.metadata.BenchmarkMetadata`,
validated as every built-in's is; its values are templates (:mod:`spotdiff.benchmarks.templates`); its
folders lie inside the declaration's folder. :func:`read_declaration` returns the parsed
:class:`Declaration`; :mod:`spotdiff.benchmarks.declared` turns it into a benchmark.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from spotdiff.benchmarks._io import inside
from spotdiff.benchmarks.metadata import BenchmarkMetadata
from spotdiff.benchmarks.sources import Checksum, HubSource, Part, RemoteFile, UrlSource
from spotdiff.benchmarks.tables import FORMATS
from spotdiff.benchmarks.templates import Template
from spotdiff.cases import PROMPT_STYLES, READERS
from spotdiff.errors import DataError

#: The declaration format this code reads (the ``spotdiff`` key).
FORMAT = 1
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
#: The ways a case's truth may be declared (``cases.truth``): ``first`` (the first text goes with every image),
#: ``diagonal`` (image k with text k), or one of the mapping keys.
TRUTH_WORDS = ("first", "diagonal")
TRUTH_KEYS = ("first", "label", "matrix", "cells")
WINDOW_UNITS = ("seconds", "frames")

_TEXT = (str,)
_TEXTS = (str, list)
#: key -> (accepted types, required, what it is); the schema of docs/declared.md, key by key.
TOP: dict[str, tuple[tuple[type, ...], bool]] = {
    "spotdiff": ((int,), True), "name": (_TEXT, True), "title": (_TEXT, True), "description": (_TEXT, True),
    "paper": (_TEXT, True), "reference": (_TEXT, True), "citation": (_TEXT, True), "license": (_TEXT, True),
    "protocols": ((list,), True), "main_score": ((list,), True), "data": ((list, dict), True),
    "cases": ((dict,), True), "reproduces": (_TEXT, False), "ties": (_TEXT, False), "data_notes": (_TEXT, False),
    "subsets": ((list,), False), "groups": ((dict,), False), "groups_source": (_TEXT, False),
    "root": (_TEXT, False), "images": (_TEXT, False), "videos": (_TEXT, False),
}  # fmt: skip
DATA: dict[str, tuple[tuple[type, ...], bool]] = {
    "path": (_TEXTS, False), "folder": (_TEXT, False), "hub": (_TEXT, False), "url": (_TEXT, False),
    "revision": (_TEXT, False), "files": (_TEXTS, False), "config": (_TEXT, False), "split": (_TEXT, False),
    "sha256": (_TEXT, False), "size": ((int,), False), "format": (_TEXT, False), "subset": (_TEXT, False),
    "records": (_TEXT, False), "delimiter": (_TEXT, False), "quoted": ((bool,), False), "gated": ((bool,), False),
}  # fmt: skip
SOURCE_KINDS = ("path", "folder", "hub", "url")
CASES: dict[str, tuple[tuple[type, ...], bool]] = {
    "id": (_TEXT, False), "subset": (_TEXT, False), "images": (_TEXTS, False), "videos": (_TEXTS, False),
    "window": ((dict,), False), "texts": (_TEXTS, True), "truth": ((str, dict), False), "answers": ((dict,), False),
    "roles": ((list, str), False), "tags": ((dict, str), False), "prompt_style": (_TEXT, False),
    "gallery": ((bool,), False), "skip_empty": ((list,), False), "prompts": (_TEXTS, False),
}  # fmt: skip
WINDOW: dict[str, tuple[tuple[type, ...], bool]] = {
    "start": (_TEXT, False), "end": (_TEXT, False), "unit": (_TEXT, False),
}
ANSWERS: dict[str, tuple[tuple[type, ...], bool]] = {
    "choices": (_TEXTS, True), "gold": ((list,), True), "reader": (_TEXT, False), "pairs": (_TEXT, False),
}


class _Loader(yaml.SafeLoader):
    """YAML's safe loader refusing a key given twice in one mapping (YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, file: object) -> Any:
    """``text`` as YAML data: no tag, anchor or alias (each an error naming its line), no key twice.

    Args:
        text: the YAML.
        file: its file, named in errors.

    >>> parse_yaml("a: [1, x]", "d.yaml")
    {'a': [1, 'x']}
    """
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, (yaml.TagToken, yaml.AnchorToken, yaml.AliasToken)):
                what = {yaml.TagToken: "a tag", yaml.AnchorToken: "an anchor", yaml.AliasToken: "an alias"}
                line = token.start_mark.line + 1
                raise DataError(f"{what[type(token)]} at line {line} is refused: a declaration holds plain data "
                                "(no tags such as !function, no anchors or aliases)", file=file)  # fmt: skip
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise DataError(f"not valid YAML: {' '.join(str(exc).split())}", file=file) from None


def _keys(value: Any, schema: dict[str, tuple[tuple[type, ...], bool]], file: Path, where: str) -> dict:
    """``value`` checked to be a mapping of ``schema``'s keys, each of its types, the required ones present."""
    if not isinstance(value, dict):
        raise DataError(f"expected a mapping, got {type(value).__name__}", file=file, field=where or None)
    allowed = ", ".join(schema)
    for key, item in value.items():
        name = f"{where}.{key}" if where else str(key)
        if key not in schema:
            raise DataError(f"unknown key (the keys of {where or 'a declaration'}: {allowed})", file=file, field=name)
        types = schema[key][0]
        if not isinstance(item, types) or (isinstance(item, bool) and bool not in types):
            expected = " or ".join({"str": "a text", "list": "a list", "dict": "a mapping", "int": "an integer",
                                    "bool": "true or false"}[t.__name__] for t in types)  # fmt: skip
            raise DataError(f"expected {expected}, got {type(item).__name__} {item!r:.60}", file=file, field=name)
    for key, (_, required) in schema.items():
        if required and key not in value:
            name = f"{where}.{key}" if where else key
            raise DataError(f"missing required key (the keys of {where or 'a declaration'}: {allowed})",
                            file=file, field=name)  # fmt: skip
    return value


def _texts(value: Any, file: Path, where: str) -> list[str]:
    """A text or a list of texts as a list, each checked to be a text."""
    items = value if isinstance(value, list) else [value]
    for k, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise DataError(f"expected a non-empty text, got {item!r:.60}", file=file, field=f"{where}[{k}]")
    return items


def _templates(value: Any, file: Path, where: str) -> tuple[Template, ...] | Template:
    """A list of templates (one value each), or one template whose value is a list (a list column)."""
    if isinstance(value, list):
        return tuple(Template(t, file, f"{where}[{k}]") for k, t in enumerate(_texts(value, file, where)))
    return Template(_texts(value, file, where)[0], file, where)


@dataclass(frozen=True)
class Source:
    """One entry of ``data``: where its files are (globs relative to the data root) and how they are read.

    Attributes:
        patterns: the files (globs relative to the data root; a ``folder`` entry's folder).
        format: one of :data:`~spotdiff.benchmarks.tables.FORMATS`, or None to go by each file's suffix.
        subset: the subset its rows belong to unless ``cases.subset`` says otherwise.
        records: for a JSON file, the key of the object holding the records.
        delimiter: a delimited file's delimiter (default: ``,`` for CSV, a tab for TSV); quoted: whether its
            cells may be quoted (default: CSV yes, TSV no).
        part: what ``spotdiff data fetch`` fetches for it (a hub or URL entry), else None.
    """

    patterns: tuple[str, ...]
    format: str | None
    subset: str | None
    records: str | None
    delimiter: str | None
    quoted: bool | None
    part: Part | None


def _hub_files(entry: dict, file: Path, where: str) -> tuple[str, ...]:
    """A hub entry's file patterns: ``files``, else ``datasets``' layout of ``config`` and ``split``
    (``data/<split>-*`` for the default config, ``<config>/<split>-*`` for another)."""
    if "files" in entry:
        return tuple(_texts(entry["files"], file, f"{where}.files"))
    if "split" not in entry:
        raise DataError("a hub entry names its files, or its split (and config)", file=file, field=f"{where}.files")
    config = entry.get("config", "default")
    folder = "data" if config == "default" else config
    return (f"{folder}/{entry['split']}-*",)


def _source(entry: Any, k: int, file: Path) -> Source:
    where = f"data[{k}]"
    entry = _keys(entry, DATA, file, where)
    kinds = [key for key in SOURCE_KINDS if key in entry]
    if len(kinds) != 1:
        raise DataError(f"an entry names one of {', '.join(SOURCE_KINDS)} (it names {kinds or 'none'})",
                        file=file, field=where)  # fmt: skip
    kind, part = kinds[0], None
    if kind == "hub":
        patterns = _hub_files(entry, file, where)
        source = HubSource(entry["hub"], entry.get("revision"), patterns, gated=entry.get("gated", False))
        part = Part(f"data-{k}", "both", source, note=f"data entry {k} of the declaration")
    elif kind == "url":
        landing = entry.get("path") or Path(entry["url"].split("?")[0]).name
        if not isinstance(landing, str):
            raise DataError("expected a text (where the file lands)", file=file, field=f"{where}.path")
        check = Checksum.parse(f"sha256:{entry['sha256']}", "the declaration") if "sha256" in entry else None
        remote = RemoteFile(entry["url"], landing, check, entry.get("size"))
        part = Part(f"data-{k}", "both", UrlSource((remote,), origin=entry["url"]), note=f"data entry {k}")
        patterns = (landing,)
    else:
        patterns = tuple(_texts(entry[kind], file, f"{where}.{kind}"))
    fmt = "folder" if kind == "folder" else entry.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}", file=file, field=f"{where}.format")
    return Source(patterns, fmt, entry.get("subset"), entry.get("records"), entry.get("delimiter"),
                  entry.get("quoted"), part)  # fmt: skip


@dataclass(frozen=True)
class Truth:
    """Which text goes with which image (``cases.truth``).

    Attributes:
        kind: ``first`` (the first ``n`` texts go with every image), ``diagonal`` (image k with text k),
            ``label`` (a value per image naming its text: an index from 0, one of ``choices``, or the text
            itself), ``matrix`` (a value holding the whole matrix, rows of 0/1 or true/false), ``cells`` (a
            value per cell, 0/1, true/false or yes/no).
        n: the true texts of ``first``.
        values: the values of ``label`` (one per image), ``matrix`` (one) or ``cells`` (rows of them).
        choices: the names ``label`` values are read against (option letters ``A, B, ...``), in text order.
    """

    kind: str
    n: int = 1
    values: tuple = ()
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answers:
    """The candidate answers of a question case (``cases.answers``): its texts are questions, and ``gold[i][q]``
    is the answer of question ``q`` about image ``i``, one of ``choices`` (two, the first the one the truth
    marks); ``reader`` names how a generated answer is read, ``pairs`` which questions each image is asked."""

    choices: tuple[str, ...] | Template
    gold: tuple[tuple[Template, ...], ...]
    reader: str | None
    pairs: str | None


@dataclass(frozen=True)
class Window:
    """The part of each video a case holds (``cases.window``): from ``start`` to ``end``, in seconds or as frame
    numbers (from 0) at the video's rate; either may be absent (the video's start, its end)."""

    start: Template | None
    end: Template | None
    unit: str


@dataclass(frozen=True)
class CaseSpec:
    """How one row becomes a case (``cases``; docs/declared.md): each field a template or a list of them, a
    single template giving a list column's whole list."""

    id: Template
    subset: Template
    images: tuple[Template, ...] | Template
    videos: tuple[Template, ...] | Template
    window: Window | None
    texts: tuple[Template, ...] | Template
    truth: Truth | None
    answers: Answers | None
    roles: tuple[str, ...] | Template
    tags: tuple[tuple[str, Template], ...] | Template
    prompt_style: str | None
    gallery: bool
    skip_empty: tuple[str, ...]
    prompts: tuple[Template, ...] | Template = ()

    def templates(self) -> list[Template]:
        """Every template, to find the columns the rows must have."""
        out = [self.id, self.subset]
        for value in (self.images, self.videos, self.texts, self.prompts):
            out += list(value) if isinstance(value, tuple) else [value]
        out += [self.roles] if isinstance(self.roles, Template) else []
        if self.window is not None:
            out += [t for t in (self.window.start, self.window.end) if t is not None]
        if self.truth is not None:
            out += [t for t in _flat(self.truth.values) if isinstance(t, Template)]
        if self.answers is not None:
            out += [t for row in self.answers.gold for t in row]
            out += [self.answers.choices] if isinstance(self.answers.choices, Template) else []
        out += [t for _, t in self.tags] if isinstance(self.tags, tuple) else [self.tags]
        return out

    def media_columns(self) -> frozenset[str]:
        """The columns that are an image or a video as they are (their cells may hold encoded bytes)."""
        media = []
        for value in (self.images, self.videos):
            media += list(value) if isinstance(value, tuple) else [value]
        return frozenset(t.column for t in media if t.column is not None)


def _flat(values: Any) -> list:
    if isinstance(values, tuple):
        return [v for item in values for v in _flat(item)]
    return [values]


def _truth(value: Any, file: Path) -> Truth:
    if isinstance(value, str):
        if value not in TRUTH_WORDS:
            raise DataError(f"unknown truth {value!r}; give {' or '.join(TRUTH_WORDS)}, or a mapping with one of "
                            f"{', '.join(TRUTH_KEYS)}", file=file, field="cases.truth")  # fmt: skip
        return Truth(value)
    keys = [k for k in value if k in TRUTH_KEYS]
    extra = [k for k in value if k not in (*TRUTH_KEYS, "choices")]
    if len(keys) != 1 or extra or ("choices" in value and keys != ["label"]):
        raise DataError(f"a truth mapping holds one of {', '.join(TRUTH_KEYS)} (label may add choices); got "
                        f"{', '.join(map(str, value))}", file=file, field="cases.truth")  # fmt: skip
    kind, item, where = keys[0], value[keys[0]], f"cases.truth.{keys[0]}"
    if kind == "first":
        if not isinstance(item, int) or isinstance(item, bool) or item < 1:
            raise DataError(f"expected a count of texts >= 1, got {item!r}", file=file, field=where)
        return Truth("first", n=item)
    if kind == "cells":
        if not isinstance(item, list) or not item or not all(isinstance(r, list) and r for r in item):
            raise DataError("expected rows (one per image) of values (one per text)", file=file, field=where)
        rows = tuple(tuple(Template(t, file, f"{where}[{i}][{j}]") for j, t in enumerate(_texts(r, file, where)))
                     for i, r in enumerate(item))  # fmt: skip
        return Truth("cells", values=rows)
    if kind == "matrix":
        return Truth("matrix", values=(Template(_texts(item, file, where)[0], file, where),))
    labels = tuple(Template(t, file, f"{where}[{k}]") for k, t in enumerate(_texts(item, file, where)))
    choices = tuple(_texts(value["choices"], file, "cases.truth.choices")) if "choices" in value else ()
    return Truth("label", values=labels, choices=choices)


def _answers(value: dict, file: Path) -> Answers:
    value = _keys(value, ANSWERS, file, "cases.answers")
    choices: tuple[str, ...] | Template
    if isinstance(value["choices"], list):
        choices = tuple(_texts(value["choices"], file, "cases.answers.choices"))
        if len(choices) != 2:
            raise DataError(f"a question case has two candidate answers, got {len(choices)}", file=file,
                            field="cases.answers.choices")  # fmt: skip
    else:
        choices = Template(value["choices"], file, "cases.answers.choices")
    gold = value["gold"]
    if not gold or not all(isinstance(r, list) and r for r in gold):
        raise DataError("expected rows (one per image) of values (one per question)", file=file,
                        field="cases.answers.gold")  # fmt: skip
    rows = tuple(
        tuple(Template(t, file, f"cases.answers.gold[{i}][{j}]") for j, t in enumerate(_texts(r, file, "gold")))
        for i, r in enumerate(gold)
    )
    reader, pairs = value.get("reader"), value.get("pairs")
    if reader is not None and reader not in READERS:
        raise DataError(f"unknown reader {reader!r}; known: {', '.join(READERS)}", file=file,
                        field="cases.answers.reader")  # fmt: skip
    if pairs not in (None, "diagonal"):
        raise DataError(f"pairs is 'diagonal' (question k about image k) or absent, got {pairs!r}", file=file,
                        field="cases.answers.pairs")  # fmt: skip
    return Answers(choices, rows, reader, pairs)


def _window(value: dict, file: Path) -> Window:
    value = _keys(value, WINDOW, file, "cases.window")
    unit = value.get("unit", "seconds")
    if unit not in WINDOW_UNITS:
        raise DataError(f"unknown unit {unit!r}; known: {', '.join(WINDOW_UNITS)}", file=file,
                        field="cases.window.unit")  # fmt: skip
    start, end = (Template(value[k], file, f"cases.window.{k}") if k in value else None for k in ("start", "end"))
    return Window(start, end, unit)


def _case_spec(value: dict, file: Path) -> CaseSpec:
    value = _keys(value, CASES, file, "cases")
    if ("truth" in value) == ("answers" in value) and not value.get("gallery"):
        raise DataError("give the truth (which text goes with which image), or answers (a question case's)",
                        file=file, field="cases.truth")  # fmt: skip
    if value.get("gallery") and ("truth" in value or "answers" in value):
        raise DataError("a gallery's truth is its rows (each row's texts go with its images): no truth or "
                        "answers", file=file, field="cases.gallery")  # fmt: skip
    style = value.get("prompt_style")
    if style is not None and style not in PROMPT_STYLES:
        raise DataError(f"unknown prompt style {style!r}; known: {', '.join(PROMPT_STYLES)}", file=file,
                        field="cases.prompt_style")  # fmt: skip
    tags = value.get("tags", {})
    tag_spec = (Template(tags, file, "cases.tags") if isinstance(tags, str)
                else tuple((str(k), Template(_texts(v, file, f"cases.tags.{k}")[0], file, f"cases.tags.{k}"))
                           for k, v in tags.items()))  # fmt: skip
    return CaseSpec(
        id=Template(value.get("id", "{{ _stem }}/{{ _row }}"), file, "cases.id"),
        subset=Template(value.get("subset", "{{ _subset }}"), file, "cases.subset"),
        images=_templates(value["images"], file, "cases.images") if "images" in value else (),
        videos=_templates(value["videos"], file, "cases.videos") if "videos" in value else (),
        window=_window(value["window"], file) if "window" in value else None,
        texts=_templates(value["texts"], file, "cases.texts"),
        truth=_truth(value["truth"], file) if "truth" in value else None,
        answers=_answers(value["answers"], file) if "answers" in value else None,
        roles=_roles(value.get("roles", []), file),
        tags=tag_spec,
        prompt_style=style,
        gallery=bool(value.get("gallery", False)),
        skip_empty=tuple(_texts(value["skip_empty"], file, "cases.skip_empty")) if "skip_empty" in value else (),
        prompts=_templates(value["prompts"], file, "cases.prompts") if "prompts" in value else (),
    )


def _roles(value: list | str, file: Path) -> tuple[str, ...] | Template:
    """The texts' roles: their names, or one template whose value is a list of them (a list column)."""
    if isinstance(value, str):
        return Template(value, file, "cases.roles")
    return tuple(_texts(value, file, "cases.roles")) if value else ()


@dataclass(frozen=True)
class Declaration:
    """A parsed declaration.

    Attributes:
        path: the YAML file; sha256: the digest of its bytes (recorded with every run on it).
        name: the benchmark's name.
        metadata: what it is and where its data comes from, validated as a built-in's.
        sources: the ``data`` entries.
        cases: how a row becomes a case.
        root: the data folder of a declaration without remote sources, relative to the file's folder;
            images, videos: the folders image and video paths are relative to, relative to the data folder.
    """

    path: Path
    sha256: str
    name: str
    metadata: BenchmarkMetadata
    sources: tuple[Source, ...]
    cases: CaseSpec
    root: str
    images: str
    videos: str

    @property
    def local_root(self) -> Path | None:
        """The data folder of a declaration whose data is local (its folder, or ``root`` inside it); None for
        one that names hub or URL sources, whose data ``spotdiff data fetch`` brings into the data home."""
        if any(s.part is not None for s in self.sources):
            return None
        return inside(self.path.parent, self.root, file=self.path, field="root")

    def record(self) -> dict[str, str]:
        """What identifies it in a run: its name, file and content digest."""
        return {"name": self.name, "path": str(self.path), "sha256": self.sha256}


def _layout(decl: dict, sources: tuple[Source, ...], path: Path, sha256: str) -> str:
    """The data layout ``spotdiff benchmarks`` shows: the declaration's file, data and cases."""
    lines = [f"declared in {path} (sha256 {sha256[:16]}...)"]
    for k, source in enumerate(sources):
        where = f" (fetched: {source.part.source.describe()})" if source.part is not None else ""
        fmt = f", format {source.format}" if source.format else ""
        subset = f", subset {source.subset}" if source.subset else ""
        lines.append(f"data[{k}]: {', '.join(source.patterns)}{fmt}{subset}{where}")
    cases = decl["cases"]
    for key in ("id", "subset", "images", "videos", "texts", "truth", "answers", "tags"):
        if key in cases:
            lines.append(f"case {key}: {cases[key]}")
    return "\n".join(lines)


def _metadata(decl: dict, sources: tuple[Source, ...], path: Path, sha256: str) -> BenchmarkMetadata:
    from spotdiff.errors import ConfigError

    score = decl["main_score"]
    if len(score) != 2 or not all(isinstance(s, str) for s in score):
        raise DataError(f"expected [protocol, metric], got {score!r}", file=path, field="main_score")
    groups = decl.get("groups", {})
    try:
        return BenchmarkMetadata(
            title=decl["title"], description=decl["description"], paper=decl["paper"], reference=decl["reference"],
            citation=decl["citation"], license=decl["license"],
            protocols=tuple(_texts(decl["protocols"], path, "protocols")), main_score=(score[0], score[1]),
            layout=_layout(decl, sources, path, sha256), parts=tuple(s.part for s in sources if s.part is not None),
            subsets=tuple(_texts(decl["subsets"], path, "subsets")) if "subsets" in decl else (),
            reproduces=decl.get("reproduces", ""),
            groups=tuple((str(g), tuple(_texts(m, path, f"groups.{g}"))) for g, m in groups.items()),
            groups_source=decl.get("groups_source", ""), ties=decl.get("ties", ""),
            data_notes=decl.get("data_notes", ""), name=decl["name"],
        )  # fmt: skip
    except ConfigError as exc:
        raise DataError(str(exc), file=path) from None


def read_declaration(path: str | Path) -> Declaration:
    """Read and check the declaration at ``path`` (module docstring); every problem is a DataError naming the
    file and the key.

    Args:
        path: the YAML file.
    """
    from spotdiff.benchmarks._io import read_text

    path = Path(path).expanduser().resolve()
    text = read_text(path)
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    decl = _keys(parse_yaml(text, path), TOP, path, "")
    if decl["spotdiff"] != FORMAT or isinstance(decl["spotdiff"], bool):
        raise DataError(f"this spotdiff reads declarations of format {FORMAT}, not {decl['spotdiff']!r}",
                        file=path, field="spotdiff")  # fmt: skip
    if not NAME.fullmatch(decl["name"]):
        raise DataError(f"name {decl['name']!r}: 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a "
                        "letter or digit", file=path, field="name")  # fmt: skip
    entries = decl["data"] if isinstance(decl["data"], list) else [decl["data"]]
    if not entries:
        raise DataError("no data entry", file=path, field="data")
    sources = tuple(_source(entry, k, path) for k, entry in enumerate(entries))
    return Declaration(
        path=path, sha256=sha256, name=decl["name"], metadata=_metadata(decl, sources, path, sha256), sources=sources,
        cases=_case_spec(decl["cases"], path), root=decl.get("root", "."), images=decl.get("images", "."),
        videos=decl.get("videos", "."),
    )  # fmt: skip
