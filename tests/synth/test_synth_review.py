"""The review sheet of the generative engines: written as CSV and offline HTML, edited by a person,
read back strictly (accepted rows with their edits; bad rows name file, row and field)."""

from __future__ import annotations

import csv
import re

import pytest

from spotdiff.errors import ConfigError, DataError
from spotdiff.review.sheet import (
    CSV_NAME,
    HTML_NAME,
    ReviewItem,
    read_review,
    read_reviews,
    reviewer_sheet,
    reviewer_sheets,
    write_review,
    write_sheet,
)

FIELDS = {"image_fields": ("image",), "text_fields": ("p1", "p2")}


def items() -> list[ReviewItem]:
    return [
        ReviewItem(
            "a", {"image": "images/a.png"}, {"p1": "A cat, on a mat.", "p2": 'The "mat" holds a cat.'}, "ok", True
        ),
        ReviewItem(
            "b", {"image": "images/b.png"}, {"p1": "A dog <b>", "p2": ""}, "failed: empty", False, "raw\nanswer"
        ),
        ReviewItem("c", {"image": "images/c.png"}, {"p1": "Two birds.", "p2": "A pair of birds."}, "ok", True),
    ]


def edit(path, changes: dict[tuple[int, str], str]) -> None:
    rows = list(csv.reader(path.open(encoding="utf-8", newline="")))
    for (r, name), value in changes.items():
        rows[r][rows[0].index(name)] = value
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)


def test_round_trip_with_a_persons_edits(tmp_path):
    csv_path, html_path = write_review(tmp_path, items(), title="T", **FIELDS)
    assert (csv_path.name, html_path.name) == (CSV_NAME, HTML_NAME)
    got = read_review(csv_path, **FIELDS)  # untouched: the suggested decisions
    assert [i.id for i in got.accepted] == ["a", "c"] and got.rejected == 1
    assert got.accepted[0].texts == items()[0].texts  # commas and quotes survive the CSV
    # the person rescues b with a written P2, rejects c and edits a's P2
    edit(csv_path, {(2, "decision"): "accept", (2, "p2"): "A dog.", (3, "decision"): " Reject ", (1, "p2"): "Edited."})
    got = read_review(csv_path, **FIELDS)
    assert [(i.id, i.texts["p2"]) for i in got.accepted] == [("a", "Edited."), ("b", "A dog.")]
    assert got.rejected == 1 and got.accepted[1].images == {"image": "images/b.png"}


def test_the_page_is_offline_and_escaped(tmp_path):
    _, page = write_review(tmp_path, items(), title="T", **FIELDS)
    text = page.read_text(encoding="utf-8")
    assert re.findall(r'src="([^"]+)"', text) == ["images/a.png", "images/b.png", "images/c.png"]
    assert "http" not in text and "A dog &lt;b&gt;" in text and "&quot;mat&quot;" in text


@pytest.mark.parametrize(
    ("changes", "record", "field"),
    [
        ({(1, "decision"): "maybe"}, "row 2", "decision"),
        ({(3, "id"): "a"}, "row 4", "id"),
        ({(2, "id"): " "}, "row 3", "id"),
        ({(2, "decision"): "accept"}, "row 3", "p2"),  # accepted with an empty P2
        ({(1, "p1"): "two\tcells"}, "row 2", "p1"),
        ({(3, "image"): ""}, "row 4", "image"),
    ],
)
def test_bad_rows_name_file_row_and_field(tmp_path, changes, record, field):
    csv_path, _ = write_review(tmp_path, items(), title="T", **FIELDS)
    edit(csv_path, changes)
    with pytest.raises(DataError) as err:
        read_review(csv_path, **FIELDS)
    assert (err.value.file, err.value.record, err.value.field) == (str(csv_path), record, field)


def test_bad_sheets(tmp_path):
    csv_path, _ = write_review(tmp_path, items(), title="T", **FIELDS)
    with pytest.raises(DataError, match="unexpected header"):
        read_review(csv_path, image_fields=("image",), text_fields=("p1", "p2", "n"))
    lines = csv_path.read_text(encoding="utf-8").splitlines()
    csv_path.write_text("\n".join([*lines, "d,accept,x.png"]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="expected 7 columns, got 3") as err:
        read_review(csv_path, **FIELDS)
    assert err.value.record == "row 5"
    csv_path.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="empty review sheet"):
        read_review(csv_path, **FIELDS)


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("images/../../evil.png", "leaves its folder"),
        ("/etc/shadow", "leaves its folder"),
        ("images/link.png", "is a link leading out of"),
    ],
)
def test_an_accepted_image_outside_the_sheets_folder_is_refused(tmp_path, image, why):
    """A sheet is a file someone hands over: it never makes spotdiff read or write outside its folder."""
    sheet_dir = tmp_path / "sheet"
    (sheet_dir / "images").mkdir(parents=True)
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not yours")
    (sheet_dir / "images" / "link.png").symlink_to(secret)
    csv_path, _ = write_review(sheet_dir, items(), title="T", **FIELDS)
    edit(csv_path, {(1, "image"): image})
    with pytest.raises(DataError, match=why) as err:
        read_review(csv_path, **FIELDS)
    assert (err.value.file, err.value.record, err.value.field) == (str(csv_path), "row 2", "image")


