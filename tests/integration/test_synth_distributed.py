"""Sharded synthesis: ``torchrun --nproc_per_node 2`` (gloo on the CPU) makes every engine's items across two
processes, each item by the rank that owns its key, and the files equal one process's byte for byte; a
rank killed part way leaves a run that the same launch resumes to the same bytes; every option passes
torchrun's own parser (``--count`` beside ``--n``)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from spotdiff.synth import ENGINES
from spotdiff.synth.run import synthesize
from spotdiff.testing.videos import encode_numbered

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = Path(__file__).with_name("synth_launch.py")
CANVAS = {"seed": 3, "image_size": 64, "workers": 1}


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("torchrun")
    launcher = [str(exe)] if exe.is_file() else [sys.executable, "-m", "torch.distributed.run"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "error"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    cmd = [*launcher, "--nproc_per_node", "2", "--master_port", str(_free_port()), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    """Small inputs of the engines that read files: GEBC boundaries and clips, VSR lines, a tiny SD model."""
    from spotdiff.testing import tiny_diffusion

    root = tmp_path_factory.mktemp("inputs")
    (root / "videos").mkdir()
    boundaries = {}
    for vid in ("Xy3kLm9PqRs", "Qw7eRt5YuIo", "Ab1cD2eF3gH"):
        encode_numbered(root / "videos" / f"{vid}_000011_000021.mp4", 100, 10)
        boundaries[vid] = [
            {"boundary_id": f"{vid}_{k}A", "timestamp": 2.0 * (k + 1), "prev_timestamp": 2.0 * k if k else 0,
             "next_timestamp": 2.0 * (k + 2), "label": "Change of Action", "subject": f"person {k}",
             "status_before": f"doing thing {k}", "status_after": f"do thing {k + 1}", "action_of_cause": None,
             "caption": ""}
            for k in range(4)
        ]  # fmt: skip
    (root / "train.json").write_text(json.dumps(boundaries), encoding="utf-8")
    lines = [
        {"image": "a.jpg", "caption": "The cat is in the basket.", "label": 1, "relation": "in"},
        {"image": "a.jpg", "caption": "The basket contains the cat.", "label": 1, "relation": "contains"},
        {"image": "b.jpg", "caption": "The dog is left of the car.", "label": 1, "relation": "left of"},
        {"image": "b.jpg", "caption": "The car is right of the dog.", "label": 1, "relation": "right of"},
    ]
    (root / "vsr.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    sd = tiny_diffusion.make_tiny_stable_diffusion(root / "sd")
    return {"root": root, "sd": str(sd)}


def _spec(inputs: dict, out: Path) -> dict:
    root = inputs["root"]
    return {
        str(out / "spec"): ["spec", {**CANVAS, "n": 2, "subsets": ["count", "existence"]}],
        str(out / "eqben"): ["eqben", {**CANVAS, "n": 1}],
        str(out / "zeroshot"): ["zeroshot", {**CANVAS, "n": 4}],
        str(out / "corpus"): ["corpus", {**CANVAS, "n": 4}],
        str(out / "visla"): ["visla", {**CANVAS, "n": 4}],
        str(out / "visla-vsr"): ["visla-vsr", {"vsr": str(root / "vsr.jsonl")}],
        str(out / "eqben-video"): [
            "eqben-video",
            {"source": "gebc", "annotations": [str(root / "train.json")], "videos": str(root / "videos")},
        ],
        str(out / "eqsd"): ["eqsd", {"n": 3, "image_size": 32, "steps": 2, "t2i": inputs["sd"], "device": "cpu"}],
    }


def _single(spec: dict) -> None:
    sys.path.insert(0, str(LAUNCH.parent))
    from synth_launch import _config

    for out, (engine, options) in spec.items():
        cls = ENGINES.get(engine)
        synthesize(cls(_config(cls, options)), Path(out), quiet=True)


def test_two_processes_write_one_process_bytes_for_every_engine(inputs, tmp_path):
    single = _spec(inputs, tmp_path / "single")
    _single(single)
    sharded = _spec(inputs, tmp_path / "sharded")
    (tmp_path / "sharded.json").write_text(json.dumps(sharded), encoding="utf-8")
    proc = _torchrun(str(LAUNCH), str(tmp_path / "sharded.json"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(single) == len(ENGINES.names())  # every engine
    for (a, _), (b, _) in zip(single.items(), sharded.items(), strict=True):
        assert _digest(Path(a)) == _digest(Path(b)), Path(a).name


def test_a_killed_rank_leaves_a_run_the_same_launch_resumes(inputs, tmp_path):
    spec = {k: v for k, v in _spec(inputs, tmp_path / "sharded").items() if k.endswith("spec")}
    single = {k.replace("sharded", "single"): v for k, v in spec.items()}
    _single(single)
    (tmp_path / "kill.json").write_text(json.dumps({**spec, "kill": [1, 2]}), encoding="utf-8")
    failed = _torchrun(str(LAUNCH), str(tmp_path / "kill.json"))
    assert failed.returncode != 0
    (out,) = spec
    assert not (Path(out) / "synth.json").exists() and (Path(out) / ".partial").is_dir()
    (tmp_path / "again.json").write_text(json.dumps(spec), encoding="utf-8")
    proc = _torchrun(str(LAUNCH), str(tmp_path / "again.json"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _digest(Path(out)) == _digest(Path(next(iter(single))))


def test_a_failing_rank_stops_every_rank_with_one_line_each(inputs, tmp_path):
    spec = {k: v for k, v in _spec(inputs, tmp_path / "sharded").items() if k.endswith("spec")}
    (tmp_path / "fail.json").write_text(json.dumps({**spec, "fail": [1, 1]}), encoding="utf-8")
    proc = _torchrun(str(LAUNCH), str(tmp_path / "fail.json"))
    assert proc.returncode != 0
    assert "injected failure after 1 items" in proc.stderr  # rank 1's own error
    assert "another rank failed (rank 1: RuntimeError: injected failure" in proc.stderr  # rank 0 names it
    (out,) = spec
    assert (Path(out) / ".partial").is_dir() and not (Path(out) / "synth.json").exists()  # finished items kept


def test_the_command_line_under_torchrun_with_count(tmp_path):
    out = tmp_path / "spec"
    proc = _torchrun("-m", "spotdiff", "synth", "spec", "--count", "1", "--subsets", "count", "--image-size", "64",
                     "--workers", "1", "-q", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "synth.json").read_text())["options"]["n"] == 1
    assert proc.stdout.count("spotdiff synth spec: wrote") == 1  # rank 0 reports


def test_every_option_passes_torchruns_parser():
    from torch.distributed.run import get_args_parser

    from spotdiff.commands import build_parser

    synth = next(a for a in build_parser()._actions if getattr(a, "choices", None) and "synth" in a.choices)
    parser = synth.choices["synth"]
    engines = next(a for a in parser._actions if getattr(a, "choices", None) and "spec" in a.choices).choices
    torchrun = get_args_parser()
    for name in ENGINES.names():
        for action in engines[name]._actions:
            for flag in action.option_strings:
                if flag in ("--n", "-h", "--help"):
                    continue  # --n is torchrun's ambiguous abbreviation: --count is its other spelling
                argv = ["--nproc-per-node", "2", "-m", "spotdiff", "synth", name, flag, "1"]
                parsed = torchrun.parse_args(argv)
                assert flag in parsed.training_script_args, (name, flag)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_a_finished_group_leaves_no_gloo_threads_for_teardown(tmp_path):
    """torch.distributed.fsdp imported after the group exists (diffusers does) held it, so gloo's threads outlived
    destroy_process_group into interpreter teardown, where a rank sometimes aborted (SIGABRT) with its work done.
    The group spotdiff creates is freed when a run finishes: no gloo thread is left on either rank."""
    script = tmp_path / "group_launch.py"
    script.write_text(
        "import os\n"
        "from spotdiff.ranks import Group, detect\n"
        "group = Group(detect())\n"
        "import torch.distributed.fsdp  # noqa: F401  (what diffusers imports)\n"
        "group.finish()\n"
        "names = [open(f'/proc/self/task/{t}/comm').read() for t in os.listdir('/proc/self/task')]\n"
        f"out = {str(tmp_path)!r} + '/rank' + os.environ['RANK']\n"
        "open(out, 'w').write(str(sum('gloo' in n for n in names)))\n",
        encoding="utf-8",
    )
    proc = _torchrun(str(script), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [(tmp_path / f"rank{r}").read_text() for r in (0, 1)] == ["0", "0"]  # gloo threads left on each rank
