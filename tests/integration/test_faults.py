"""Faults and bad input: SIGKILL and resume, concurrent runs on one cache and run store, and one
clear error (naming what and where) for each kind of bad input, with the work already done kept.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import errno
import importlib.util
import json
import multiprocessing
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks.sugarcrepe import SUBSETS as SUGARCREPE_SUBSETS
from spotdiff.cases import Case
from spotdiff.cli import main
from spotdiff.diagnose.cache import CACHE_FILE, Cache
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import get_protocol

ROOT = Path(__file__).resolve().parents[2]
N_IMAGES = 5


# ----------------------------------------------------------------------------------- helpers
def write_sugarcrepe(root: Path) -> Path:
    """All seven SugarCrepe files, 3 records each, over 5 PNG images; image 4 first appears last."""
    import spotdiff.testing.tiny_models as tm

    (root / "images").mkdir(parents=True, exist_ok=True)
    for k, image in enumerate(tm.tiny_images(N_IMAGES, size=32)):
        image.save(root / "images" / f"{k}.png")
    words = ("cat", "dog", "horse", "car", "tree", "table")
    for s, subset in enumerate(SUGARCREPE_SUBSETS):
        data = {
            str(i): {
                "filename": f"{(s + i) % N_IMAGES}.png",
                "caption": f"a {words[(s + i) % 6]} on the grass",
                "negative_caption": f"a {words[(s + 2 * i + 1) % 6]} on the grass",
            }
            for i in range(3)
        }
        (root / f"{subset}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import spotdiff.testing.tiny_models as tm

    return tm.make_tiny_clip(tmp_path_factory.mktemp("tiny_clip") / "clip")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_sugarcrepe(tmp_path / "sugarcrepe")


def cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, list[str]]:
    """Run ``spotdiff`` in-process; return the exit status and the stderr lines."""
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().err.strip().splitlines()


def one_error(lines: list[str]) -> str:
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, lines
    assert not any("Traceback" in line for line in lines), lines
    return errors[0]


def eval_args(clip: Path, data: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "eval", "--model", f"hf-clip:{clip}", "--benchmark", "sugarcrepe", "--data", data, "--device", "cpu",
        "--batch-size", "2", "--cache", tmp_path / "cache", "--store", tmp_path / "runs.sqlite",
        "--n-boot", "50", "--quiet", *extra,
    ]  # fmt: skip


def cache_rows(cache_dir: Path) -> int:
    with sqlite3.connect(cache_dir / CACHE_FILE) as db:
        return db.execute("SELECT COUNT(*) FROM items").fetchone()[0]


# ------------------------------------------------------------------------- SIGKILL and resume
def _fault_injection():
    spec = importlib.util.spec_from_file_location("fault_injection", ROOT / "measurements" / "fault_injection.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_sigkill_twice_then_resume_equals_a_clean_run(shared_data: Path, tmp_path: Path) -> None:
    """A real minilm run on a VISLA slice, killed twice mid-encoding (batch size 4, the cache committing every
    batch: many commits), then resumed: same metrics.json and scores, nothing computed twice, nothing lost."""
    report = tmp_path / "report.json"
    status = _fault_injection().main(
        [
            "--n", "1", "--kills", "2", "--mode", "progress", "--data", str(shared_data / "visla"),
            "--limit", "60", "--batch-size", "4", "--commit-seconds", "0", "--n-boot", "100",
            "--workdir", str(tmp_path / "work"),
            "--json", str(report),
        ]
    )  # fmt: skip
    summary = json.loads(report.read_text())
    trial = summary["trials"][0]
    assert all(k["killed"] for k in trial["kills"]), trial  # both kills landed mid-run
    assert 0 < trial["items_at_resume"] < summary["clean"]["unique_items"]
    assert trial["computed_by_resume"] == summary["clean"]["unique_items"] - trial["items_at_resume"]
    assert trial["metrics_equal"] and trial["scores_equal"] and trial["nothing_lost"], trial
    assert status == 0 and summary["survived"] == 1


@pytest.mark.slow
def test_fault_injection_sigterm_class(shared_data: Path, tmp_path: Path) -> None:
    """The benchmark's SIGTERM class: the stopped run exits by itself, marked failed, no temporary file
    left; the resumed run equals a clean one."""
    report = tmp_path / "report.json"
    status = _fault_injection().main(
        [
            "--n", "1", "--kills", "1", "--mode", "progress", "--signal", "term", "--data", str(shared_data / "visla"),
            "--limit", "40", "--batch-size", "4", "--commit-seconds", "0", "--n-boot", "50",
            "--workdir", str(tmp_path / "work"),
            "--json", str(report),
        ]
    )  # fmt: skip
    trial = json.loads(report.read_text())["trials"][0]
    assert [(k["exit"], k["stopped_cleanly"]) for k in trial["kills"]] == [(130, True)], trial
    assert trial["ok"] and status == 0, trial


@pytest.mark.slow
def test_fault_injection_plan_class(tmp_path: Path) -> None:
    """The benchmark's plan class: SIGTERM to ``spotdiff run`` while it trains stops every command (exit 143,
    no process left), keeps the checkpoints; the plan run again resumes from the last one and ends with
    the clean run's weights and metrics."""
    report = tmp_path / "report.json"
    status = _fault_injection().main(
        ["--fault", "plan", "--n", "1", "--steps", "24", "--save-every", "4", "--workdir", str(tmp_path / "work"),
         "--json", str(report)]
    )  # fmt: skip
    summary = json.loads(report.read_text())
    trial = summary["trials"][0]
    assert trial["qualified"] and trial["exit"] == 143 and trial["left_running"] == [], trial
    assert 0 < trial["resumed_at"] < 24 and trial["weights_equal"] and trial["metrics_equal"], trial
    assert status == 0 and summary["survived"] == 1


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_fault_injection_disk_full_class(shared_data: Path, tmp_path: Path) -> None:
    """The benchmark's disk-full class, once per place (the evaluation's cache, output folder and run store, the
    ``--out`` of train, synth and report): one line naming the path and "disk full", no traceback, no temporary
    file, an evaluation's run marked failed; the command run again, with room, ends as the clean run did (an
    evaluation computing only what the cache lacked)."""
    report = tmp_path / "report.json"
    status = _fault_injection().main(
        ["--fault", "disk-full", "--n", "6", "--data", str(shared_data / "visla"), "--limit", "40",
         "--batch-size", "4", "--n-boot", "50", "--workdir", str(tmp_path / "work"), "--json", str(report)]
    )  # fmt: skip
    trials = json.loads(report.read_text())["trials"]
    assert [t["target"] for t in trials] == ["cache", "out", "store", "train", "synth", "report"]
    for t in trials:
        assert t["exit"] == 2 and "disk full" in t["last_line"] and t["mount"] in t["last_line"], t
        assert t["ok"], t
    assert status == 0


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only tmpfs needs root")
def test_fault_injection_read_only_class(shared_data: Path, tmp_path: Path) -> None:
    """The benchmark's read-only class: the ``--out`` of eval, train, synth and report on a read-only file
    system is one line naming it, no traceback, no temporary file; remounted writable, the command run again
    writes what the clean run wrote."""
    report = tmp_path / "report.json"
    status = _fault_injection().main(
        ["--fault", "read-only", "--n", "4", "--data", str(shared_data / "visla"), "--limit", "40",
         "--batch-size", "4", "--n-boot", "50", "--workdir", str(tmp_path / "work"), "--json", str(report)]
    )  # fmt: skip
    trials = json.loads(report.read_text())["trials"]
    assert [t["target"] for t in trials] == ["out", "train", "synth", "report"]
    for t in trials:
        assert t["exit"] == 2 and "read-only file system" in t["last_line"] and t["mount"] in t["last_line"], t
        assert t["ok"], t
    assert status == 0


