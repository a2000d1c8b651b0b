"""Untrusted data, images and weights (issue 32): each fault is one line naming the file (and the record)
and the remedy, exit status 2, no traceback; nothing outside the data is read into a run or a report.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.shared import MANIFEST
from spotdiff.cases import FileImage, PILImage, as_image_ref
from spotdiff.cli import main
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError, ModelOutputError
from spotdiff.jsonio import iter_jsonl
from spotdiff.report.gallery import CaseSource
from spotdiff.scorers import EmbeddingScorer, ScorerOptions
from spotdiff.scorers.weights import naming_damaged_weights
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


def test_a_jpeg_bomb_never_reaches_the_gpu_decoder(tmp_path: Path) -> None:
    """``--gpu-decode`` hands whole JPEG files to nvJPEG, which has no pixel limit: a file whose header
    declares too many pixels takes the CPU path, which refuses it naming the file."""
    from spotdiff.diagnose.pipeline import _jpeg_bytes

    small, bomb = tmp_path / "small.jpg", tmp_path / "bomb.jpg"
    Image.new("RGB", (16, 16)).save(small)
    data = small.read_bytes()
    sof = data.index(b"\xff\xc0")  # baseline frame header: length, precision, height, width
    bomb.write_bytes(data[: sof + 5] + (20000).to_bytes(2, "big") * 2 + data[sof + 9 :])
    assert _jpeg_bytes([FileImage(small)]) is not None
    assert _jpeg_bytes([FileImage(small), FileImage(bomb)]) is None
    with pytest.raises(DataError, match=rf"image {bomb} is refused as a possible decompression bomb"):
        FileImage(bomb).load()


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


# --------------------------------------------------------------- images outside the data (item 7)
def _secret(tmp_path: Path) -> Path:
    """An image outside the data folder, as a user's private photo would be."""
    secret = tmp_path / "private" / "secret.png"
    secret.parent.mkdir()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(secret)
    return secret


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_record_naming_an_image_outside_the_data_is_refused(data: Path, tmp_path: Path, how: str) -> None:
    secret = _secret(tmp_path)
    if how == "symlink":  # a link inside the data that leads out of it
        (data / "images" / "link.png").symlink_to(secret)
        name = "link.png"
    else:
        name = "../../private/secret.png" if how == "dotdot" else str(secret)
    assert (data / "images" / name).resolve() == secret.resolve()
    edit_record(data, "swap_obj", "1", filename=name)
    bench = get_benchmark("sugarcrepe")(data)
    with pytest.raises(DataError, match=rf"record swap_obj/1: image .* is {re.escape(str(secret.resolve()))}, outside"):
        bench.load()
    assert len(get_benchmark("sugarcrepe")(data, image_root=str(secret.parent)).load()) == 14  # declared: read


