"""How close SPEC's generative engine comes to its models: ``python measurements/synth_generative_speed.py``.

For each batch size (``--batch-sizes 1,8``: prompts, photos or backgrounds per model call), side by side
in one run:

* the engine: ``write_spec`` from an empty cache (object library rendered in batches, Grounding DINO and
  SAM on each library batch, backgrounds made ahead in batches and expanded by inpainting, the canvas,
  the PNGs): candidate sets/s, images/s, and model photos/s;
* the limit: every model call the engine made (recorded: the same prompts, seeds, photos and boxes, the
  same batches) made again directly, in a plain loop, by the same loaded models; the engine reaches
  ``limit time / engine time`` of it;
* the peer: SPEC released no generation code (wjpoom/SPEC at 2826cdd holds the evaluation only), so
  there is no published loop to run on the same weights;
* ``--processes``: the command line in one process against ``torchrun --nproc_per_node 2`` (gloo), the
  same options and models, whole processes timed (start-up included).

On CUDA (fp16) when available, else the CPU, with each side's peak GPU memory
(``torch.cuda.max_memory_allocated``). Without ``--t2i`` etc. it builds the tiny random models of
:mod:`spotdiff.testing.tiny_diffusion` (``--preset tiny``: a smoke figure: their calls take milliseconds, so
the engine's own work, canvas and PNGs, weighs far more than it does with real weights; raise ``--steps``
and ``--object-size`` to weigh the models more). ``--preset sd15``: Stable-Diffusion-1.5-sized text-to-image
and inpainting pipelines with random weights (``sized_models.build_sd15``: built on the device, saved in fp16,
loaded through the folder path a user's ``--t2i DIR --inpaint DIR`` takes; the build, save and load seconds
printed), 512-pixel objects and canvas, 10 steps; Grounding DINO and SAM stay the tiny ones (their real sizes
are not built here). ``--json FILE``: the rows of ``measurements/rows.py`` (engine images/s against the plain
loop's, goal 0.9; below it, one engine pass profiled for what bounds it).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import rows
from sized_models import build_sd15
from spotdiff.synth.canvas.pipeline import Pipeline
from spotdiff.synth.canvas.spec import write_spec
from spotdiff.synth.diffusion.models import resolve_device
from spotdiff.synth.diffusion.stages import (
    GroundingSamIsolator,
    InpaintBackground,
    TextToImageSource,
    make_generative_stages,
)
from spotdiff.synth.output import progress
from spotdiff.testing import tiny_diffusion

SUBSETS = ("absolute_spatial", "count")
#: Each preset's defaults (a flag given on the command line wins).
PRESETS = {
    "tiny": {"image_size": 64, "object_size": 32, "steps": 2, "library_size": 8, "sets": 3, "rounds": 3},
    "sd15": {"image_size": 512, "object_size": 512, "steps": 10, "library_size": 4, "sets": 2, "rounds": 2},
}


def _tiny_models(root: Path) -> dict[str, str]:
    return {
        "t2i_model": str(tiny_diffusion.make_tiny_stable_diffusion(root / "sd")),
        "inpaint_model": str(tiny_diffusion.make_tiny_stable_diffusion(root / "inpaint", inpaint=True)),
        "detector": str(tiny_diffusion.make_tiny_grounding_dino(root / "gdino")),
        "segmenter": str(tiny_diffusion.make_tiny_sam(root / "sam")),
    }


class Recorder:
    """A model (pipeline, or an isolator's detect / segment) that records each call to replay it later."""

    def __init__(self, fn) -> None:
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kwargs):
        generators = kwargs.get("generator")
        seeds = [g.initial_seed() for g in generators] if isinstance(generators, list) else None
        self.calls.append((args, {k: v for k, v in kwargs.items() if k != "generator"}, seeds))
        return self.fn(*args, **kwargs)

    def replay(self) -> None:
        """Every recorded call again, in order, with fresh generators from the same seeds."""
        for args, kwargs, seeds in self.calls:
            if seeds is not None:
                kwargs = {**kwargs, "generator": [torch.Generator("cpu").manual_seed(s) for s in seeds]}
            self.fn(*args, **kwargs)


def _stages(loaded, root: Path, batch_size: int):
    """Fresh stages with empty caches at one batch size, sharing the loaded models, their calls recorded."""
    source0, isolator0, background0 = loaded
    t2i = Recorder(source0.pipeline)
    inpaint = Recorder(background0.inpaint)
    source = TextToImageSource(t2i, model=source0.model, classes=source0.classes, size=source0.size,
                               steps=source0.steps, device=source0.device, cache_dir=root / "cache",
                               library_size=source0.library_size, batch_size=batch_size, weights="bench")  # fmt: skip
    isolator = GroundingSamIsolator(isolator0.detector, isolator0.segmenter, device=isolator0.device)
    detect, segment = Recorder(isolator.detect), Recorder(isolator.segment)
    isolator.detect, isolator.segment = detect, segment
    background = InpaintBackground(t2i, inpaint, steps=background0.steps, device=background0.device,
                                   cache_dir=root / "cache", batch_size=batch_size)  # fmt: skip
    return (source, isolator, background), [t2i, inpaint, detect, segment]


