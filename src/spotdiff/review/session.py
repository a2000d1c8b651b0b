"""One reviewer's review of one output folder: the sheet's items, and the reviewer's decisions saved at once.

The folder's sheet and its columns are :mod:`spotdiff.review.kinds`' (``review.csv``, which ``eqsd``, ``visla
--pairs`` and ``visla-vsr`` write; for a SPEC or EqBen folder without one, written from the published output).
A :class:`ReviewSession` holds one reviewer's decisions and edits in ``review.<name>.csv`` beside the sheet (the
sheet's format, an undecided row's decision empty), rewritten whole at every decision (a temporary file renamed
into place), so that closing the page or killing the server loses nothing. A session holds its reviewer's file
(:class:`spotdiff.locks.HeldLock`, ``.review.<name>.lock`` beside it) until it is closed: a second session of the
same reviewer, which would rewrite the file from what it held, is refused naming the first.
"""

from __future__ import annotations

import io
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.benchmarks.spec import SUBSETS
from spotdiff.cases import FileImage, NpyImage
from spotdiff.errors import DataError
from spotdiff.locks import HeldLock
from spotdiff.review.kinds import PAIRS, SETS, find_sheet, sheet_kind
from spotdiff.review.sets import read_cases
from spotdiff.review.sheet import DECISIONS, inside, read_sheet, reviewer_sheet, write_sheet

#: the longest text an edit may write, in characters (a caption, far below the CSV reader's field limit)
MAX_TEXT = 10_000
#: the image files the page shows (anything else a sheet names is not served)
IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
                  ".npy": "image/png"}  # fmt: skip


