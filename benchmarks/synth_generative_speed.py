"""How fast SPEC's generative backend runs: ``python benchmarks/synth_generative_speed.py``.

For each text-to-image batch size (``--batch-sizes 1,8``: prompts per pipeline call), side by side:
instances per second (a class library rendered ahead in batches with the paper's prompt, then each
photo isolated by Grounding DINO + SAM) and candidate sets per second (whole SPEC cases from an empty
instance cache: the library rendered in batches as cases need it, the canvas, the inpainted
background shared by the set), and the ratio of each to the first batch size's. On CUDA (fp16) when
available, else the CPU. Without ``--t2i`` etc. it builds the tiny random models of
:mod:`spotdiff.testing.tiny_diffusion` (a smoke figure, not a real-model figure).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from spotdiff.synth.canvas.pipeline import Pipeline
from spotdiff.synth.canvas.spec import write_spec
from spotdiff.synth.diffusion.models import resolve_device
from spotdiff.synth.diffusion.stages import TextToImageSource, make_generative_stages
from spotdiff.testing import tiny_diffusion


def _tiny_models(root: Path) -> dict[str, str]:
    return {
        "t2i_model": str(tiny_diffusion.make_tiny_stable_diffusion(root / "sd")),
        "inpaint_model": str(tiny_diffusion.make_tiny_stable_diffusion(root / "inpaint", inpaint=True)),
        "detector": str(tiny_diffusion.make_tiny_grounding_dino(root / "gdino")),
        "segmenter": str(tiny_diffusion.make_tiny_sam(root / "sam")),
    }


def _source(loaded: TextToImageSource, cache: Path, batch_size: int) -> TextToImageSource:
    """A source sharing the loaded pipeline, with its own (empty) cache and batch size."""
    return TextToImageSource(
        loaded.pipeline,
        model=loaded.model,
        classes=loaded.classes,
        size=loaded.size,
        steps=loaded.steps,
        device=loaded.device,
        cache_dir=cache,
        library_size=loaded.library_size,
        batch_size=batch_size,
    )


def _measure(stages, root: Path, batch_size: int, image_size: int, sets: int) -> dict[str, float]:
    """Instances/s and sets/s at one batch size, each from an empty cache."""
    loaded, isolator, background = stages
    source = _source(loaded, root / "instances", batch_size)
    library = Pipeline(source, isolator, background, image_size).library
    start = time.perf_counter()
    source.render_library()
    t2i = time.perf_counter() - start
    instances = [inst for c in source.classes for inst in source.library(c)]
    for inst in instances:
        library.cutout(inst)
    per_instance = (time.perf_counter() - start) / len(instances)

    cases = _source(loaded, root / "sets-instances", batch_size)
    counts = {"absolute_spatial": sets, "count": sets}
    start = time.perf_counter()
    summary = write_spec(
        root / "spec",
        size=image_size,
        pipeline=Pipeline(cases, isolator, background, image_size),
        cls=False,
        subsets=list(counts),
        counts=counts,
    )
    elapsed = time.perf_counter() - start
    n_sets = sum(summary["cases"].values())
    return {
        "instances/s": 1 / per_instance,
        "photos/s": len(instances) / t2i,
        "calls": source.calls,
        "sets/s": n_sets / elapsed,
        "sets": n_sets,
        "set calls": cases.calls,
        "set photos": cases.rendered,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-sizes", default="1,8", help="text-to-image batch sizes compared (default 1,8)")
    p.add_argument("--classes", default="cat,dog,cup,apple", help="the object classes (comma-separated)")
    p.add_argument("--library-size", type=int, default=8, help="instances per class")
    p.add_argument("--sets", type=int, default=3, help="SPEC candidate sets per subset (absolute_spatial, count)")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--object-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--device", default="auto")
    for name in ("t2i", "inpaint", "detector", "segmenter"):
        p.add_argument(f"--{name}", help="a real model (hub name or folder); default: tiny random models")
    args = p.parse_args(argv)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        models = _tiny_models(Path(tmp) / "models")
        given = {"t2i_model": args.t2i, "inpaint_model": args.inpaint}
        given.update(detector=args.detector, segmenter=args.segmenter)
        models.update({k: v for k, v in given.items() if v})
        stages = make_generative_stages(
            **models,
            classes=args.classes.split(","),
            device=device,
            object_size=args.object_size,
            steps=args.steps,
            library_size=args.library_size,
        )
        _measure(stages, Path(tmp) / "warm-up", sizes[0], args.image_size, 1)  # loads the models: not counted
        results = {b: _measure(stages, Path(tmp) / f"batch-{b}", b, args.image_size, args.sets) for b in sizes}
    weights = "real" if any(given.values()) else "tiny random"
    load = "n/a" if not hasattr(os, "getloadavg") else "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print(
        f"{device}, {weights} weights, {args.steps} steps, objects {args.object_size}px, canvas {args.image_size}px, "
        f"{len(stages[0].classes)} classes x {args.library_size} instances; load average {load}"
    )
    first = results[sizes[0]]
    for b, r in results.items():
        print(
            f"  batch {b}: {r['instances/s']:.2f} instances/s (text-to-image + Grounding DINO + SAM; text-to-image "
            f"alone {r['photos/s']:.2f} photos/s in {r['calls']} calls); {r['sets/s']:.2f} candidate sets/s "
            f"({r['sets']} sets from an empty cache: {r['set photos']} photos in {r['set calls']} calls)"
        )
    for b in sizes[1:]:
        r = results[b]
        print(
            f"  batch {b} / batch {sizes[0]}: instances/s x{r['instances/s'] / first['instances/s']:.2f}, "
            f"text-to-image photos/s x{r['photos/s'] / first['photos/s']:.2f}, "
            f"sets/s x{r['sets/s'] / first['sets/s']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
