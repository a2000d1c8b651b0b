"""A benchmark declared in a YAML file (:mod:`spotdiff.benchmarks.declaration`), as a registered loader.

:func:`declared_benchmark` makes a :class:`DeclaredBenchmark` subclass of a declaration and registers it
under the declared name, as ``@BENCHMARKS.register`` does a built-in: every command, the Python API and
reports then use it by that name. Its cases are its rows (:mod:`spotdiff.benchmarks.tables`), each made
into a case by the declaration's templates; an empty text, a value outside its choices or a row without an
image is an error naming the data file, the row and the column, and a row a ``skip_empty`` rule drops is
counted. Images and videos stay lazy references; an image file a row names is read when it is scored (an
error then names the file, the row and the column too), and only inside the data and the folders declared.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from spotdiff.benchmarks._io import IMAGE_ROOT, first_true, frozen_truth, images_dir, inside
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, LoadReport
from spotdiff.benchmarks.declaration import CaseSpec, Declaration, Truth
from spotdiff.benchmarks.tables import SUFFIXES, Table, folder_files, label, rows
from spotdiff.benchmarks.templates import Template, missing_column
from spotdiff.cases import (
    ANSWER_SEP,
    ANSWERS_TAG,
    PAIRS_TAG,
    PROMPTS_TAG,
    READER_TAG,
    Case,
    FileImage,
    ImageRef,
    ParquetImage,
    file_digest,
    parquet_image_bytes,
)
from spotdiff.errors import DataError
from spotdiff.jsonio import atomic_path
from spotdiff.video.clips import VideoRef

_GLOB = re.compile(r"[*?\[]")
#: Distinct tag dicts shared between cases before the memo starts afresh (memory stays bounded).
_SHARED_TAGS = 4096
_TRUE, _FALSE = {"1", "true", "yes"}, {"0", "false", "no"}


@dataclass(frozen=True, eq=False)
class DeclaredImage(FileImage):
    """An image file a row names; ``origin`` (the data file, row and column) is named when it cannot be read."""

    origin: str = ""

    def describe(self) -> str:
        return f"{super().describe()} (named by {self.origin})"


@dataclass(frozen=True, eq=False)
class DeclaredVideo(VideoRef):
    """A video file (or a window of one) a row names, with its ``origin`` named when it cannot be read."""

    origin: str = ""

    def describe(self) -> str:
        return f"{super().describe()} (named by {self.origin})"


def url_media_name(url: str) -> str:
    """The file an image or video URL is fetched into (in the benchmark's media folder): the URL's SHA-256 and
    its file's suffix.

    >>> url_media_name("https://example.org/a/cat.JPG?x=1")[-4:]
    '.jpg'
    """
    suffix = Path(url.split("?")[0]).suffix.lower()
    return hashlib.sha256(url.encode()).hexdigest()[:32] + (suffix if re.fullmatch(r"\.[a-z0-9]{1,5}", suffix) else "")


def _is_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))


class DeclaredBenchmark(Benchmark):
    """The loader of a declared benchmark; :func:`declared_benchmark` makes one subclass per declaration.

    ``media`` is the folder image and video URLs are fetched into and embedded videos written to (the
    benchmark's folder in the data home, set by :mod:`spotdiff.data.declared`); it is one of the folders
    cases may name files in.
    """

    option_names = ("images", "videos")  # the -o options it reads
    declaration: ClassVar[Declaration]
    media: ClassVar[Path | None] = None

    def __init__(self, root: str | Path, **options: object) -> None:
        super().__init__(root, **options)
        decl = self.declaration
        base = self.root if self.root.is_dir() else self.root.parent
        for key, folder in (("images", decl.images), ("videos", decl.videos)):
            inside(base, folder, file=decl.path, field=key)
        self._images = images_dir(base, self.options, decl.images)
        self._videos = images_dir(base, self.options, decl.videos, option="videos")
        if self.media is not None:
            declared = self.options.get(IMAGE_ROOT) or []
            declared = [declared] if isinstance(declared, (str, Path)) else list(declared)
            self.options = {**self.options, IMAGE_ROOT: [*declared, str(self.media)]}
        self._refs: dict[str, ImageRef] = {}
        self._tag_dicts: dict[tuple, dict[str, str]] = {}

    @classmethod
    def default_data(cls) -> Path | None:
        return cls.declaration.local_root

    @classmethod
    def declaration_record(cls) -> dict[str, str] | None:
        return cls.declaration.record()

    # -- files ------------------------------------------------------------------------------

    def tables(self) -> list[Table]:
        """Every data file of every entry, in the declaration's order (a glob's matches sorted); an entry whose
        names match no file, or a name outside the data, is an error naming the entry (one of several names
        may match none: a folder may hold only some subsets' files)."""
        decl, base = self.declaration, self.root if self.root.is_dir() else self.root.parent
        out = []
        for k, source in enumerate(decl.sources):
            where, found = f"data[{k}]", 0
            for pattern in source.patterns:
                inside(base, _GLOB.split(pattern)[0] or ".", file=decl.path, field=where)
                paths = sorted(base.glob(pattern)) if _GLOB.search(pattern) else [base / pattern]
                wanted = Path.is_dir if source.format == "folder" else Path.is_file
                for path in filter(wanted, paths):
                    name = path.relative_to(base).as_posix()
                    inside(base, name, file=decl.path, field=where)
                    out.append(self._table(path, name, source, where))
                    found += 1
            if not found:
                raise DataError(f"no data file matches {', '.join(source.patterns)} in {base}", file=decl.path,
                                field=where)  # fmt: skip
        return out

    def _table(self, path: Path, name: str, source: Any, where: str) -> Table:
        fmt = source.format or SUFFIXES.get(path.suffix.lower())
        if fmt is None:
            raise DataError(f"{name}: unknown format of {path.suffix!r} files; give format ({', '.join(SUFFIXES)})",
                            file=self.declaration.path, field=f"{where}.format")  # fmt: skip
        tab = fmt == "tsv"
        delimiter = source.delimiter or ("\t" if tab else ",")
        quoted = source.quoted if source.quoted is not None else not tab
        return Table(path, name, fmt, source.subset or self.name, source.records, delimiter, quoted)

    def data_files(self) -> list[Path]:
        files: list[Path] = []
        for table in self.tables():
            files += folder_files(table) if table.format == "folder" else [table.path]
        return files

    # -- cases ------------------------------------------------------------------------------

    def _columns(self) -> frozenset[str] | None:
        """The columns the declaration reads (None: any, a template computes a column's name)."""
        spec = self.declaration.cases
        templates = spec.templates()
        if any(t.any_column for t in templates):
            return None
        return frozenset().union(*(t.columns for t in templates)) | set(spec.skip_empty)

    def check_subset(self, subset: str | None) -> None:
        """The subset (checked when the declaration lists its subsets), and every column the declaration names
        in the first row of each data file: a run fails on a misspelt column before any model loads."""
        super().check_subset(subset)
        spec = self.declaration.cases
        columns = self._columns()
        for table in self.tables():
            first = next(rows(table, columns, spec.media_columns()), None)
            if first is None:
                continue
            place, row = first
            for t in spec.templates():
                absent = sorted(c for c in t.columns if c not in row)
                if absent:
                    raise t.missing(absent[0], row, table.path, label(place))
            self._skipped(row, table, label(place))

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        spec = self.declaration.cases
        columns = self._columns()
        gallery: dict[str, _Gallery] = {}
        by_file = spec.subset.column == "_subset"  # the subset is the entry's: whole files are skipped
        for table in self.tables():
            if subset is not None and by_file and table.subset != subset:
                continue
            for place, row in rows(table, columns, spec.media_columns()):
                self.report.records += 1
                case = self._case(spec, table, place, row, gallery)
                if case is not None and (subset is None or case.subset == subset):
                    yield case
        for name, items in gallery.items():
            if subset is None or name == subset:
                yield items.case(name)

    def _case(self, spec: CaseSpec, table: Table, place: dict, row: dict, gallery: dict) -> Case | None:
        """The case of one row (None: skipped by ``skip_empty``, or gathered into a gallery)."""
        where, path = _Where(place), table.path

        def value(t: Template) -> Any:
            column = t.plain
            if column is None:
                return t(row, place, path, where)
            try:
                return row[column]
            except KeyError:
                raise t.missing(column, row, path, where) from None

        skipped = self._skipped(row, table, where) if spec.skip_empty else None
        if skipped is not None:
            self.report.skip(f"empty {skipped} (cases.skip_empty)")
            return None
        subset = _text(value(spec.subset), table, where, spec.subset)
        texts = tuple([_text(v, table, where, t) for t, v in _values(spec.texts, value)])
        refs = [self._image(v, table, where, t) for t, v in _values(spec.images, value)] if spec.images else []
        if spec.videos:
            refs += self._videos_of(spec, value, table, where)
        if spec.gallery:
            gallery.setdefault(subset, _Gallery()).add(refs, texts)
            return None
        tags = self._tags(spec, value, subset, table, where)
        truth = self._truth(spec, value, len(refs), texts, table, where, tags)
        case_id = _text(value(spec.id), table, where, spec.id)
        roles = spec.roles if type(spec.roles) is tuple else tuple(_list(value(spec.roles), table, where, spec.roles))
        prompts = tuple([_text(v, table, where, t) for t, v in _values(spec.prompts, value)]) if spec.prompts else ()
        try:
            return Case(case_id, texts, truth, tuple(refs), tags, roles=roles, prompts=prompts)
        except DataError as exc:
            raise DataError(str(exc), file=table.path, record=where) from None

    def _skipped(self, row: dict, table: Table, where: str) -> str | None:
        """The first ``skip_empty`` column that is empty in ``row`` (the row is skipped), None for none; a column
        the row lacks is an error."""
        for column in self.declaration.cases.skip_empty:
            if column not in row:
                raise missing_column(column, row, "cases.skip_empty", self.declaration.path, table.path, where)
            if row[column] is None or (isinstance(row[column], str) and not row[column].strip()):
                return column
        return None

    def _tags(self, spec: CaseSpec, value: Any, subset: str, table: Table, where: Any) -> dict[str, str]:
        """The case's tags: its subset, the declared tags, the prompt style. Cases whose tags are equal share one
        dict (as a built-in loader's cases of one file do), unless the case's answers add their own."""
        if isinstance(spec.tags, tuple):
            raw: Any = tuple(value(t) for _, t in spec.tags)
        else:
            raw = value(spec.tags)
        key = (subset, raw) if spec.answers is None and isinstance(raw, (str, tuple)) else None
        shared = self._tag_dicts.get(key) if key is not None else None
        if shared is not None:
            return shared
        tags = {"subset": subset, **self._declared_tags(spec, raw, table, where)}
        if spec.prompt_style is not None:
            tags[PROMPTS_TAG] = spec.prompt_style
        if key is not None:
            if len(self._tag_dicts) >= _SHARED_TAGS:
                self._tag_dicts.clear()
            self._tag_dicts[key] = tags
        return tags

    @staticmethod
    def _declared_tags(spec: CaseSpec, raw: Any, table: Table, where: Any) -> dict[str, str]:
        """The declared tags of one row, from their values (``raw``: one per tag, or one mapping-valued value)."""
        if isinstance(spec.tags, tuple):
            return {k: "" if v is None else str(v) for (k, _), v in zip(spec.tags, raw, strict=True)}
        got = raw
        if isinstance(got, str):  # a JSON object (or list of pairs) written as text
            with contextlib.suppress(ValueError):
                got = json.loads(got)
        pairs = got.items() if isinstance(got, dict) else got
        try:
            return {str(k): "" if v is None else str(v) for k, v in pairs}
        except (TypeError, ValueError):
            raise DataError(f"expected a mapping of tags (or [name, value] pairs), got {got!r:.80}", file=table.path,
                            record=where, field=spec.tags.column or spec.tags.key) from None  # fmt: skip

    def media_urls(self) -> list[str]:
        """The image and video URLs the rows name, each once, in order (``spotdiff data fetch`` fetches them)."""
        spec = self.declaration.cases
        templates = [t for f in (spec.images, spec.videos) for t in (f if isinstance(f, tuple) else (f,))]
        if not templates:
            return []
        columns = self._columns()
        urls: dict[str, None] = {}
        for table in self.tables():
            for place, row in rows(table, columns, frozenset()):
                for t in templates:
                    got = t(row, place, table.path, label(place))
                    for item in got if isinstance(got, (list, tuple)) else [got]:
                        if isinstance(item, str) and _is_url(item.strip()):
                            urls[item.strip()] = None
        return list(urls)

    # -- media ------------------------------------------------------------------------------

    def _image(self, value: Any, table: Table, where: str, t: Template) -> ImageRef:
        ref = self._refs.get(value) if type(value) is str else None
        if ref is not None:
            return ref
        if isinstance(value, ParquetImage):
            return value
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"no image (got {value!r:.60})", file=table.path, record=where, field=t.column or t.key)
        name = value.strip()
        path = self._url_file(name, table, where, t) if _is_url(name) else self._images / name
        ref = self._refs[value] = DeclaredImage(path, origin=f"{table.name} {where} {t.column or t.key}")
        return ref

    def _url_file(self, url: str, table: Table, where: str, t: Template) -> Path:
        """Where an image or video URL was fetched to (``spotdiff data fetch``); an error when it was not."""
        path = None if self.media is None else self.media / url_media_name(url)
        if path is None or not path.is_file():
            raise DataError(f"{url} is not fetched yet: run `spotdiff data fetch {self.declaration.path}`",
                            file=table.path, record=where, field=t.column or t.key)  # fmt: skip
        return path

    def _videos_of(self, spec: CaseSpec, value: Any, table: Table, where: str) -> list[ImageRef]:
        videos = _values(spec.videos, value)
        window = spec.window
        out: list[ImageRef] = []
        for k, (t, cell) in enumerate(videos):
            origin = f"{table.name} {where} {t.column or t.key}"
            if isinstance(cell, ParquetImage):
                path = self._written(cell, table, where, t)
            elif isinstance(cell, str) and cell.strip():
                path = self._url_file(cell, table, where, t) if _is_url(cell) else self._videos / cell.strip()
            else:
                raise DataError(f"no video (got {cell!r:.60})", file=table.path, record=where, field=t.column or t.key)
            start = end = None
            if window is not None:
                start, end = (_time(value(b), k, path, window.unit, table, where, b) if b is not None else None
                              for b in (window.start, window.end))  # fmt: skip
            try:
                out.append(DeclaredVideo(path, start, end, origin=origin))
            except DataError as exc:
                raise DataError(str(exc), file=table.path, record=where) from None
        return out

    def _written(self, ref: ParquetImage, table: Table, where: str, t: Template) -> Path:
        """An embedded video's bytes as a file of the media folder, named by their digest (written once)."""
        if self.media is None:
            raise DataError("an embedded video needs a media folder (spotdiff.data.declared sets it)",
                            file=table.path, record=where, field=t.column or t.key)  # fmt: skip
        path = self.media / f"{ref.sha256}.mp4"
        if not path.is_file() or file_digest(path) != ref.sha256:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path, sweep=False) as tmp:
                tmp.write_bytes(parquet_image_bytes(ref.path, ref.row, ref.column, ref.item))
        return path

    # -- truth ------------------------------------------------------------------------------

    def _truth(self, spec: CaseSpec, value: Any, n_images: int, texts: tuple[str, ...], table: Table, where: str,
               tags: dict[str, str]) -> np.ndarray:  # fmt: skip
        """The case's truth, from ``cases.truth`` or its answers (which also set the answer tags)."""
        if spec.answers is not None:
            return _answer_truth(spec, value, table, where, tags)
        truth: Truth = spec.truth  # type: ignore[assignment]
        n_rows = max(n_images, 1)
        if truth.kind == "first":
            if truth.n > len(texts):
                raise DataError(f"truth first {truth.n}: the case has {len(texts)} texts", file=table.path,
                                record=where, field="cases.truth")  # fmt: skip
            return first_true(len(texts)) if truth.n == 1 and n_rows == 1 else _leading(n_rows, len(texts), truth.n)
        if truth.kind == "diagonal":
            if n_images != len(texts):
                raise DataError(f"truth diagonal: {n_images} images and {len(texts)} texts (image k goes with text "
                                "k)", file=table.path, record=where, field="cases.truth")  # fmt: skip
            return frozen_truth(np.eye(n_images, dtype=bool))
        if truth.kind == "label":
            return _label_truth(truth, value, n_rows, texts, table, where)
        if truth.kind == "matrix":
            (t,) = truth.values
            return np.array([[_flag(c, table, where, t) for c in _list(r, table, where, t)]
                             for r in _list(value(t), table, where, t)], dtype=bool)  # fmt: skip
        return np.array([[_flag(value(t), table, where, t) for t in r] for r in truth.values], dtype=bool)


