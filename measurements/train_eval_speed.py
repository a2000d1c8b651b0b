"""Evaluation during training: the model in memory against a saved snapshot, timed side by side.

``spotdiff train --eval`` evaluates the weights being trained in memory
(:class:`spotdiff.optimize.evaluation.TrainingScorer`). The alternative, the peer's usual way, saves
a checkpoint (``save_pretrained``: weights, tokenizer, image processor) and evaluates it as a user's
model (``spotdiff eval --model hf-clip:SNAPSHOT``: ``from_pretrained`` then the same engine). Both go
through the same ``run_eval`` on the same data (a zero-shot set written by ``spotdiff synth
zeroshot``), without a cache; the script checks they give the same metrics and prints wall-clock
times (best of ``--repeat``) and their ratio.

    python measurements/train_eval_speed.py [--preset small|CONFIG.json] [--n 132] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.optimize.evaluation import TrainingScorer
from spotdiff.optimize.models import build_clip_from_config
from spotdiff.synth.canvas.zeroshot import write_zeroshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preset", default="small", help="--from-config preset (tiny, small) or a JSON file of CLIPConfig arguments"
    )
    parser.add_argument("--n", type=int, default=132, help="zero-shot images")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        core = build_clip_from_config(args.preset, seed=0).eval()
        size = core.image_processor.crop_size["height"]
        data = root / "zs"
        info = write_zeroshot(data, n=args.n, seed=5, size=size)

        def config(model: str) -> EvalConfig:
            return EvalConfig(model=model, benchmark="zeroshot-classification", data=data, device="cpu",
                              batch_size=64, use_store=False, progress=False, n_boot=1000)  # fmt: skip

        def in_memory() -> dict:
            scorer = TrainingScorer(core, "memory", device=torch.device("cpu"), batch_size=64, info={})
            return run_eval(config("memory"), scorer=scorer).metrics["all"]

        def snapshot() -> dict:
            folder = root / "snapshot"
            core.save(folder)
            return run_eval(config(core.eval_spec(folder))).metrics["all"]

        best = {"memory": float("inf"), "snapshot": float("inf")}
        results = {}
        order = [("memory", in_memory), ("snapshot", snapshot)]
        for r in range(args.repeat):
            for name, fn in order if r % 2 == 0 else order[::-1]:  # alternate, so neither always runs first
                t0 = time.perf_counter()
                results[name] = fn()
                best[name] = min(best[name], time.perf_counter() - t0)
    same = all(abs(results["memory"][m] - results["snapshot"][m]) < 1e-9 for m in ("top1", "top5"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    params = sum(p.numel() for p in core.parameters())
    print(f"evaluation during training: {args.preset} CLIP ({params / 1e6:.1f}M parameters), {args.n} zero-shot "
          f"images x {info['classes']} classes x {info['templates']} templates "
          f"({os.cpu_count()} CPUs, load {load:.1f}, best of {args.repeat})")  # fmt: skip
    print(f"  in memory (TrainingScorer)           {best['memory']:.2f} s")
    print(f"  snapshot (save + from_pretrained)    {best['snapshot']:.2f} s")
    print(f"  snapshot / in memory                 {best['snapshot'] / best['memory']:.2f}x")
    print(f"  same top-1 / top-5: {same} ({results['memory']['top1']:.2f} / {results['memory']['top5']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
