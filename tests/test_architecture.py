"""The house rules a newcomer relies on (issue 43): each thing in the room named for it, and no room too large.

The benchmarks' rules for reading answers and asking questions live in :mod:`spotdiff.readers`, by the names the
cases' tags give, and no scorer module defines one or imports a benchmark's module; what a review is lives in
:mod:`spotdiff.review`, which the engines import and which imports no engine.
"""

from __future__ import annotations

import ast
from pathlib import Path

from spotdiff.cases import PROMPT_STYLES, READERS
from spotdiff.readers import ANSWER_READERS, CHOICE_STYLES

SRC = Path(__file__).resolve().parents[1] / "src" / "spotdiff"


def _imports(path: Path) -> set[str]:
    """The modules a source file imports (``from X import y`` gives X)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_every_reader_and_question_style_the_cases_name_lives_in_readers() -> None:
    assert set(ANSWER_READERS) == set(READERS)
    assert set(CHOICE_STYLES) == set(PROMPT_STYLES)
    for name, reader in ANSWER_READERS.items():
        assert reader.__module__.startswith("spotdiff.readers."), name
    for name, style in CHOICE_STYLES.items():
        assert style.read_text.__module__.startswith("spotdiff.readers."), name
        assert style.read_image.__module__.startswith("spotdiff.readers."), name


def test_no_scorer_module_holds_or_imports_a_benchmarks_reading_rule() -> None:
    rules = {"extract_answer", "read_letter", "read_letter_lmms_eval", "read_letter_corrected", "read_first_char",
             "read_first_char_lists", "vismin_matches", "parse_choice", "colorswap_is_option_text",
             "colorswap_is_option_image", "choice_questions", "read_choice"}  # fmt: skip
    for path in sorted((SRC / "scorers").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & (rules | {"ChoiceStyle", "ChoiceQuestion"}), path
        assert not {m for m in _imports(path) if m.startswith("spotdiff.readers.")} - {"spotdiff.readers.choice"}, path


def test_a_review_is_defined_once_in_review_and_the_engines_reach_it_there() -> None:
    """Items, sheets, decisions, rules and agreement live in spotdiff.review (below the engines, which import it);
    no engine module defines one, and the review imports no engine."""
    review = {"ReviewItem", "ReviewResult", "SheetRow", "SheetKind", "read_review", "read_reviews", "write_review",
              "read_sheet", "write_sheet", "agreed_value", "pair_items", "review_items", "sheet_kind", "kappa"}
    for path in sorted((SRC / "synth").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & review, path
    for path in sorted((SRC / "review").rglob("*.py")):
        assert not {m for m in _imports(path) if m.startswith("spotdiff.synth")}, path
    assert "spotdiff.review.sheet" in _imports(SRC / "synth" / "text" / "visla_generic.py")


def _code_lines(lines: list[str], node: ast.AST) -> int:
    """A function's lines of code: its lines but its docstring, blank lines and comment lines."""
    body = node.body
    skip: set[int] = set()
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        skip = set(range(first.lineno, first.end_lineno + 1))
    return sum(
        1
        for n in range(node.lineno, node.end_lineno + 1)
        if n not in skip and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")
    )


def test_no_module_over_800_lines_and_no_function_over_100_lines_of_code() -> None:
    too_long, too_large = [], []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if len(lines) > 800:
            too_long.append(f"{path.relative_to(SRC)}: {len(lines)} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _code_lines(lines, node) > 100:
                too_large.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {_code_lines(lines, node)}")
    assert not too_long, too_long
    assert not too_large, too_large


def test_the_line_counts_read_code_not_docstrings_nor_comments() -> None:
    source = 'def f():\n    """Doc\n    more."""\n    # a comment\n\n    x = 1\n    return x\n'
    (node,) = ast.parse(source).body
    assert _code_lines(source.splitlines(), node) == 3  # def, x = 1, return x


def test_every_spotdiff_module_an_import_names_exists() -> None:
    """An import inside a function (a lazy one, which lint-imports does not see) named a module a move had taken
    away (``spotdiff.synth.review`` after issue 43): every ``spotdiff`` module any import of ``src/`` names exists,
    and so does every name imported from it that is not a module."""
    import importlib
    import importlib.util

    missing = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("spotdiff"):
                if importlib.util.find_spec(node.module) is None:
                    missing.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.module}")
                    continue
                module = importlib.import_module(node.module)
                absent = [a.name for a in node.names if not hasattr(module, a.name)]
                missing += [f"{path.relative_to(SRC)}:{node.lineno}: {node.module}.{name}" for name in absent
                            if importlib.util.find_spec(f"{node.module}.{name}") is None]  # fmt: skip
            elif isinstance(node, ast.Import):
                missing += [f"{path.relative_to(SRC)}:{node.lineno}: {a.name}" for a in node.names
                            if a.name.startswith("spotdiff") and importlib.util.find_spec(a.name) is None]  # fmt: skip
    assert missing == []