class _Where:
    """A row as errors name it (:func:`~spotdiff.benchmarks.tables.label`), made only when an error names it."""

    __slots__ = ("place",)

    def __init__(self, place: dict) -> None:
        self.place = place

    def __str__(self) -> str:
        return label(self.place)


class _Gallery:
    """The rows of one subset gathered into one retrieval case: its distinct images, every text, and which go
    together (each row's texts with each of its images)."""

    def __init__(self) -> None:
        self.images: list[ImageRef] = []
        self.texts: list[str] = []
        self.pairs: list[tuple[int, int]] = []
        self._index: dict[str, int] = {}

    def add(self, refs: list[ImageRef], texts: tuple[str, ...]) -> None:
        slots = []
        for ref in refs:
            key = ref.describe() if isinstance(ref, DeclaredImage) else ref.key
            if key not in self._index:
                self._index[key] = len(self.images)
                self.images.append(ref)
            slots.append(self._index[key])
        for text in texts:
            self.pairs += [(i, len(self.texts)) for i in slots]
            self.texts.append(text)

    def case(self, subset: str) -> Case:
        truth = np.zeros((max(len(self.images), 1), len(self.texts)), dtype=bool)
        for i, t in self.pairs:
            truth[i, t] = True
        return Case(subset, tuple(self.texts), truth, tuple(self.images), {"subset": subset})


