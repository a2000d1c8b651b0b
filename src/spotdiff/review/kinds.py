"""Which sheet a folder has: the columns of each engine family's sheet (EqBen pairs, SPEC sets, VISLA Generic and
Spatial triplets), which family a sheet is (:func:`sheet_kind`) and the sheet of a SPEC or EqBen folder written
without one (:func:`find_sheet`); moved here from :mod:`spotdiff.review.session` (issue 43), so that the engines
take their sheets' columns from here.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from spotdiff.benchmarks.spec import SUBSETS
from spotdiff.errors import ConfigError, DataError
from spotdiff.review import pairs, sets
from spotdiff.review.sheet import CSV_NAME, header, write_review

__all__ = [
    "KINDS", "PAIRS", "SETS", "VISLA_IMAGE_FIELDS", "VISLA_SPATIAL_TEXT_FIELDS", "VISLA_TEXT_FIELDS", "SheetKind",
    "find_sheet", "sheet_kind",
]  # fmt: skip

#: the columns of a VISLA sheet (``visla --pairs``): its image, and the triplet's texts
VISLA_IMAGE_FIELDS = ("image",)
VISLA_TEXT_FIELDS = ("p1", "p2", "n")
#: the text columns of a Spatial sheet (``visla-vsr``): the fifth TSV column too
VISLA_SPATIAL_TEXT_FIELDS = ("p1", "p2", "n", "irrelevant")


@dataclass(frozen=True)
class SheetKind:
    """The columns of one engine family's sheet, and the ``spotdiff synth`` engine whose ``--from-review``
    reads it (None: the engine that wrote the folder, from its ``synth.json``)."""

    name: str
    image_fields: tuple[str, ...]
    text_fields: tuple[str, ...]
    optional: tuple[str, ...] = ()
    reader: str | None = None

    @property
    def columns(self) -> list[str]:
        return header(self.image_fields, self.text_fields)

    @property
    def fields(self) -> dict[str, tuple[str, ...]]:
        """The keyword arguments of the sheet readers."""
        return {"image_fields": self.image_fields, "text_fields": self.text_fields}


PAIRS = SheetKind("EqBen pairs", pairs.IMAGE_FIELDS, pairs.TEXT_FIELDS)
SETS = SheetKind("SPEC sets", sets.SHEET_IMAGES, sets.SHEET_TEXTS, sets.OPTIONAL_FIELDS, reader="spec")
KINDS = (
    PAIRS,
    SETS,
    SheetKind("VISLA Generic triplets", VISLA_IMAGE_FIELDS, VISLA_TEXT_FIELDS, reader="visla"),
    SheetKind("VISLA Spatial triplets", VISLA_IMAGE_FIELDS, VISLA_SPATIAL_TEXT_FIELDS, reader="visla"),
)


def find_sheet(out: Path) -> Path:
    """The sheet of an output folder: its ``review.csv``; a SPEC or EqBen folder without one gets one, written
    from its published files (every item suggested for acceptance: these engines have no automatic check).

    Args:
        out: the folder a ``spotdiff synth`` engine wrote.
    """
    out = Path(out)
    if not out.is_dir():
        raise ConfigError(f"{out} is not a folder: give the folder a spotdiff synth run wrote")
    sheet = out / CSV_NAME
    if sheet.is_file():
        return sheet
    if (out / pairs.PAIRS_FILE).is_file():
        items, kind, title = pairs.pair_items(out), PAIRS, "EqBen pairs: review"
    elif any((out / sub / "metadata.json").is_file() for sub in SUBSETS):
        items, kind, title = sets.review_items(out), SETS, "SPEC sets: review"
    else:
        raise DataError(
            f"no review sheet ({CSV_NAME}) and no SPEC or EqBen output to review; give the folder of a "
            "spotdiff synth run (spec, eqben, eqben-video, eqsd, visla --pairs, visla-vsr)",
            file=out,
        )
    try:
        return write_review(out, items, image_fields=kind.image_fields, text_fields=kind.text_fields, title=title)[0]
    except OSError as exc:
        why = f"cannot write the review sheet: {exc.strerror or exc}; review a writable copy of the folder"
        raise DataError(why, file=sheet) from None


def sheet_kind(sheet: Path) -> SheetKind:
    """Which engine family's columns the sheet has (its header row).

    Args:
        sheet: a ``review.csv``.
    """
    try:
        with Path(sheet).open(encoding="utf-8", newline="") as fh:
            got = [c.strip() for c in next(csv.reader(fh), [])]
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the review sheet's header: {exc}", file=sheet) from None
    for kind in KINDS:
        if got == kind.columns:
            return kind
    raise DataError(f"not a review sheet spotdiff writes (header {got!r})", file=sheet, record="row 1")