def _engine(loaded, root: Path, batch_size: int, image_size: int, sets: int) -> tuple[float, dict, list, int]:
    """One engine run from empty caches: its seconds, ``write_spec``'s summary, the recorders of its model calls
    and the photos it rendered."""
    (source, isolator, background), recorders = _stages(loaded, root, batch_size)
    counts = dict.fromkeys(SUBSETS, sets)
    pipeline = Pipeline(source, isolator, background, image_size)
    start = time.perf_counter()
    with progress(False):
        summary = write_spec(root / "spec", size=image_size, pipeline=pipeline, cls=False, subsets=list(counts),
                             counts=counts)  # fmt: skip
    return time.perf_counter() - start, summary, recorders, source.rendered + background.rendered


def _timed(fn, device: str) -> tuple[float, int | None, object]:
    """The seconds of ``fn()`` (the device's queue drained before and after), on CUDA its peak allocated bytes,
    and what it returned."""
    cuda = str(device).startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    out = fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start, (torch.cuda.max_memory_allocated() if cuda else None), out


def _measure(loaded, root: Path, batch_size: int, image_size: int, sets: int, rounds: int = 1) -> dict:
    """The engine from empty caches, then the same model calls in a plain loop, alternating for ``rounds``
    rounds; the medians of each, and each side's peak GPU memory (the largest over the rounds; None off CUDA)."""
    device = loaded[0].device
    engine, limit, peaks = [], [], {"engine": [], "loop": []}
    for k in range(rounds):
        _, peak, (seconds, summary, recorders, photos) = _timed(
            lambda k=k: _engine(loaded, root / f"round-{k}", batch_size, image_size, sets), device
        )
        engine.append(seconds)
        peaks["engine"].append(peak)
        seconds, peak, _ = _timed(lambda r=recorders: [recorder.replay() for recorder in r], device)
        limit.append(seconds)
        peaks["loop"].append(peak)
    n_sets = sum(summary["cases"].values())
    e, m = statistics.median(engine), statistics.median(limit)
    return {
        "sets/s": n_sets / e,
        "images/s": summary["images"] / e,
        "images": summary["images"],
        "photos": photos,
        "calls": sum(len(r.calls) for r in recorders),
        "engine s": e,
        "limit s": m,
        "ratio": m / e,
        "peak bytes": {side: None if None in v else max(v) for side, v in peaks.items()},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes(models: dict[str, str], root: Path, args) -> dict[int, float]:
    """Whole-command seconds of ``spotdiff synth spec --backend generative`` in 1 process and under torchrun 2."""
    options = ["synth", "spec", "--backend", "generative", "--count", str(args.sets), "--subsets", ",".join(SUBSETS),
               "--no-cls", "--image-size", str(args.image_size), "--object-size", str(args.object_size),
               "--steps", str(args.steps), "--library-size", str(args.library_size), "--workers", "1", "-q",
               "--t2i", models["t2i_model"], "--inpaint", models["inpaint_model"], "--detector", models["detector"],
               "--segmenter", models["segmenter"]]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    timings = {}
    for n in (1, 2):
        launcher = [sys.executable, "-m", "spotdiff"]
        if n > 1:
            launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(n),
                        "--master_port", str(_free_port()), "-m", "spotdiff"]  # fmt: skip
        start = time.perf_counter()
        subprocess.run([*launcher, *options, "--out", str(root / f"p{n}")], check=True, env=env, capture_output=True)
        timings[n] = time.perf_counter() - start
    return timings


def _models(args, root: Path, device: str) -> tuple[dict[str, str], dict[str, float], str]:
    """The model folders (tiny ones unless given; ``--preset sd15``: SD-1.5-sized pipelines built on ``device``
    and saved), the seconds the sized ones took to build and save, and what the weights are."""
    models = _tiny_models(root)
    given = {"t2i_model": args.t2i, "inpaint_model": args.inpaint, "detector": args.detector,
             "segmenter": args.segmenter}  # fmt: skip
    seconds: dict[str, float] = {}
    weights = "real" if any(given.values()) else "tiny random"
    if args.preset == "sd15":
        for key, inpaint in (("t2i_model", False), ("inpaint_model", True)):
            if given[key] is None:
                folder = root / ("sd15-inpaint" if inpaint else "sd15")
                built = build_sd15(folder, device, inpaint=inpaint)
                seconds.update({f"{folder.name} {k}": v for k, v in built.items()})
                given[key] = str(folder)
        weights = "SD-1.5-sized random (Grounding DINO, SAM: tiny random unless given)"
    models.update({k: v for k, v in given.items() if v})
    return models, seconds, weights


