"""Reading annotation files with errors that name the file, the record and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spotdiff.errors import DataError


def read_text(path: Path) -> str:
    """The file's text as UTF-8 (a BOM is accepted); non-UTF-8 bytes raise a DataError."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read: {exc}", file=path) from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"not valid UTF-8 at byte {exc.start} (line {line})", file=path) from exc


def read_json(path: Path) -> Any:
    """Parse a JSON file; truncated or malformed JSON raises a DataError with line and column."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=path) from exc


def read_jsonl(path: Path) -> list[tuple[int, Any]]:
    """Parse a JSON-lines file into (line number, value) pairs, skipping blank lines."""
    out = []
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON: {exc.msg}", file=path, record=f"line {lineno}") from exc
    return out


def field(record: Any, name: str, kind: type | tuple[type, ...], *, file: Path, record_id: object) -> Any:
    """``record[name]``, checked to exist and to be of ``kind``; strings must be non-blank."""
    if not isinstance(record, dict):
        raise DataError(f"expected an object, got {type(record).__name__}", file=file, record=record_id)
    if name not in record:
        raise DataError("missing field", file=file, record=record_id, field=name)
    value = record[name]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise DataError(f"expected {kind}, got bool", file=file, record=record_id, field=name)
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DataError(
            f"expected {names}, got {type(value).__name__} {value!r:.60}", file=file, record=record_id, field=name
        )
    if isinstance(value, str) and not value.strip():
        raise DataError("empty or whitespace-only text", file=file, record=record_id, field=name)
    return value
