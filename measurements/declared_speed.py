"""Speed and memory of a declared benchmark against the built-in loader on the same records, side by side.

Writes VL-CheckList-sized data twice (about 372,000 records, the size of VL-CheckList's corpus): as the built-in
loader ``vl-checklist`` reads it (a corpus of YAML files and annotation JSON, ``-o missing_images=keep``: no image
is written or looked for) and as one table with its declaration (``spotdiff.testing.declarations``), parquet and
CSV. Then, each in a fresh process and in turn, ``--repeats`` times: reads every case as a run streams them
(``confined_cases``, images as lazy references, no case kept), and prints the median seconds, the cases per second,
the peak resident memory's growth over the process's before the cases are read (Linux's VmHWM, reset through
/proc/self/clear_refs) and each declared loader's time over the built-in's; then the memory of each on a quarter of
the records (memory that does not follow the records is bounded). Linux only.

    python measurements/declared_speed.py [--records 372000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
from pathlib import Path
from spotdiff.benchmarks import get_benchmark
from spotdiff.data.declared import resolve_benchmark
kind, root = sys.argv[1], Path(sys.argv[2])
if kind == "builtin":
    bench = get_benchmark("vl-checklist")(root / "vl-checklist", missing_images="keep")
else:
    bench = get_benchmark(resolve_benchmark(str(root / f"checklist-{kind}.yaml")))(root)
def status(field):  # MiB
    line = next(ln for ln in open("/proc/self/status") if ln.startswith(field + ":"))
    return int(line.split()[1]) / 1024
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak resident size (VmHWM) starts again from now
base = status("VmRSS")
start = time.perf_counter()
n = sum(1 for _ in bench.confined_cases())
seconds = time.perf_counter() - start
print(json.dumps({"cases": n, "seconds": seconds, "memory": status("VmHWM") - base}))
"""
KINDS = ("builtin", "parquet", "csv")


def write(root: Path, records: int) -> dict[str, int]:
    """Both layouts of ``records`` records in ``root``; the bytes of each one's files."""
    from spotdiff.testing.declarations import write_checklist

    for table in ("parquet", "csv"):
        path = write_checklist(root, records, table=table)
        path.rename(root / f"checklist-{table}.yaml")
        text = (root / f"checklist-{table}.yaml").read_text()
        (root / f"checklist-{table}.yaml").write_text(text.replace("name: vl-checklist-table",
                                                                   f"name: vl-checklist-{table}"))  # fmt: skip
    sizes = {"builtin": sum(p.stat().st_size for p in (root / "vl-checklist").rglob("*") if p.is_file())}
    sizes.update({t: (root / f"checklist.{t}").stat().st_size for t in ("parquet", "csv")})
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=372_000, help="records (VL-CheckList's corpus: about 372,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each loader (the median is shown)")
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        sizes = write(Path(tmp), args.records)
        for _ in range(args.repeats):
            for kind in KINDS:  # in turn, so that a busy machine slows every loader alike
                runs[kind].append(_child(kind, Path(tmp)))
        quarter = Path(tmp) / "quarter"
        write(quarter, args.records // 4)
        small = {kind: _child(kind, quarter) for kind in KINDS}
    base = statistics.median(r["seconds"] for r in runs["builtin"])
    print(f"{args.records} records, median of {args.repeats} runs each, every case read as a run streams them")
    print("loader                       files MB   cases   seconds   cases/s   peak RSS growth MiB   time / built-in"
          "   MiB at 1/4 the records")  # fmt: skip
    for kind in KINDS:
        seconds = statistics.median(r["seconds"] for r in runs[kind])
        memory = max(r["memory"] for r in runs[kind])
        label = "vl-checklist (built-in)" if kind == "builtin" else f"declared, {kind} table"
        n = runs[kind][0]["cases"]
        print(f"{label:<27} {sizes[kind] / 1e6:>9.1f} {n:>7} {seconds:>9.2f} {n / seconds:>9.0f} {memory:>21.0f} "
              f"{seconds / base:>17.2f} {small[kind]['memory']:>24.0f}")


def _child(kind: str, root: Path) -> dict:
    """One loader's run in a fresh process: ``{"cases", "seconds", "memory"}``."""
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(root)], check=True, capture_output=True,
                         text=True).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
