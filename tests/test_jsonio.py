"""The one JSON-lines reader and writer, and the atomic JSON writer (spotdiff.jsonio)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spotdiff.errors import DataError
from spotdiff.jsonio import dumps, iter_jsonl, temporary_path, write_json, write_jsonl


def test_iter_jsonl_numbers_lines_skips_blanks_and_accepts_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    # U+2028 is a line break for str.splitlines, not for JSON lines
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n  \n{"b": "x\xe2\x80\xa8y"}\r\n[2]')
    assert list(iter_jsonl(path)) == [(1, {"a": 1}), (4, {"b": "x\u2028y"}), (5, [2])]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1}\n{"a": \n', r"record line 2: invalid JSON at column 7: Expecting value"),
        (b'{"a": 1}\n\n{"a": "\xff"}\n', r"record line 3: not valid UTF-8 at byte 17"),
        (b'\xef\xbb\xbf{"a": "\xe4"}\n', r"record line 1: not valid UTF-8 at byte 10"),
    ],
)
def test_iter_jsonl_names_file_and_line(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    with pytest.raises(DataError, match=message) as info:
        list(iter_jsonl(path))
    assert info.value.file == str(path)


def test_iter_jsonl_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read") as info:
        list(iter_jsonl(tmp_path / "missing.jsonl"))
    assert info.value.file == str(tmp_path / "missing.jsonl")


def test_write_jsonl_round_trips_and_converts_values(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "rows.jsonl"
    rows = [{"b": np.int64(2), "a": "café"}, {"p": Path("x/y"), "t": (1, np.float32(0.5)), "s": {3}}]
    write_jsonl(path, iter(rows))
    assert path.read_bytes() == ('{"b": 2, "a": "café"}\n{"p": "x/y", "t": [1, 0.5], "s": [3]}\n'.encode())
    assert [v for _, v in iter_jsonl(path)] == [
        {"b": 2, "a": "café"},
        {"p": "x/y", "t": [1, 0.5], "s": [3]},
    ]
    with pytest.raises(TypeError, match="not JSON serialisable"):
        write_jsonl(path, [{"x": object()}])


def test_write_jsonl_with_run_file_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "scores.jsonl", [{"b": float("nan"), "a": "é"}], dump=dumps)
    assert path.read_text(encoding="utf-8") == '{"a": "\\u00e9", "b": null}\n'


def test_dumps_arrays_of_every_kind() -> None:
    """Finite float, integer and boolean arrays go out as they are; NaN and infinities become null."""
    value = {
        "f": np.array([[0.25, -1.5]], dtype=np.float32),
        "nan": np.array([0.5, np.nan, np.inf]),
        "i": np.arange(3, dtype=np.int8),
        "b": np.array([True, False]),
        "h": np.float16(0.5),
    }
    expected = '{"b": [true, false], "f": [[0.25, -1.5]], "h": 0.5, "i": [0, 1, 2], "nan": [0.5, null, null]}'
    assert dumps(value) == expected


def test_write_json_leaves_no_temporary_file_when_the_write_fails(tmp_path: Path) -> None:
    """Issue 32: a failed write (here the rename onto a folder that holds a file) left ``.NAME.PID.tmp``."""
    target = tmp_path / "run.json"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        write_json(target, {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def _dead_pid() -> int:
    process = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(process.stdout)


def test_write_json_removes_the_temporaries_of_processes_that_are_gone(tmp_path: Path) -> None:
    """Issue 32: ``..spotdiff-run.json.PID.tmp`` of a process killed (or stopped by a full disk) survived later
    successful runs; a write removes those of processes no longer running and keeps a live one's."""
    target = tmp_path / ".spotdiff-run.json"
    stale, live = (
        target.with_name(f"..spotdiff-run.json.{_dead_pid()}.tmp"),
        target.with_name(f"..spotdiff-run.json.{os.getppid()}.tmp"),
    )
    other = tmp_path / f".other.json.{_dead_pid()}.tmp"  # another file's: not this write's to judge
    for path in (stale, live, other):
        path.write_text("{")
    assert temporary_path(target) == tmp_path / f"..spotdiff-run.json.{os.getpid()}.tmp"
    write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert not stale.exists() and live.exists() and other.exists()
