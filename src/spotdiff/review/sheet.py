"""What a review is: the items, the sheet a person edits, the decisions, the rules that make several reviewers'
decisions one; read back strictly (moved here from ``spotdiff.synth.review``, issue 43). The human step of the
generative engines: they write a sheet (:func:`write_review`) and their ``--from-review`` reads it back
(:func:`read_reviews`); the review page (:mod:`spotdiff.review.session`) edits it.

:func:`write_review` writes ``review.csv`` (the sheet a person edits: ``decision`` accept/reject and
the text columns) and ``review.html`` (the same items with their images, offline: images by relative
path, no external URL). :func:`read_review` reads the edited CSV back; a bad row is an error naming
the file, the row and the field; an image cell must name a file inside the sheet's folder (links
leading out refused), and cells are written so that a spreadsheet shows formulas as text (OWASP CSV
injection) and read back unchanged. VISLA's authors validated every LLM-written caption by hand this way
(VISLA Sec. 3.2-3.3); docs/synthesis.md shows the workflow.
"""

from __future__ import annotations

import csv
import html
import io
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spotdiff.benchmarks._io import inside
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import atomic_path, atomic_write_text

CSV_NAME = "review.csv"
HTML_NAME = "review.html"
DECISIONS = ("accept", "reject")
#: how several reviewers' decisions make one: ``all`` keeps an item every reviewer accepted, ``majority``
#: one more than half of them accepted (a tie rejects)
RULES = ("all", "majority")
#: a reviewer's name, as it appears in ``review.<name>.csv``
REVIEWER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FIXED = ("id", "decision")
_TRAILING = ("verdict", "details")


@dataclass(frozen=True)
class ReviewItem:
    """One generated item as the reviewer sees it.

    ``images`` and ``texts`` map column names to values (image paths relative to the sheet's
    folder); ``verdict`` is the automatic check's verdict and ``accept`` the decision it suggests;
    ``details`` anything else worth showing (the LM's raw answers, candidates).
    """

    id: str
    images: dict[str, str]
    texts: dict[str, str]
    verdict: str
    accept: bool
    details: str = ""


@dataclass
class ReviewResult:
    """The rows of an edited sheet (or of several reviewers' sheets, under ``rule``): the accepted items
    (file order) and the count of rejected ones."""

    accepted: list[ReviewItem] = field(default_factory=list)
    rejected: int = 0
    files: list[str] = field(default_factory=list)
    rule: str = RULES[0]

    def summary(self) -> dict:
        """What a ``--from-review`` run records: the files read, the rule, and the counts."""
        return {"review": self.files, "review_rule": self.rule, "rejected": self.rejected}


@dataclass(frozen=True)
class SheetRow:
    """One row of a sheet as read: its row number in the file, its id, its decision (None: undecided) and
    every cell, by column (values as written before :func:`neutral`)."""

    row: int
    id: str
    decision: str | None
    cells: dict[str, str]


def header(image_fields: Sequence[str], text_fields: Sequence[str]) -> list[str]:
    """The CSV's columns.

    >>> header(["image"], ["p1", "p2"])
    ['id', 'decision', 'image', 'p1', 'p2', 'verdict', 'details']
    """
    return [*_FIXED, *image_fields, *text_fields, *_TRAILING]


def write_review(
    folder: Path, items: Sequence[ReviewItem], *, image_fields: Sequence[str], text_fields: Sequence[str], title: str
) -> tuple[Path, Path]:
    """Write ``review.csv`` and ``review.html`` under ``folder``; return their paths.

    Args:
        folder: where both files go (image paths are relative to it).
        items: the generated items.
        image_fields: the image columns, in order.
        text_fields: the editable text columns, in order.
        title: the page's title.
    """
    folder = Path(folder)
    csv_path = folder / CSV_NAME
    rows = [
        [
            it.id,
            DECISIONS[0] if it.accept else DECISIONS[1],
            *(it.images[f] for f in image_fields),
            *(it.texts[f] for f in text_fields),
            it.verdict,
            it.details,
        ]
        for it in items
    ]
    write_sheet(csv_path, header(image_fields, text_fields), rows)
    html_path = folder / HTML_NAME
    atomic_write_text(html_path, _page(items, image_fields, text_fields, title))
    return csv_path, html_path