_LEADING: dict[tuple[int, int, int], np.ndarray] = {}


def _leading(rows_: int, k: int, n: int) -> np.ndarray:
    """The read-only truth of ``rows_`` images x ``k`` texts whose first ``n`` texts go with every image."""
    key = (rows_, k, n)
    if key not in _LEADING:
        _LEADING[key] = frozen_truth([[j < n for j in range(k)] for _ in range(rows_)])
    return _LEADING[key]


def _values(spec: tuple[Template, ...] | Template, value: Any) -> Any:
    """``(template, value)`` of each item: one per template of a list, or each item of one template's list."""
    if type(spec) is tuple:
        return zip(spec, map(value, spec), strict=True)
    got = value(spec)
    return [(spec, v) for v in got] if isinstance(got, (list, tuple)) else [(spec, got)]


def _text(got: Any, table: Table, where: str, t: Template) -> str:
    """A value as a text, surrounding whitespace removed; an empty one is an error naming the row and column."""
    text = got.strip() if type(got) is str else "" if got is None else str(got).strip()
    if not text:
        raise DataError(f"empty text (from {t.key})", file=table.path, record=where, field=t.column or t.key)
    return text


def _list(got: Any, table: Table, where: str, t: Template) -> list:
    """A list value: a list column's, or a JSON list written as text (a CSV cell, a rendered template)."""
    if isinstance(got, str):
        with contextlib.suppress(ValueError):
            got = json.loads(got)
    if not isinstance(got, (list, tuple)):
        raise DataError(f"expected a list, got {got!r:.60}", file=table.path, record=where, field=t.column or t.key)
    return list(got)


