"""Memory of reading a hub parquet layout (Winoground's) through lazy ParquetImage references.

Writes two Winoground-layout parquet files, one 4x the other (random 400x300 PNGs, row groups of 100
rows, as the hub's converter writes image datasets), then in a fresh process for each: loads every
case, computes every image key (which hashes every image's bytes), and decodes every image once in
file order. Prints the file sizes and the peak RSS growth of each step over the process's baseline:
memory should follow the row-group size, not the file size. Linux only (reads /proc/self/statm).

    python measurements/parquet_memory.py [--rows 200]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys
from spotdiff.benchmarks import get_benchmark
import spotdiff.benchmarks.winoground
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20  # resident now
cases = get_benchmark("winoground")(sys.argv[1]).load()
keys = {r.key for c in cases for r in c.images}
after_keys = peak()
for c in cases:
    for r in c.images:
        r.load()
print(json.dumps({"cases": len(cases), "images": len(keys), "base": base, "keys": after_keys - base,
                  "decode": peak() - base}))
"""


def write(folder: Path, rows: int) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    rng = np.random.default_rng(0)

    def image() -> dict:
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(buf, format="PNG")
        return {"bytes": buf.getvalue(), "path": "x.png"}

    path = folder / "data" / "test-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    writer = None
    for start in range(0, rows, 100):
        n = min(100, rows - start)
        table = pa.table({
            "id": list(range(start, start + n)), "image_0": [image() for _ in range(n)],
            "image_1": [image() for _ in range(n)], "caption_0": ["a dog on a cat"] * n,
            "caption_1": ["a cat on a dog"] * n, "tag": ["Noun"] * n, "secondary_tag": [""] * n,
            "num_main_preds": [1] * n, "collapsed_tag": ["Object"] * n,
        })
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=100)
    writer.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200, help="rows of the small file (the large one has 4x)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (args.rows, 4 * args.rows):
            folder = Path(tmp) / f"wino-{rows}"
            size = write(folder, rows).stat().st_size / 2**20
            out = subprocess.run([sys.executable, "-c", CHILD, str(folder)], check=True, capture_output=True,
                                 text=True).stdout
            results.append((rows, size, json.loads(out.strip().splitlines()[-1])))
    print("rows  file MiB  images  peak RSS growth: load + keys  + decode all (MiB)")
    for rows, size, r in results:
        print(f"{rows:>5} {size:>9.0f} {r['images']:>7} {r['keys']:>21.0f} {r['decode']:>14.0f}")
    (_, s1, a), (_, s2, b) = results
    print(f"file size x{s2 / s1:.1f} -> memory x{b['keys'] / a['keys']:.2f} (load + keys), "
          f"x{b['decode'] / a['decode']:.2f} (decode all)")


if __name__ == "__main__":
    main()
