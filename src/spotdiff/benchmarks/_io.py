"""Reading annotation files with errors that name the file, the record and the field."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.benchmarks.shared import MANIFEST, SHARED
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import check_surrogates


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


def iter_lines(path: Path) -> Iterator[str]:
    """The file's lines as UTF-8 text (a BOM is accepted), streamed with their line endings (for the
    ``csv`` module); non-UTF-8 bytes raise the DataError of :func:`read_text`."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            yield from f
    except UnicodeDecodeError:
        read_text(path)  # raises the DataError naming the byte and the line
        raise
    except OSError as exc:
        raise DataError(f"cannot read: {exc}", file=path) from exc


def read_json(path: Path) -> Any:
    """Parse a JSON file; truncated or malformed JSON raises a DataError with line and column, a lone
    surrogate escape one naming the record (:func:`~spotdiff.jsonio.check_surrogates`)."""
    text = read_text(path)
    try:
        return check_surrogates(json.loads(text), text, file=path)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=path
        ) from exc


def field(record: Any, name: str, kind: type | tuple[type, ...], *, file: Path, record_id: object) -> Any:
    """``record[name]``, checked to exist and to be of ``kind``; strings must be non-blank.

    Args:
        record: the record (a dict).
        name: the field's name.
        kind: the type(s) its value must have.
        file: the file the record comes from (named in the DataError).
        record_id: the record's id or index (likewise).
    """
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
            f"expected {names}, got {type(value).__name__} {value!r:.60}",
            file=file,
            record=record_id,
            field=name,
        )
    if isinstance(value, str) and not value.strip():
        raise DataError("empty or whitespace-only text", file=file, record=record_id, field=name)
    return value


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_json_unique(path: Path) -> Any:
    """Like :func:`read_json`, but a key repeated inside one JSON object raises a DataError.

    ``json.loads`` silently keeps the last of two equal keys, which would drop a record whose id
    was duplicated; benchmarks keyed by record id read their files with this instead.
    """
    text = read_text(path)
    try:
        return check_surrogates(json.loads(text, object_pairs_hook=_unique_pairs), text, file=path)
    except _DuplicateKey as exc:
        raise DataError(f"duplicate key {exc.key!r} in one JSON object", file=path, record=exc.key) from None
    except json.JSONDecodeError as exc:
        raise DataError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=path
        ) from exc


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def option_bool(options: Mapping[str, object], name: str, default: bool = False) -> bool:
    """A boolean loader option; accepts bools, 0/1 and the strings true/false/yes/no/on/off.

    Args:
        options: the loader's options.
        name: the option's name.
        default: the value when it is not given.
    """
    value = options.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"option {name!r} must be true or false, got {value!r}")


def option_choice(options: Mapping[str, object], name: str, choices: Iterable[str], default: str) -> str:
    """A loader option that takes one of a few string values.

    Args:
        options: the loader's options.
        name: the option's name.
        choices: the accepted values.
        default: the value when it is not given.
    """
    choices = tuple(choices)
    value = options.get(name)
    if value is None:
        return default
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"option {name!r} must be one of {', '.join(choices)}; got {value!r}")
    return value


def images_dir(root: Path, options: Mapping[str, object], default: str = "images", *, option: str = "images") -> Path:
    """Where a loader resolves image (or video) file names: option ``images`` (``option``) if given, else
    ``root/default``.

    The directory need not exist at load time: images are lazy references, read only when scored.

    Args:
        root: the data location.
        options: the loader's options.
        default: the folder under ``root`` when the option is not given.
        option: the option naming the folder (:data:`MEDIA_OPTIONS`).
    """
    value = options.get(option)
    if value is None or value == "":
        return root / default
    if not isinstance(value, (str, Path)):
        raise ConfigError(f"option {option!r} must be a path, got {value!r}")
    return Path(value).expanduser()


#: The loader options naming the folder of a benchmark's images, or of its videos.
MEDIA_OPTIONS = ("images", "videos")


#: The loader option that declares folders, besides the data, that records may name images in
#: (``spotdiff eval --image-root DIR``; a path or a list of paths).
IMAGE_ROOT = "image_root"


class ImageRoots:
    """The folders a benchmark's records may name image files in, and the check that they do.

    A record names an image by a path that the loader joins to its image folder; ``../../secret`` or an
    absolute path would reach any file this process may read, and the image would then be scored, cached
    and shown in a shareable report. A file is allowed when its real path (symbolic links followed) lies
    inside one of: the data location (its folder when it is a file), the folder option ``images`` names,
    the folders option :data:`IMAGE_ROOT` declares, and, for a folder that ``spotdiff data fetch`` made
    (it holds the manifest), the data home's shared image collections that its links point to.

    Args:
        root: the data location.
        options: the loader's options.
    """

    def __init__(self, root: Path, options: Mapping[str, object]) -> None:
        data = root if root.is_dir() else root.parent
        declared = options.get(IMAGE_ROOT) or ()
        declared = [declared] if isinstance(declared, (str, Path)) else list(declared)
        if not all(isinstance(d, (str, Path)) and str(d) for d in declared):
            raise ConfigError(f"option {IMAGE_ROOT!r} must be a folder or a list of folders, got {declared!r}")
        folders = [data, *(Path(d).expanduser() for d in declared)]
        folders += [images_dir(root, options, option=name) for name in MEDIA_OPTIONS if options.get(name)]
        if (data / MANIFEST).is_file():
            folders.append(data.parent / SHARED)
        self.roots = tuple(dict.fromkeys(os.path.realpath(f) for f in folders))
        self._inside = tuple(r if r.endswith(os.sep) else r + os.sep for r in self.roots)
        self._real_dirs: dict[str, str] = {}
        self._allowed: set[str] = set()

    def real_path(self, path: str | Path) -> str:
        """``path`` with every symbolic link and ``..`` resolved as the OS resolves them (the folders'
        real paths are kept, so a folder of many images is resolved once)."""
        folder, name = os.path.split(os.fspath(path))
        if name in ("", ".", ".."):
            return os.path.realpath(path)
        real = self._real_dirs.get(folder)
        if real is None:
            real = self._real_dirs[folder] = os.path.realpath(folder or ".")
        full = os.path.join(real, name)
        return os.path.realpath(full) if os.path.islink(full) else full

    def check(self, path: str | Path, *, record: str, what: str = "image") -> None:
        """Refuse (DataError naming ``record``) an image (or video) file outside every root.

        Args:
            path: the image file a record names (joined to the loader's image folder).
            record: the case it belongs to, named in the error.
            what: what the file is called in the error (``image``, ``video``).
        """
        key = os.fspath(path)
        if key in self._allowed:
            return
        real = self.real_path(key)
        if not real.startswith(self._inside) and real not in self.roots:
            raise DataError(
                f"{what} {path} is {real}, outside the data ({', '.join(self.roots)}): a record may only "
                f"name {what}s inside it; if that folder is meant, declare it with --image-root DIR "
                f"(loader option {IMAGE_ROOT}=DIR)",
                record=record,
            )
        self._allowed.add(key)


