"""Fault injection: stop real ``spotdiff`` runs at random points, run them again, check that nothing is lost.

Four classes of fault (``--fault``), each a clean run and ``--n`` trials compared with it:

* ``eval`` (the default): SIGKILL (a crash) or SIGTERM (``--signal term``: ``kill``, Slurm, ``docker
  stop``) to ``spotdiff eval`` at a random point, ``--kills`` times in a row, then the run again to the
  end. The resumed run must write the clean run's ``metrics.json`` (every field but ``run_id``) and
  ``scores.jsonl`` (scores to ``--atol``), compute exactly the items the stopped runs had not committed to
  the cache (which commits once per chunk of cases and at least every ``--commit-seconds``), end with every
  unique item cached, and leave no temporary file; a SIGTERM stop must exit
  by itself with its run marked failed. Kill points (``--mode``): ``progress`` (when the cache holds a
  random number of items), ``time`` (a uniformly random time within the clean run), ``mixed``. Only
  kills that land mid-run (after the first cache commit, before the last) count; a trial starts afresh
  up to 3 times. ``--nproc 2`` runs every step under ``torchrun`` (the whole process group is killed).
* ``plan``: SIGTERM (or SIGINT, ``--signal int``) to ``spotdiff run`` on a small study (synthesis,
  tokenizer, ``train --save-every``, ``eval``) at a random moment after the training's first complete
  checkpoint. The runner must exit 143 (130) with no process of the study left running and the
  checkpoints kept; run again, the training must resume from its last checkpoint (never step 0) and the
  study end with the clean run's weights (tensor for tensor) and metrics.
* ``disk-full``: the evaluation's cache, output folder or run store, or the ``--out`` of ``train``,
  ``synth`` or ``report`` (in turn) on a tmpfs of a random 10-90% of the size the clean run wrote there
  (needs root, to mount). The run must end with one line naming the path and "disk full" (no traceback),
  its run marked failed (an evaluation's), no temporary file left; once the file system has room, the same
  command must finish equal to the clean run (an evaluation with every item cached; a training resumed
  with ``--resume``; a synthesis into its emptied folder, which it refuses to delete itself).
* ``read-only``: the ``--out`` of ``eval``, ``train``, ``synth`` or ``report`` (in turn) on a read-only
  tmpfs (needs root). The run must end with one line naming the path and "read-only file system", no
  traceback, nothing written; remounted writable, the same command must finish equal to the clean run.

Example (the numbers in docs/scaling.md)::

    python measurements/fault_injection.py --n 10 --data ../shared/data/visla --limit 300
    python measurements/fault_injection.py --fault plan --n 5
    python measurements/fault_injection.py --fault disk-full --n 6
    python measurements/fault_injection.py --fault read-only --n 4

Prints one line per trial, how many qualified, and the summary ``faults survived with nothing lost
(FAULT): K/Q``; writes the details as JSON with ``--json``. Exit status 0 when K == Q and Q > 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def count_items(cache_dir: Path) -> int:
    """Distinct cached items in a cache directory: the main file and any shard files together."""
    shards = sorted((cache_dir / "shards").glob("*.sqlite"))
    main = cache_dir / "cache.sqlite"
    keys: set[tuple] = set()
    total = 0
    for path in [main, *shards]:
        if not path.is_file():
            continue
        try:
            db = sqlite3.connect(path, timeout=5)
            try:
                if shards:  # a kill during a merge can leave an item in two files: count it once
                    keys.update(db.execute("SELECT model, kind, key FROM items"))
                else:
                    total += db.execute("SELECT COUNT(*) FROM items").fetchone()[0]
            finally:
                db.close()
        except sqlite3.Error:
            continue  # being created right now: counted on the next poll
    return len(keys) + total


def eval_command(args: argparse.Namespace, trial_dir: Path) -> list[str]:
    spotdiff = [
        "eval", "--model", args.model, "--benchmark", args.benchmark, "--data", str(args.data),
        "--batch-size", str(args.batch_size), "--seed", str(args.seed), "--n-boot", str(args.n_boot),
        "--cache", str(trial_dir / "cache"), "--out", str(trial_dir / "out"),
        "--store", str(trial_dir / "runs.sqlite"), "--quiet",
    ]  # fmt: skip
    if args.protocol:
        spotdiff += ["--protocol", args.protocol]
    if args.limit:
        spotdiff += ["--limit", str(args.limit)]
    if args.device:
        spotdiff += ["--device", args.device]
    if args.nproc > 1:
        exe = Path(sys.executable).with_name("torchrun")
        launcher = [str(exe)] if exe.is_file() else [sys.executable, "-m", "torch.distributed.run"]
        port = str(random.Random().randint(20000, 60000))
        return [*launcher, "--nproc_per_node", str(args.nproc), "--master_port", port, "-m", "spotdiff", *spotdiff]
    return [sys.executable, "-m", "spotdiff", *spotdiff]


#: The cache's commit interval given to the runs (``--commit-seconds``; None: the cache's own).
COMMIT_SECONDS: float | None = None


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    if COMMIT_SECONDS is not None:
        env["SPOTDIFF_COMMIT_SECONDS"] = str(COMMIT_SECONDS)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    return env


def start(args: argparse.Namespace, trial_dir: Path) -> subprocess.Popen:
    cmd = eval_command(args, trial_dir)
    with open(trial_dir / "log.txt", "a", encoding="utf-8") as log:  # the child keeps its own handle
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT, start_new_session=True)


def run_to_end(args: argparse.Namespace, trial_dir: Path) -> float:
    t0 = time.monotonic()
    proc = start(args, trial_dir)
    if proc.wait() != 0:
        raise SystemExit(f"run failed (exit {proc.returncode}); see {trial_dir / 'log.txt'}")
    return time.monotonic() - t0


def _process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (Linux /proc); torchrun starts its ranks in new sessions."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the run: every process of it at once, as a crashed machine would stop them."""
    pids = _process_tree(proc.pid) if Path("/proc").is_dir() else []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def stop(proc: subprocess.Popen, trial_dir: Path, how: str) -> dict:
    """Stop the run: ``kill`` SIGKILLs every process of it at once; ``term`` sends SIGTERM (``kill``,
    Slurm, ``docker stop``) to the run and waits for it to exit (SIGKILL after 120 s), which must leave
    no run ``running`` in the store and no temporary file in the output folder."""
    if how == "kill":
        kill(proc)
        return {}
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        status = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        kill(proc)
        status = None
    running = []
    if (trial_dir / "runs.sqlite").is_file():
        with contextlib.closing(sqlite3.connect(trial_dir / "runs.sqlite", timeout=60)) as db:
            running = db.execute("SELECT id FROM runs WHERE status='running'").fetchall()
    left = sorted(p.name for p in (trial_dir / "out").glob(".scores*.tmp"))
    return {"exit": status, "stopped_cleanly": status is not None and not running and not left}


