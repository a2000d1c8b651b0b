"""How fast SPEC's generative backend runs: ``python benchmarks/synth_generative_speed.py``.

Instances per second (text-to-image with the paper's prompt, then Grounding DINO + SAM isolation)
and candidate sets per second (whole SPEC cases: instances, canvas, the inpainted background shared
by the set), on CUDA (fp16) when available, else the CPU. Without ``--t2i`` etc. it builds the tiny
random models of :mod:`spotdiff.testing.tiny_diffusion` (a smoke figure, not a real-model figure).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from spotdiff.synth.generative import resolve_device
from spotdiff.synth.pipeline import make_pipeline
from spotdiff.synth.spec import write_spec
from spotdiff.testing import tiny_diffusion


def _tiny_models(root: Path) -> dict[str, str]:
    return {
        "t2i_model": str(tiny_diffusion.make_tiny_stable_diffusion(root / "sd")),
        "inpaint_model": str(tiny_diffusion.make_tiny_stable_diffusion(root / "inpaint", inpaint=True)),
        "detector": str(tiny_diffusion.make_tiny_grounding_dino(root / "gdino")),
        "segmenter": str(tiny_diffusion.make_tiny_sam(root / "sam")),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--instances", type=int, default=8, help="object instances to generate and isolate")
    p.add_argument("--sets", type=int, default=3, help="SPEC candidate sets per subset (absolute_spatial, count)")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--object-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--device", default="auto")
    for name in ("t2i", "inpaint", "detector", "segmenter"):
        p.add_argument(f"--{name}", help="a real model (hub name or folder); default: tiny random models")
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        models = _tiny_models(Path(tmp) / "models")
        given = {"t2i_model": args.t2i, "inpaint_model": args.inpaint}
        given.update(detector=args.detector, segmenter=args.segmenter)
        models.update({k: v for k, v in given.items() if v})
        options = {**models, "steps": args.steps, "object_size": args.object_size, "device": device}
        pipeline = make_pipeline(args.image_size, backend="generative", generative_options=options)
        rng = np.random.default_rng(0)
        instances = [pipeline.source.sample(rng) for _ in range(args.instances + 1)]
        pipeline.library.cutout(instances.pop())  # loads the models: not timed
        start = time.perf_counter()
        for inst in instances:
            pipeline.library.cutout(inst)
        per_instance = (time.perf_counter() - start) / max(len(instances), 1)
        counts = {"absolute_spatial": args.sets, "count": args.sets}
        start = time.perf_counter()
        summary = write_spec(
            Path(tmp) / "spec", size=args.image_size, pipeline=pipeline, cls=False, subsets=list(counts), counts=counts
        )
        elapsed = time.perf_counter() - start
    sets = sum(summary["cases"].values())
    weights = "real" if any(given.values()) else "tiny random"
    print(
        f"{device}, {weights} weights, {args.steps} steps, objects {args.object_size}px, canvas {args.image_size}px: "
        f"{1 / per_instance:.2f} instances/s (text-to-image + Grounding DINO + SAM); "
        f"{sets / elapsed:.2f} candidate sets/s ({sets} sets, {summary['images']} images in {elapsed:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
