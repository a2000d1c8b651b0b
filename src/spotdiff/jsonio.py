"""The one way spotdiff writes JSON: NaN as null, numpy values as Python numbers, sorted keys, files
replaced atomically; the one JSON-lines reader and writer; the one rounding of metric values for display; and a JSON
document as a float32 cache row (:func:`json_row`).

>>> import numpy as np
>>> dumps({"b": np.float32(0.5), "a": [float("nan"), np.int64(2)]})
'{"a": [null, 2], "b": 0.5}'
>>> round_values({"accuracy": 58.8900001, "accuracy_ci95": [55.81234, float("nan")]})
{'accuracy': 58.89, 'accuracy_ci95': [55.81, None]}
"""

from __future__ import annotations

import codecs
import contextlib
import glob
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.errors import DataError


def to_jsonable(value: Any) -> Any:
    """A JSON-safe copy: NaN and infinities become None, numpy values Python numbers, keys strings."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # the common leaves, checked first
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype.kind in "biu":
        return value.tolist()
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and np.isfinite(value).all():
        return value.tolist()  # Python floats, none to replace
    if hasattr(value, "tolist"):
        return to_jsonable(value.tolist())
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text (see :func:`to_jsonable`), keys sorted; anything else as ``str``."""
    return json.dumps(to_jsonable(value), sort_keys=True, allow_nan=False, default=str, indent=indent)


class JsonText(str):
    """JSON text already made by :func:`dumps`: :func:`json_text` and :func:`json_object` take it as it is, so
    a value written to several places (a case's scores in ``scores.jsonl`` and in the run store) is serialised
    once."""


def json_text(value: Any) -> str:
    """``value`` as JSON text: a :class:`JsonText` as it is, anything else by :func:`dumps`."""
    return value if isinstance(value, JsonText) else dumps(value)


def json_object(fields: dict[str, str]) -> JsonText:
    """The JSON object whose values are the JSON texts ``fields``, keys sorted and spaced as :func:`dumps` writes
    them.

    >>> json_object({"b": dumps(1), "a": dumps([1.5, None])}) == dumps({"b": 1, "a": [1.5, None]})
    True
    """
    return JsonText("{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in sorted(fields.items())) + "}")


def write_json(path: str | Path, value: Any, *, indent: int | None = 2) -> Path:
    """Write ``value`` to ``path`` through a temporary file (:func:`temporary_path`) and an atomic rename.

    The temporary file is removed when the write fails (a full disk, an interrupt), and once ``path`` is
    written, so are those that processes no longer running left beside it.
    """
    with atomic_path(path) as tmp:
        tmp.write_text(dumps(value, indent=indent) + "\n", encoding="utf-8")
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> None:
    """``text`` written to ``path`` (UTF-8, ``\n`` line ends) through :func:`atomic_path`, its folder made; no sweep
    per file (a writer of many files sweeps the temporaries a killed attempt left once, at its end)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, sweep=False) as partial:
        partial.write_text(text, encoding="utf-8", newline="\n")


@contextlib.contextmanager
def atomic_path(path: str | Path, *, sweep: bool = True) -> Iterator[Path]:
    """The temporary file (:func:`temporary_path`) to write ``path`` into: renamed onto ``path`` when the
    block succeeds, removed when it fails, so ``path`` is either whole or absent (never half written).

    Args:
        path: the file to write.
        sweep: once ``path`` is written, also remove the temporaries dead processes left beside it (a
            writer of many files in one folder sweeps once at its end instead).
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        yield tmp
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):  # a file system that refused the write may refuse this too
            tmp.unlink(missing_ok=True)
        raise
    if sweep:
        remove_stale_temporaries(path)


def temporary_path(path: str | Path) -> Path:
    """The temporary file this process writes ``path`` into before renaming it: ``.NAME.PID.tmp``."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def remove_stale_temporaries(path: str | Path) -> None:
    """Remove the temporary files of ``path`` (:func:`temporary_path`) left by processes that no longer
    run (killed, or on a disk that was full)."""
    path = Path(path)
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2 : -len(".tmp")]
        if pid.isdigit() and not _process_alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def json_default(value: Any) -> Any:
    """The ``default`` hook of :func:`json.dumps` for data files: numpy numbers as Python numbers,
    tuples and sets as lists, paths as strings; anything else is a TypeError."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, (tuple, set)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def jsonl_line(value: Any) -> str:
    """``value`` as one line of a data file: keys in insertion order, non-ASCII text kept as is."""
    return json.dumps(value, ensure_ascii=False, default=json_default)