def _flag(got: Any, table: Table, where: str, t: Template) -> bool:
    """A truth cell: true/false, 1/0 or yes/no (any case)."""
    if isinstance(got, bool):
        return got
    text = str(got).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise DataError(f"expected true/false, 1/0 or yes/no, got {got!r:.60}", file=table.path, record=where,
                    field=t.column or t.key)  # fmt: skip


def _label_truth(truth: Truth, value: Any, n_rows: int, texts: tuple[str, ...], table: Table, where: str) -> np.ndarray:
    """Each image's label names its text: an index from 0, one of the choices (text k is choice k), or the text."""
    if len(truth.values) != n_rows:
        raise DataError(f"{len(truth.values)} labels for {n_rows} images", file=table.path, record=where,
                        field="cases.truth.label")  # fmt: skip
    out = np.zeros((n_rows, len(texts)), dtype=bool)
    for i, t in enumerate(truth.values):
        got = value(t)
        text = "" if got is None else str(got).strip()
        if truth.choices:
            names = [c.lower() for c in truth.choices]
            k = names.index(text.lower()) if text.lower() in names else None
            what = f"the choices {', '.join(truth.choices)}"
        else:
            k = int(text) if text.isdigit() else texts.index(text) if text in texts else None
            what = f"an index from 0 to {len(texts) - 1} or one of the case's texts"
        if k is None or k >= len(texts):
            raise DataError(f"label {got!r} is not {what}", file=table.path, record=where, field=t.column or t.key)
        out[i, k] = True
    return out