def kill_at_random_point(
    args: argparse.Namespace, trial_dir: Path, mode: str, total: int, span: float, rng: random.Random
) -> dict:
    """Start a run and stop it (:func:`stop`, ``args.signal``) at a random point (time kills: within
    ``span`` seconds)."""
    cache = trial_dir / "cache"
    before = count_items(cache)
    proc = start(args, trial_dir)
    t0 = time.monotonic()
    if mode == "progress":
        target = rng.randint(before + 1, max(before + 1, total - 1))
        while proc.poll() is None and count_items(cache) < target:
            time.sleep(0.01)
        point = f"cache at {target}/{total} items"
    else:
        delay = rng.uniform(0.0, span)
        while proc.poll() is None and time.monotonic() - t0 < delay:
            time.sleep(0.01)
        point = f"{delay:.1f}s of {span:.1f}s"
    finished = proc.poll() is not None
    elapsed = time.monotonic() - t0
    stopped = stop(proc, trial_dir, args.signal)
    after = count_items(cache)
    return {
        **stopped,
        "mode": mode,
        "point": point,
        "killed": not finished,
        "elapsed": round(elapsed, 2),
        "items_before": before,
        "items_after": after,
        # mid-run: still running when killed, this attempt had committed to the cache, and items were left
        "mid_run": not finished and before < after < total,
    }


def _why_not(kill: dict) -> str:
    """Why a kill did not land mid-run (empty when it did)."""
    if kill["mid_run"]:
        return ""
    return " (not mid-run: " + ("before the first cache commit" if kill["killed"] else "the run had finished") + ")"


def _metrics(out: Path, folder: Path | None = None) -> dict:
    """``metrics.json`` without its run id (and with ``folder``, where a study's paths start, made relative)."""
    text = (out / "metrics.json").read_text(encoding="utf-8")
    data = json.loads(text.replace(json.dumps(str(folder))[1:-1], "STUDY") if folder is not None else text)
    data.pop("run_id", None)
    return data


