"""Throughput of ``api:`` (items per second) against a plain concurrent client at its best concurrency.

Both drive the same loopback OpenAI-compatible server (:class:`spotdiff.testing.openai_server.
ChatCompletionsServer`, a tiny chat VLM) with the same VQAScore requests. The server answers a
request it has seen from memory after a fixed latency (``--latency``, requests waiting in parallel,
as a batching server's would), so the numbers measure the clients, not the tiny model on the CPU:
a warm-up round runs the model once per request first.

* ``api:`` scores every (image, text) pair through the engine (a fresh temporary cache each round,
  so every pair is asked), at its default concurrency (or ``--concurrency``);
* the plain client is ``openai.AsyncOpenAI`` with an ``asyncio.Semaphore``, at each concurrency of
  ``--plain`` (the best one counts).

Prints items per second of each (best of ``--repeats``) and the ratio ``api: / best plain``. Usage:
``python benchmarks/api_throughput.py [--images 32] [--texts 4] [--latency 0.05]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from spotdiff.cases import PILImage
from spotdiff.diagnose.engine import Engine
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.api import encode_image
from spotdiff.scorers.chat import ChatVLM
from spotdiff.testing.openai_server import ChatCompletionsServer
from spotdiff.testing.tiny_models import tiny_images
from spotdiff.testing.tiny_vlms import make_tiny_vlm

NOUNS = "cat dog cup bowl horse car tree chair table ball".split()


def spotdiff_rate(base_url: str, pairs: list, concurrency: int | None) -> float:
    """Items per second of ``api:`` scoring ``pairs`` through the engine (nothing cached)."""
    extra = f"?concurrency={concurrency}" if concurrency else ""
    scorer = load_scorer(f"api:tiny-vlm@{base_url}{extra}", ScorerOptions(batch_size=len(pairs)))
    start = time.perf_counter()
    with Engine(scorer, progress=False, workers=0) as engine:
        engine.pair_scores(pairs)
    return len(pairs) / (time.perf_counter() - start)


def plain_rate(base_url: str, bodies: list[dict], concurrency: int) -> float:
    """Items per second of a plain ``AsyncOpenAI`` client sending ``bodies``, ``concurrency`` at a time."""
    import openai

    async def run() -> None:
        client = openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url)
        gate = asyncio.Semaphore(concurrency)

        async def one(body: dict) -> None:
            async with gate:
                await client.chat.completions.create(**body)

        async with client:
            await asyncio.gather(*(one(b) for b in bodies))

    start = time.perf_counter()
    asyncio.run(run())
    return len(bodies) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--texts", type=int, default=4, help="texts per image")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds each answer waits, in parallel")
    parser.add_argument("--concurrency", type=int, default=None, help="api:'s limit (default: its own)")
    parser.add_argument("--plain", type=int, nargs="+", default=[4, 8, 16, 32, 64, 128])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        chat = ChatVLM.load(str(make_tiny_vlm("qwen2_vl", Path(tmp) / "vlm")), ScorerOptions(), "server")
        images = [PILImage(im, name=f"i{k}") for k, im in enumerate(tiny_images(args.images))]
        texts = [f"a {a} next to a {b}" for a, b in zip(NOUNS, NOUNS[1:] + NOUNS[:1], strict=True)][: args.texts]
        pairs = [(ref, t) for ref in images for t in texts]
        with ChatCompletionsServer(chat, delay=args.latency, memo=True) as server:
            probe = load_scorer(f"api:tiny-vlm@{server.base_url}", ScorerOptions())
            urls = [encode_image(ref.load(), probe.max_side)[0] for ref in images]
            bodies = [probe._body([u], probe.question.format(t), 1) for u in urls for t in texts]
            plain_rate(server.base_url, bodies, 16)  # warm-up: the model runs once per request
            ours, plain = 0.0, dict.fromkeys(args.plain, 0.0)
            for _ in range(args.repeats):  # alternating, best of each: a busy machine slows all alike
                ours = max(ours, spotdiff_rate(server.base_url, pairs, args.concurrency))
                for c in args.plain:
                    plain[c] = max(plain[c], plain_rate(server.base_url, bodies, c))
    best = max(plain, key=plain.get)
    print(f"{len(pairs)} pairs ({args.images} images x {args.texts} texts), server latency {args.latency:.3f} s")
    for c, rate in plain.items():
        print(f"  plain AsyncOpenAI, concurrency {c:4d}: {rate:8.1f} items/s")
    print(f"  api: (engine, concurrency {args.concurrency or probe.concurrency}): {ours:8.1f} items/s")
    print(f"ratio api: / best plain (concurrency {best}): {ours / plain[best]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
