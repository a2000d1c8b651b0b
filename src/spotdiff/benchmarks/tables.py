"""The rows of a declared benchmark's data files: CSV, TSV, JSON, JSON lines, parquet, Arrow, or a folder of images
or videos; each row a ``{column: cell}`` mapping with its place in its file.

Files are streamed (a CSV or JSON-lines file line by line, parquet and Arrow in record batches of the
columns the declaration reads), except a JSON file, which is one value. A folder is read as ``datasets``'
``imagefolder`` reads one: its ``metadata.jsonl`` (or ``.csv``, ``.parquet``) when it has one, its rows naming
their file in ``file_name``; else one row per image or video file (``file_name``, and ``label``, the folder
holding it). Errors name the file, the row and the column.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from spotdiff.benchmarks._io import read_json_unique, read_text
from spotdiff.benchmarks._parquet import holds_bytes, iter_rows, parquet_columns
from spotdiff.benchmarks.zeroshot import IMAGE_EXTENSIONS
from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl
from spotdiff.video.frames import VIDEO_SUFFIXES

#: File formats by suffix.
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet",
            ".arrow": "arrow"}  # fmt: skip
#: Every format a data entry may name; ``folder`` is a folder of images or videos.
FORMATS = (*dict.fromkeys(SUFFIXES.values()), "folder")
#: The files a folder's rows are, without a metadata file: images (torchvision's ImageFolder's suffixes) and videos.
MEDIA_SUFFIXES = frozenset((*IMAGE_EXTENSIONS, *VIDEO_SUFFIXES))
#: The metadata files a folder may hold, in the order they are looked for (``datasets``' imagefolder names).
FOLDER_METADATA = ("metadata.jsonl", "metadata.csv", "metadata.parquet")
#: Rows per record batch of a parquet or Arrow table, and of one whose media columns hold encoded images or videos
#: (whose bytes are hashed as they pass and dropped: memory holds about one such batch).
TABLE_BATCH = 4096
IMAGE_BATCH = 32


@dataclass(frozen=True)
class Table:
    """One data file (or folder) of a declared benchmark, and how its rows are read.

    Attributes:
        path: the file or folder.
        name: its path relative to the data root (posix), the row's ``_file``.
        format: one of :data:`FORMATS`.
        subset: the subset its data entry declares (else the benchmark's name), the row's ``_subset``.
        records: for a JSON file, the key of the object holding its records (None: the file is the records).
        delimiter: a CSV or TSV file's delimiter; quoted: whether its cells may be quoted (CSV, RFC 4180;
            a TSV file is not quoted, as IANA's text/tab-separated-values).
    """

    path: Path
    name: str
    format: str
    subset: str
    records: str | None = None
    delimiter: str = ","
    quoted: bool = True

    @cached_property
    def _file_place(self) -> dict[str, Any]:
        """The part of a row's place its file gives: ``_dir`` is the file's folder (a folder's own name for the rows
        of a folder, whose ``file_name`` is relative to it)."""
        parent = self.name if self.format == "folder" else Path(self.name).parent.as_posix()
        return {"_file": self.name, "_dir": parent, "_stem": Path(self.name).stem, "_subset": self.subset}

    def place(self, row: int, line: int | None = None, key: str | None = None) -> dict[str, Any]:
        """A row's place (:data:`spotdiff.benchmarks.templates.META`)."""
        return {"_row": row, "_line": line, "_key": key, **self._file_place}


def label(place: dict[str, Any]) -> str:
    """A row as errors name it: ``row N`` (from 0), with its line or its key when it has one."""
    where = f"row {place['_row']}"
    if place["_key"] is not None:
        return f"{where} (key {place['_key']!r})"
    return f"{where} (line {place['_line']})" if place["_line"] is not None else where


def rows(table: Table, columns: frozenset[str] | None, media: frozenset[str]) -> Iterator[tuple[dict, dict]]:
    """``(place, row)`` of every record of ``table``, in file order.

    Args:
        table: the file.
        columns: the columns the declaration reads (a parquet or Arrow file reads only these); None: every column.
        media: the columns whose cells may be embedded images or videos (parquet, Arrow).
    """
    if table.format in ("csv", "tsv"):
        yield from _delimited(table)
    elif table.format == "jsonl":
        for n, (line, record) in enumerate(iter_jsonl(table.path)):
            yield table.place(n, line), _object(record, table, f"line {line}")
    elif table.format == "json":
        yield from _json(table)
    elif table.format in ("parquet", "arrow"):
        names = parquet_columns(table.path) if columns is None else sorted(columns)
        media = media & set(names)
        if not holds_bytes(table.path, media):  # paths: nothing to turn into image references
            media, batch = frozenset(), TABLE_BATCH
        else:
            batch = IMAGE_BATCH
        for _, n, record in iter_rows([table.path], names, media_columns=media, batch=batch):
            yield table.place(n), record
    else:
        yield from _folder(table, columns, media)


def _object(record: Any, table: Table, where: str) -> dict:
    if not isinstance(record, dict):
        raise DataError(f"expected an object of columns, got {type(record).__name__}", file=table.path, record=where)
    return record


def _delimited(table: Table) -> Iterator[tuple[dict, dict]]:
    """A CSV or TSV file's rows, its first line the header; cells stripped of surrounding whitespace. Streamed as
    :func:`~spotdiff.benchmarks._io.iter_lines` reads (UTF-8, a BOM accepted), straight from the file."""
    try:
        with open(table.path, encoding="utf-8-sig", newline="") as f:
            yield from _delimited_rows(table, f)
    except UnicodeDecodeError:
        read_text(table.path)  # raises the DataError naming the byte and the line
        raise
    except OSError as exc:
        raise DataError(f"cannot read: {exc}", file=table.path) from exc


def _delimited_rows(table: Table, lines: Any) -> Iterator[tuple[dict, dict]]:
    quoting = csv.QUOTE_MINIMAL if table.quoted else csv.QUOTE_NONE
    reader = csv.reader(lines, delimiter=table.delimiter, quoting=quoting, strict=table.quoted)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise DataError("empty file: no header row", file=table.path) from None
    except csv.Error as exc:
        raise DataError(f"CSV syntax error: {exc}", file=table.path, record="line 1") from exc
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated or "" in header:
        raise DataError(f"the header names a column twice or not at all: {header}", file=table.path, record="line 1")
    n, start, width = 0, reader.line_num + 1, len(header)
    try:
        for cells in reader:
            stripped = [c.strip() for c in cells]
            if any(stripped):  # a blank line is no row
                if len(cells) != width:
                    raise DataError(f"{len(cells)} cells for the {width} columns {', '.join(header)}",
                                    file=table.path, record=f"row {n} (line {start})")  # fmt: skip
                yield table.place(n, start), dict(zip(header, stripped, strict=True))
                n += 1
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"CSV syntax error: {exc}", file=table.path, record=f"line {reader.line_num}") from exc


