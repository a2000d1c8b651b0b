"""A declaration is one YAML file of data, checked key by key (items 1 and 7 of issue 46): its metadata by the
model every built-in's is validated by, no YAML tags or aliases, templates rendered in a sandbox that refuses code;
bad input is one line naming the file and the key (or the data file, the row and the column), exit 2, nothing
written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spotdiff.api import load_benchmark
from spotdiff.benchmarks import BENCHMARKS
from spotdiff.benchmarks.declaration import read_declaration
from spotdiff.cli import main
from spotdiff.errors import DataError


def _error_line(capsys: pytest.CaptureFixture) -> str:
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("spotdiff")]
    return line


def test_a_declaration_is_validated_by_the_builtins_metadata_model(declare, pairs: Path) -> None:
    path = declare(reproduces="Table 1 of the paper", subsets=["swap", "count", "colour"],
                   groups={"pairs": ["swap", "count"]}, groups_source="the paper, Sec. 2")  # fmt: skip
    decl = read_declaration(path)
    meta = decl.metadata
    assert (meta.title, meta.license, meta.main_score, meta.reproduces) == (
        "My pairs", "CC-BY-4.0", ("i2t-top1", "accuracy"), "Table 1 of the paper")
    assert meta.subset_groups == {"pairs": ("swap", "count")} and meta.parts == ()
    assert decl.local_root == pairs and len(decl.sha256) == 64
    # what BenchmarkMetadata refuses for a built-in, it refuses here, naming the file
    bad = declare(file="bad.yaml", groups={"pairs": ["swap", "nope"]}, subsets=["swap"])
    with pytest.raises(DataError, match=rf"file {bad}: benchmark declaration 'my-pairs': group 'pairs' names unknown"):
        read_declaration(bad)
    bad = declare(file="bad.yaml", main_score=["group", "group"])
    with pytest.raises(DataError, match=r"main score's protocol 'group' is not one of i2t-top1"):
        read_declaration(bad)
    bad = declare(file="bad.yaml", data=[{"hub": "org/set", "revision": "main", "files": ["*.parquet"]}])
    with pytest.raises(DataError, match=r"hub revision 'main' is not a commit"):
        read_declaration(bad)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"cases": {"textz": ["{{ caption }}"]}}, "cases.textz", "unknown key (the keys of cases: id, subset, images"),
        ({"licence": "MIT"}, "licence", "unknown key (the keys of a declaration: spotdiff, name, title"),
        ({"protocols": "i2t-top1"}, "protocols", "expected a list, got str 'i2t-top1'"),
        ({"spotdiff": True}, "spotdiff", "expected an integer, got bool"),
        ({"license": None}, "license", "missing required key (the keys of a declaration: spotdiff, name"),
        ({"cases": {"texts": None}}, "cases.texts", "missing required key (the keys of cases:"),
        ({"data": [{"path": "pairs.csv", "hub": "a/b"}]}, "data[0]", "an entry names one of path, folder, hub, url"),
        ({"data": [{"path": "pairs.csv", "format": "xlsx"}]}, "data[0].format", "unknown format 'xlsx'; known: csv"),
        ({"name": "My Pairs"}, "name", "name 'My Pairs': 1 to 64 lowercase letters"),
        ({"spotdiff": 2}, "spotdiff", "this spotdiff reads declarations of format 1, not 2"),
        ({"cases": {"truth": "last"}}, "cases.truth", "unknown truth 'last'; give first or diagonal"),
        ({"cases": {"truth": {"first": 0}}}, "cases.truth.first", "expected a count of texts >= 1"),
        ({"cases": {"truth": None}}, "cases.truth", "give the truth (which text goes with which image)"),
        ({"cases": {"answers": {"choices": ["Yes", "No", "Maybe"], "gold": [["{{ a }}"]]}, "truth": None}},
         "cases.answers.choices", "a question case has two candidate answers, got 3"),
        ({"cases": {"answers": {"choices": ["A", "B"], "gold": [["{{ a }}"]], "reader": "vibes"}, "truth": None}},
         "cases.answers.reader", "unknown reader 'vibes'; known: words, letter"),
        ({"protocols": ["i2t-top1", "sppec"]}, "protocols[1]", "unknown protocol 'sppec'; known:"),
        ({"main_score": ["i2t-top1", "acc"]}, "main_score", "protocol 'i2t-top1' has no metric 'acc'; its metrics:"),
    ],
)
def test_a_bad_key_is_one_line_naming_the_file_and_the_key(declare, capsys, changes, field, message) -> None:
    path = declare(**changes)
    assert main(["benchmarks", str(path)]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"spotdiff benchmarks: error: file {path}, field {field!r}: {message}"), line


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cases:\n  images: !function utils.doc_to_visual\n", "a tag at line 2 is refused"),
        ("a: !!python/object/apply:os.system ['true']\n", "a tag at line 1 is refused"),
        ("a: !!str 1\n", "a tag at line 1 is refused"),
        ("a: &x [1]\nb: *x\n", "an anchor at line 1 is refused"),
        ("name: a\nname: b\n", "key 'name' is given twice"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_yaml_is_plain_data(tmp_path: Path, text: str, message: str) -> None:
    """No YAML tag (lmms-eval's ``!function`` hooks, Python objects, even ``!!str``), anchor or alias (no alias
    bombs), no key given twice (YAML keeps the last silently)."""
    path = tmp_path / "d.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=rf"file {path}: .*{message}"):
        read_declaration(path)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ caption.__class__.__mro__ }}", "refused: it reaches for the attribute '__mro__'"),
        ("{{ cycler.__init__.__globals__ }}", "refused: it reaches for the attribute '__globals__'"),
        ("{{ row['__class__'] }}", "refused: it reaches for the item '__class__'"),
        ("{% include 'secret.txt' %}", "refused: it loads another template"),
        ("{% import 'x' as y %}{{ y }}", "refused: it loads another template"),
        ("{{ 9 ** 9 ** 9 }}", "refused: it raises to a power"),
        ("{{ caption", "does not parse"),
    ],
)
def test_a_template_that_reaches_for_code_is_refused_when_read(declare, template: str, message: str) -> None:
    path = declare(cases={"texts": [template, "{{ negative }}"]})
    with pytest.raises(DataError, match=rf"file {path}, field 'cases.texts\[0\]': template .* {message}"):
        read_declaration(path)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ 'a' * 1000000 }}", "is refused: a '\\*' making more than 100000 items is refused"),
        ("{{ row.pop('caption') }}", "is refused: .*pop"),
        ("{{ row.clear() }}", "is refused: .*clear"),
    ],
)
def test_the_sandbox_refuses_what_a_template_does_at_render_time(declare, pairs, template, message) -> None:
    path = declare(cases={"texts": [template, "{{ negative }}"]})
    with pytest.raises(DataError, match=rf"file {pairs / 'pairs.csv'}, record row 0 \(line 2\): the template of "
                                         rf"cases.texts\[0\] \({path}\) {message}"):  # fmt: skip
        load_benchmark(str(path))


def test_a_column_absent_from_the_data_is_named_with_the_data_columns(declare, pairs, tmp_path, capsys) -> None:
    """Exit 2, one line naming the data file, the row and the column, the data's columns listed, nothing written."""
    path = declare(cases={"texts": ["{{ captoin }}", "{{ negative }}"]})
    out = tmp_path / "out"
    args = ["eval", "--model", "minilm", "--benchmark", str(path), "--out", str(out), "--no-store", "--no-cache"]
    assert main(args) == 2
    line = _error_line(capsys)
    assert line == (f"spotdiff eval: error: file {pairs / 'pairs.csv'}, record row 0 (line 2), field 'captoin': no "
                    f"column 'captoin', which cases.texts[0] of {path} names (the data's columns: id, image, caption, "
                    "negative, kind)")  # fmt: skip
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize(
    ("row", "changes", "field", "message"),
    [
        ("p9,9.png, ,x,swap", {}, "caption", "empty text (from cases.texts[0])"),
        ("p9,,a,b,swap", {}, "image", "no image (got '')"),
        ("p9,9.png,a,b,C", {"cases": {"truth": {"label": "{{ 'A' if kind != 'C' else kind }}", "choices": ["A", "B"]}}},
         "cases.truth.label[0]", "label 'C' is not the choices A, B"),
        ("p9,9.png,a,b,swap", {"cases": {"truth": {"label": "{{ 0 if id != 'p9' else 'x' }}"}}},
         "cases.truth.label[0]", "label 'x' is not an index from 0 to 1 or one of the case's texts"),
        ("p9,9.png,a,b,maybe", {"cases": {"truth": {"cells": [["{{ 1 if id != 'p9' else kind }}", "0"]]}}},
         "cases.truth.cells[0][0]", "expected true/false, 1/0 or yes/no, got 'maybe'"),
        ("p9,9.png,a,b", {}, None, "4 cells for the 5 columns id, image, caption, negative, kind"),
    ],
)
def test_a_bad_row_names_the_data_file_the_row_and_the_column(declare, pairs, row, changes, field, message) -> None:
    with (pairs / "pairs.csv").open("a", encoding="utf-8") as f:
        f.write(row + "\n")
    path = declare(**changes)
    where = f"file {pairs / 'pairs.csv'}, record row 6 (line 8)" + (f", field {field!r}" if field else "")
    with pytest.raises(DataError, match="^" + re.escape(f"{where}: {message}")):
        load_benchmark(str(path))