def _answer_truth(spec: CaseSpec, value: Any, table: Table, where: str, tags: dict[str, str]) -> np.ndarray:
    """A question case's truth: ``gold[i][q]`` is the first candidate answer; sets the answers, reader and pairs
    tags."""
    answers = spec.answers
    assert answers is not None
    choices = answers.choices
    if isinstance(choices, Template):
        got = value(choices)
        choices = tuple(got if isinstance(got, (list, tuple)) else str(got).split(ANSWER_SEP))
        if len(choices) != 2 or not all(str(c).strip() for c in choices):
            raise DataError(f"expected two candidate answers, got {got!r:.60}", file=table.path, record=where,
                            field=answers.choices.column or answers.choices.key)  # fmt: skip
    names = [str(c).strip().lower() for c in choices]
    truth = np.zeros((len(answers.gold), len(answers.gold[0])), dtype=bool)
    for i, row in enumerate(answers.gold):
        for q, t in enumerate(row):
            got = value(t)
            text = "" if got is None else str(got).strip().lower()
            if text not in names:
                raise DataError(f"answer {got!r} is none of {', '.join(map(str, choices))}", file=table.path,
                                record=where, field=t.column or t.key)  # fmt: skip
            truth[i, q] = names.index(text) == 0
    tags[ANSWERS_TAG] = ANSWER_SEP.join(str(c).strip() for c in choices)
    if answers.reader is not None:
        tags[READER_TAG] = answers.reader
    if answers.pairs is not None:
        tags[PAIRS_TAG] = answers.pairs
    return truth


