"""Reading hub parquet layouts row by row, with image cells turned into lazy :class:`ParquetImage` s
(``.arrow`` files, ``datasets``' ``save_to_disk`` shards, are read memory-mapped the same way).

Rows are streamed in small batches (``pyarrow.parquet.ParquetFile.iter_batches``, without pyarrow's
pre-buffering, which reads ahead and keeps the column chunks it has read): each image cell's bytes are
hashed as they pass and dropped, so a loader holds about one row group of images at a time, never the
column. Missing columns and empty cells are DataErrors naming the file, the row and the column.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from spotdiff.cases import ParquetImage, arrow_table, cell_image_bytes
from spotdiff.errors import DataError

BATCH = 32


def find_parquet(root: Path, patterns: Iterable[str], *, what: str) -> list[Path]:
    """The parquet files matching the first of ``patterns`` (globs below ``root``) that matches any; sorted.

    Args:
        root: the data location.
        patterns: glob patterns below ``root``, in order.
        what: what the files are, for the DataError when none matches.
    """
    patterns = tuple(patterns)
    if root.is_file() and root.suffix == ".parquet":
        return [root]
    for pattern in patterns:
        files = sorted(p for p in root.glob(pattern) if p.is_file())
        if files:
            return files
    raise DataError(f"no {what} parquet files in {root}; looked for {', '.join(patterns)}")


def iter_rows(
    files: list[Path],
    columns: Iterable[str],
    image_columns: Iterable[str] = (),
    *,
    media_columns: Iterable[str] = (),
    batch: int = BATCH,
) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """Yield ``(file, row index in the file, {column: value})``; image columns hold ParquetImage refs.

    Columns listed in ``columns`` may be absent from a file only if their name starts with ``?``
    (optional; the value is then None).

    Args:
        files: the parquet (or ``.arrow``) files, read in order.
        columns: the columns to read (``?name``: optional).
        image_columns: the columns holding encoded images.
        media_columns: columns that may hold encoded images or videos: a cell of bytes (or a ``datasets``
            ``Image`` / ``Video`` struct holding them) becomes a ParquetImage, a list of them a list of
            ParquetImages (:attr:`~spotdiff.cases.ParquetImage.item`), any other cell (a path) stays as it is.
        batch: rows per record batch read (memory holds about one batch of the columns read).
    """
    wanted = [c.lstrip("?") for c in columns]
    optional = {c.lstrip("?") for c in columns if c.startswith("?")}
    images, media = tuple(image_columns), frozenset(media_columns)
    for path in files:
        names, read = _open(path, batch)
        for column in (*wanted, *images):
            if column not in names and column not in optional:
                raise DataError(f"missing column (columns: {', '.join(sorted(names))})", file=path, field=column)
        present = [c for c in dict.fromkeys((*wanted, *images)) if c in names]
        absent = {c: None for c in optional if c not in names}
        converted = [c for c in present if c in images or c in media]
        row = 0
        for chunk in read(present):
            data = chunk.to_pydict()
            for values in zip(*(data[c] for c in present), strict=True):
                record: dict[str, Any] = dict(zip(present, values, strict=True))
                if absent:
                    record.update(absent)
                for column in converted:
                    value = record[column]
                    if column in images:
                        raw = cell_image_bytes(value, where=f"{path} row {row} column {column!r}")
                        record[column] = ParquetImage(path, row, column, hashlib.sha256(raw).hexdigest())
                    else:
                        record[column] = _media(value, path, row, column)
                yield path, row, record
                row += 1


def _embedded(value: Any) -> bytes | None:
    """The encoded bytes a cell holds (bytes, or a ``datasets`` Image / Video struct's), None when it holds none."""
    if isinstance(value, dict):
        value = value.get("bytes")
    return bytes(value) if isinstance(value, (bytes, bytearray)) and value else None


def _media(value: Any, path: Path, row: int, column: str) -> Any:
    """A media cell: embedded bytes as a ParquetImage, a list of them as a list; a path (or a ``datasets``
    struct holding only one) as that path; anything else as it is."""
    if isinstance(value, list):
        return [_media_item(v, path, row, column, k) for k, v in enumerate(value)]
    return _media_item(value, path, row, column, None)


def _media_item(value: Any, path: Path, row: int, column: str, item: int | None) -> Any:
    raw = _embedded(value)
    if raw is not None:
        return ParquetImage(path, row, column, hashlib.sha256(raw).hexdigest(), item=item)
    return value.get("path") if isinstance(value, dict) else value


def holds_bytes(path: Path, columns: Iterable[str]) -> bool:
    """Whether any of ``columns`` of a parquet (or ``.arrow``) file holds binary data (bytes, a struct or a list of
    them: encoded images or videos), not only text or numbers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def binary(kind: Any) -> bool:
        if pa.types.is_struct(kind):
            return any(binary(kind.field(i).type) for i in range(kind.num_fields))
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return binary(kind.value_type)
        return pa.types.is_binary(kind) or pa.types.is_large_binary(kind)

    columns = set(columns)
    if not columns:
        return False
    schema = arrow_table(path).schema if path.suffix == ".arrow" else pq.read_schema(path)
    return any(binary(schema.field(c).type) for c in columns if c in schema.names)


def parquet_columns(path: Path) -> list[str]:
    """The column names of a parquet (or ``.arrow``) file, in its order."""
    import pyarrow.parquet as pq

    if path.suffix == ".arrow":
        return list(arrow_table(path).column_names)
    try:
        return list(pq.read_schema(path).names)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read parquet file: {exc}", file=path) from exc


def _open(path: Path, batch: int = BATCH) -> tuple[set[str], Callable[[list[str]], Iterator[Any]]]:
    """A file's column names and a reader of its record batches of some columns: parquet streamed
    without pre-buffering (pyarrow would otherwise keep reading ahead and hold the file's columns), a
    ``.arrow`` file memory-mapped (:func:`~spotdiff.cases.arrow_table`)."""
    import pyarrow.parquet as pq

    if path.suffix == ".arrow":
        table = arrow_table(path)
        return set(table.column_names), lambda cols: iter(table.select(cols).to_batches(max_chunksize=batch))
    try:
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read parquet file: {exc}", file=path) from exc
    return set(pf.schema_arrow.names), lambda cols: _batches(pf, cols, path, batch)


def _batches(pf: Any, columns: list[str], path: Path, batch: int = BATCH) -> Iterator[Any]:
    """``pf``'s record batches of ``columns``; a damaged page or footer is a DataError naming the file."""
    import pyarrow as pa

    batches = pf.iter_batches(batch_size=batch, columns=columns)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise DataError(f"cannot read parquet data: {exc}", file=path) from exc
        yield batch
