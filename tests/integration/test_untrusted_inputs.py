"""Untrusted data, images and weights (issue 32): each fault is one line naming the file (and the record)
and the remedy, exit status 2, no traceback; nothing outside the data is read into a run or a report.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spotdiff.cases import FileImage, PILImage, as_image_ref
from spotdiff.cli import main
from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl
from spotdiff.testing.formats import write_sugarcrepe


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import spotdiff.testing.tiny_models as tm

    return tm.make_tiny_clip(tmp_path_factory.mktemp("tiny_clip") / "clip")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_sugarcrepe(tmp_path / "sugarcrepe", n=2)


def edit_record(data: Path, subset: str, key: str, **fields: str) -> Path:
    """Set fields of one record of a SugarCrepe subset file, written as JSON with ASCII escapes."""
    path = data / f"{subset}.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    records[key].update(fields)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def one_error(capsys: pytest.CaptureFixture, *argv: object) -> str:
    """Run ``spotdiff`` in-process; assert exit status 2 and one error line without a traceback; return it."""
    status = main([str(a) for a in argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2, lines
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and not any("Traceback" in line for line in lines), lines
    return errors[0]


def eval_args(model: str, data: Path, tmp_path: Path, *extra: object) -> list[object]:
    return [
        "eval", "--model", model, "--benchmark", "sugarcrepe", "--data", data, "--device", "cpu",
        "--cache", tmp_path / "cache", "--store", tmp_path / "runs.sqlite", "--n-boot", "20", "--quiet",
        "--workers", "0", *extra,
    ]  # fmt: skip


# ------------------------------------------------------------------------- lone surrogates (item 15)
def test_a_lone_surrogate_in_a_json_caption_names_file_record_and_field(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = edit_record(data, "swap_att", "1", caption="a cat \ud800 on the grass")
    assert "\\ud800" in path.read_text(encoding="utf-8")  # valid JSON: an escape, not a byte
    error = one_error(capsys, *eval_args(f"hf-clip:{clip}", data, tmp_path))
    assert f"file {path}, record 1, field 'caption': text holds a lone surrogate \\ud800" in error
    assert "fix or remove that escape" in error


def test_surrogate_pairs_are_text_and_a_lone_one_in_json_lines_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text('{"caption": "a \\ud83d\\ude00 face"}\n\n{"caption": "ok", "tags": ["x\\udc00"]}\n')
    lines = iter_jsonl(path)
    assert next(lines) == (1, {"caption": "a \N{GRINNING FACE} face"})  # a valid pair is one character
    with pytest.raises(DataError, match=r"records.jsonl, record line 3, field 'tags/0': text holds a lone surrogate"):
        next(lines)


# ------------------------------------------------------------------ images: bombs, 16 bits (items 12, 16)
def test_a_decompression_bomb_is_one_line_naming_the_image(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    bomb = data / "images" / "bomb.png"
    Image.new("1", (20000, 20000)).save(bomb, optimize=True)  # 400 megapixels in about 48 KB
    assert bomb.stat().st_size < 100_000
    edit_record(data, "add_att", "0", filename="bomb.png")
    error = one_error(capsys, *eval_args(f"hf-clip:{clip}", data, tmp_path))
    assert f"image {bomb} is refused as a possible decompression bomb" in error
    assert "400000000 pixels" in error and "resize it" in error


def test_sixteen_bit_greyscale_is_scaled_to_eight_bits_not_clipped(tmp_path: Path) -> None:
    values = np.arange(0, 65536, 257, dtype=np.uint16).reshape(16, 16)  # 0, 257, ..., 65535: every 8-bit grey
    path = tmp_path / "grey16.png"
    Image.fromarray(values).save(path)
    with Image.open(path) as im:
        assert im.mode == "I;16"
    expected = np.arange(256, dtype=np.uint8).reshape(16, 16)  # v * 255 / 65535, exactly
    for ref in (FileImage(path), PILImage(Image.open(path)), as_image_ref(Image.fromarray(values.astype(np.int32)))):
        rgb = np.asarray(ref.load())
        assert rgb.shape == (16, 16, 3) and (rgb == expected[..., None]).all(), type(ref).__name__
