"""The converted-SmolLM2 folders of :mod:`spotdiff.testing.tiny_vlms` are keyed by the GGUF's content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotdiff.testing import tiny_vlms


@pytest.fixture
def gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site" / "model.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    monkeypatch.setattr("spotdiff.scorers.lm.smollm2_gguf_path", lambda: path)
    return path


def test_a_reinstalled_gguf_reuses_the_folder_and_new_content_converts_again(gguf: Path, tmp_path: Path) -> None:
    calls: list[bytes] = []

    def convert(source: Path, folder: Path) -> None:
        calls.append(source.read_bytes())
        (folder / "done").write_text("ok")

    cache = tmp_path / "cache"
    first = tiny_vlms._converted_once("tokenizer", "done", convert, cache)
    os.utime(gguf, ns=(1, 1))  # a reinstall: the same bytes with another modification time
    assert tiny_vlms._converted_once("tokenizer", "done", convert, cache) == first
    assert len(calls) == 1 and (first / "done").read_text() == "ok"

    gguf.write_bytes(gguf.read_bytes()[::-1])  # the same size, other content
    second = tiny_vlms._converted_once("tokenizer", "done", convert, cache)
    assert second != first and len(calls) == 2
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == sorted([first.name, second.name])