def _time(got: Any, k: int, video: Path, unit: str, table: Table, where: str, t: Template) -> float | None:
    """Video ``k``'s window bound (one value for every video, or a list with one per video) in seconds."""
    if isinstance(got, (list, tuple)):
        got = got[k] if k < len(got) else None
    if got is None or (isinstance(got, str) and not got.strip()):
        return None
    try:
        number = float(got)
    except (TypeError, ValueError):
        raise DataError(f"expected a number, got {got!r:.60}", file=table.path, record=where,
                        field=t.column or t.key) from None  # fmt: skip
    if unit == "seconds":
        return number
    from spotdiff.video.frames import video_rate

    return number / float(video_rate(video))


def declared_benchmark(
    decl: Declaration, media: Path | None = None, versions: Path | None = None
) -> type[DeclaredBenchmark]:
    """The loader of ``decl``, registered under its name (the one already registered for the same file and
    content, or replacing an earlier version of the same file, or of a file in ``versions``); a name another
    benchmark holds is an error.

    Args:
        decl: the declaration.
        media: the folder its URLs are fetched into and its embedded videos written to (in the data home).
        versions: a folder whose declarations are versions of this one (a hub dataset's snapshots, one folder per
            commit): the one read last is the one registered.
    """
    name = decl.name
    if name in BENCHMARKS:
        held = BENCHMARKS.get(name)
        record = held.declaration_record()
        if record is not None and record["path"] == str(decl.path) and record["sha256"] == decl.sha256:
            return held  # type: ignore[return-value]
        versioned = versions is not None and record is not None and all(
            Path(p).resolve().is_relative_to(versions.resolve()) for p in (record["path"], decl.path)
        )
        if not versioned and (record is None or record["path"] != str(decl.path)):
            what = "a built-in benchmark" if record is None else f"the declaration {record['path']}"
            raise DataError(f"the name {name!r} is already {what}'s; give this benchmark another name",
                            file=decl.path, field="name")  # fmt: skip
    attrs = {"metadata": decl.metadata, "declaration": decl, "media": media, "__module__": __name__,
             "__doc__": f"The benchmark declared in {decl.path}."}  # fmt: skip
    cls = type(f"Declared[{name}]", (DeclaredBenchmark,), attrs)
    BENCHMARKS.register(name, replace=True)(cls)
    return cls