def test_a_missing_image_file_is_named_with_its_row_and_column_when_read(declare, pairs) -> None:
    (pairs / "images" / "2.png").unlink()
    cases = load_benchmark(str(declare()))  # images are lazy, as for built-ins
    with pytest.raises(DataError, match=r"cannot read image .*2\.png \(named by pairs\.csv row 2 \(line 4\) image\)"):
        _ = cases[2].images[0].key


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"images": "../elsewhere"}, "field 'images': '../elsewhere' leaves its folder"),
        ({"images": "/etc"}, "field 'images': '/etc' leaves its folder"),
        ({"root": "../.."}, "field 'root': '../..' leaves its folder"),
        ({"data": [{"path": "../pairs/pairs.csv"}]}, "field 'data\\[0\\]': '../pairs/pairs.csv' leaves its folder"),
        ({"data": [{"path": "/etc/passwd"}]}, "field 'data\\[0\\]': '/etc/passwd' leaves its folder"),
    ],
)
def test_the_declarations_folders_and_files_lie_inside_it(declare, changes, message) -> None:
    with pytest.raises(DataError, match=message):
        load_benchmark(str(declare(**changes)))


@pytest.mark.parametrize("image", ["../../outside.png", "{outside}", "link.png"])
def test_an_image_outside_the_declared_roots_is_refused_as_for_builtins(declare, pairs, tmp_path, image) -> None:
    """``..``, an absolute path, a link leading out: refused by the check every loader's cases go through."""
    outside = tmp_path / "outside.png"
    (pairs / "images" / "0.png").rename(outside)
    (pairs / "images" / "link.png").symlink_to(outside)
    text = (pairs / "pairs.csv").read_text().replace("0.png", image.format(outside=outside))
    (pairs / "pairs.csv").write_text(text)
    with pytest.raises(DataError, match=r"record p0: image .* outside the data .* declare it with --image-root"):
        load_benchmark(str(declare()))


def test_a_data_file_linked_from_outside_is_refused(declare, pairs, tmp_path) -> None:
    (pairs / "pairs.csv").rename(tmp_path / "elsewhere.csv")
    (pairs / "pairs.csv").symlink_to(tmp_path / "elsewhere.csv")
    with pytest.raises(DataError, match=r"'pairs.csv' is a link leading out of"):
        load_benchmark(str(declare()))


def test_a_name_held_by_another_benchmark_is_refused(declare, pairs) -> None:
    with pytest.raises(DataError, match=r"field 'name': the name 'sugarcrepe' is already a built-in benchmark's"):
        load_benchmark(str(declare(file="a.yaml", name="sugarcrepe")))
    load_benchmark(str(declare(file="a.yaml")))
    with pytest.raises(DataError, match=r"the name 'my-pairs' is already the declaration .*a.yaml's"):
        load_benchmark(str(declare(file="b.yaml")))
    assert BENCHMARKS.get("my-pairs").declaration_record()["path"].endswith("a.yaml")