def test_an_image_outside_the_data_is_one_line_and_image_root_allows_it(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    secret = _secret(tmp_path)
    edit_record(data, "add_obj", "0", filename=str(secret))
    error = one_error(capsys, *eval_args(f"hf-clip:{clip}", data, tmp_path, "--no-store"))
    assert f"record add_obj/0: image {secret} is {secret.resolve()}, outside the data ({data.resolve()})" in error
    assert "--image-root DIR" in error
    argv = eval_args(f"hf-clip:{clip}", data, tmp_path, "--image-root", secret.parent, "--out", tmp_path / "out")
    assert main([str(a) for a in argv]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["n_cases"] == 14 and metrics["run_config"]["options"] == {"image_root": str([str(secret.parent)])}


def test_fetched_data_reads_its_shared_collections_and_images_names_a_folder(tmp_path: Path) -> None:
    """``spotdiff data fetch`` links a benchmark's images to the data home's shared collections: those
    links are followed (the folder holds the manifest); ``--images DIR`` declares its folder too."""
    home = tmp_path / "home"
    data = write_sugarcrepe(home / "_shared" / "coco" / "staging", n=1)
    (home / "sugarcrepe").mkdir()
    for path in data.glob("*.json"):
        path.rename(home / "sugarcrepe" / path.name)
    (home / "sugarcrepe" / "images").symlink_to(Path("..") / "_shared" / "coco" / "staging" / "images")
    with pytest.raises(DataError, match="outside the data"):  # a hand-made folder: links out are refused
        get_benchmark("sugarcrepe")(home / "sugarcrepe").load()
    (home / "sugarcrepe" / MANIFEST).write_text("{}", encoding="utf-8")
    assert len(get_benchmark("sugarcrepe")(home / "sugarcrepe").load()) == 7
    (home / "sugarcrepe" / MANIFEST).unlink()
    loader = get_benchmark("sugarcrepe")(home / "sugarcrepe", images=str(data / "images"))
    assert len(loader.load()) == 7


def test_a_report_shows_no_image_outside_the_data(data: Path, tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    bench = get_benchmark("sugarcrepe")(data)
    digest = bench.data_digest()
    edit_record(data, "add_att", "0", filename=str(secret))
    assert get_benchmark("sugarcrepe")(data).data_digest() != digest
    cases, note = CaseSource._load("sugarcrepe", str(data), {}, get_benchmark("sugarcrepe")(data).data_digest())
    assert cases == {} and "outside the data" in note and "texts and images not shown" in note
    cases, note = CaseSource._load(
        "sugarcrepe", str(data), {"image_root": [str(secret.parent)]}, get_benchmark("sugarcrepe")(data).data_digest()
    )
    assert note is None and cases["add_att/0"].images[0].path == secret


# ------------------------------------------------------------------- damaged model weights (item 13)
class _RunsCode:
    """A pickle that asks to run a shell command when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _damage_weights(model: Path, how: str, marker: Path) -> tuple[Path, str]:
    """Damage the copy ``model`` of a tiny CLIP folder; return the weights file and the error expected."""
    import torch
    from safetensors.torch import load_file

    weights = model / "model.safetensors"
    data = weights.read_bytes()
    if how == "header":
        weights.write_bytes(data[:8] + b"{garbage" + data[16:])
        return weights, "is damaged or incomplete (SafetensorError: Error while deserializing header"
    if how == "truncated":
        weights.write_bytes(data[: len(data) // 2])
        return weights, "is damaged or incomplete (SafetensorError: "
    state = load_file(weights)
    weights.unlink()
    pickled = model / "pytorch_model.bin"
    if how == "pickle":
        torch.save({**state, "x": _RunsCode(marker)}, pickled)
        return pickled, "is a pickle that asks to run posix.system; spotdiff reads weights with torch.load(weights_only"
    torch.save(state, pickled)
    pickled.write_bytes(pickled.read_bytes()[:-4096])
    return pickled, "is damaged or incomplete (RuntimeError: PytorchStreamReader failed reading zip archive"


@pytest.mark.parametrize("how", ["header", "truncated", "pickle", "truncated-pickle"])
def test_damaged_or_code_running_weights_are_one_line_naming_the_file(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, how: str
) -> None:
    model, marker = tmp_path / "model", tmp_path / "code-ran"
    shutil.copytree(clip, model)
    weights, expected = _damage_weights(model, how, marker)
    error = one_error(capsys, *eval_args(f"hf-clip:{model}", data, tmp_path))
    assert f"hf-clip: weights file {weights} {expected}" in error
    assert error.endswith(("download or save the model again", "convert them from a copy you trust"))
    assert not marker.exists()  # the pickle's command never ran


def test_the_damaged_file_among_several_is_named_and_other_errors_pass_through(tmp_path: Path) -> None:
    from safetensors import SafetensorError
    from safetensors.numpy import save_file

    for k in (1, 2):
        save_file({"w": np.zeros(4, np.float32)}, tmp_path / f"model-0000{k}-of-00002.safetensors")
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"\x08" + b"\x00" * 7 + b"{not json")
    named = r"^m: weights file .*model-00002-of-00002.safetensors is damaged"
    with pytest.raises(ConfigError, match=named), naming_damaged_weights("m", tmp_path):
        raise SafetensorError("Error while deserializing header")
    with pytest.raises(KeyError, match="k"), naming_damaged_weights("m", tmp_path):
        raise KeyError("k")  # not a weights error: unchanged


# ------------------------------------------------------------------------- NaN scores (item 14)
class _DivergesOn(EmbeddingScorer):
    """Bag-of-letters texts and mean-colour images; NaN embeddings for texts holding ``word``."""

    capabilities = frozenset({"image-text"})

    def __init__(self, word: str) -> None:
        super().__init__(f"diverges-on:{word}", ScorerOptions(batch_size=8))
        self.word = word

    def identity(self) -> dict:
        return {"spec": self.spec}

    def encode_images(self, images) -> np.ndarray:
        v = np.stack([np.resize(np.asarray(im, np.float32).mean(axis=(0, 1)), 26) + 1.0 for im in images])
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def encode_texts(self, texts) -> np.ndarray:
        v = np.array([[t.count(c) + 1.0 for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], np.float32)
        v[[self.word in t for t in texts]] = np.nan
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_nan_scores_fail_the_run_or_are_counted_as_failures(data: Path, tmp_path: Path) -> None:
    import spotdiff

    cases = spotdiff.load_benchmark("sugarcrepe", data)
    word = "next to a " + cases[0].texts[0].split()[-1]  # the last noun of the first caption
    nan_ids = [c.id for c in cases if any(word in t for t in c.texts)]
    assert 0 < len(nan_ids) < len(cases)
    settings = {"cache": None, "use_store": False, "n_boot": 0, "progress": False, "workers": 0}
    with pytest.raises(ModelOutputError, match=rf"gave NaN scores in {len(nan_ids)} of {len(cases)} cases \(first: "):
        spotdiff.evaluate(_DivergesOn(word), "sugarcrepe", data, out=tmp_path / "failed", **settings)
    assert not (tmp_path / "failed" / "metrics.json").exists()
    result = spotdiff.evaluate(
        _DivergesOn(word), "sugarcrepe", data, out=tmp_path / "out", nan_as_failure=True, **settings
    )
    assert result.run.diagnostics["n_nan_cases"] == len(nan_ids)
    assert result.run.diagnostics["nan_rate"] == pytest.approx(100 * len(nan_ids) / len(cases))
    assert all(c["units"][0]["accuracy"] == 0.0 for c in result.run.cases if c["id"] in nan_ids)  # failures
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["n_nan_cases"] == len(nan_ids) and metrics["nan_cases"] == nan_ids[:5]


def test_a_diverged_model_is_one_line_and_nan_as_failure_records_the_run(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture
) -> None:
    import torch
    from transformers import CLIPModel

    diverged = tmp_path / "diverged"
    shutil.copytree(clip, diverged)
    model = CLIPModel.from_pretrained(clip)
    with torch.no_grad():
        model.text_projection.weight[0, 0] = float("nan")  # every text embedding, so every score, is NaN
    model.save_pretrained(diverged)
    error = one_error(capsys, *eval_args(f"hf-clip:{diverged}", data, tmp_path))
    assert f"model hf-clip:{diverged} gave NaN scores in 14 of 14 cases (first: add_att/0, add_att/1," in error
    assert "--dtype float32" in error and "--nan-as-failure" in error
    (run,) = RunStore(tmp_path / "runs.sqlite").runs()
    assert run.status.startswith("failed: ModelOutputError: model hf-clip:")
    assert main([str(a) for a in eval_args(f"hf-clip:{diverged}", data, tmp_path, "--nan-as-failure")]) == 0
    assert "NaN scores: 14 cases (100.00%) scored as failures" in capsys.readouterr().out  # the table's note
    assert "gave NaN scores in 14 of 14 cases" in caplog.text and "scored as failures" in caplog.text


# ----------------------------------------------------------------------- bootstrap size (item 17)
def test_n_boot_is_bounded_with_the_memory_it_would_take(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    import spotdiff
    from spotdiff.protocols.stats import MAX_N_BOOT, resample_units

    for command in (["eval", "--model", "minilm", "--benchmark", "sugarcrepe", "--data", data], ["compare", "a", "b"]):
        with pytest.raises(SystemExit) as refused:  # argparse's usage error, before any work
            main([*map(str, command), "--n-boot", "100000000"])
        err = capsys.readouterr().err
        assert refused.value.code == 2 and "Traceback" not in err
        assert "argument --n-boot: 100,000,000 is above the most, 100,000: its bootstrap values alone" in err
        assert "would hold 800 MB for each metric and each scope" in err
    with pytest.raises(ConfigError, match=r"--n-boot 100,001 is above the most, 100,000: .* would hold 1 MB for each"):
        spotdiff.evaluate("hf-clip:/nowhere", "sugarcrepe", data, n_boot=MAX_N_BOOT + 1, use_store=False)
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match=r"--n-boot 200,000 is above the most"):  # every bootstrap passes here
        resample_units(lambda idx: {"m": idx.mean(axis=1)}, {}, 10, 2 * MAX_N_BOOT, rng)
    assert len(resample_units(lambda idx: {"m": idx.mean(axis=1)}, {}, 10, MAX_N_BOOT, rng)["m"]) == MAX_N_BOOT


# ------------------------------------------------------------ failed runs: their reason, their --out (item 19)
def test_runs_lists_why_a_run_failed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with RunStore(tmp_path / "runs.sqlite") as store:
        kept = {"benchmark": "sugarcrepe", "subset": None, "protocol": "i2t-top1", "model_identity": {},
                "data_path": "/d", "data_digest": "0" * 64, "seed": 0, "version": "x", "info": {}}  # fmt: skip
        failed = store.start_run(model="m-failed", **kept)
        store.fail_run(failed, "DataError: file /d/add_att.json, record 2:\nexpected str")
        store.start_run(model="m-running", **kept)
    assert main(["runs", "--store", str(tmp_path / "runs.sqlite")]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(k for k, line in enumerate(lines) if line.startswith(failed))
    assert "  failed    sugarcrepe" in lines[row] and lines[row].endswith("m-failed")
    assert lines[row + 1].strip() == "why: DataError: file /d/add_att.json, record 2: expected str"  # one line
    assert any("  running   sugarcrepe" in line for line in lines) and len(lines) == 4  # no reason, no second line


def test_a_failed_run_leaves_its_out_folder_to_the_next_run(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    image = next((data / "images").iterdir())
    good = image.read_bytes()
    image.write_bytes(b"not an image")
    assert "cannot decode image" in one_error(capsys, *eval_args(f"hf-clip:{clip}", data, tmp_path, "--out", out))
    assert list(out.iterdir()) == []  # it wrote nothing, and claimed nothing
    image.write_bytes(good)
    argv = eval_args(f"hf-clip:{clip}", data, tmp_path, "--out", out, "--seed", "1")  # another configuration
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["seed"] == 1
    assert "belongs to another run" in one_error(capsys, *eval_args(f"hf-clip:{clip}", data, tmp_path, "--out", out))