class ReviewSession:
    """One reviewer's decisions on one folder's sheet, each saved at once to ``review.<reviewer>.csv``, which the
    session holds until it is closed (a context manager; a second session of the reviewer is refused, a
    ConfigError naming the holder).

    Args:
        out: the folder a ``spotdiff synth`` run wrote.
        reviewer: the reviewer's name.
    """

    def __init__(self, out: Path, reviewer: str) -> None:
        self.out = Path(out)
        self.sheet = find_sheet(self.out)
        self.kind = sheet_kind(self.sheet)
        self.reviewer = reviewer
        self.file = reviewer_sheet(self.sheet, reviewer)
        self._hold = _hold(self.file)  # before the file is read: what it holds is this session's alone
        try:
            self.rows = read_sheet(self.sheet, **self.kind.fields)
            self.index = {row.id: k for k, row in enumerate(self.rows)}
            self.images = {row.cells[f] for row in self.rows for f in self.kind.image_fields if row.cells[f]}
            self._lock = threading.Lock()
            self.decisions: dict[str, str | None] = {row.id: None for row in self.rows}
            self.texts = {row.id: {f: row.cells[f] for f in self.kind.text_fields} for row in self.rows}
            if self.file.is_file():
                self._load()
            else:
                self._create()
            self.boxes = _spec_boxes(self.out) if self.kind is SETS else {}
        except BaseException:
            self.close()
            raise

    def _create(self) -> None:
        """Write the reviewer's file, every item undecided."""
        try:
            self._save(self.decisions, self.texts)
        except OSError as exc:
            raise DataError(f"cannot write the reviewer's file: {exc.strerror or exc}", file=self.file) from None

    def close(self) -> None:
        """Let the reviewer's file go (what was decided is saved already); again: nothing to do."""
        self._hold.release()

    def __enter__(self) -> ReviewSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self) -> None:
        """Take up the reviewer's earlier decisions (their file must be a copy of this sheet)."""
        mine = read_sheet(self.file, **self.kind.fields)
        if sorted(r.id for r in mine) != sorted(self.index):
            raise DataError(
                f"its items are not those of {self.sheet.name} (the sheet was written again since); move it away "
                "to start this reviewer afresh",
                file=self.file,
            )
        for row in mine:
            self.decisions[row.id] = row.decision
            self.texts[row.id] = {f: row.cells[f] for f in self.kind.text_fields}

    def _save(self, decisions: dict[str, str | None], texts: dict[str, dict[str, str]]) -> None:
        """Write the reviewer's file with these decisions and texts (read back before it replaces the file)."""
        rows = []
        for row in self.rows:
            cells = {**row.cells, **texts[row.id], "decision": decisions[row.id] or ""}
            rows.append([cells[c] for c in self.kind.columns])
        write_sheet(self.file, self.kind.columns, rows)

    def decide(self, item_id: str, decision: str | None, texts: dict[str, str] | None = None) -> dict[str, Any]:
        """Record a decision (None: undecided again, as an undo leaves it) and the item's texts as edited, and
        save the reviewer's file before returning; return the item's state. A decision refused (a DataError:
        invalid, or not saved) changes nothing, on disk or here.

        Args:
            item_id: the item.
            decision: ``accept``, ``reject`` or None.
            texts: the edited texts by column (None: unchanged); each one line of at most :data:`MAX_TEXT`
                characters, not empty, and one the item has.
        """
        if item_id not in self.index:
            raise DataError(f"no item {item_id!r}", file=self.sheet, field="id")
        if decision is not None and decision not in DECISIONS:
            raise DataError(f"decision must be one of {', '.join(DECISIONS)} or none", field="decision")
        for name, value in (texts or {}).items():
            self._check_text(item_id, name, value)
        with self._lock:  # the file first; what this session holds once the file holds it
            decisions = {**self.decisions, item_id: decision}
            changed = {k: v.strip() for k, v in (texts or {}).items()}
            edited = {**self.texts, item_id: {**self.texts[item_id], **changed}}
            try:
                self._save(decisions, edited)
            except OSError as exc:  # not saved: the page says so, and shows what the file holds
                raise DataError(f"cannot save the decision: {exc.strerror or exc}", file=self.file) from None
            self.decisions, self.texts = decisions, edited
            return self.item(self.index[item_id])

    def _check_text(self, item_id: str, name: object, value: object) -> None:
        """Refuse an edited text that the reviewer's file could not hold or ``--from-review`` would refuse."""
        if name not in self.kind.text_fields or not isinstance(value, str):
            raise DataError(f"no text column {name!r} (columns: {', '.join(self.kind.text_fields)})")
        original = self.rows[self.index[item_id]].cells[name]
        if name in self.kind.optional and not original.strip():
            raise DataError(f"item {item_id!r} has no {name} (its set has fewer texts)", field=name)
        if len(value) > MAX_TEXT:
            raise DataError(f"a text is at most {MAX_TEXT} characters, got {len(value)}", field=name)
        if any(ch in value for ch in "\t\r\n"):
            raise DataError("a text is one line (the published formats are line-based)", field=name)
        if not value.strip() and original.strip():
            raise DataError("a text cannot be emptied; reject the item instead", field=name)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise DataError("a text holds a lone surrogate (half of a UTF-16 pair): no file can hold it",
                            field=name) from None  # fmt: skip

    def progress(self) -> dict[str, int]:
        """How many items there are, and how many are decided, accepted and rejected."""
        values = list(self.decisions.values())
        accepted, rejected = values.count("accept"), values.count("reject")
        return {"total": len(values), "decided": accepted + rejected, "accepted": accepted, "rejected": rejected}

    def item(self, k: int) -> dict[str, Any]:
        """What the page shows of item ``k``: images (with SPEC's measured boxes), texts as the sheet wrote
        them and as edited, the check's verdict and suggestion, and this reviewer's decision."""
        row = self.rows[k]
        names = [(f, row.cells[f]) for f in self.kind.image_fields if row.cells[f]]
        boxes = self.boxes.get(row.id, [None] * len(names))
        return {
            "id": row.id,
            "index": k,
            "images": [{"field": f, "name": name, "boxes": b} for (f, name), b in zip(names, boxes, strict=False)],
            "texts": {f: v for f, v in self.texts[row.id].items() if v or row.cells[f]},
            "original": {f: row.cells[f] for f in self.kind.text_fields if row.cells[f]},
            "suggested": row.decision,
            "verdict": row.cells["verdict"],
            "details": row.cells["details"],
            "decision": self.decisions[row.id],
            "difference": self.kind is PAIRS,
        }

    def items(self) -> list[dict[str, Any]]:
        """Every item, in the sheet's order."""
        return [self.item(k) for k in range(len(self.rows))]

    def image_file(self, name: str) -> Path:
        """The file of an image the sheet names (any other name, or one leading out of the folder, is refused).

        Args:
            name: the image cell's value.
        """
        if name not in self.images or Path(name).suffix.lower() not in IMAGE_SUFFIXES:
            raise DataError(f"{name!r} is not an image of this review", file=self.sheet)
        path = inside(self.sheet.parent, name, file=self.sheet)
        if not path.is_file():
            raise DataError("image not found", file=path)
        return path

    def image_png(self, name: str) -> bytes:
        """An image as PNG bytes (EqBen's ``.npy`` frames: BGR arrays, as the ``eqben`` loader reads them)."""
        return _png(_load(self.image_file(name)))

    def difference(self, k: int) -> bytes:
        """The pixel difference of pair ``k`` as a PNG: the first image in dim grey, every pixel where the second
        differs in red (brighter: a larger difference)."""
        row = self.rows[k]
        if self.kind is not PAIRS:
            raise DataError(f"item {row.id!r} is not a pair", file=self.sheet)
        paths = [self.image_file(row.cells[f]) for f in self.kind.image_fields]
        return _difference(*(str(p) for p in paths))


