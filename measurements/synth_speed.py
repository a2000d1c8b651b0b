"""How fast the SPEC canvas engine renders: ``python measurements/synth_speed.py [--cases 1000]``.

Renders ``--cases`` SPEC-style cases spread evenly over the six subsets (SPEC Sec. 3.3), writes
them in SPEC's format (PNG images, image2text/text2image/classification/metadata JSON, and the
cls/ images unless ``--no-cls``) into a temporary folder, and prints the wall-clock time and the
rates. The acceptance target is 1,000 cases in under 2 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from spotdiff.synth.canvas.pipeline import make_pipeline
from spotdiff.synth.canvas.spec import SUBSETS, write_spec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=1000, help="total SPEC cases (default 1000)")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-cls", action="store_true", help="skip the cls/ images (one per case)")
    p.add_argument("--out", type=Path, help="keep the dataset here instead of a temporary folder")
    p.add_argument("--budget", type=float, default=120.0, help="seconds allowed for 1,000 cases (exit 1 if slower)")
    args = p.parse_args(argv)

    base, extra = divmod(args.cases, len(SUBSETS))
    counts = {sub: base + (1 if i < extra else 0) for i, sub in enumerate(SUBSETS)}
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "spec"
        start = time.perf_counter()
        cpu0 = os.times()
        summary = write_spec(
            out,
            seed=args.seed,
            size=args.image_size,
            pipeline=make_pipeline(args.image_size),
            workers=args.workers,
            cls=not args.no_cls,
            counts=counts,
        )
        elapsed = time.perf_counter() - start
        cpu1 = os.times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    cpu += (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    cases = sum(summary["cases"].values())
    images = summary["images"]
    per_1000 = elapsed * 1000 / max(cases, 1)
    print(
        f"rendered {cases} SPEC cases ({images} images incl. {summary['cls_images']} cls, "
        f"{args.image_size}px) with {args.workers} worker(s) in {elapsed:.1f} s: "
        f"{cases / elapsed:.1f} cases/s, {images / elapsed:.1f} images/s; "
        f"{per_1000:.1f} s per 1,000 cases (budget {args.budget:.0f} s)"
    )
    # on a busy machine the wall clock measures the other processes too; the CPU time does not
    print(
        f"CPU time {cpu:.1f} s (all processes): {cpu * 1000 / max(cases, 1) / max(args.workers, 1):.1f} s per "
        f"1,000 cases on {args.workers} idle core(s); load average {os.getloadavg()[0]:.1f}"
    )
    return 0 if per_1000 <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
