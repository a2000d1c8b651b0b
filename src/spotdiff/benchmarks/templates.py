"""The values of a declared benchmark: Jinja templates over one row's columns, rendered in a sandbox.

Every value a declaration gives a case (its id, subset, texts, image and video paths, tags) is a template
of jinja2's :class:`~jinja2.sandbox.ImmutableSandboxedEnvironment` over the row: each column by its name,
``row["any name"]`` for any column, and the row's place (:data:`META`). A template that is exactly one
column (``{{ caption }}``, ``{{ row["second positive"] }}``) gives the cell itself without rendering (a list
column's list, an image column's bytes; and a table of 372,000 rows is read at the speed of its file);
any other gives text, a missing value (None) rendering as nothing.

A declaration is data, never code: a template is refused when it is compiled if it does not parse, loads
another template (``import``, ``include``, ``extends``), names an attribute or item starting with ``_``, or
raises to a power; at render time the sandbox refuses any other unsafe attribute or call, and a ``*``
that would make a text or list longer than :data:`MAX_LENGTH`. Each refusal is an error naming the
declaration's key (or the data file, row and column).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined, TemplateError, UndefinedError, meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
from rapidfuzz.distance import Levenshtein

from spotdiff.errors import DataError

#: The name of the whole row in a template (``row["a column"]``).
ROW = "row"
#: The row's place, beside its columns: its index among its file's records (from 0), its line (from 1;
#: a CSV or JSON-lines file's), its key (a JSON object of records), its file (relative to the data root),
#: that file's stem, and the subset its data entry declares (else the benchmark's name).
META = ("_row", "_line", "_key", "_file", "_stem", "_subset")
#: The longest text or list a ``*`` may make.
MAX_LENGTH = 100_000


def edit_distance(a: object, b: object) -> int:
    """The character Levenshtein distance of two texts (the filter ``edit_distance``; VISLA orders its two
    positives by it).

    >>> edit_distance("a cat", "a hat")
    1
    """
    return Levenshtein.distance(str(a), str(b))


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with ``*`` intercepted: a repeated text or list is refused past :data:`MAX_LENGTH`."""

    intercepted_binops = frozenset({"*"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_LENGTH:
                    raise SecurityError(f"a '*' making more than {MAX_LENGTH} items is refused")
        return super().call_binop(context, operator, left, right)


def _none_as_empty(value: Any) -> Any:
    return "" if value is None else value


_ENV = _Sandbox(undefined=StrictUndefined, finalize=_none_as_empty, autoescape=False, keep_trailing_newline=False)
_ENV.filters["edit_distance"] = edit_distance
#: The names a template may use that are not columns: the row, its place, and Jinja's own globals.
_NOT_COLUMNS = frozenset({ROW, *META, *_ENV.globals})


def _refusal(node: nodes.Node) -> str | None:
    """Why a template holding ``node`` is refused, or None."""
    if isinstance(node, (nodes.Import, nodes.FromImport, nodes.Include, nodes.Extends)):
        return "it loads another template"
    if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
        return f"it reaches for the attribute {node.attr!r}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and str(node.arg.value).startswith("_"):
        return f"it reaches for the item {node.arg.value!r}"
    if isinstance(node, nodes.Pow):
        return "it raises to a power"
    return None


def _row_items(tree: nodes.Template) -> tuple[set[str], bool]:
    """The constant keys of ``row[...]`` in ``tree``, and whether some key is computed (any column may be read)."""
    keys, computed = set(), False
    for item in tree.find_all(nodes.Getitem):
        if isinstance(item.node, nodes.Name) and item.node.name == ROW:
            if isinstance(item.arg, nodes.Const) and isinstance(item.arg.value, str):
                keys.add(item.arg.value)
            else:
                computed = True
    return keys, computed


def _single(tree: nodes.Template) -> str | None:
    """The column (or place) a template is exactly, ``{{ name }}`` or ``{{ row["name"] }}``; else None."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], nodes.Output) or len(tree.body[0].nodes) != 1:
        return None
    node = tree.body[0].nodes[0]
    if isinstance(node, nodes.Name) and node.name != ROW and node.name not in _ENV.globals:
        return node.name
    if (isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name) and node.node.name == ROW
            and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str)):  # fmt: skip
        return node.arg.value
    return None


class Template:
    """One value of a declaration, compiled once.

    Attributes:
        text: the template as written.
        file: the declaration file, key: the key holding the template, named in every error.
        column: the column (or place) it is exactly, whose cell it gives as it is; None for any other.
        columns: the columns it reads by name (its places excluded).
        any_column: it reads ``row[...]`` with a computed key, so any column may be read.

    Args:
        text: the template.
        file: the declaration file; key: the key that holds the template (``cases.texts[0]``), for errors.

    Raises:
        DataError: the template does not parse or is refused (module docstring).

    >>> Template("{{ caption }}", "d.yaml", "cases.texts[0]").column
    'caption'
    >>> Template("{{ a }} and {{ row['b c'] }}", "d.yaml", "cases.texts[0]")({"a": 1, "b c": None}, {})
    '1 and '
    """

    def __init__(self, text: str, file: object, key: str) -> None:
        self.text, self.file, self.key = text, file, key
        try:
            tree = _ENV.parse(text)
        except TemplateError as exc:
            raise DataError(f"template {text!r} does not parse: {exc}", file=file, field=key) from None
        for node in tree.find_all(nodes.Node):
            why = _refusal(node)
            if why is not None:
                raise DataError(f"template {text!r} is refused: {why} (a declaration holds data, not code)",
                                file=file, field=key)  # fmt: skip
        keys, self.any_column = _row_items(tree)
        self.columns = frozenset((meta.find_undeclared_variables(tree) - _NOT_COLUMNS) | keys) - set(META)
        self.column = _single(tree)
        #: The data column the template is exactly (not a place): its value is ``row[plain]``.
        self.plain = self.column if self.column is not None and self.column not in META else None
        self._compiled = None if self.column is not None else _ENV.from_string(tree)

    def __call__(self, row: Mapping[str, Any], place: Mapping[str, Any], file: object = None,
                 record: object = None) -> Any:
        """The value for one row: the cell of a one-column template, else the rendered text.

        Args:
            row: the row's columns.
            place: its place (:data:`META`).
            file: the data file, record: the row, named in errors.
        """
        if self.column is not None:
            if self.column in place:
                return place[self.column]
            if self.column not in row:
                raise self.missing(self.column, row, file, record)
            return row[self.column]
        try:
            return self._compiled.render({**row, **place, ROW: row})
        except UndefinedError as exc:
            absent = next((c for c in sorted(self.columns) if c not in row), None)
            if absent is not None:
                raise self.missing(absent, row, file, record) from None
            raise self._failure(exc, file, record) from None
        except SecurityError as exc:
            raise DataError(f"the template of {self.key} ({self.file}) is refused: {exc}", file=file,
                            record=record) from None  # fmt: skip
        except (TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
            raise self._failure(exc, file, record) from None

    def missing(self, column: str, row: Mapping[str, Any], file: object, record: object) -> DataError:
        """The error of a column this template names that the data lacks (:func:`missing_column`)."""
        return missing_column(column, row, self.key, self.file, file, record)

    def _failure(self, exc: Exception, file: object, record: object) -> DataError:
        return DataError(f"the template of {self.key} ({self.file}) fails on this row: {type(exc).__name__}: {exc}",
                         file=file, record=record)  # fmt: skip


def missing_column(column: str, row: Mapping[str, Any], key: str, declaration: object, file: object,
                   record: object) -> DataError:  # fmt: skip
    """The error of a column a declaration names (at ``key``) that a row of ``file`` lacks, listing its columns.

    Args:
        column: the column named.
        row: the row (its columns are listed).
        key: the declaration's key that names it; declaration: the declaration file.
        file: the data file; record: the row, as errors name it.
    """
    return DataError(f"no column {column!r}, which {key} of {declaration} names (the data's columns: "
                     f"{', '.join(map(str, row)) or 'none'})", file=file, record=record, field=column)  # fmt: skip