def write_sheet(path: Path, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Write a sheet: the header, then each row's cells through :func:`neutral`, whole or not at all
    (a temporary file renamed into place, so a killed process never leaves half a sheet), and read back
    before it replaces ``path``: a sheet the readers would refuse (a cell longer than the CSV reader's field
    limit, text that UTF-8 cannot hold) is a DataError naming the file, and ``path`` is left as it was.

    Args:
        path: the CSV file.
        columns: the header (:func:`header`).
        rows: the cells of each row, in the header's order (an undecided row's decision is empty).
    """
    path = Path(path)
    table = [list(columns), *([neutral(c) for c in cells] for cells in rows)]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(table)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, sweep=False) as partial:
        try:
            partial.write_text(buffer.getvalue(), encoding="utf-8", newline="\n")
            with partial.open(encoding="utf-8", newline="") as fh:
                same = list(csv.reader(fh, strict=True)) == table
        except (UnicodeError, csv.Error) as exc:
            raise DataError(f"the sheet would not read back ({exc}); nothing written", file=path) from None
        if not same:
            raise DataError("the sheet would not read back as written; nothing written", file=path)


def reviewer_sheet(sheet: Path, reviewer: str) -> Path:
    """The file of one reviewer's decisions on ``sheet``: ``review.<reviewer>.csv`` beside it (so its image
    cells keep their meaning). A name that is not letters, digits, ``_``, ``.`` or ``-`` is refused.

    Args:
        sheet: the sheet (``review.csv``).
        reviewer: the reviewer's name.

    >>> reviewer_sheet(Path("out/review.csv"), "alice").as_posix()
    'out/review.alice.csv'
    """
    if not REVIEWER_NAME.fullmatch(reviewer):
        raise ConfigError(
            f"reviewer name {reviewer!r}: use 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return Path(sheet).with_name(f"{Path(CSV_NAME).stem}.{reviewer}.csv")


def reviewer_sheets(folder: Path) -> dict[str, Path]:
    """Every reviewer's file beside the sheet in ``folder``, by reviewer name (sorted)."""
    stem, suffix = Path(CSV_NAME).stem, Path(CSV_NAME).suffix
    found = {p.name[len(stem) + 1 : -len(suffix)]: p for p in Path(folder).glob(f"{stem}.*{suffix}")}
    return {name: found[name] for name in sorted(found) if REVIEWER_NAME.fullmatch(name)}


def sheet_image(item: ReviewItem, column: str, sheet: Path, row: int) -> str:
    """The image an accepted row names in ``column``, relative to the sheet's ``images/`` folder (the cell
    must read ``images/<name>``; anything else is an error naming the sheet, the row and the column).

    Args:
        item: the accepted row.
        column: its image column.
        sheet: the review sheet, for the message.
        row: the row's number among the accepted ones (from 1), for the message.

    >>> item = ReviewItem("0", {"image": "images/a/b.png"}, {}, "", True)
    >>> sheet_image(item, "image", Path("review.csv"), 1)
    'a/b.png'
    """
    rel = Path(item.images[column])
    if rel.is_absolute() or rel.parts[0] != "images" or len(rel.parts) < 2:
        where = f"accepted row {row} ({item.id})"
        raise DataError("expected images/<file name>", file=sheet, record=where, field=column)
    return Path(*rel.parts[1:]).as_posix()


def copy_images(
    names: Sequence[str], source: Path, out: Path, *, sheet: Path | None = None, under: str = "images"
) -> None:
    """Copy the named images from ``source`` to ``out/images`` (a missing one is an error; a name leaving
    ``source``, or a link leading out of it, is refused).

    Args:
        names: file names relative to ``source`` (subfolders kept).
        source: the images folder.
        out: the output folder.
        sheet: the file that named them (a review sheet), for the messages.
        under: the folder of ``out`` they are copied under ("": ``out`` itself).
    """
    for name in sorted(set(names)):
        src = inside(Path(source), name, file=sheet, record=name)
        if not src.is_file():
            raise DataError("image not found", file=src, field="filename")
        target = inside(Path(out) / under, name, file=sheet, record=name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)


#: what a spreadsheet reads as a formula at the start of a cell (OWASP, CSV injection)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutral(value: str) -> str:
    """A cell a spreadsheet shows as text: a leading ``'`` before a formula's first character (and before a
    leading ``'``, so that :func:`unneutral` gives every value back unchanged).

    >>> neutral("=1+1"), neutral("-1 cat"), neutral("a cat")
    ("'=1+1", "'-1 cat", 'a cat')
    """
    return "'" + value if value.startswith((*FORMULA_START, "'")) else value


def unneutral(value: str) -> str:
    """A cell as :func:`neutral` wrote it, back to the value (a spreadsheet that dropped the ``'`` is fine too).

    >>> unneutral(neutral("=1+1")), unneutral(neutral("'quoted")), unneutral("=1+1")
    ('=1+1', "'quoted", '=1+1')
    """
    return value[1:] if value.startswith("'") and value[1:].startswith((*FORMULA_START, "'")) else value


