"""Writing and reading embeddings through the cache, in the file layout spotdiff creates and in the one it created
before (issue 34), side by side in one run.

Both sides run the real :class:`spotdiff.diagnose.cache.Cache` (``put`` of every row, one ``commit``, then one
``get`` of every key, in a fresh connection): the only difference is the file it opens.

* today's layout: a rowid table (the primary key an index beside it) in pages of ``PAGE_SIZE`` bytes;
* the layout before: the same columns in a ``WITHOUT ROWID`` table, in SQLite's default 4 KiB pages (a file
  made so before the cache opens it, as an older spotdiff left it).

Rows are ``--dim`` float32 (512: CLIP ViT-B; 384: MiniLM), ``--rows`` of them under text keys, in WAL mode as the
main cache is. Rounds alternate the two sides; the medians are printed with the files' sizes (WAL folded in) and
a last line ``write ratio W; read ratio R; size ratio S`` (before / today: above 1, today is better).

    python measurements/cache_write_speed.py [--rows 30000] [--dim 512] [--rounds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np

from spotdiff.diagnose.cache import CACHE_FILE, PAGE_SIZE, Cache

BEFORE = (
    "CREATE TABLE items (model TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, "
    "digest INTEGER, PRIMARY KEY (model, kind, key)) WITHOUT ROWID"
)


def side(folder: Path, rows: dict[str, np.ndarray], before: bool) -> tuple[float, float, int]:
    """Seconds to put and commit ``rows``, seconds to read them back, and the file's bytes."""
    folder.mkdir(parents=True)
    if before:
        with sqlite3.connect(folder / CACHE_FILE) as db:
            db.execute(BEFORE)
    start = time.perf_counter()
    with Cache(folder, "model") as cache:
        cache.put("text", rows.items())
        cache.commit()
    written = time.perf_counter() - start
    start = time.perf_counter()
    with Cache(folder, "model") as cache:
        got = cache.get("text", list(rows))
        cache.checkpoint()  # the write-ahead log folded into the file, whose size is then the data's
    read = time.perf_counter() - start
    assert len(got) == len(rows)
    return written, read, os.path.getsize(folder / CACHE_FILE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = {
        f"text:{hashlib.sha256(str(i).encode()).hexdigest()}": rng.standard_normal(args.dim).astype(np.float32)
        for i in range(args.rows)
    }
    print(f"{args.rows:,} rows of {args.dim} float32 ({args.rows * args.dim * 4 / 1e6:.0f} MB), page size "
          f"{PAGE_SIZE}, load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    results: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for before in (False, True):
                results[before].append(side(Path(tmp) / f"{k}-{before}", rows, before))
    med = {b: [float(np.median([r[i] for r in results[b]])) for i in range(3)] for b in results}
    for before, name in ((False, "today (rowid table)"), (True, "before (WITHOUT ROWID, 4 KiB pages)")):
        w, r, size = med[before]
        print(f"{name}: write {args.rows / w:,.0f} rows/s ({w:.2f}s), read {args.rows / r:,.0f} rows/s ({r:.2f}s), "
              f"file {size / 1e6:.0f} MB")  # fmt: skip
    ratios = [med[True][i] / med[False][i] for i in range(3)]
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("write ratio {:.2f}; read ratio {:.2f}; size ratio {:.2f}".format(*ratios))


if __name__ == "__main__":
    main()
