"""``measurements/gpu_run.py``: its parts end in rows or in a line saying why, its table names every row, and its
CPU mode runs every part end to end (what CI checks; the GPU run itself needs a lent device)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "measurements" / "gpu_run.py"


@pytest.fixture(scope="module")
def gr() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("gpu_run_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _part(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "part.py"
    script.write_text(body, encoding="utf-8")
    return [sys.executable, str(script), "--json", str(tmp_path / "part.json")]


def test_a_part_that_fails_or_overruns_gives_no_rows_and_says_why(gr, tmp_path: Path) -> None:
    with open(tmp_path / "log", "w", encoding="utf-8") as log:
        rows, ended = gr.run_part("bad", _part(tmp_path, "raise SystemExit(3)"), 30, {}, log)
        assert (rows, ended["status"]) == ([], "failed (exit status 3)")
        rows, ended = gr.run_part("slow", _part(tmp_path, "import time; time.sleep(30)"), 0.5, {}, log)
        assert (rows, ended["status"]) == ([], "stopped at its time limit of 0 s")
        rows, ended = gr.run_part("empty", _part(tmp_path, "pass"), 30, {}, log)
        assert (rows, ended["status"]) == ([], "failed (no rows written)")
    assert "===== bad: failed (exit status 3)" in (tmp_path / "log").read_text()


def test_a_part_s_rows_are_read_back_with_its_name(gr, tmp_path: Path) -> None:
    body = ("import json, sys; from rows import row, write_rows\n"
            "write_rows(sys.argv[2], 'x.py', [row('f', 'm', 's', 3.0, 'items/s', limit=4.0, limit_side='l')])\n")
    with open(tmp_path / "log", "w", encoding="utf-8") as log:
        rows, ended = gr.run_part("ok", _part(tmp_path, body), 30, {"PYTHONPATH": str(SCRIPT.parent)}, log)
    assert ended["status"] == "ok"
    assert rows == [{"figure": "f", "model": "m", "side": "s", "value": 3.0, "unit": "items/s", "limit": 4.0,
                     "limit_side": "l", "ratio": 0.75, "goal": 0.9, "bound": "", "part": "ok"}]  # fmt: skip


def test_the_table_gives_every_row_its_limit_ratio_goal_and_bound(gr) -> None:
    about = {"date": "2026-11-28T00:00:00+00:00", "gpu": "NVIDIA H200", "driver": "580.1", "gpu_memory": "143771 MiB",
             "cpu_cores": 16, "torch": "2.11.0", "commit": "abc1234", "installed": "16 carried wheels installed",
             "wall_s": 471.2}  # fmt: skip
    rows = [
        {"figure": "eval images/s, JPEG files", "model": "vit-b-32", "side": "harness images", "value": 1161.4,
         "unit": "images/s", "limit": 21593.0, "limit_side": "forward images", "ratio": 1161.4 / 21593.0,
         "goal": 0.9, "bound": "the host side"},
        {"figure": "vqa speed-up", "model": "qwen2-vl-2b", "side": "reuse", "value": 6.32, "unit": "x",
         "limit": None, "limit_side": "", "ratio": None, "goal": None, "bound": ""},
    ]  # fmt: skip
    parts = [{"part": "eval vit-b-32", "status": "ok", "seconds": 61.0},
             {"part": "vqa llava-1.5-7b", "status": "stopped at its time limit of 95 s", "seconds": 95.0}]  # fmt: skip
    table = gr.markdown(about, parts, rows)
    assert "Device: NVIDIA H200 (driver 580.1, 143771 MiB), 16 CPU cores; torch 2.11.0;" in table
    assert "| eval images/s, JPEG files | vit-b-32 | harness images | 1,161 images/s | 21,593 (forward images) | " \
           "0.05 | >= 0.9 | the host side |" in table  # fmt: skip
    assert "| vqa speed-up | qwen2-vl-2b | reuse | 6.32 x |  |  |  |  |" in table
    assert "| vqa llava-1.5-7b | stopped at its time limit of 95 s | 95.0 |" in table


def test_the_cuda_parts_measure_every_model_the_issue_names_within_eight_minutes(gr, tmp_path: Path) -> None:
    parts = gr.part_commands("cuda", tmp_path, tmp_path / "tok")
    names = [name for name, _, _ in parts]
    assert names == ["eval vit-b-32", "eval vit-l-14", "vqa qwen2-vl-2b", "train vit-b-32", "synth sd15",
                     "eval siglip-so400m", "vqa llava-1.5-7b"]  # fmt: skip
    assert sum(limit for _, _, limit in parts) <= 8 * 60
    for _, argv, _ in parts:
        assert (SCRIPT.parent / Path(argv[1]).name).exists()
        assert argv[argv.index("--json") + 1].startswith(str(tmp_path))


def test_the_cpu_mode_runs_every_part_end_to_end(gr, tmp_path: Path) -> None:
    """What CI checks of the GPU run: every part at its CPU size ends in rows, and each row reads as its script says
    (the VQAScore rows from the Qwen2-VL peer and no reuse, the synthesis row from the engine and its plain loop)."""
    code = gr.main(["run", "--device", "cpu", "--out", str(tmp_path / "out")])
    result = json.loads((tmp_path / "out" / "gpu_run.json").read_text())
    assert [(p["part"], p["status"]) for p in result["parts"]] == [
        (name, "ok") for name, _, _ in gr.part_commands("cpu", tmp_path, None)
    ]
    assert code == 0
    rows: dict[str, list[dict]] = {}
    for r in result["rows"]:
        rows.setdefault(r["part"], []).append(r)
        assert r["value"] > 0 and (r["limit"] is None or r["ratio"] == pytest.approx(r["value"] / r["limit"]))
    assert set(rows) == {p["part"] for p in result["parts"]}
    assert [(r["figure"], r["limit_side"], r["image_tokens"], r["shape"]) for r in rows["vqa tiny"]] == [
        ("VQAScore pairs/s, reuse over t2v_metrics", "t2v_metrics", 16, "2 x 2"),
        ("VQAScore pairs/s, reuse over no-reuse", "no-reuse", 16, "2 x 2"),
    ]
    for r in rows["vqa tiny"]:
        assert r["value"] == pytest.approx(4 / r["seconds"]["reuse"]) and r["unit"] == "pairs/s"
        assert r["ratio"] == pytest.approx(r["seconds"][r["limit_side"]] / r["seconds"]["reuse"])
        assert r["goal"] is None and r["bound"] == ""  # no goal: a speed-up over the peer; no profile on the CPU
        assert r["dlog"] < 1e-4  # no-reuse and the Qwen2-VL peer score what reuse scores
    (synth,) = rows["synth tiny"]
    assert (synth["figure"], synth["side"], synth["goal"]) == ("synthesis images/s", "generative engine, batch 1", 0.9)
    assert synth["ratio"] == pytest.approx(synth["loop_s"] / synth["engine_s"])
    assert synth["peak_bytes"] == {"engine": None, "loop": None}  # measured on CUDA only
    assert (synth["ratio"] >= 0.9) == (synth["bound"] == "")  # below the goal, the profile says what bounds it
    assert {r["side"] for r in rows["eval small"]} >= {"harness images", "peer images", "harness texts"}
    table = (tmp_path / "out" / "gpu_run.md").read_text()
    assert table.count("\n| ") == 2 + len(result["rows"]) + 2 + len(result["parts"])  # headers, rows, parts
