"""The human step of the generative engines: a review sheet a person edits, read back strictly.

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
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spotdiff.errors import DataError

CSV_NAME = "review.csv"
HTML_NAME = "review.html"
DECISIONS = ("accept", "reject")
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
    """The rows of an edited sheet: the accepted items (file order) and the count of rejected ones."""

    accepted: list[ReviewItem] = field(default_factory=list)
    rejected: int = 0


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
    folder.mkdir(parents=True, exist_ok=True)
    columns = header(image_fields, text_fields)
    csv_path = folder / CSV_NAME
    with csv_path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        for it in items:
            decision = DECISIONS[0] if it.accept else DECISIONS[1]
            cells = [
                it.id,
                decision,
                *(it.images[f] for f in image_fields),
                *(it.texts[f] for f in text_fields),
                it.verdict,
                it.details,
            ]
            writer.writerow([neutral(c) for c in cells])
    html_path = folder / HTML_NAME
    html_path.write_text(_page(items, image_fields, text_fields, title), encoding="utf-8", newline="\n")
    return csv_path, html_path


def inside(
    root: Path, name: str, *, file: Path | None = None, record: str | None = None, field: str | None = None
) -> Path:
    """``root / name``, refused (a DataError naming the file) when it would lie outside ``root``: an absolute
    name, ``..`` climbing out, or a symbolic link on the way that leads out. A sheet or a record is a file
    someone hands over; it never makes spotdiff read or write elsewhere.

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


def copy_images(names: Sequence[str], source: Path, out: Path, *, sheet: Path | None = None) -> None:
    """Copy the named images from ``source`` to ``out/images`` (a missing one is an error; a name leaving
    ``source``, or a link leading out of it, is refused).

    Args:
        names: file names relative to ``source`` (subfolders kept).
        source: the images folder.
        out: the output folder.
        sheet: the file that named them (a review sheet), for the messages.
    """
    for name in sorted(set(names)):
        src = inside(Path(source), name, file=sheet, record=name)
        if not src.is_file():
            raise DataError("image not found", file=src, field="filename")
        target = inside(Path(out) / "images", name, file=sheet, record=name)
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
            f'<img src="{esc(it.images[f], quote=True)}" alt="{esc(it.images[f])}" width="160">' for f in image_fields
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


def read_review(path: Path, *, image_fields: Sequence[str], text_fields: Sequence[str]) -> ReviewResult:
    """Read an edited ``review.csv`` back, strictly.

    Every row needs a unique id and a decision of accept or reject; an accepted row needs every image
    and text cell filled, without tabs or line breaks (the published formats are line-based).

    Args:
        path: the edited CSV.
        image_fields: the image columns the sheet was written with.
        text_fields: its text columns.
    """
    path = Path(path)
    columns = header(image_fields, text_fields)
    result = ReviewResult()
    seen: set[str] = set()
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, strict=True)
        try:
            got = next(reader)
        except StopIteration:
            raise DataError("empty review sheet (no header row)", file=path) from None
        except csv.Error as exc:
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
            except csv.Error as exc:
                raise DataError(f"not a valid CSV: {exc}", file=path, record=f"row {row_no}") from None
            if not row:
                continue
            item = _row(path, row_no, row, columns, image_fields, text_fields, seen)
            if item is None:
                result.rejected += 1
            else:
                result.accepted.append(item)
    return result


def _row(path, row_no, row, columns, image_fields, text_fields, seen) -> ReviewItem | None:
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
    if decision not in DECISIONS:
        raise DataError(
            f"decision must be one of {', '.join(DECISIONS)}, got {cells['decision']!r}",
            file=path,
            record=record,
            field="decision",
        )
    if decision == "reject":
        return None
    values = {}
    for name in (*image_fields, *text_fields):
        value = cells[name].strip()
        if not value:
            raise DataError("empty cell in an accepted row", file=path, record=record, field=name)
        if any(ch in value for ch in "\t\r\n"):
            raise DataError("a tab or line break in an accepted row", file=path, record=record, field=name)
        if name in image_fields:
            inside(path.parent, value, file=path, record=record, field=name)
        values[name] = value
    return ReviewItem(
        id=item_id,
        images={f: values[f] for f in image_fields},
        texts={f: values[f] for f in text_fields},
        verdict=cells["verdict"],
        accept=True,
        details=cells["details"],
    )