def write_jsonl(path: str | Path, rows: Iterable[Any], *, dump: Callable[[Any], str] = jsonl_line) -> Path:
    """Write one JSON value per line: ``dump(row)`` and ``"\\n"``, UTF-8; the folder is created.

    Args:
        path: the file, replaced.
        rows: the values, in order.
        dump: one value as one line; :func:`jsonl_line` (data files) by default, :func:`dumps` for run
            files (sorted keys, NaN as null, ASCII).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(dump(row) + "\n")
    return path


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of a JSON-lines file, streamed.

    A BOM is accepted; an unreadable file, a line that is not UTF-8 or not JSON raises a DataError
    naming the file and ``line N``. Callers check the values.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            offset = 0
            for lineno, raw in enumerate(f, start=1):
                if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw, offset = raw[len(codecs.BOM_UTF8) :], len(codecs.BOM_UTF8)
                yield from _jsonl_value(path, lineno, offset, raw)
                offset += len(raw)
    except OSError as exc:
        raise DataError(f"cannot read: {exc}", file=path) from exc


def _jsonl_value(path: Path, lineno: int, offset: int, raw: bytes) -> Iterator[tuple[int, Any]]:
    """The value of one line starting at byte ``offset``, none when it is blank."""
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        where = f"line {lineno}"
        raise DataError(f"not valid UTF-8 at byte {offset + exc.start}", file=path, record=where) from exc
    if not text.strip():
        return
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON at column {exc.pos + 1}: {exc.msg}", file=path, record=f"line {lineno}") from exc
    yield lineno, check_surrogates(value, text, file=path, record=f"line {lineno}")


#: A JSON escape of a UTF-16 surrogate: two of them spell one character, one alone is no text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
#: A surrogate left in a parsed string: JSON parsing joins every valid pair into one character.
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_surrogates(value: Any, text: str, *, file: str | Path, record: object | None = None) -> Any:
    """``value``, parsed from the JSON ``text``, refused when a string in it holds a lone surrogate
    (an escape such as ``\\ud800`` that is half of a pair): valid JSON, but text that no UTF-8 file,
    tokenizer or run store can hold, so it would fail later without naming where it came from.

    Args:
        value: the parsed document (or line).
        text: its JSON text; documents without a surrogate escape are returned without a walk.
        file: the file, named in the DataError.
        record: the record ``value`` is (``line N`` of a JSON-lines file); None: the document's
            top-level key or index is the record.

    >>> check_surrogates(json.loads('{"a": "\\\\ud83d\\\\ude00"}'), '{"a": "\\\\ud83d\\\\ude00"}', file="f.json")
    {'a': '😀'}
    >>> check_surrogates(["ok", "x\\ud800"], '["ok", "x\\\\ud800"]', file="f.json")
    Traceback (most recent call last):
    ...
    spotdiff.errors.DataError: file f.json, record 1: text holds a lone surrogate \\ud800 (an escape ...
    """
    if _SURROGATE_ESCAPE.search(text) is None:
        return value
    found = _lone_surrogate(value)
    if found is None:
        return value
    path, char = found
    if record is None and path:
        record, path = path[0], path[1:]
    raise DataError(
        f"text holds a lone surrogate \\u{ord(char):04x} (an escape that is half of a UTF-16 pair: no text can "
        "hold it); fix or remove that escape",
        file=file,
        record=record,
        field="/".join(str(p) for p in path) or None,
    )


def _lone_surrogate(value: Any) -> tuple[tuple, str] | None:
    """``(path of keys and indices, the surrogate)`` of the first string or key holding one, else None."""
    if isinstance(value, str):
        match = _SURROGATE.search(value)
        return None if match is None else ((), match.group())
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _lone_surrogate(key) if isinstance(key, str) else None
        if found is None:
            found = _lone_surrogate(item)
        if found is not None:
            return (key, *found[0]), found[1]
    return None


def round_values(value: Any, digits: int = 2) -> Any:
    """Floats rounded to ``digits`` (NaN as None), through dicts and lists; for display only."""
    if isinstance(value, dict):
        return {k: round_values(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_values(v, digits) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        return value
    return None if math.isnan(x) else round(x, digits)


def json_row(document: object) -> np.ndarray:
    """A JSON document as a cache row: its UTF-8 text, padded with spaces to a multiple of four
    bytes, viewed as float32 (the bytes round-trip exactly; :func:`row_json` reads it back).

    >>> row_json(json_row({"a": [1, "é"]}))
    {'a': [1, 'é']}
    """
    data = json.dumps(document, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return np.frombuffer(data + b" " * (-len(data) % 4), dtype=np.float32)


def row_json(row: np.ndarray) -> object:
    """The JSON document held by a row made by :func:`json_row`."""
    return json.loads(np.ascontiguousarray(row, dtype=np.float32).tobytes().decode("utf-8"))