def _page(items: Sequence[ReviewItem], image_fields: Sequence[str], text_fields: Sequence[str], title: str) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in ["id", "suggested", *image_fields, *text_fields, *_TRAILING])
    rows = []
    for it in items:
        cells = [esc(it.id), DECISIONS[0] if it.accept else DECISIONS[1]]
        cells += [
            f'<img src="{esc(it.images[f], quote=True)}" alt="{esc(it.images[f])}" width="160">' if it.images[f] else ""
            for f in image_fields
        ]
        cells += [esc(it.texts[f]) for f in text_fields]
        cells += [esc(it.verdict), f"<pre>{esc(it.details)}</pre>"]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title>"
        "<style>td,th{border:1px solid #999;padding:4px;vertical-align:top}"
        "table{border-collapse:collapse}pre{white-space:pre-wrap;max-width:30em}</style></head><body>\n"
        f"<h1>{esc(title)}</h1>\n<p>Edit {CSV_NAME} beside this page: set <code>decision</code> to "
        "accept or reject and correct the text columns; then write the dataset with "
        "<code>--from-review</code>.</p>\n"
        f"<table><tr>{head}</tr>\n" + "\n".join(rows) + "\n</table></body></html>\n"
    )


def read_sheet(path: Path, *, image_fields: Sequence[str], text_fields: Sequence[str]) -> list[SheetRow]:
    """Read a sheet's rows, undecided ones too: the header must be the sheet's, every row needs its columns,
    a unique id and a decision of accept, reject or none yet (empty).

    Args:
        path: the CSV.
        image_fields: the image columns the sheet was written with.
        text_fields: its text columns.
    """
    path = Path(path)
    columns = header(image_fields, text_fields)
    rows: list[SheetRow] = []
    seen: set[str] = set()
    try:
        fh = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise DataError(f"cannot read the review sheet: {exc.strerror}", file=path) from None
    with fh:
        reader = csv.reader(fh, strict=True)
        try:
            got = next(reader)
        except StopIteration:
            raise DataError("empty review sheet (no header row)", file=path) from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(f"not a valid CSV: {exc}", file=path, record="row 1") from None
        if [c.strip() for c in got] != columns:
            raise DataError(f"unexpected header {got!r}; expected {columns!r}", file=path, record="row 1")
        row_no = 1
        while True:
            row_no += 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except (csv.Error, UnicodeDecodeError) as exc:
                raise DataError(f"not a valid CSV: {exc}", file=path, record=f"row {row_no}") from None
            if row:
                rows.append(_sheet_row(path, row_no, row, columns, seen))
    return rows


def _sheet_row(path: Path, row_no: int, row: list[str], columns: list[str], seen: set[str]) -> SheetRow:
    record = f"row {row_no}"
    if len(row) != len(columns):
        raise DataError(f"expected {len(columns)} columns, got {len(row)}", file=path, record=record)
    cells = dict(zip(columns, (unneutral(c) for c in row), strict=True))
    item_id = cells["id"].strip()
    if not item_id:
        raise DataError("empty id", file=path, record=record, field="id")
    if item_id in seen:
        raise DataError(f"duplicate id {item_id!r}", file=path, record=record, field="id")
    seen.add(item_id)
    decision = cells["decision"].strip().lower()
    if decision and decision not in DECISIONS:
        raise DataError(
            f"decision must be one of {', '.join(DECISIONS)}, got {cells['decision']!r}",
            file=path,
            record=record,
            field="decision",
        )
    return SheetRow(row_no, item_id, decision or None, cells)


def read_review(
    path: Path, *, image_fields: Sequence[str], text_fields: Sequence[str], optional: Sequence[str] = ()
) -> ReviewResult:
    """Read an edited ``review.csv`` (or one reviewer's file) back, strictly.

    Every row needs a unique id and a decision of accept or reject (an undecided row is an error: the
    review is not finished); an accepted row needs every image and text cell filled, without tabs or
    line breaks (the published formats are line-based), and its images inside the sheet's folder.

    Args:
        path: the edited CSV.
        image_fields: the image columns the sheet was written with.
        text_fields: its text columns.
        optional: the columns an accepted row may leave empty (the sets of a sheet that differ in size).
    """
    path = Path(path)
    result = ReviewResult(files=[str(path)])
    for row in read_sheet(path, image_fields=image_fields, text_fields=text_fields):
        if row.decision is None:
            raise DataError(
                f"item {row.id!r} is undecided: finish the review (spotdiff review {path.parent} --reviewer NAME) "
                "or write accept or reject",
                file=path,
                record=f"row {row.row}",
                field="decision",
            )
        if row.decision == "reject":
            result.rejected += 1
        else:
            result.accepted.append(_accepted(path, row, image_fields, text_fields, optional))
    return result