# ------------------------------------------------------------------------------ concurrency
def _hammer(args: tuple[str, int]) -> int:
    directory, worker = args
    cache = Cache(directory, "model")
    store = RunStore(Path(directory) / "runs.sqlite")
    run_id = store.start_run(
        benchmark="b", subset=None, protocol="p", model="m", model_identity={}, data_path="d",
        data_digest="x", seed=0, version="0", info={},
    )  # fmt: skip
    for batch in range(20):
        keys = [f"shared-{batch}-{k}" for k in range(5)] + [f"own-{worker}-{batch}-{k}" for k in range(5)]
        cache.put("text", [(k, np.full(4, len(k), np.float32)) for k in keys])
        units = [
            {"unit_id": f"u{batch}-{k}", "case_id": "c", "subset": "s", "scores": [1.0], "outcomes": {"a": 1.0}}
            for k in range(5)
        ]
        store.add_units(run_id, units)
    store.finish_run(run_id, {"all": {"a": 100.0}}, 100)
    cache.close()
    store.close()
    return worker


def test_processes_writing_one_cache_and_store_at_once(tmp_path: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert sorted(pool.map(_hammer, [(str(tmp_path), w) for w in range(4)])) == [0, 1, 2, 3]
    assert Cache(tmp_path, "model").count() == 20 * 5 + 4 * 20 * 5
    store = RunStore(tmp_path / "runs.sqlite")
    runs = store.runs()
    assert len(runs) == 4 and all(r.status == "done" for r in runs)
    assert all(len(list(store.units(r.id))) == 100 for r in runs)


@pytest.mark.slow
def test_two_runs_sharing_cache_and_store_both_finish(clip: Path, data: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    commands = [
        [sys.executable, "-m", "spotdiff", *map(str, eval_args(clip, data, tmp_path, "--out", tmp_path / f"o{k}"))]
        for k in range(2)
    ]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        for cmd in commands
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    m0, m1 = (json.loads((tmp_path / f"o{k}" / "metrics.json").read_text()) for k in range(2))
    assert m0["run_id"] != m1["run_id"]
    assert m0["metrics"] == m1["metrics"] and m0["n_cases"] == m1["n_cases"] == 21
    store = RunStore(tmp_path / "runs.sqlite")
    runs = store.runs()
    assert len(runs) == 2 and all(r.status == "done" for r in runs)
    assert all(len(list(store.units(r.id))) == 21 for r in runs)
    n_texts = len({t for f in SUGARCREPE_SUBSETS for r in json.loads((data / f"{f}.json").read_text()).values()
                   for t in (r["caption"], r["negative_caption"])})  # fmt: skip
    assert cache_rows(tmp_path / "cache") == N_IMAGES + n_texts


# ------------------------------------------------------------------------------- bad images
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_bytes(b"not an image at all" * 10), "cannot decode image"),
        (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "cannot decode image"),
        (lambda p: p.unlink(), "cannot read image"),
    ],
    ids=["corrupt", "truncated", "missing"],
)
def test_bad_image_one_error_naming_it_and_work_kept(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, damage, message: str
) -> None:
    bad = data / "images" / f"{N_IMAGES - 1}.png"
    good = bad.read_bytes()
    damage(bad)
    status, lines = cli(capsys, *eval_args(clip, data, tmp_path, "--out", tmp_path / "out"))
    assert status == 2
    error = one_error(lines)
    assert message in error and str(bad) in error
    kept = cache_rows(tmp_path / "cache")
    if message == "cannot decode image":  # the images before it were encoded and committed
        assert kept == N_IMAGES - 1
    (run,) = RunStore(tmp_path / "runs.sqlite").runs()
    assert run.status.startswith("failed: DataError") and str(bad) in run.status
    assert not (tmp_path / "out" / "scores.jsonl").exists()  # no partial outputs
    assert not list((tmp_path / "out").glob(".scores*"))
    bad.write_bytes(good)  # fixed: the re-run computes only what is missing
    config = EvalConfig(
        model=f"hf-clip:{clip}", benchmark="sugarcrepe", data=data, device="cpu", batch_size=2,
        cache=tmp_path / "cache", use_store=False, progress=False, n_boot=0,
    )  # fmt: skip
    result = run_eval(config)
    assert result.engine_stats["cached"] == kept
    assert result.engine_stats["computed"] == cache_rows(tmp_path / "cache") - kept


