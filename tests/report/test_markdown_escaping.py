"""report.md shows text from the data as text: a caption's HTML, a case id's Markdown and a model
label's backticks are escaped as report.html's autoescaping escapes them (issue 32 item 6)."""

from __future__ import annotations

import json

import pytest

from spotdiff.diagnose.store import RunStore
from spotdiff.report.build import build_report, write_report
from spotdiff.report.markdown import _code, _esc
from spotdiff.testing.formats import SUGARCREPE_SUBSETS, write_sugarcrepe
from spotdiff.testing.synthetic_runs import fill_store

SCRIPT = "<script>alert(1)</script>"
LINK = "[click](https://example.invalid/x.png)"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """SugarCrepe data whose every caption carries a script tag and a Markdown link, its ids a table
    pipe and emphasis, and synthetic runs of two models on it, rendered to report.md and report.html."""
    root = tmp_path_factory.mktemp("hostile")
    data = write_sugarcrepe(root / "sugarcrepe", n=3)
    for subset in SUGARCREPE_SUBSETS:
        path = data / f"{subset}.json"
        records = json.loads(path.read_text(encoding="utf-8"))
        records = {
            f"{key}|*x*": {
                **r,
                "caption": f"{SCRIPT} {r['caption']}",
                "negative_caption": f"{LINK} {r['negative_caption']}",
            }
            for key, r in records.items()
        }
        path.write_text(json.dumps(records), encoding="utf-8")
    with RunStore(root / "runs.sqlite") as store:
        fill_store(store, models=2, benchmarks=("sugarcrepe",), n_cases=21, n_boot=20, data={"sugarcrepe": data})
        report = build_report(store, title=f"{SCRIPT} report")
    written = write_report(report, root / "report")
    return {k: written[k].read_text(encoding="utf-8") for k in ("md", "html")}


def test_captions_html_is_escaped_in_markdown_as_in_html(hostile: dict) -> None:
    md, page = hostile["md"], hostile["html"]
    assert "<script>" not in md and "<script>alert" not in page  # the page's own scripts carry no alert
    assert md.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2  # the title and the gallery's captions
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_markdown_links_and_cell_breaks_from_the_data_stay_text(hostile: dict) -> None:
    md = hostile["md"]
    assert "[click](https" not in md and r"\[click\](https://example.invalid/x.png)" in md
    gallery = md.split("#### Failure gallery", 1)[1]
    assert r"**case " in gallery and r"0\|\*x\*" in gallery  # the id's pipe and asterisks escaped


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a <b>bold</b> & co", "a &lt;b&gt;bold&lt;/b&gt; &amp; co"),
        ("two\nlines", "two lines"),
        ("*a* _b_ `c` [d](e) ~~f~~ | \\", r"\*a\* \_b\_ \`c\` \[d\](e) \~\~f\~\~ \| \\"),
    ],
)
def test_esc_shows_text_as_is_on_one_line(text: str, shown: str) -> None:
    assert _esc(text) == shown


def test_code_spans_cannot_be_closed_by_the_text() -> None:
    assert _code("hf-clip:m") == "`hf-clip:m`"
    assert _code("a`b") == "``a`b``" and _code("``x") == "``` ``x ```"
    assert _code("a|b") == r"`a\|b`" and _code("a|b", cell=False) == "`a|b`"
    assert _code("<script>") == "`<script>`"  # a code span shows HTML verbatim