def _scores_equal(a: Path, b: Path, atol: float) -> bool:
    lines_a = (a / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    lines_b = (b / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    if len(lines_a) != len(lines_b):
        return False
    for la, lb in zip(lines_a, lines_b, strict=True):
        ra, rb = json.loads(la), json.loads(lb)
        if ra.get("scores") is not None or rb.get("scores") is not None:
            sa, sb = np.asarray(ra.pop("scores"), float), np.asarray(rb.pop("scores"), float)
            if sa.shape != sb.shape or not np.allclose(sa, sb, rtol=0, atol=atol, equal_nan=True):
                return False
        if ra != rb:
            return False
    return True


def _computed(trial_dir: Path) -> int:
    """Items the resumed run computed (all ranks of a sharded run), from the run store."""
    sys.path.insert(0, str(ROOT / "src"))
    from spotdiff.diagnose.store import RunStore

    run_id = json.loads((trial_dir / "out" / "metrics.json").read_text(encoding="utf-8"))["run_id"]
    store = RunStore(trial_dir / "runs.sqlite")
    try:
        info = store.get(run_id).info
    finally:
        store.close()
    return int(info["engine"]["computed"]) + sum(info.get("distributed", {}).get("computed", []))


def resume(args: argparse.Namespace, trial: Path, clean: Path, reference: dict, total: int, kills: list[dict]) -> dict:
    """Run a stopped trial to the end and compare it with the clean run: same metrics and scores, nothing
    computed twice, nothing lost, every SIGTERM stop clean, no temporary file left after the resume.

    Args:
        args: the script's options.
        trial: the trial's folder.
        clean: the clean run's folder.
        reference: the clean run's metrics (:func:`_metrics`).
        total: the unique items of the clean run.
        kills: the trial's stops (:func:`kill_at_random_point`).
    """
    at_resume = count_items(trial / "cache")
    run_to_end(args, trial)
    computed = _computed(trial)
    result = {
        "qualified": True,
        "kills": kills,
        "items_at_resume": at_resume,
        "computed_by_resume": computed,
        "items_at_end": count_items(trial / "cache"),
        "metrics_equal": _metrics(trial / "out") == reference,
        "scores_equal": _scores_equal(trial / "out", clean / "out", args.atol),
        "stops_clean": all(k.get("stopped_cleanly", True) for k in kills),
        "no_temporaries": not list((trial / "out").glob(".scores*.tmp")),
    }
    result["nothing_twice"] = computed == total - at_resume
    result["nothing_lost"] = result["items_at_end"] == total
    checks = ("metrics_equal", "scores_equal", "nothing_twice", "nothing_lost", "stops_clean", "no_temporaries")
    result["ok"] = all(result[k] for k in checks)
    return result


def _verdict(result: dict, checks: tuple[str, ...]) -> str:
    """Set ``result["ok"]`` (every one of ``checks`` holds) and say it: ``OK`` or ``FAILED`` and the checks failed."""
    result["ok"] = all(result[k] for k in checks)
    return "OK" if result["ok"] else "FAILED " + ", ".join(k for k in checks if not result[k])


def eval_trials(args: argparse.Namespace, work: Path, rng: random.Random) -> tuple[list[dict], dict]:
    """A clean evaluation, then ``args.n`` trials: ``args.kills`` stops in a row at random mid-run points,
    then the resume compared with the clean run (:func:`resume`). Returns the trials and the clean run's
    facts."""
    clean = work / "clean"
    shutil.rmtree(clean, ignore_errors=True)
    clean.mkdir()
    clean_s = run_to_end(args, clean)
    total = count_items(clean / "cache")
    print(f"clean run: {clean_s:.1f}s, {total} unique items", flush=True)
    reference = _metrics(clean / "out")
    span = clean_s  # time kills are drawn in [0, span): the shortest full run seen so far
    trials = []
    for i in range(args.n):
        trial = work / f"trial-{i}"
        kills: list[dict] = []
        for _attempt in range(4):  # a trial whose kills did not all land mid-run starts afresh
            shutil.rmtree(trial, ignore_errors=True)
            trial.mkdir()
            kills = []
            for k in range(args.kills):
                mode = args.mode if args.mode != "mixed" else ("progress", "time")[(i + k) % 2]
                kills.append(kill_at_random_point(args, trial, mode, total, span, rng))
                if not kills[-1]["mid_run"]:
                    if not kills[-1]["killed"]:  # the run beat the kill: draw later kills earlier
                        span = min(span, kills[-1]["elapsed"])
                    break
            if all(x["mid_run"] for x in kills) and len(kills) == args.kills:
                break
        qualified = len(kills) == args.kills and all(x["mid_run"] for x in kills)
        where = ", ".join(f"{x['point']}{_why_not(x)}" for x in kills)
        if not qualified:
            trials.append({"trial": i, "kills": kills, "qualified": False})
            print(f"trial {i}: not qualified, no kill landed mid-run after 4 attempts ({where})", flush=True)
            continue
        result = resume(args, trial, clean, reference, total, kills)
        trials.append({"trial": i, **result})
        print(
            f"trial {i}: stopped at {where}; {result['items_at_resume']} items kept; "
            f"resume computed {result['computed_by_resume']}; "
            f"{'OK' if result['ok'] else 'MISMATCH ' + json.dumps(result)}",
            flush=True,
        )
    return trials, {"seconds": round(clean_s, 1), "unique_items": total}


# --- fault class "plan": SIGTERM / SIGINT to `spotdiff run` while a stage trains ------------------

PLAN = """\
name: fault injection (a study interrupted while it trains)
vars: {seed: 0, steps: 60, save_every: 10}
stages:
  - name: synth-corpus
    run: synth corpus --out data/corpus --n 256 --seed {seed} --image-size 32 --workers 1
    outputs: [data/corpus]
  - name: synth-spec
    run: synth spec --out data/spec --n 6 --seed 1 --image-size 32 --workers 1
    outputs: [data/spec]
  - name: tokenizer
    after: [synth-corpus]
    run: demo tokenizer --captions data/corpus/captions.jsonl --out models/tokenizer
    outputs: [models/tokenizer]
  - name: train
    after: [synth-corpus, tokenizer]
    run: >-
      train --from-config small --tokenizer models/tokenizer --captions data/corpus/captions.jsonl --loss clip
      --steps {steps} --batch-size 32 --lr 0.001 --warmup-steps 2 --seed {seed} --save-every {save_every}
      --log-every 10 --out models/m
    outputs: [models/m]
  - name: eval
    after: [train, synth-spec]
    run: >-
      eval --model hf-clip:models/m --benchmark spec --data data/spec --out evals/m --store runs.sqlite
      --cache cache --n-boot 100 --seed {seed} -q
    outputs: [evals/m]
"""


def run_plan(args: argparse.Namespace, folder: Path) -> subprocess.Popen:
    """``spotdiff run plan.yaml --out folder`` in its own session, its output appended to ``folder/log.txt``."""
    plan = folder.parent / "plan.yaml"
    cmd = [sys.executable, "-m", "spotdiff", "run", str(plan), "--out", str(folder), "--workers", "2",
           "--set", f"steps={args.steps}", "--set", f"save_every={args.save_every}"]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "log.txt", "a", encoding="utf-8") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT, start_new_session=True)