def test_every_engines_from_review_refuses_a_path_out_and_writes_nothing_outside(tmp_path):
    from spotdiff.commands import main

    sheet_dir = tmp_path / "made"
    (sheet_dir / "images" / "eqbensd").mkdir(parents=True)
    (tmp_path / "evil.png").write_bytes(b"x")
    rows = [
        ["id", "decision", "image0", "image1", "caption0", "caption1", "verdict", "details"],
        ["00000", "accept", "images/../../evil.png", "images/eqbensd/b.png", "a cat.", "a dog.", "", ""],
    ]
    with (sheet_dir / "review.csv").open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    out = tmp_path / "final"
    assert main(["synth", "eqsd", "--from-review", str(sheet_dir / "review.csv"), "--out", str(out)]) == 2
    assert (tmp_path / "evil.png").read_bytes() == b"x" and not any(out.glob("images/**/*.png"))


def test_cells_a_spreadsheet_would_run_are_written_as_text_and_read_back_unchanged(tmp_path):
    texts = ['=HYPERLINK("http://evil","x")', "+1+1", "-2 cats", "@SUM(A1)", "'quoted", "a cat"]
    written = [
        ReviewItem(str(k), {"image": "images/a.png"}, {"p1": text, "p2": "ok."}, "=cmd|' /C calc'!A0", True)
        for k, text in enumerate(texts)
    ]
    csv_path, _ = write_review(tmp_path, written, title="T", **FIELDS)
    rows = list(csv.reader(csv_path.open(encoding="utf-8", newline="")))
    cells = [row[rows[0].index("p1")] for row in rows[1:]]
    assert [c[0] for c in cells[:5]] == ["'"] * 5 and cells[5] == "a cat"  # OWASP: a leading apostrophe
    assert all(not row[rows[0].index("verdict")].startswith("=") for row in rows[1:])
    got = read_review(csv_path, **FIELDS)
    assert [i.texts["p1"] for i in got.accepted] == texts and got.accepted[0].verdict == "=cmd|' /C calc'!A0"


def _reviewer(folder, name, decisions, p2=None):
    """A reviewer's file of the sheet in ``folder``: its rows with ``decisions`` (and P2 of row 1 edited)."""
    rows = list(csv.reader((folder / CSV_NAME).open(encoding="utf-8", newline="")))
    for row, decision in zip(rows[1:], decisions, strict=True):
        row[1] = decision
    if p2 is not None:
        rows[1][rows[0].index("p2")] = p2
    path = reviewer_sheet(folder / CSV_NAME, name)
    write_sheet(path, rows[0], rows[1:])
    return path


def test_several_reviewers_under_a_rule(tmp_path):
    write_review(tmp_path, items(), title="T", **FIELDS)
    edit(tmp_path / CSV_NAME, {(2, "p2"): "A dog."})  # every row acceptable
    a = _reviewer(tmp_path, "a", ["accept", "accept", "reject"], p2="An edit by a.")
    b = _reviewer(tmp_path, "b", ["accept", "reject", "reject"])
    assert [p.name for p in (a, b)] == ["review.a.csv", "review.b.csv"]
    assert list(reviewer_sheets(tmp_path)) == ["a", "b"]
    both = read_reviews([a, b], **FIELDS, rule="all")
    assert [i.id for i in both.accepted] == ["a"] and both.rejected == 2
    assert both.accepted[0].texts["p2"] == "An edit by a."  # the one edit wins over the sheet's text
    assert both.summary() == {"review": [str(a), str(b)], "review_rule": "all", "rejected": 2}
    tie = read_reviews([a, b], **FIELDS, rule="majority")  # one of two is no majority
    assert [i.id for i in tie.accepted] == ["a"]
    c = _reviewer(tmp_path, "c", ["accept", "accept", "reject"], p2="An edit by c.")
    with pytest.raises(DataError, match=re.escape("wrote different values: 'An edit by a.' / 'An edit by c.';")):
        read_reviews([a, b, c], **FIELDS, rule="majority")
    c = _reviewer(tmp_path, "c", ["accept", "accept", "reject"])
    assert [i.id for i in read_reviews([a, b, c], **FIELDS, rule="majority").accepted] == ["a", "b"]
    d = _reviewer(tmp_path, "d", ["accept", "", "reject"])
    with pytest.raises(DataError, match="item 'b' is undecided") as err:
        read_reviews([a, d], **FIELDS)
    assert (err.value.file, err.value.record) == (str(d), "row 3")
    other = tmp_path / "other"
    write_review(other, items()[:2], title="T", **FIELDS)
    with pytest.raises(DataError, match="its items are not those of"):
        read_reviews([a, _reviewer(other, "e", ["reject", "reject"])], **FIELDS)
    with pytest.raises(ConfigError, match=re.escape("reviewer name '../x'")):
        reviewer_sheet(tmp_path / CSV_NAME, "../x")
