"""Cases as the parquet shards of a Hugging Face dataset: one row per case, one config (folder) per subset.

A row holds the case's id and subset, its images (``datasets``' ``Image`` feature: the file's own bytes, so an
image keeps its content key) or its videos (``Video`` feature, with each clip's window in ``starts`` / ``ends``),
its texts, its truth matrix, the texts' roles, its tags as ``[name, value]`` pairs and its prompt templates.
The features are declared in each file's schema metadata (``huggingface``), where ``datasets`` reads them; a
subset's rows go to ``<config>/test-0000k-of-0000n.parquet``, a new shard past :data:`SHARD_BYTES` of media, row
groups of :data:`ROW_GROUP` rows (a reader holds about one group of images at a time).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotdiff.cases import Case, FileImage, ImageRef, ParquetImage, parquet_image_bytes
from spotdiff.errors import DataError
from spotdiff.video.clips import VideoRef

#: Media bytes per shard before the next one starts (``datasets``' ``push_to_hub`` default, 500 MB).
SHARD_BYTES = 500_000_000
ROW_GROUP = 64
#: The split every published set is (a benchmark is a test set).
SPLIT = "test"


def _value(dtype: str) -> dict:
    return {"dtype": dtype, "_type": "Value"}


def _list(feature: dict) -> dict:
    return {"feature": feature, "_type": "List"}


def _columns() -> dict[str, tuple[Any, dict]]:
    """Every column: its Arrow type and its ``datasets`` feature."""
    import pyarrow as pa

    media = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    texts = (pa.list_(pa.string()), _list(_value("string")))
    times = (pa.list_(pa.float64()), _list(_value("float64")))
    return {
        "id": (pa.string(), _value("string")), "subset": (pa.string(), _value("string")),
        "images": (pa.list_(media), _list({"_type": "Image"})), "videos": (pa.list_(media), _list({"_type": "Video"})),
        "starts": times, "ends": times, "texts": texts,
        "truth": (pa.list_(pa.list_(pa.bool_())), _list(_list(_value("bool")))), "roles": texts,
        "tags": (pa.list_(pa.list_(pa.string())), _list(_list(_value("string")))), "prompts": texts,
    }  # fmt: skip


def config_name(subset: str) -> str:
    """A subset's config name (and folder): letters, digits, ``.``, ``_`` and ``-``.

    >>> config_name("Object/Location")
    'Object--Location'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "--", subset).strip("-") or "x"


def _image_bytes(ref: ImageRef) -> tuple[bytes, str]:
    """An image's bytes and name: a file's or a parquet cell's own bytes (its content key kept), else its pixels
    as PNG (a crop, an array)."""
    if isinstance(ref, FileImage) and ref.bbox is None:
        try:
            return ref.path.read_bytes(), ref.path.name
        except OSError as exc:
            raise DataError(f"cannot read image {ref.describe()}: {exc}") from None
    if isinstance(ref, ParquetImage) and ref.bbox is None:
        return parquet_image_bytes(ref.path, ref.row, ref.column, ref.item), f"{ref.sha256[:16]}.png"
    buf = io.BytesIO()
    ref.load().save(buf, format="PNG")
    return buf.getvalue(), f"{ref.describe()}.png"


def case_row(case: Case) -> dict[str, Any]:
    """The row of one case (module docstring); a case mixing images and videos is an error."""
    videos = [r for r in case.images if isinstance(r, VideoRef)]
    if videos and len(videos) != len(case.images):
        raise DataError(f"case {case.id} mixes images and videos: a published row holds one kind")
    row: dict[str, Any] = {"id": case.id, "subset": case.subset, "texts": list(case.texts),
                           "truth": case.truth.tolist(), "roles": list(case.roles),
                           "tags": [[k, v] for k, v in case.tags.items() if k != "subset"],
                           "prompts": list(case.prompts)}  # fmt: skip
    if videos:
        try:
            row["videos"] = [{"bytes": v.path.read_bytes(), "path": v.path.name} for v in videos]
        except OSError as exc:
            raise DataError(f"case {case.id}: cannot read its video: {exc}") from None
        row["starts"], row["ends"] = [v.start for v in videos], [v.end for v in videos]
    else:
        row["images"] = [dict(zip(("bytes", "path"), _image_bytes(r), strict=True)) for r in case.images]
    return row


