"""How far several reviewers of one output folder agree: ``spotdiff review OUT --agreement``.

Every reviewer's file beside the sheet (``review.<name>.csv``) is read; the items every reviewer has
decided are compared. Agreement beyond chance is Cohen's kappa for two reviewers and Fleiss' kappa for
more (statsmodels' ``cohens_kappa`` and ``fleiss_kappa``, over the categories accept and reject); it is
undefined (None) when chance agreement is already perfect (every decision the same). The items the
reviewers decided differently are listed, and so are those whose texts the accepting reviewers edited
differently (``--from-review`` refuses those until the reviewers agree).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.errors import ConfigError, DataError
from spotdiff.review.kinds import sheet_kind
from spotdiff.review.sheet import CSV_NAME, DECISIONS, agreed_value, read_sheet, reviewer_sheets


def kappa(decisions: np.ndarray) -> tuple[str, float | None]:
    """Cohen's kappa (two columns) or Fleiss' kappa (more) of an items x reviewers array of category codes.

    Args:
        decisions: one row per item, one column per reviewer, each a category's index (0: accept, 1: reject).

    Returns:
        The method's name and the kappa (None where it is undefined: chance agreement is perfect, or no item).
    """
    from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa

    n_cat = len(DECISIONS)
    method = "Cohen's kappa" if decisions.shape[1] == 2 else "Fleiss' kappa"
    if len(decisions) == 0:
        return method, None
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        if decisions.shape[1] == 2:
            table = np.zeros((n_cat, n_cat))
            np.add.at(table, (decisions[:, 0], decisions[:, 1]), 1)
            value = float(cohens_kappa(table).kappa)
        else:
            value = float(fleiss_kappa(aggregate_raters(decisions, n_cat=n_cat)[0]))
    return method, value if np.isfinite(value) else None


def agreement(out: Path) -> dict[str, Any]:
    """Compare the reviewers of ``out``: kappa over the items all of them decided, and the disagreements.

    Args:
        out: the reviewed folder (its ``review.csv`` and two or more ``review.<name>.csv``).
    """
    out = Path(out)
    sheet = out / CSV_NAME
    if not sheet.is_file():
        raise ConfigError(f"{out} has no review sheet ({CSV_NAME}): review it first (spotdiff review {out})")
    kind = sheet_kind(sheet)
    files = reviewer_sheets(out)
    if len(files) < 2:
        raise ConfigError(
            f"--agreement needs two or more reviewers' files (review.NAME.csv) in {out}, found {len(files)}"
            f"{': ' + ', '.join(files) if files else ''}; each reviewer runs spotdiff review {out} --reviewer NAME"
        )
    base = {row.id: row for row in read_sheet(sheet, **kind.fields)}
    rows = {}
    for name, path in files.items():
        rows[name] = {row.id: row for row in read_sheet(path, **kind.fields)}
        if rows[name].keys() != base.keys():
            raise DataError(f"its items are not those of {CSV_NAME} (the sheet was written again since)", file=path)
    names = list(files)
    complete = [i for i in base if all(rows[n][i].decision is not None for n in names)]
    codes = np.array([[DECISIONS.index(rows[n][i].decision) for n in names] for i in complete], dtype=int)
    method, value = kappa(codes.reshape(len(complete), len(names)))
    disagreements = [{"id": i, "decisions": {n: rows[n][i].decision for n in names}} for i in complete
                     if len({rows[n][i].decision for n in names}) > 1]  # fmt: skip
    return {
        "folder": str(out),
        "reviewers": names,
        "items": len(base),
        "compared": len(complete),
        "not_decided_by_all": len(base) - len(complete),
        "accepted": {n: sum(rows[n][i].decision == "accept" for i in complete) for n in names},
        "observed": (len(complete) - len(disagreements)) / len(complete) if complete else None,
        "method": method,
        "kappa": value,
        "disagreements": disagreements,
        "edited_differently": _edits(kind.text_fields, base, rows, complete),
    }


def _edits(fields: tuple[str, ...], base: dict, rows: dict[str, dict], items: list[str]) -> list[dict[str, Any]]:
    """The texts that the reviewers who accepted an item edited differently (no one agreed value)."""
    found = []
    for i in items:
        accepting = [n for n in rows if rows[n][i].decision == "accept"]
        for field in fields:
            values = {n: rows[n][i].cells[field].strip() for n in accepting}
            if len(accepting) > 1 and agreed_value(set(values.values()), base[i].cells[field]) is None:
                found.append({"id": i, "field": field, "values": values})
    return found


__all__ = ["agreement", "kappa"]
