"""What ``spotdiff report`` writes, against someone else's store and an unlucky disk (issue 44): every file
is replaced whole (a failed write leaves the one that was there), a link in the report folder is replaced,
never written through, and every value from the store reaches report.html as text, in every attribute."""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from spotdiff.cli import main
from spotdiff.diagnose.store import RunStore
from spotdiff.testing.formats import write_sugarcrepe
from spotdiff.testing.synthetic_runs import fill_store

#: a run id someone else's store may hold: it closes an attribute and opens an element that runs a script
HOSTILE_ID = 'd8703"><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Synthetic runs of two models on SugarCrepe fixture data (so the report has failure galleries)."""
    root = tmp_path_factory.mktemp("report-files")
    data = write_sugarcrepe(root / "sugarcrepe", n=3)
    with RunStore(root / "runs.sqlite") as rs:
        fill_store(rs, models=2, benchmarks=("sugarcrepe",), n_cases=21, n_boot=20, data={"sugarcrepe": data})
    return root / "runs.sqlite"


def report(store: Path, out: Path, *extra: str) -> int:
    return main(["report", "--store", str(store), "--out", str(out), "--jobs", "1", *extra])


def test_a_link_in_the_report_folder_is_replaced_never_written_through(store: Path, tmp_path: Path) -> None:
    """``R/report.html -> ../victim.txt`` overwrote the victim; so would a link to a folder where the
    report writes its tables."""
    out, victim, elsewhere = tmp_path / "R", tmp_path / "victim.txt", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    victim.write_text("precious")
    (out / "report.html").symlink_to(Path("..") / "victim.txt")
    (out / "report.md").symlink_to(victim)
    (out / "tables").symlink_to(elsewhere, target_is_directory=True)
    assert report(store, out) == 0
    assert victim.read_text() == "precious" and list(elsewhere.iterdir()) == []
    for path in (out / "report.html", out / "report.md", out / "tables"):
        assert not path.is_symlink()
    assert (out / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (out / "tables" / "provenance.csv").is_file()


def _limited(size: int) -> None:  # pragma: no cover - in the child, before it runs spotdiff
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing


def test_a_report_that_cannot_be_written_leaves_the_previous_one_whole(store: Path, tmp_path: Path) -> None:
    """A write the file system cuts short (here a file-size limit, as a full disk would) left a cut
    report.html where a complete one was: every report file is written to a temporary file and renamed."""
    out = tmp_path / "R"
    assert report(store, out) == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    limit = 1 << 16  # above what SQLite writes beside the store, below report.html
    assert len(before[Path("report.html")]) > limit
    argv = [sys.executable, "-m", "spotdiff", "report", "--store", str(store), "--out", str(out), "--jobs", "1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, preexec_fn=lambda: _limited(limit))
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after[Path("report.html")] == before[Path("report.html")]
    for name, data in after.items():  # whole: the old file, or a new one within the limit
        assert data == before[name] or len(data) < limit, name
    assert after.keys() == before.keys()  # no temporary file left
    errors = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(errors) == 1, errors
    assert "file too large" in errors[0] and str(out) in errors[0], errors


class _Elements(HTMLParser):
    """Every start tag of a page with its attributes, as a browser's parser reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def test_values_from_a_store_are_text_in_every_attribute(store: Path, tmp_path: Path) -> None:
    """A run id ``d8703"><img src=x onerror=alert(1)>`` became script in report.html (scores_table put it
    into ``title`` and ``href`` unescaped); a model name and a case id from the store are values too."""
    hostile = tmp_path / "hostile.sqlite"
    hostile.write_bytes(store.read_bytes())
    with sqlite3.connect(hostile) as db:
        (first,) = db.execute("SELECT id FROM runs ORDER BY id LIMIT 1").fetchone()
        for table, column in (("runs", "id"), ("metrics", "run_id"), ("units", "run_id")):
            db.execute(f"UPDATE {table} SET {column}=? WHERE {column}=?", (HOSTILE_ID, first))
        db.execute("UPDATE runs SET model=model || '\"><svg onload=alert(2)>'")
        db.execute("UPDATE units SET case_id=case_id || '\" onmouseover=\"alert(3)'")
    assert report(hostile, tmp_path / "R", "--format", "html") == 0
    page = (tmp_path / "R" / "report.html").read_text(encoding="utf-8")
    parser = _Elements()
    parser.feed(page)
    handlers = [(tag, name) for tag, attrs in parser.elements for name in attrs if name.startswith("on")]
    assert handlers == []
    images = [a for tag, a in parser.elements if tag in ("img", "svg")]
    assert [a for a in images if not (a.get("src") or "").startswith("data:")] == []
    assert [a["data-run"] for _, a in parser.elements if "data-run" in a].count(HOSTILE_ID) >= 1
    links = {a["href"] for tag, a in parser.elements if tag == "a" and "href" in a}
    assert f"#run-{HOSTILE_ID}" in links