@dataclass
class Config:
    """One subset as written: its config (folder), cases, shard files (relative to the output folder)."""

    subset: str
    name: str
    cases: int = 0
    files: list[str] = field(default_factory=list)


class ShardWriter:
    """Writes rows (:func:`case_row`) subset by subset into ``out``; the cases of a subset must come together
    (a subset met again after another is an error), so that reading the configs in order gives the cases in
    order.

    Args:
        out: the output folder.
        kind: ``images`` or ``videos``: the media columns of every row.
        prompts: whether the rows have prompt templates (zero-shot sets).
    """

    def __init__(self, out: Path, kind: str, prompts: bool) -> None:
        import pyarrow as pa

        columns = _columns()
        names = ["id", "subset", *(["videos", "starts", "ends"] if kind == "videos" else ["images"]), "texts",
                 "truth", "roles", "tags", *(["prompts"] if prompts else [])]  # fmt: skip
        features = {"info": {"features": {n: columns[n][1] for n in names}}}
        self.schema = pa.schema([(n, columns[n][0]) for n in names]).with_metadata(
            {"huggingface": json.dumps(features)})  # fmt: skip
        self.out, self.kind = out, kind
        self.configs: list[Config] = []
        self._rows: list[dict] = []
        self._writer: Any = None
        self._bytes = 0

    def add(self, row: dict[str, Any]) -> None:
        current = self.configs[-1] if self.configs else None
        if current is None or row["subset"] != current.subset:
            if any(c.subset == row["subset"] for c in self.configs):
                raise DataError(f"case {row['id']}: the cases of subset {row['subset']!r} do not come together, so "
                                "its config would not keep their order")  # fmt: skip
            self._close()
            self.configs.append(Config(row["subset"], config_name(row["subset"])))
        size = sum(len(m["bytes"]) for m in row.get(self.kind, []))
        if self._writer is not None and self._bytes + size > SHARD_BYTES:
            self._close()
        self._rows.append(row)
        self._bytes += size
        self.configs[-1].cases += 1
        if len(self._rows) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._rows:
            return
        if self._writer is None:
            config = self.configs[-1]
            path = self.out / config.name / f"{SPLIT}-{len(config.files):05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            config.files.append(path.relative_to(self.out).as_posix())
            self._writer = pq.ParquetWriter(path, self.schema)
        table = pa.Table.from_pylist([{n: r.get(n) for n in self.schema.names} for r in self._rows], self.schema)
        self._writer.write_table(table, row_group_size=ROW_GROUP)
        self._rows = []

    def _close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer, self._bytes = None, 0

    def finish(self) -> list[Config]:
        """Close the last shard and name every shard ``<split>-0000k-of-0000n.parquet``; the configs written."""
        self._close()
        for config in self.configs:
            total = len(config.files)
            named = []
            for k, rel in enumerate(config.files):
                target = f"{config.name}/{SPLIT}-{k:05d}-of-{total:05d}.parquet"
                (self.out / rel).rename(self.out / target)
                named.append(target)
            config.files = named
        return self.configs


def write_shards(cases: Iterable[Case], out: Path) -> tuple[list[Config], str, bool]:
    """Write ``cases`` as shards in ``out``; the configs, the kind of media (``images`` or ``videos``) and whether
    the rows hold prompt templates."""
    writer: ShardWriter | None = None
    for case in cases:
        row = case_row(case)
        if writer is None:
            writer = ShardWriter(out, "videos" if "videos" in row else "images", bool(case.prompts))
        elif ("videos" in row) != (writer.kind == "videos"):
            raise DataError(f"case {case.id}: some cases hold images and others videos; a set holds one kind")
        writer.add(row)
    if writer is None:
        raise DataError("no cases to publish")
    return writer.finish(), writer.kind, "prompts" in writer.schema.names