def _hold(file: Path) -> HeldLock:
    """The lock on a reviewer's file: ``.review.<name>.lock`` beside it, its holder in ``.review.<name>.lock.json``."""
    lock = file.with_name(f".{file.stem}.lock")

    def busy(holder: str) -> str:
        return (f"{file} is in use by another spotdiff review ({holder}), which would rewrite it from what it holds: "
                "use that one's page, stop it (Ctrl-C in its terminal), or give another --reviewer")  # fmt: skip

    return HeldLock(lock, lock.with_name(lock.name + ".json"), busy)


def _load(path: Path) -> Image.Image:
    ref = NpyImage(path, bgr=True) if path.suffix.lower() == ".npy" else FileImage(path)
    return ref.load().convert("RGB")


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


@lru_cache(maxsize=64)
def _difference(first: str, second: str) -> bytes:
    a = np.asarray(_load(Path(first)), dtype=np.int16)
    b_image = _load(Path(second))
    if b_image.size != (a.shape[1], a.shape[0]):
        b_image = b_image.resize((a.shape[1], a.shape[0]), Image.BILINEAR)
    b = np.asarray(b_image, dtype=np.int16)
    change = np.abs(a - b).max(axis=2).astype(np.float64)
    grey = a.mean(axis=2) * 0.35  # at most 90: a changed pixel's red (110 and up) always stands out
    red = np.where(change > 0, 110.0 + 145.0 * change / max(change.max(), 1.0), grey)
    return _png(Image.fromarray(np.stack([red, grey, grey], axis=2).round().astype(np.uint8)))


def _spec_boxes(out: Path) -> dict[str, list[list[dict[str, Any]]]]:
    """Per SPEC set, per image: the boxes of its objects' visible masks (as measured when the set was drawn),
    each marked ``changed`` unless the same object is in the same place in every image of the set."""
    boxes = {}
    for sub in SUBSETS:
        for case in read_cases(out, sub):
            try:
                boxes[case["id"]] = _changed(case)
            except (KeyError, TypeError, ValueError) as exc:
                where = case.get("id") if isinstance(case, dict) else None
                raise DataError(f"a set without its measured objects ({exc!r})", file=out / sub / "metadata.json",
                                record=where) from None  # fmt: skip
    return boxes


def _changed(case: dict[str, Any]) -> list[list[dict[str, Any]]]:
    per_image = [[o for o in m["objects"] if o["mask_area"] > 0] for m in case["measured"]]
    keys = [{(o["category"], tuple(o["bbox"])) for o in objs} for objs in per_image]
    everywhere = set.intersection(*keys) if keys else set()
    return [
        [
            {"box": o["bbox"], "role": o["role"], "category": o["category"],
             "changed": (o["category"], tuple(o["bbox"])) not in everywhere}
            for o in objs
        ]
        for objs in per_image
    ]  # fmt: skip


__all__ = ["ReviewSession"]