def inside(
    root: Path, name: str, *, file: Path | None = None, record: str | None = None, field: str | None = None
) -> Path:
    """``root / name``, refused (a DataError naming the file) when it would lie outside ``root``: an absolute
    name, ``..`` climbing out, or a symbolic link on the way that leads out. A sheet, a record or a declaration
    is a file someone hands over; it never makes spotdiff read or write elsewhere.

    Args:
        root: the folder the name is relative to.
        name: the relative name, as the file gives it.
        file: the file the name comes from (for the message).
        record: the record or row (for the message).
        field: the column or field (for the message).

    >>> inside(Path("/data"), "a/b.png").as_posix()
    '/data/a/b.png'
    """
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts:
        raise DataError(f"{name!r} leaves its folder {root}", file=file or root, record=record, field=field)
    path = Path(root) / relative
    real_root = Path(root).resolve()
    if not path.resolve().is_relative_to(real_root):
        raise DataError(f"{name!r} is a link leading out of {root}", file=file or root, record=record, field=field)
    return path


def frozen_truth(rows: Any) -> np.ndarray:
    """A read-only boolean truth matrix, safe to share between the many cases of one shape."""
    truth = np.array(rows, dtype=bool)
    truth.setflags(write=False)
    return truth


@cache
def first_true(k: int) -> np.ndarray:
    """The read-only truth of 1 image x ``k`` texts whose first text is the true one; one array per ``k``,
    shared by every case of that size.

    Args:
        k: the number of texts.
    """
    return frozen_truth([[j == 0 for j in range(k)]])


def option_int(options: Mapping[str, object], name: str, default: int) -> int:
    """An integer loader option; accepts ints and decimal strings (as the command line passes them).

    Args:
        options: the loader's options.
        name: the option's name.
        default: the value when it is not given.
    """
    value = options.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ConfigError(f"option {name!r} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"option {name!r} must be an integer, got {value!r}")


def find_file(root: Path, candidates: Iterable[str], *, what: str) -> Path:
    """``root`` itself when it is a file, else the first of ``root/candidate`` that is a file.

    Candidates may contain sub-folders (``"data/examples.jsonl"``). A DataError lists what was tried.

    Args:
        root: the data location (a folder, or the file itself).
        candidates: paths relative to ``root``, in order.
        what: what the file is, for the DataError.
    """
    if root.is_file():
        return root
    candidates = tuple(candidates)
    for name in candidates:
        path = root / name
        if path.is_file():
            return path
    raise DataError(f"no {what} found in {root}; looked for {', '.join(candidates)}")


def read_csv_rows(path: Path, required: Iterable[str] = ()) -> list[tuple[int, dict[str, str]]]:
    """Parse a comma-separated file with a header row into (line number, row) pairs.

    Fields may be quoted and may span lines (the line number is the row's first line). A missing
    ``required`` column, a row with more or fewer cells than the header, or a CSV syntax error raises
    a DataError naming the file, the line and the column.
    """
    import csv
    import io

    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise DataError("empty file: no header row", file=path)
        header = [h.strip() for h in header]
        for name in required:
            if name not in header:
                raise DataError(f"missing column (header: {', '.join(header)})", file=path, field=name)
        out = []
        start = reader.line_num + 1
        for cells in reader:
            if not cells:
                start = reader.line_num + 1
                continue
            if len(cells) != len(header):
                raise DataError(
                    f"{len(cells)} cells for {len(header)} columns", file=path, record=f"line {start}"
                )
            out.append((start, dict(zip(header, cells, strict=True))))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"CSV syntax error: {exc}", file=path, record=f"line {reader.line_num}") from exc
    return out


def nonempty_strings(items: list | tuple, what: str, *, file: Path, record_id: object, name: str) -> list[str]:
    """``items`` as a list, each checked to be a non-empty string.

    Args:
        items: the strings.
        what: what an item is, in the error: "<what> k is not a non-empty string".
        file: the file, record_id: the record and name: the field that hold them, named in the error.
    """
    for k, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise DataError(f"{what} {k} is not a non-empty string: {item!r:.60}", file=file, record=record_id,
                            field=name)
    return list(items)
