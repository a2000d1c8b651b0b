"""Peak memory of a text-only evaluation as the number of cases grows (issue 17: under 2 GB at 1,000,000).

Each size runs ``spotdiff eval`` (the command-line entry point, in a fresh child process) on
VISLA-format files of N synthetic cases (three sentences each, the P1/P2/N triplets of VISLA's
Generic file), protocol ``t2t``, with everything a user's run does: the default persistent cache,
the run store, ``--out`` files (``scores.jsonl``, ``metrics.json``) and 1,000 bootstrap resamples.
The model is a tiny random sentence-transformer (BERT, 2 layers, width 32, built from a config and
loaded by path) so that the measurement is the harness's memory and takes minutes, not hours; a
real text model adds its own weights, a constant. The child reports its peak resident memory
(``ru_maxrss``); a child that only imports spotdiff and the model libraries gives the fixed part.
Throughput: cases per second of the whole run, and its ratio to the model's own
``SentenceTransformer.encode`` of the same texts in another fresh child (encoding time only, one
call, the same batch size): 1.0 would be a harness that costs nothing beyond the model.
Usage: ``python benchmarks/eval_memory.py [--quick] [--sizes 10000 1000000]``.
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

BATCH_SIZE = 256


def raw_encode_seconds(model_dir: Path, tsv: Path) -> tuple[float, int]:
    """Seconds (and texts) of the model's own ``SentenceTransformer.encode`` of the file's unique texts."""
    argv = [sys.executable, "-c", _RAW_ENCODE, str(model_dir), str(tsv), str(BATCH_SIZE)]
    fields = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()
    return float(fields[fields.index("SECONDS") + 1]), int(fields[fields.index("TEXTS") + 1])


def write_visla(path: Path, n: int, seed: int) -> None:
    """``n`` rows of VISLA's Generic TSV: a caption, a paraphrase and a negative, all distinct."""
    rng = np.random.default_rng(seed)
    words = np.array(TINY_WORDS)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("filename\tcaption\tsecond positive\tnegative_caption\r\n")
        for i in range(n):
            p1, p2 = (" ".join(rng.choice(words, size=8)) + f" {i}" for _ in range(2))
            f.write(f"{i:012d}.jpg\t{p1}\t{p2}\t{p1} not\r\n")


def peak(code: str, argv: list[str]) -> int:
    out = subprocess.run([sys.executable, "-c", code, *argv], check=True, capture_output=True, text=True)
    fields = out.stdout.split()
    value = int(fields[fields.index("PEAK_MIB") + 1])
    if fields[fields.index("STATUS") + 1] != "0":
        raise SystemExit(f"spotdiff eval failed:\n{out.stdout}\n{out.stderr}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 and 100,000 cases")
    parser.add_argument("--sizes", type=int, nargs="+", help="numbers of cases (default 10,000 and 1,000,000)")
    args = parser.parse_args()
    sizes = args.sizes or ([10_000, 100_000] if args.quick else [10_000, 1_000_000])
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = make_tiny_sentence_transformer(root / "st")
        model = f"sentence-transformers:{model_dir}"
        fixed = peak(_IMPORTS_ONLY, [])
        print(f"imports only (spotdiff, torch, transformers, sentence-transformers): {fixed} MiB")
        peaks = []
        for n in sizes:
            data = root / f"visla{n}"
            data.mkdir()
            write_visla(data / "Generic_VISLA.tsv", n, seed=n)
            argv = ["eval", "--model", model, "--benchmark", "visla-generic", "--data", str(data),
                    "--protocol", "t2t", "--cache", str(root / f"cache{n}"), "--store", str(root / f"runs{n}.sqlite"),
                    "--out", str(root / f"out{n}"), "--batch-size", str(BATCH_SIZE),
                    "--device", "cpu", "--quiet"]  # fmt: skip
            start = time.perf_counter()
            peaks.append(peak(_CHILD, argv))
            seconds = time.perf_counter() - start
            with open(root / f"out{n}" / "scores.jsonl", encoding="utf-8") as f:
                lines = sum(1 for _ in f)
            print(f"text-only run, {n:,} cases ({3 * n:,} texts, {lines:,} lines of scores.jsonl): "
                  f"peak RSS {peaks[-1]:,} MiB in {seconds:.1f}s, {n / seconds:,.0f} cases/s")  # fmt: skip
            raw, texts = raw_encode_seconds(model_dir, data / "Generic_VISLA.tsv")
            print(f"  SentenceTransformer.encode of the same {texts:,} texts: {raw:.1f}s; "
                  f"ratio encode / whole run = {raw / seconds:.2f}")  # fmt: skip
        if len(sizes) > 1:
            grow = (peaks[-1] - peaks[0]) * 2**20 / (sizes[-1] - sizes[0])
            print(f"{sizes[-1] / sizes[0]:g}x the cases -> {peaks[-1] / peaks[0]:.2f}x the peak memory; "
                  f"{grow:,.0f} bytes per extra case; {peaks[-1]:,} MiB at {sizes[-1]:,} cases (goal: under 2,048 MiB)")
        else:
            print(f"{peaks[-1]:,} MiB at {sizes[-1]:,} cases (goal: under 2,048 MiB at 1,000,000)")
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