# -------------------------------------------------------------------------- bad annotations
_DELETE = object()


def _sugarcrepe_file(data: Path) -> Path:
    return data / f"{SUGARCREPE_SUBSETS[0]}.json"


def _set(data: Path, key: str, field: str, value) -> Path:
    path = _sugarcrepe_file(data)
    records = json.loads(path.read_text())
    if value is _DELETE:
        del records[key][field]
    else:
        records[key][field] = value
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: _sugarcrepe_file(d).write_text(_sugarcrepe_file(d).read_text()[:-40]), "invalid JSON at line"),
        (lambda d: _set(d, "1", "caption", _DELETE), "record 1, field 'caption': missing field"),
        (lambda d: _set(d, "2", "caption", 17), "record 2, field 'caption': expected str, got int"),
        (lambda d: _set(d, "0", "negative_caption", " \t "), "field 'negative_caption': empty or whitespace-only"),
        (lambda d: _set(d, "0", "caption", ""), "record 0, field 'caption': empty or whitespace-only"),
        (
            lambda d: _sugarcrepe_file(d).write_bytes(_sugarcrepe_file(d).read_bytes().replace(b"grass", b"gr\xe4ss")),
            "not valid UTF-8 at byte",
        ),
        (lambda d: _sugarcrepe_file(d).write_text("[1, 2, 3]"), "expected a JSON object keyed by record id"),
    ],
    ids=["truncated", "missing-field", "wrong-type", "whitespace-caption", "empty-caption", "non-utf8", "schema"],
)
def test_bad_annotation_one_error_naming_file_record_field(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, edit, expected: str
) -> None:
    edit(data)
    status, lines = cli(capsys, *eval_args(clip, data, tmp_path))
    assert status == 2
    error = one_error(lines)
    assert f"file {_sugarcrepe_file(data)}" in error and expected in error