def _checkpoint_steps(model_dir: Path) -> list[int]:
    """Steps of the complete checkpoints in a training folder."""
    return sorted(int(p.parent.name.rsplit("-", 1)[1]) for p in model_dir.glob("checkpoint-*/COMPLETE"))


def _left_running(folder: Path) -> list[int]:
    """Processes whose working directory is inside ``folder`` (a stopped plan must leave none)."""
    pids = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        with contextlib.suppress(OSError):
            if Path(os.readlink(cwd)).is_relative_to(folder):
                pids.append(int(cwd.parent.name))
    return pids


def _weights_equal(a: Path, b: Path) -> bool:
    from safetensors.numpy import load_file

    ta, tb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return ta.keys() == tb.keys() and all(np.array_equal(ta[k], tb[k]) for k in ta)


def interrupt_plan(args: argparse.Namespace, trial: Path, rng: random.Random) -> dict:
    """Start the plan, wait for the training's first complete checkpoint, then a random 0-2 s more (but no
    later than the checkpoint two saves before the last, so that the signal lands mid-training however fast
    the machine trains), and send ``args.signal`` (term: SIGTERM, what Slurm and ``docker stop`` send; int:
    Ctrl-C) to the runner."""
    proc = run_plan(args, trial)
    model = trial / "models" / "m"
    while proc.poll() is None and not _checkpoint_steps(model):
        time.sleep(0.05)
    end = time.monotonic() + rng.uniform(0.0, 2.0)
    latest = args.steps - 2 * args.save_every
    while proc.poll() is None and time.monotonic() < end and max(_checkpoint_steps(model), default=0) < latest:
        time.sleep(0.05)
    mid_run = proc.poll() is None and not (trial / "stages" / "train.json").is_file()
    sig = signal.SIGTERM if args.signal == "term" else signal.SIGINT
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        status = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        kill(proc)
        status = None
    time.sleep(0.5)  # the stopped commands' last exits
    return {
        "mid_run": mid_run,
        "exit": status,
        "checkpoints_at_stop": _checkpoint_steps(model),
        "left_running": _left_running(trial),
    }


