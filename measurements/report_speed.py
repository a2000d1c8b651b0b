"""Report rendering speed: ``spotdiff report`` over 50 models x 10 benchmarks (500 runs), goal < 30 s.

Synthetic runs are written straight into a fresh run store (:func:`spotdiff.testing.synthetic_runs.fill_store`):
10 benchmarks in their own case shapes and protocols (Winoground and EqBen 2 x 2 group score, VISLA
T2T and I2T triplets, SugarCrepe and Crepe top-1 with alpha curves, VALSE match probabilities, SPEC
K x K, ARO VG-Relation macro accuracy, COCO gallery retrieval), 50 models each, ``--cases`` cases per
benchmark. Winoground, EqBen and ARO VG-Relation read fixture files with real images (ARO with bounding
box crops) through their loaders, and VISLA reads ``../shared/data/visla`` when present, so the failure
galleries load texts and make thumbnails as they would for real runs.

The timed part is what ``spotdiff report`` does: read the runs and units from the store, build the
tables with their paired significance tests, draw every figure, pick the galleries with thumbnails,
and write report.html, report.md, the figures and the CSV/LaTeX tables.

Usage: ``python measurements/report_speed.py [--models 50] [--benchmarks 10] [--cases 300] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from spotdiff.diagnose.store import RunStore  # noqa: E402
from spotdiff.report.build import build_report, write_report  # noqa: E402
from spotdiff.testing.formats import write_aro_vg_relation, write_eqben, write_winoground  # noqa: E402
from spotdiff.testing.synthetic_runs import SPECS, fill_store  # noqa: E402

BUDGET_S = 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--benchmarks", type=int, default=10, help=f"at most {len(SPECS)}")
    parser.add_argument("--cases", type=int, default=300, help="cases per benchmark")
    parser.add_argument("--jobs", type=int, help="figure-rendering processes (default: CPUs, at most 4)")
    parser.add_argument("--out", type=Path, help="keep the store and the report here (default: a temp dir)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        benchmarks = list(SPECS)[: args.benchmarks]
        data = {
            "winoground": write_winoground(work / "data" / "winoground", n=args.cases, seed=0),
            "eqben": write_eqben(work / "data" / "eqben", n=args.cases, seed=0),
            "aro-vg-relation": write_aro_vg_relation(work / "data" / "aro", n=args.cases, seed=0),
        }
        visla = ROOT.parent / "shared" / "data" / "visla"
        if visla.is_dir():
            data["visla-generic"] = data["visla-spatial"] = visla
        store_path = work / "runs.sqlite"
        store_path.unlink(missing_ok=True)
        store = RunStore(store_path)
        t0 = time.perf_counter()
        ids = fill_store(store, models=args.models, benchmarks=benchmarks, n_cases=args.cases, data=data)
        print(f"setup: {len(ids)} synthetic runs in {time.perf_counter() - t0:.1f} s (not timed)")
        store.close()

        t0 = time.perf_counter()
        store = RunStore(store_path)
        report = build_report(store, jobs=args.jobs)
        written = write_report(report, work / "report")
        elapsed = time.perf_counter() - t0
        store.close()
        size = written["html"].stat().st_size / 1e6
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items())
        cpu = ", ".join(f"{k} {v:.1f} s" for k, v in report.cpu_timings.items())
        print(
            f"runs: {len(report.runs)} ({args.models} models x {len(benchmarks)} benchmarks, {args.cases} cases each)"
        )
        print(f"stages, wall clock: {parts}")
        print(f"stages, CPU of the main process (figure workers not counted): {cpu}")
        print(f"report.html: {size:.1f} MB, {len(report.tables)} tables")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} at the end")
        verdict = "OK" if elapsed < BUDGET_S else "TOO SLOW"
        print(f"report rendered in {elapsed:.1f} s (goal < {BUDGET_S:.0f} s): {verdict}")
        if args.out:
            print(f"wrote {written['html']}")
        return 0 if elapsed < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
