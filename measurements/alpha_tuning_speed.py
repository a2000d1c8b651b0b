"""Time VisualGPTScore alpha tuning: 1,001 alphas x 10 random half splits on 10,000 cases.

Sec. 6 / Table 4a protocol (grid step 0.001, tune on a random half, test on the other, 10 times),
as :func:`spotdiff.diagnose.debias.cross_validate_alpha` runs it, plus building the per-case alpha curve of
an image-to-text top-1 benchmark (:func:`spotdiff.diagnose.debias.i2t_alpha_curve`). Prints wall-clock and
CPU time (best of ``--repeat``) and the machine's load, since a busy machine slows both.

    python measurements/alpha_tuning_speed.py [--cases 10000] [--negatives 1] [--splits 10]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from spotdiff.diagnose.debias import alpha_grid, cross_validate_alpha, i2t_alpha_curve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--negatives", type=int, default=1, help="negatives per case (ARO/SugarCrepe: 1)")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--step", type=float, default=0.001)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    alphas = alpha_grid(args.step)
    pos, pos_q = rng.normal(size=args.cases), rng.normal(size=args.cases)
    neg = rng.normal(size=(args.cases, args.negatives))
    neg_q = rng.normal(size=(args.cases, args.negatives)) - 0.5

    best = {"curve": (np.inf, np.inf), "tune": (np.inf, np.inf), "total": (np.inf, np.inf)}
    for _ in range(args.repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        curve = i2t_alpha_curve(pos, neg, pos_q, neg_q, alphas)
        w1, c1 = time.perf_counter(), time.process_time()
        cv = cross_validate_alpha(curve, alphas, n_splits=args.splits, seed=args.seed)
        w2, c2 = time.perf_counter(), time.process_time()
        for key, wall, cpu in (("curve", w1 - w0, c1 - c0), ("tune", w2 - w1, c2 - c1), ("total", w2 - w0, c2 - c0)):
            best[key] = (min(best[key][0], wall), min(best[key][1], cpu))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"alpha tuning: {args.cases} cases x {len(alphas)} alphas x {args.splits} splits "
        f"({os.cpu_count()} CPUs, load {load:.1f}, best of {args.repeat})"
    )
    for key, label in (("curve", "per-case alpha curve"), ("tune", "cross-validated tuning"), ("total", "total")):
        print(f"  {label:<24s} {best[key][0]:.3f} s wall  {best[key][1]:.3f} s CPU")
    print(f"  alpha* = {cv['alpha_star_mean']:.3f} +- {cv['alpha_star_std']:.3f}, test {cv['test_score_mean']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