def plan_trials(args: argparse.Namespace, work: Path, rng: random.Random) -> tuple[list[dict], dict]:
    """A clean run of the plan, then ``args.n`` runs interrupted while training and run again: each must stop
    cleanly (exit 143 or 130, no process left), keep its checkpoints, resume from the last one (never from
    step 0) and end with the clean run's weights and metrics."""
    (work / "plan.yaml").write_text(PLAN, encoding="utf-8")
    clean = work / "clean"
    t0 = time.monotonic()
    if run_plan(args, clean).wait() != 0:
        raise SystemExit(f"the clean plan failed; see {clean / 'log.txt'}")
    clean_s = time.monotonic() - t0
    print(f"clean plan: {clean_s:.1f}s", flush=True)
    reference = _metrics(clean / "evals" / "m", clean)
    trials = []
    for i in range(args.n):
        trial = work / f"trial-{i}"
        shutil.rmtree(trial, ignore_errors=True)
        stop_ = interrupt_plan(args, trial, rng)
        if not stop_["mid_run"]:
            trials.append({"trial": i, "qualified": False, **stop_})
            print(f"trial {i}: not qualified (the training had ended before the signal)", flush=True)
            continue
        kept = _checkpoint_steps(trial / "models" / "m")
        status = run_plan(args, trial).wait()
        log = (trial / "logs" / "train.log").read_text(encoding="utf-8", errors="replace")
        step = re.search(r"resumed from \S+ at step (\d+)", log)
        result = {
            "trial": i,
            "qualified": True,
            **stop_,
            "stopped_cleanly": stop_["exit"] in (130, 143) and not stop_["left_running"],
            "checkpoints_kept": bool(kept) and kept == stop_["checkpoints_at_stop"][: len(kept)],
            "resumed_at": int(step.group(1)) if step else None,
            "weights_equal": status == 0 and _weights_equal(trial / "models" / "m", clean / "models" / "m"),
            "metrics_equal": status == 0 and _metrics(trial / "evals" / "m", trial) == reference,
        }
        result["resumed"] = bool(kept) and result["resumed_at"] == kept[-1]  # the last checkpoint, never step 0
        checks = ("stopped_cleanly", "checkpoints_kept", "resumed", "weights_equal", "metrics_equal")
        trials.append(result)
        print(f"trial {i}: SIG{args.signal.upper()} at checkpoints {stop_['checkpoints_at_stop']}; "
              f"{_verdict(result, checks)}", flush=True)  # fmt: skip
    return trials, {"seconds": round(clean_s, 1), "checkpoints": _checkpoint_steps(clean / "models" / "m")}


# --- fault class "disk-full": the cache, the output folder or the run store on a full file system ----


def _mount_tmpfs(where: Path, size: int, *, read_only: bool = False) -> None:
    where.mkdir(parents=True, exist_ok=True)
    options = f"{'ro,' if read_only else ''}size={size}"
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)