def test_truncated_tsv_names_file_and_line(tmp_path: Path) -> None:
    from spotdiff.benchmarks.visla import VislaGeneric

    path = tmp_path / "Generic_VISLA.tsv"
    rows = ["filename\tcaption\tsecond positive\tnegative_caption", "a.jpg\tone\ttwo\tthree", "b.jpg\tfour\tfi"]
    path.write_text("\r\n".join(rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"Generic_VISLA.tsv, record data row 2 \(line 3\): expected 4 tab-sep"):
        list(VislaGeneric(tmp_path).cases())
    path.write_bytes(path.read_bytes().replace(b"two", b"tw\xff"))
    with pytest.raises(DataError, match=r"Generic_VISLA.tsv: not valid UTF-8 at byte \d+ \(line 2\)"):
        list(VislaGeneric(tmp_path).cases())
    path.write_text("\r\n".join([rows[0], "a.jpg\t   \ttwo\tthree"]), encoding="utf-8")
    with pytest.raises(DataError, match=r"record data row 1 \(line 2\), field 'caption': empty cell"):
        list(VislaGeneric(tmp_path).cases())


# ------------------------------------------------------------------------- mismatched counts
def test_mismatched_image_and_text_counts(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"case x: truth has shape \(2, 2\) but the case has 1 images and 2 texts"):
        Case(id="x", texts=("a", "b"), truth=np.eye(2, dtype=bool), images=(object(),), tags={"subset": "s"})
    case = Case(id="y", texts=("a", "b", "c"), truth=np.array([[1, 0, 0]], bool), tags={"subset": "s"})
    with pytest.raises(DataError, match=r"case y: protocol 'valse-pairwise' needs one image x 2 texts"):
        get_protocol("valse-pairwise").outcomes(case, np.zeros((1, 3)))
    with pytest.raises(DataError, match=r"case y: expected a image-text score matrix of shape \(1, 3\), got \(1, 2\)"):
        get_protocol("i2t-top1").outcomes(case, np.zeros((1, 2)))
    # in a published format: VL-CheckList pairs POS[i] with NEG[i]
    (tmp_path / "corpus" / "v1" / "Attribute" / "color").mkdir(parents=True)
    (tmp_path / "corpus" / "v1" / "Attribute" / "color" / "vaw.yaml").write_text(
        "ANNO_PATH: data/color.json\nIMG_ROOT: vg/\nTYPE: TUPLE_JSON\n", encoding="utf-8"
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "color.json").write_text(json.dumps([["1.jpg", {"POS": ["a", "b"], "NEG": ["c"]}]]))
    from spotdiff.benchmarks.vl_checklist import VLCheckList

    with pytest.raises(DataError, match=r"color.json, record #0, field 'NEG': 2 POS texts but 1 NEG texts"):
        list(VLCheckList(tmp_path).cases())


# ------------------------------------------------------------------------------ bad model path
@pytest.mark.parametrize("family", ["hf-clip", "sentence-transformers", "blip-itm"])
def test_model_path_that_does_not_exist(family: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    missing = tmp_path / "no" / "model"
    argv = ["eval", "--model", f"{family}:{missing}", "--benchmark", "sugarcrepe", "--data", data,
            "--store", tmp_path / "runs.sqlite", "--cache", tmp_path / "cache", "--quiet"]  # fmt: skip
    status, lines = cli(capsys, *argv)
    assert status == 2
    assert f"path {missing} does not exist" in one_error(lines)
    assert RunStore(tmp_path / "runs.sqlite").runs() == []  # failed before any work was recorded
    with pytest.raises(ConfigError, match="does not exist"):
        run_eval(EvalConfig(model=f"{family}:{missing}", benchmark="sugarcrepe", data=data, use_store=False))


def test_data_location_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, lines = cli(
        capsys, "eval", "--model", "minilm", "--benchmark", "sugarcrepe", "--data", tmp_path / "nowhere", "--no-store"
    )
    assert status == 2
    assert f"data location does not exist: {tmp_path / 'nowhere'}" in one_error(lines)


# ------------------------------------------------------------------- full disk, damaged files
class _FullDisk:
    """A file whose writes fail as on a full disk (ENOSPC), like its close (the buffered rest)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("", encoding="utf-8")

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))

    def close(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))


def _assert_failed_for_full_disk(tmp_path: Path, lines: list[str], full: Path) -> None:
    error = one_error(lines)
    assert "disk full" in error and str(full) in error and "rollback" not in error, lines
    (run,) = RunStore(tmp_path / "runs.sqlite").runs()
    assert run.status.startswith(f"failed: DataError: file {full}: disk full"), run.status
    assert not list((tmp_path / "out").glob(".scores*")) and not (tmp_path / "out" / "scores.jsonl").exists()


def test_full_disk_on_out_is_one_error_and_the_run_failed_with_its_temporary_file_removed(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spotdiff.diagnose.recorder as runner

    monkeypatch.setattr(runner, "open", lambda path, *a, **k: _FullDisk(Path(path)), raising=False)
    status, lines = cli(capsys, *eval_args(clip, data, tmp_path, "--out", tmp_path / "out"))
    assert status == 2
    _assert_failed_for_full_disk(tmp_path, lines, tmp_path / "out" / f".scores.jsonl.{os.getpid()}.tmp")


def test_full_disk_on_cache_is_one_error_and_the_run_failed_with_that_reason(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spotdiff.diagnose.cache as cache_module

    connect = cache_module._connect

    def full(path: Path, journal: str | None) -> sqlite3.Connection:
        """The cache file on a "full disk": no page beyond the present ones, and those filled with rows
        sorting before every real one, so the run's first write needs a new page: SQLITE_FULL."""
        db = connect(path, journal)
        if journal is not None:
            db.execute(f"PRAGMA max_page_count={db.execute('PRAGMA page_count').fetchone()[0]}")
            with pytest.raises(sqlite3.OperationalError, match="full"):
                for n in range(100_000):
                    filler = "INSERT OR REPLACE INTO items (model, kind, key, value) VALUES ('!filler', 'x', ?, x'00')"
                    db.execute(filler, [f"{n:06d}"])
        return db

    monkeypatch.setattr(cache_module, "_connect", full)
    status, lines = cli(capsys, *eval_args(clip, data, tmp_path, "--out", tmp_path / "out"))
    assert status == 2
    _assert_failed_for_full_disk(tmp_path, lines, tmp_path / "cache" / CACHE_FILE)


def _garbage(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    content = np.random.default_rng(0).bytes(8192)
    path.write_bytes(content)
    return content


def test_an_embedding_damaged_on_disk_is_recomputed_and_the_result_unchanged(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 22: flipping bits of one cached embedding (a file SQLite's checks find sound) changed an
    accuracy with exit code 0; with each value's checksum the damaged one is recomputed, with a warning."""
    status, _ = cli(capsys, *eval_args(clip, data, tmp_path, "--out", tmp_path / "first"))
    assert status == 0
    with sqlite3.connect(tmp_path / "cache" / CACHE_FILE) as db:
        key, blob = db.execute("SELECT key, value FROM items WHERE kind='image' ORDER BY key LIMIT 1").fetchone()
        flipped = np.frombuffer(blob, np.float32) * -1
        db.execute("UPDATE items SET value=? WHERE kind='image' AND key=?", [flipped.tobytes(), key])
    status, _ = cli(capsys, *eval_args(clip, data, tmp_path, "--out", tmp_path / "second"))
    assert status == 0 and "do not match their checksum" in caplog.text
    first, second = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("first", "second"))
    assert second["metrics"] == first["metrics"] and second["tie_rate"] == first["tie_rate"]


def test_damaged_cache_or_store_is_one_error_naming_it_before_any_work(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cache = tmp_path / "cache" / CACHE_FILE
    content = _garbage(cache)
    status, lines = cli(capsys, *eval_args(clip, data, tmp_path))
    error = one_error(lines)
    assert status == 2 and str(cache) in error and f"mv {cache.parent} {cache.parent}.corrupt" in error
    assert cache.read_bytes() == content and not (tmp_path / "runs.sqlite").exists()  # no run started
    cache.unlink()
    store = tmp_path / "runs.sqlite"
    content = _garbage(store)
    for argv in (eval_args(clip, data, tmp_path), ["runs", "--store", store],
                 ["report", "--store", store, "--out", tmp_path / "report"]):  # fmt: skip
        status, lines = cli(capsys, *argv)
        error = one_error(lines)
        assert status == 2 and str(store) in error and "cannot be rebuilt" in error, (argv, lines)
        assert store.read_bytes() == content
    assert cache_rows(tmp_path / "cache") == 0  # eval stopped before evaluating anything


# ----------------------------------------------------------------------------------- SIGTERM
#: ``spotdiff eval`` whose run blocks after its first case, once it has written the file argv[1].
_BLOCKING_EVAL = """
import pathlib, sys, time
from spotdiff.diagnose import runner
add_case = runner.RunRecorder.add_case
def blocking(self, case, matrix, *rest):
    add_case(self, case, matrix, *rest)
    pathlib.Path(sys.argv[1]).write_text("started")
    time.sleep(600)
runner.RunRecorder.add_case = blocking
from spotdiff.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _dead_pid() -> int:
    process = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(process.stdout)


@pytest.mark.slow
def test_sigterm_marks_the_run_failed_and_leaves_no_temporary_file(clip: Path, data: Path, tmp_path: Path) -> None:
    """SIGTERM (``kill``, Slurm, ``docker stop``) stops ``eval`` as Ctrl-C does; a later run that
    finishes removes the temporary files of runs whose process is gone."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    out, started = tmp_path / "out", tmp_path / "started"
    argv = [str(a) for a in eval_args(clip, data, tmp_path, "--out", out, "--workers", "0")]
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKING_EVAL, str(started), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), proc.communicate(timeout=60)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    (run,) = RunStore(tmp_path / "runs.sqlite").runs()
    assert run.status == "failed: KeyboardInterrupt: SIGTERM"
    assert not list(out.glob(".scores*"))
    stale, live = out / f".scores.jsonl.{_dead_pid()}.tmp", out / f".scores.jsonl.{os.getppid()}.tmp"
    stale.write_text("{}\n")
    live.write_text("{}\n")
    config = EvalConfig(
        model=f"hf-clip:{clip}", benchmark="sugarcrepe", data=data, device="cpu", batch_size=2, out=out,
        cache=tmp_path / "cache", store=tmp_path / "runs.sqlite", progress=False, n_boot=50, workers=0,
    )  # fmt: skip
    run_eval(config)
    assert (out / "scores.jsonl").is_file() and not stale.exists() and live.exists()


# --------------------------------------------------------------- read-only and full output folders
def _mount_tmpfs(where: Path, options: str) -> bool:
    """Mount a tmpfs with ``options`` at ``where`` (root only); False where this root may not mount."""
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=False).returncode == 0


@pytest.fixture(params=["read-only", "disk-full"])
def refusing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``(fault, folder)``: a folder on a read-only file system (root, who may write anywhere else) or without
    write permission (anyone else), or on a tmpfs of 16 KiB that fills at once (root only)."""
    folder = tmp_path / request.param
    folder.mkdir()
    if os.geteuid() != 0:
        if request.param == "disk-full":
            pytest.skip("mounting a small tmpfs needs root")
        folder.chmod(0o555)
        yield request.param, folder
        folder.chmod(0o755)
        return
    if not _mount_tmpfs(folder, "ro,size=16k" if request.param == "read-only" else "size=16k"):
        pytest.skip("this root may not mount")
    try:
        yield request.param, folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


@pytest.fixture(scope="module")
def captions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four coloured squares with their captions (captions.jsonl) and the tiny test tokenizer."""
    from PIL import Image

    from spotdiff.testing.tiny_models import make_tiny_tokenizer

    root = tmp_path_factory.mktemp("captions")
    lines = []
    for name, rgb in {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220)}.items():
        Image.new("RGB", (32, 32), rgb).save(root / f"{name}.png")
        lines.append(json.dumps({"image": f"{name}.png", "caption": f"a {name} square"}))
    (root / "captions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    make_tiny_tokenizer(root / "tokenizer", max_length=32)
    return root


def _command(command: str, out: Path, clip: Path, data: Path, captions: Path, tmp_path: Path) -> list[str]:
    """``spotdiff COMMAND`` writing into ``out``."""
    if command == "eval":
        return eval_args(clip, data, tmp_path, "--out", out)
    if command == "train":
        return ["train", "--from-config", "tiny", "--tokenizer", captions / "tokenizer", "--captions",
                captions / "captions.jsonl", "--steps", "2", "--batch-size", "3", "--device", "cpu",
                "--out", out]  # fmt: skip
    if command == "synth":
        return ["synth", "spec", "--out", out, "--n", "1", "--image-size", "32", "--workers", "1"]
    if command == "report":
        assert main([str(a) for a in eval_args(clip, data, tmp_path, "--out", tmp_path / "evaluated")]) == 0
        return ["report", "--store", tmp_path / "runs.sqlite", "--out", out]
    plan = tmp_path / "plan.yaml"
    plan.write_text("stages:\n  - name: spec\n    run: synth spec --out spec --n 1 --image-size 32 --workers 1\n"
                    "    outputs: [spec]\n")  # fmt: skip
    return ["run", plan, "--out", out, "--workers", "1"]


@pytest.mark.parametrize("command", ["eval", "train", "synth", "report", "run"])
@pytest.mark.parametrize("new", [True, False], ids=["new-out", "out"])
def test_a_read_only_or_full_output_folder_is_one_error_naming_it(
    command: str, new: bool, refusing: tuple[str, Path], clip: Path, data: Path, captions: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:  # fmt: skip
    """Issue 32: ``--out`` on a read-only file system or a full disk (the folder itself, or a new folder in it)
    ended ``eval``, ``train``, ``synth``, ``report`` and ``run`` with an OSError traceback; each is one line
    naming the folder (or the file in it) and the remedy, exit 2, with no temporary file left and no thread
    left running (a TensorBoard writer outliving a failed training deadlocked a plan's later fork)."""
    fault, folder = refusing
    argv = _command(command, folder / "out" if new else folder, clip, data, captions, tmp_path)
    capsys.readouterr()
    threads = set(threading.enumerate())
    status, lines = cli(capsys, *argv)
    assert [t.name for t in set(threading.enumerate()) - threads if t.name != "tqdm_monitor"] == []
    error = one_error(lines)
    assert status == 2 and error.startswith(f"spotdiff {command}: error: file {folder}"), lines
    said = {"read-only": ("read-only file system", "permission denied"), "disk-full": ("disk full",)}[fault]
    assert any(s in error for s in said) and ("run again" in error or "writable" in error or "access" in error)
    assert not [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_a_later_run_removes_the_run_claims_temporary_of_a_process_gone(
    clip: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 32: ``..spotdiff-run.json.PID.tmp``, left in ``--out`` by a run stopped while claiming it,
    survived later successful runs."""
    out = tmp_path / "out"
    out.mkdir()
    stale = out / f"..spotdiff-run.json.{_dead_pid()}.tmp"
    stale.write_text("{")
    assert cli(capsys, *eval_args(clip, data, tmp_path, "--out", out))[0] == 0
    assert not stale.exists() and sorted(p.name for p in out.iterdir()) == [
        ".spotdiff-run.json", "metrics.json", "scores.jsonl"
    ]  # fmt: skip