def _accepted(
    path: Path, row: SheetRow, image_fields: Sequence[str], text_fields: Sequence[str], optional: Sequence[str]
) -> ReviewItem:
    record = f"row {row.row}"
    values = {}
    for name in (*image_fields, *text_fields):
        value = row.cells[name].strip()
        if not value and name not in optional:
            raise DataError("empty cell in an accepted row", file=path, record=record, field=name)
        if any(ch in value for ch in "\t\r\n"):
            raise DataError("a tab or line break in an accepted row", file=path, record=record, field=name)
        if value and name in image_fields:
            inside(path.parent, value, file=path, record=record, field=name)
        values[name] = value
    return ReviewItem(
        id=row.id,
        images={f: values[f] for f in image_fields},
        texts={f: values[f] for f in text_fields},
        verdict=row.cells["verdict"],
        accept=True,
        details=row.cells["details"],
    )


def read_reviews(
    paths: Path | Sequence[Path],
    *,
    image_fields: Sequence[str],
    text_fields: Sequence[str],
    optional: Sequence[str] = (),
    rule: str = RULES[0],
) -> ReviewResult:
    """Several reviewers' files of one sheet read back together: an item is kept when every reviewer
    accepted it (``rule="all"``) or more than half did (``"majority"``; a tie rejects).

    Each file is read as :func:`read_review` reads one (every item decided). A kept item's cells are those
    its accepting reviewers agree on; where they differ, the one value that differs from the sheet beside
    the files (``review.csv``: one person's edit) wins, and two different edits are an error naming both.

    Args:
        paths: one reviewer's file, or several (one per reviewer, of the same sheet).
        image_fields: the image columns.
        text_fields: the text columns.
        optional: the columns an accepted row may leave empty.
        rule: one of :data:`RULES`.
    """
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if rule not in RULES:
        raise DataError(f"unknown review rule {rule!r}; use one of {', '.join(RULES)}")
    fields = {"image_fields": image_fields, "text_fields": text_fields}
    if len(paths) == 1:
        return ReviewResult(**{**vars(read_review(paths[0], **fields, optional=optional)), "rule": rule})
    if len({p.resolve() for p in paths}) != len(paths):
        raise DataError("a reviewer's file is given twice", file=paths[0])
    results = [read_review(p, **fields, optional=optional) for p in paths]
    rows = [read_sheet(p, **fields) for p in paths]
    order = [r.id for r in rows[0]]
    for path, file_rows in zip(paths[1:], rows[1:], strict=True):
        if sorted(r.id for r in file_rows) != sorted(order):
            raise DataError(f"its items are not those of {paths[0]}: reviewers' files must be copies of one sheet",
                            file=path)  # fmt: skip
    base = _base_cells(paths, fields)
    accepted = [{item.id: item for item in result.accepted} for result in results]
    combined = ReviewResult(files=[str(p) for p in paths], rule=rule)
    for item_id in order:
        votes = [a[item_id] for a in accepted if item_id in a]
        if len(votes) == len(paths) or (rule == "majority" and 2 * len(votes) > len(paths)):
            combined.accepted.append(_agreed(votes, base.get(item_id), paths))
        else:
            combined.rejected += 1
    return combined


def _base_cells(paths: list[Path], fields: dict) -> dict[str, dict[str, str]]:
    """The cells of the sheet beside the reviewers' files, by id (none when it is not there)."""
    sheet = paths[0].parent / CSV_NAME
    if not sheet.is_file() or sheet.resolve() in {p.resolve() for p in paths}:
        return {}
    return {row.id: row.cells for row in read_sheet(sheet, **fields)}


def _agreed(votes: list[ReviewItem], base: dict[str, str] | None, paths: list[Path]) -> ReviewItem:
    """One kept item from its accepting reviewers' rows: the cells they agree on, or the one edit."""
    first = votes[0]
    cells = {}
    for kind in ("images", "texts"):
        cells[kind] = {}
        for name in getattr(first, kind):
            values = {getattr(v, kind)[name] for v in votes}
            sheet_value = (base or {}).get(name, "").strip()
            value = agreed_value(values, sheet_value)
            if value is None:
                raise DataError(
                    f"reviewers who accepted item {first.id!r} wrote different values: "
                    + " / ".join(repr(e) for e in sorted(values - {sheet_value}))
                    + "; make them agree in their files",
                    file=paths[0].parent,
                    record=first.id,
                    field=name,
                )
            cells[kind][name] = value
    return ReviewItem(first.id, cells["images"], cells["texts"], first.verdict, True, first.details)


def agreed_value(values: set[str], base: str | None) -> str | None:
    """The value of a cell that several reviewers wrote: the one they all wrote, else the one edit (the one
    value unlike the sheet's ``base``); None when two of them edited it differently.

    Args:
        values: the distinct values the reviewers wrote.
        base: the sheet's value (None: unknown).

    >>> agreed_value({"a cat."}, None), agreed_value({"a cat.", "a cat!"}, "a cat."), agreed_value({"x", "y"}, "z")
    ('a cat.', 'a cat!', None)
    """
    edits = values - {(base or "").strip()} if len(values) > 1 else values
    return next(iter(edits)) if len(edits) == 1 else None