def _resize_tmpfs(where: Path, size: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def fault_size(clean: Path, target: str, rng: random.Random) -> int:
    """A random 10-90% of what the clean run wrote to ``target`` (cache, out, store, train, synth or
    report), in whole pages."""
    clean_size = _size(clean / target) if target != "store" else (clean / "runs.sqlite").stat().st_size
    return max(4096, int(clean_size * rng.uniform(0.1, 0.9)) // 4096 * 4096)


def fill_disk(args: argparse.Namespace, trial: Path, target: str, size: int) -> dict:
    """Run the evaluation with ``target`` (cache, out or store) on the tmpfs of ``size`` bytes mounted at
    ``trial/target``: the run must stop with one line naming the path and "disk full", no traceback, its
    run marked failed (where the store is writable) and no temporary file left."""
    mount = trial / target
    cmd = eval_command(args, trial)
    if target == "store":
        cmd[cmd.index("--store") + 1] = str(mount / "runs.sqlite")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT)
    said = (proc.stdout + proc.stderr).strip().splitlines()
    store = mount / "runs.sqlite" if target == "store" else trial / "runs.sqlite"
    failed = []
    if target != "store" and store.is_file():
        with contextlib.closing(sqlite3.connect(store, timeout=60)) as db:
            failed = db.execute("SELECT status FROM runs").fetchall()
    return {
        "target": target,
        "size": size,
        "exit": proc.returncode,
        "last_line": said[-1] if said else "",
        "clear": proc.returncode != 0
        and bool(said)
        and "disk full" in said[-1]
        and str(mount) in said[-1]
        and not any(line.startswith("Traceback") for line in said),
        # the store holds the reason (a store on the full disk itself cannot record it)
        "marked_failed": target == "store"
        or (bool(failed) and all(s.startswith("failed: ") and "disk full" in s for (s,) in failed)),
        "no_temporaries": not list((trial / "out").glob(".scores*.tmp")),
        "mount": str(mount),
    }


def disk_full_trials(args: argparse.Namespace, work: Path, rng: random.Random) -> tuple[list[dict], dict]:
    """A clean run, then ``args.n`` runs whose cache, output folder or run store (in turn) sits on a full
    tmpfs; each fault must give one clear line (:func:`fill_disk`), and the run started again once the
    file system has room must finish equal to the clean run, computing nothing the cache kept."""
    clean = work / "clean"
    clean.mkdir(parents=True, exist_ok=True)
    clean_s = run_to_end(args, clean)
    reference, total = _metrics(clean / "out"), count_items(clean / "cache")
    trials = []
    for i in range(args.n):
        trial = work / f"trial-{i}"
        trial.mkdir(parents=True, exist_ok=True)
        target = ("cache", "out", "store", "train", "synth", "report")[i % 6]
        if target in ("train", "synth", "report"):
            clean_output(args, target, work)
            size = fault_size(clean, target, rng)
            result = {"trial": i, **refuse_output(args, trial, target, "disk-full", size, work)}
            result["qualified"] = result["exit"] != 0  # a run that fit met no fault
            trials.append(result)
            verdict = "OK" if result["ok"] else "FAILED " + ", ".join(result["failed_checks"])
            print(f"trial {i}: {target} --out on a {size // 1024} KiB tmpfs -> {result['last_line'][:160]!r}; "
                  f"{verdict}", flush=True)  # fmt: skip
            continue
        size = fault_size(clean, target, rng)
        _mount_tmpfs(trial / target, size)
        try:  # unmounted whatever happens
            fault = fill_disk(args, trial, target, size)
            _resize_tmpfs(trial / target, 64 * 1024 * 1024)
            kept = count_items(trial / "cache")
            args_store = trial / "store" / "runs.sqlite" if fault["target"] == "store" else None
            cmd = eval_command(args, trial)
            if args_store is not None:
                cmd[cmd.index("--store") + 1] = str(args_store)
            status = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT).returncode
            # a run that fit after all (its writes rounded below the size) met no fault: not a trial
            result = {"trial": i, "qualified": fault["exit"] != 0, **fault, "rerun_exit": status, "items_kept": kept}
            result["metrics_equal"] = status == 0 and _metrics(trial / "out") == reference
            result["nothing_lost"] = status == 0 and count_items(trial / "cache") == total
        finally:
            subprocess.run(["umount", str(trial / target)], check=False)
        checks = ("clear", "marked_failed", "no_temporaries", "metrics_equal", "nothing_lost")
        trials.append(result)
        print(f"trial {i}: {fault['target']} on a {fault['size'] // 1024} KiB tmpfs -> {fault['last_line'][:160]!r}; "
              f"{_verdict(result, checks)}", flush=True)  # fmt: skip
    return trials, {"seconds": round(clean_s, 1), "unique_items": total}


# --- the --out of train, synth and report (and eval's, read-only) on a full or read-only file system ------

#: The command whose ``--out`` each output target is: ``out`` is the evaluation's (:func:`eval_command`).
OUTPUT_COMMANDS = {"out": "eval", "train": "train", "synth": "synth", "report": "report"}