def _json(table: Table) -> Iterator[tuple[dict, dict]]:
    """A JSON file's records: a list of objects, or an object of objects (each key the row's ``_key``), the
    file itself or its member ``records``."""
    data = read_json_unique(table.path)
    if table.records is not None:
        if not isinstance(data, dict) or table.records not in data:
            raise DataError(f"no member {table.records!r} holding the records", file=table.path, field=table.records)
        data = data[table.records]
    if isinstance(data, list):
        for n, record in enumerate(data):
            yield table.place(n), _object(record, table, f"row {n}")
    elif isinstance(data, dict):
        for n, (key, record) in enumerate(data.items()):
            yield table.place(n, key=key), _object(record, table, f"row {n} (key {key!r})")
    else:
        raise DataError(f"expected a list of records or an object of records, got {type(data).__name__}",
                        file=table.path)  # fmt: skip


def _folder(table: Table, columns: frozenset[str] | None, media: frozenset[str]) -> Iterator[tuple[dict, dict]]:
    """A folder's rows: its metadata file's, each ``file_name`` checked to lie inside the folder; else one per
    image or video file, in name order."""
    from spotdiff.benchmarks._io import inside

    if not table.path.is_dir():
        raise DataError("not a folder", file=table.path)
    metadata = next((table.path / m for m in FOLDER_METADATA if (table.path / m).is_file()), None)
    if metadata is not None:
        fmt = SUFFIXES[metadata.suffix]
        sub = Table(metadata, f"{table.name}/{metadata.name}", fmt, table.subset)
        for place, row in rows(sub, None if columns is None else columns | {"file_name"}, media):
            name = row.get("file_name")
            if not isinstance(name, str) or not name.strip():
                raise DataError("no file_name", file=metadata, record=label(place), field="file_name")
            inside(table.path, name.strip(), file=metadata, record=label(place), field="file_name")
            yield place, row
        return
    for n, path in enumerate(_media_files(table.path)):
        relative = path.relative_to(table.path)
        parent = relative.parent.as_posix()
        yield table.place(n), {"file_name": relative.as_posix(), "label": "" if parent == "." else parent}


def folder_files(table: Table) -> list[Path]:
    """The files that identify a folder's rows: its metadata file, else its image and video files."""
    metadata = [table.path / m for m in FOLDER_METADATA if (table.path / m).is_file()]
    if metadata:
        return metadata[:1]
    return _media_files(table.path)


def _media_files(folder: Path) -> list[Path]:
    """The image and video files in ``folder`` and below, by path."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in MEDIA_SUFFIXES)
