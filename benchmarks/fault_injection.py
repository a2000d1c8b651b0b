"""Fault injection: SIGKILL (or SIGTERM) real ``spotdiff eval`` runs at random points, resume them, compare.

For each of N trials the script starts a run on a fresh cache, kills it with SIGKILL at a random
point (``--kills`` times in a row), then runs it again to completion and checks that the resumed run

* writes the same ``metrics.json`` as an uninterrupted run (every field but ``run_id``) and the same
  ``scores.jsonl`` (scores to ``--atol``, outcomes exactly);
* computes nothing twice: it computes exactly the items the killed runs had not committed to the
  cache (``computed == unique items - items cached at the kill``, from the run store's record);
* loses nothing: the cache ends with every unique item;
* leaves nothing behind: no temporary ``scores`` file after the resumed run, and with ``--signal term``
  (what ``kill``, Slurm and ``docker stop`` send) each stopped run exited by itself, marked failed in
  the run store (none left ``running``) with its temporary file removed.

Kill points (``--mode``): ``progress`` kills when the cache holds a random number of items (somewhere
inside the encoding, where the work is); ``time`` kills at a uniformly random time within the clean
run's duration (it can also land in model loading, or after the run ended); ``mixed`` alternates.

Only kills that land *mid-run* count: the run was still going when it was killed, and it had already
committed at least one batch to the cache. A kill before the first commit (model loading) or after
the run ended is not a trial: the trial starts again afresh (a time kill with the elapsed time as the
new span), up to 3 times, and a trial whose kills still did not all land mid-run is reported as not
qualified and left out of the count. The summary prints how many trials qualified.
``--nproc 2`` runs every step under ``torchrun`` (sharded evaluation; the whole launcher process
group is killed).

Example (the numbers in docs/scaling.md)::

    python benchmarks/fault_injection.py --n 10 --data ../shared/data/visla --limit 300

Prints one line per trial, how many qualified (``Q of N trials killed mid-run``) and the summary
``resumed runs matching the clean run: K/Q``; writes the details as JSON with ``--json``. Exit status
0 when K == Q and Q > 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
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
        # mid-run: still running when killed, and this attempt had committed to the cache
        "mid_run": not finished and after > before,
    }


def _why_not(kill: dict) -> str:
    """Why a kill did not land mid-run (empty when it did)."""
    if kill["mid_run"]:
        return ""
    return " (not mid-run: " + ("before the first cache commit" if kill["killed"] else "the run had finished") + ")"


def _metrics(out: Path) -> dict:
    data = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    data.pop("run_id", None)
    return data


def _scores_equal(a: Path, b: Path, atol: float) -> bool:
    import numpy as np

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


def resume(
    args: argparse.Namespace, trial: Path, clean: Path, reference: dict, total: int, kills: list[dict]
) -> dict:
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=5, help="trials (kill + resume), default 5")
    p.add_argument("--kills", type=int, default=1, help="kills in a row before the resume, default 1")
    p.add_argument("--mode", choices=("progress", "time", "mixed"), default="mixed")
    p.add_argument(
        "--signal", choices=("kill", "term"), default="kill", help="stop runs with SIGKILL (a crash) or SIGTERM"
    )
    p.add_argument("--model", default="minilm")
    p.add_argument("--benchmark", default="visla-generic")
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "visla")
    p.add_argument("--protocol", default="t2t")
    p.add_argument("--limit", type=int, default=300, help="cases (0 = all)")
    p.add_argument("--batch-size", type=int, default=8, help="small, so that there are many cache commits")
    p.add_argument("--device", default="cpu")
    p.add_argument("--n-boot", type=int, default=200)
    p.add_argument("--seed", type=int, default=0, help="seed of the run and of the kill points")
    p.add_argument("--nproc", type=int, default=1, help="processes per run (>1: torchrun, sharded)")
    p.add_argument("--atol", type=float, default=1e-5, help="tolerance on per-case scores")
    p.add_argument("--workdir", type=Path, help="keep everything here (default: a temporary folder)")
    p.add_argument("--json", type=Path, help="write the per-trial details here")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="spotdiff-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
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
        done = [t for t in trials if t["qualified"]]
        ok = sum(t["ok"] for t in done)
        summary = {
            "n": args.n,
            "qualified": len(done),
            "matching": ok,
            "metrics_equal": sum(t["metrics_equal"] for t in done),
            "clean_seconds": round(clean_s, 1),
            "unique_items": total,
            "trials": trials,
        }
        how = f"SIG{args.signal.upper()}"
        print(f"{len(done)} of {args.n} trials stopped mid-run by {how} (after the first cache commit, before the end)")
        print(f"resumed runs matching the clean run: {ok}/{len(done)}")
        if args.json:
            args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        return 0 if done and ok == len(done) else 1
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