def _run_logged(cmd: list[str], log: Path) -> subprocess.CompletedProcess:
    """Run ``cmd``, its output captured (and appended to ``log``)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT)
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    return proc


def output_command(args: argparse.Namespace, target: str, out: Path, work: Path) -> list[str]:
    """The command of ``target`` (train, synth, report) writing into ``out``: a 4-step training of the tiny
    CLIP on a small synthetic corpus, 4 SPEC candidate sets per subset, the report of the clean evaluation."""
    spotdiff = [sys.executable, "-m", "spotdiff"]
    if target == "train":
        inputs = work / "inputs"
        if not (inputs / "tokenizer").is_dir():
            inputs.mkdir(parents=True, exist_ok=True)
            corpus = ["synth", "corpus", "--out", str(inputs / "corpus"), "--n", "64", "--image-size", "32",
                      "--workers", "1", "--seed", str(args.seed)]  # fmt: skip
            tokenizer = ["demo", "tokenizer", "--captions", str(inputs / "corpus" / "captions.jsonl"),
                         "--out", str(inputs / "tokenizer")]  # fmt: skip
            for argv in (corpus, tokenizer):
                if _run_logged([*spotdiff, *argv], work / "log.txt").returncode != 0:
                    raise SystemExit(f"preparing the training's inputs failed; see {work / 'log.txt'}")
        return [*spotdiff, "train", "--from-config", "tiny", "--tokenizer", str(inputs / "tokenizer"), "--captions",
                str(inputs / "corpus" / "captions.jsonl"), "--steps", "4", "--batch-size", "16", "--save-every", "2",
                "--seed", str(args.seed), "--device", "cpu", "--out", str(out)]  # fmt: skip
    if target == "synth":
        return [*spotdiff, "synth", "spec", "--out", str(out), "--n", "4", "--image-size", "64", "--workers", "1",
                "--seed", str(args.seed)]  # fmt: skip
    return [*spotdiff, "report", "--store", str(work / "clean" / "runs.sqlite"), "--out", str(out)]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` by its relative path; the report's "Generated TIME" and "built in S s" lines
    dropped (they differ between any two runs)."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix in (".md", ".html"):
            kept = [ln for ln in data.splitlines() if b"Generated " not in ln and b"report built in" not in ln]
            data = b"\n".join(kept)
        files[path.relative_to(folder).as_posix()] = data
    return files


def same_output(target: str, out: Path, clean: Path, args: argparse.Namespace) -> bool:
    """Whether ``out`` holds what the clean run of ``target`` wrote in ``clean``."""
    if target == "out":
        return _metrics(out) == _metrics(clean) and _scores_equal(out, clean, args.atol)
    if target == "train":
        return _weights_equal(out, clean)
    return _files(out) == _files(clean)


def clean_output(args: argparse.Namespace, target: str, work: Path) -> Path:
    """The clean run of ``target``'s command (made once; the evaluation's is ``work/clean/out``)."""
    clean = work / "clean"
    if not (clean / "out" / "metrics.json").is_file():
        clean.mkdir(parents=True, exist_ok=True)
        run_to_end(args, clean)
    if target == "out":
        return clean / "out"
    made = (clean / target).is_dir() or _run_logged(output_command(args, target, clean / target, work),
                                                    clean / "log.txt").returncode == 0  # fmt: skip
    if not made:
        raise SystemExit(f"the clean {target} failed; see {clean / 'log.txt'}")
    return clean / target


def refuse_output(args: argparse.Namespace, trial: Path, target: str, fault: str, size: int, work: Path) -> dict:
    """Run ``target``'s command with its ``--out`` on a tmpfs mounted at ``trial/target``: read-only, or of
    ``size`` bytes. It must stop with one line naming the path and the fault, no traceback, no temporary
    file; then, the file system writable with room, the command run again must write the clean run's output
    (a training resumed with ``--resume``; a synthesis into its emptied folder, as it refuses to delete
    files it did not record)."""
    mount = trial / target
    _mount_tmpfs(mount, size, read_only=fault == "read-only")
    try:
        cmd = eval_command(args, trial) if target == "out" else output_command(args, target, mount, work)
        proc = _run_logged(cmd, trial / "log.txt")
        said = (proc.stdout + proc.stderr).strip().splitlines()
        words = "read-only file system" if fault == "read-only" else "disk full"
        result = {
            "target": target,
            "size": size,
            "exit": proc.returncode,
            "last_line": said[-1] if said else "",
            "clear": proc.returncode == 2 and bool(said) and words in said[-1] and str(mount) in said[-1]
            and not any(line.startswith("Traceback") for line in said),
            "no_temporaries": not [p for p in mount.rglob("*") if p.name.endswith(".tmp")],
            "mount": str(mount),
        }  # fmt: skip
        subprocess.run(["mount", "-o", "remount,rw,size=64m", str(mount)], check=True)
        if target == "synth":
            result["emptied"] = [p.name for p in mount.iterdir()]
            for path in mount.iterdir():
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        rerun = _run_logged([*cmd, "--resume"] if target == "train" else cmd, trial / "log.txt")
        result["rerun_exit"] = rerun.returncode
        result["equal"] = rerun.returncode == 0 and same_output(target, mount, clean_output(args, target, work), args)
    finally:
        subprocess.run(["umount", str(mount)], check=False)
    checks = ("clear", "no_temporaries", "equal")
    result["ok"] = all(result[k] for k in checks)
    result["failed_checks"] = [k for k in checks if not result[k]]
    return result


def read_only_trials(args: argparse.Namespace, work: Path, rng: random.Random) -> tuple[list[dict], dict]:
    """``args.n`` runs of eval, train, synth and report (in turn) whose ``--out`` is on a read-only file
    system (:func:`refuse_output`)."""
    targets = [tuple(OUTPUT_COMMANDS)[i % len(OUTPUT_COMMANDS)] for i in range(args.n)]
    t0 = time.monotonic()
    for target in dict.fromkeys(targets):
        clean_output(args, target, work)
    clean_s = time.monotonic() - t0
    trials = []
    for i, target in enumerate(targets):
        trial = work / f"trial-{i}"
        trial.mkdir(parents=True, exist_ok=True)
        result = {"trial": i, "qualified": True, **refuse_output(args, trial, target, "read-only", 1 << 20, work)}
        trials.append(result)
        print(f"trial {i}: {OUTPUT_COMMANDS[target]} --out on a read-only tmpfs -> {result['last_line'][:160]!r}; "
              f"{'OK' if result['ok'] else 'FAILED ' + ', '.join(result['failed_checks'])}", flush=True)  # fmt: skip
    return trials, {"seconds": round(clean_s, 1)}


FAULTS = {"eval": eval_trials, "plan": plan_trials, "disk-full": disk_full_trials, "read-only": read_only_trials}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fault", choices=tuple(FAULTS), default="eval", help="the class of fault, default eval")
    p.add_argument("--n", type=int, default=5, help="trials, default 5")
    p.add_argument("--kills", type=int, default=1, help="eval: kills in a row before the resume, default 1")
    p.add_argument("--mode", choices=("progress", "time", "mixed"), default="mixed", help="eval: kill points")
    p.add_argument(
        "--signal", choices=("kill", "term", "int"), default=None,
        help="eval: SIGKILL (a crash, the default) or SIGTERM; plan: SIGTERM (the default) or SIGINT (Ctrl-C)",
    )  # fmt: skip
    p.add_argument("--model", default="minilm")
    p.add_argument("--benchmark", default="visla-generic")
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "visla")
    p.add_argument("--protocol", default="t2t")
    p.add_argument("--limit", type=int, default=300, help="cases (0 = all)")
    p.add_argument("--batch-size", type=int, default=8, help="small, so that there are many batches")
    p.add_argument(
        "--commit-seconds", type=float, default=1.0,
        help="eval: the cache commits at least this often (SPOTDIFF_COMMIT_SECONDS; a chunk of cases commits "
        "once), so that kills land between commits; default 1",
    )  # fmt: skip
    p.add_argument("--device", default="cpu")
    p.add_argument("--n-boot", type=int, default=200)
    p.add_argument("--seed", type=int, default=0, help="seed of the run and of the fault points")
    p.add_argument("--nproc", type=int, default=1, help="eval: processes per run (>1: torchrun, sharded)")
    p.add_argument("--atol", type=float, default=1e-5, help="eval: tolerance on per-case scores")
    p.add_argument("--steps", type=int, default=60, help="plan: training steps")
    p.add_argument("--save-every", type=int, default=10, help="plan: steps between checkpoints")
    p.add_argument("--workdir", type=Path, help="keep everything here (default: a temporary folder)")
    p.add_argument("--json", type=Path, help="write the per-trial details here")
    args = p.parse_args(argv)
    global COMMIT_SECONDS
    COMMIT_SECONDS = args.commit_seconds
    signals = {"eval": ("kill", "term"), "plan": ("term", "int"), "disk-full": ("kill",), "read-only": ("kill",)}[
        args.fault
    ]
    args.signal = args.signal or signals[0]
    if args.signal not in signals:
        p.error(f"--signal {args.signal} does not apply to --fault {args.fault} (one of {', '.join(signals)})")
    if args.fault in ("disk-full", "read-only") and os.geteuid() != 0:
        p.error(f"--fault {args.fault} mounts a tmpfs, which needs root")
    rng = random.Random(args.seed)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="spotdiff-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        trials, clean = FAULTS[args.fault](args, work, rng)
        done = [t for t in trials if t["qualified"]]
        ok = sum(t["ok"] for t in done)
        how = {"disk-full": "a full file system", "read-only": "a read-only file system"}.get(
            args.fault, f"SIG{args.signal.upper()}"
        )
        print(f"{len(done)} of {args.n} trials had their fault ({args.fault}: {how}) land mid-run")
        print(f"faults survived with nothing lost ({args.fault}): {ok}/{len(done)}")
        if args.json:
            summary = {"fault": args.fault, "n": args.n, "qualified": len(done), "survived": ok, "clean": clean,
                       "trials": trials}  # fmt: skip
            args.json.write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
        return 0 if done and ok == len(done) else 1
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