def _rows(results: dict, loaded, root: Path, args, weights: str) -> list[dict]:
    """The ``--json`` rows: per batch size the engine's images/s against the plain loop's (goal 0.9; below it,
    one more engine pass profiled for what bounds it)."""
    out = []
    for b, r in results.items():
        bound = ""
        if r["ratio"] < rows.GOAL:
            run = lambda b=b: _engine(loaded, root / f"profile-{b}", b, args.image_size, args.sets)  # noqa: E731
            bound = rows.profile_bound(run, loaded[0].device)["bound"]
        out.append(rows.row("synthesis images/s", f"{args.preset}: {weights}", f"generative engine, batch {b}",
                            r["images/s"], "images/s", limit=r["images"] / r["limit s"],
                            limit_side="the same model calls in a plain loop", bound=bound, batch_size=b,
                            sets_per_s=r["sets/s"], engine_s=r["engine s"], loop_s=r["limit s"],
                            peak_bytes=r["peak bytes"], photos=r["photos"], calls=r["calls"], steps=args.steps,
                            image_size=args.image_size, object_size=args.object_size))  # fmt: skip
    return out


def _print(results: dict, device: str, weights: str, args, classes: int, seconds: dict) -> None:
    load = "n/a" if not hasattr(os, "getloadavg") else "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print(f"{device}, {weights} weights, {args.steps} steps, objects {args.object_size}px, canvas {args.image_size}px, "
          f"{classes} classes x {args.library_size} instances; load average {load}")  # fmt: skip
    if seconds:
        print("  models: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    for b, r in results.items():
        print(f"  batch {b} (medians of {args.rounds} rounds): engine {r['sets/s']:.2f} sets/s, "
              f"{r['images/s']:.2f} images/s ({r['photos']} model "
              f"photos and backgrounds, {r['calls']} model calls, {r['engine s']:.2f} s); the same calls in a plain "
              f"loop {r['limit s']:.2f} s: the engine reaches x{r['ratio']:.2f} of the models' own speed")  # fmt: skip
        if r["peak bytes"]["engine"] is not None:
            print(f"    peak GPU memory: engine {r['peak bytes']['engine'] / 2**30:.2f} GiB, plain loop "
                  f"{r['peak bytes']['loop'] / 2**30:.2f} GiB")  # fmt: skip
    sizes = list(results)
    for b in sizes[1:]:
        print(f"  batch {b} / batch {sizes[0]}: sets/s x{results[b]['sets/s'] / results[sizes[0]]['sets/s']:.2f}")
    print("  SPEC's own generation loop: not published (wjpoom/SPEC at 2826cdd holds the evaluation code only)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=tuple(PRESETS), default="tiny",
                   help="model sizes and the defaults below (tiny: 64px canvas, 32px objects, 2 steps, 8 instances, "
                        "3 sets, 3 rounds; sd15: 512px, 512px, 10 steps, 4 instances, 2 sets, 2 rounds)")  # fmt: skip
    p.add_argument("--batch-sizes", default="1,8", help="model batch sizes compared (default 1,8)")
    p.add_argument("--classes", default="cat,dog,cup,apple", help="the object classes (comma-separated)")
    p.add_argument("--library-size", type=int, help="instances per class")
    p.add_argument("--sets", type=int, help="SPEC candidate sets per subset (absolute_spatial, count)")
    p.add_argument("--image-size", type=int)
    p.add_argument("--object-size", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--device", default="auto")
    p.add_argument("--rounds", type=int, help="engine and plain loop alternated; medians")
    p.add_argument("--processes", action="store_true", help="also time 1 process against torchrun's 2")
    p.add_argument("--json", type=Path, help="write the figures as rows (measurements/rows.py) to this file")
    for name in ("t2i", "inpaint", "detector", "segmenter"):
        p.add_argument(f"--{name}", help="a real model (hub name or folder); default: the preset's random models")
    args = p.parse_args(argv)
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        models, seconds, weights = _models(args, Path(tmp) / "models", device)
        loaded = make_generative_stages(**models, classes=args.classes.split(","), device=device,
                                        object_size=args.object_size, steps=args.steps,
                                        library_size=args.library_size)  # fmt: skip
        start = time.perf_counter()
        _measure(loaded, Path(tmp) / "warm-up", sizes[0], args.image_size, 1)  # loads the models: not counted
        seconds["load and warm-up s"] = time.perf_counter() - start
        results = {
            b: _measure(loaded, Path(tmp) / f"batch-{b}", b, args.image_size, args.sets, args.rounds) for b in sizes
        }
        out = _rows(results, loaded, Path(tmp), args, weights) if args.json else []
        timings = _processes(models, Path(tmp), args) if args.processes else None
    _print(results, device, weights, args, len(loaded[0].classes), seconds)
    if timings:
        print(
            f"  whole command, 1 process {timings[1]:.1f} s, torchrun 2 processes {timings[2]:.1f} s: "
            f"x{timings[1] / timings[2]:.2f}"
        )
    rows.write_rows(args.json, "synth_generative_speed", out, device=device, preset=args.preset, seconds=seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
