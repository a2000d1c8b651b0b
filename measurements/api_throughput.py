"""Throughput of ``api:`` (items per second) against a plain concurrent client at its best concurrency.

Both drive the same loopback OpenAI-compatible server (:class:`spotdiff.testing.openai_server.
ChatCompletionsServer`, a tiny chat VLM, in a process of its own as a real server is) with the same VQAScore
requests. The server answers a request it has seen from memory after a latency drawn from a log-normal
distribution (``--latency`` the median, ``--spread`` the sigma of its logarithm: most answers near the median,
a long tail of slow ones, as a serving engine's), requests waiting in parallel, so that the numbers measure the
clients, not the tiny model on the CPU: a warm-up round runs the model once per request first.

* ``api:`` scores every (image, text) pair through the engine at its default settings (batch size,
  concurrency, thread budget; a fresh temporary cache each round, so every pair is asked), or at
  ``--concurrency``; it also encodes each image as a PNG data URL, reads the responses and caches them;
* the plain client is ``openai.AsyncOpenAI`` with an ``asyncio.Semaphore``, sending the same requests
  (bodies built beforehand) at each concurrency of ``--plain``; the best one counts.

The sides alternate round by round (a busy machine slows all alike); each figure is the median of
``--repeats`` rounds. Prints the load average, items per second of each, and the ratio ``api: / best plain``
(goal >= 0.9). Usage: ``python measurements/api_throughput.py [--images 64] [--texts 4] [--latency 0.05]``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import os
import statistics
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from spotdiff.cases import PILImage
from spotdiff.diagnose.engine import Engine
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.chat import ChatVLM
from spotdiff.testing.openai_server import ChatCompletionsServer
from spotdiff.testing.tiny_models import tiny_images
from spotdiff.testing.tiny_vlms import make_tiny_vlm

NOUNS = "cat dog cup bowl horse car tree chair table ball".split()


def spotdiff_rate(base_url: str, pairs: list, concurrency: int | None) -> float:
    """Items per second of ``api:`` scoring ``pairs`` through the engine (nothing cached), at its defaults but
    for ``concurrency`` when given."""
    extra = f"?concurrency={concurrency}" if concurrency else ""
    scorer = load_scorer(f"api:tiny-vlm@{base_url}{extra}", ScorerOptions())
    start = time.perf_counter()
    with Engine(scorer, progress=False) as engine:
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


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def serve(conn: Connection, latency: float, spread: float) -> None:
    """The server process: a tiny Qwen2-VL behind :class:`ChatCompletionsServer`; sends its base URL, then answers
    ``"peak"`` (the most requests it has held at once since the last ask) until ``"stop"``."""
    with tempfile.TemporaryDirectory() as tmp:
        chat = ChatVLM.load(str(make_tiny_vlm("qwen2_vl", Path(tmp) / "vlm")), ScorerOptions(), "server")
        with ChatCompletionsServer(chat, delay=latency, memo=True, spread=spread) as server:
            conn.send(server.base_url)
            while conn.recv() == "peak":
                conn.send(server.peak)
                server.reset_peak()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--texts", type=int, default=4, help="texts per image")
    parser.add_argument("--latency", type=float, default=0.05, help="median seconds an answer waits, in parallel")
    parser.add_argument("--spread", type=float, default=0.6, help="sigma of the latency's logarithm (0: constant)")
    parser.add_argument("--concurrency", type=int, default=None, help="api:'s limit (default: its own)")
    parser.add_argument("--plain", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load average {load()}")

    images = [PILImage(im, name=f"i{k}") for k, im in enumerate(tiny_images(args.images))]
    texts = [f"a {a} next to a {b}" for a, b in zip(NOUNS, NOUNS[1:] + NOUNS[:1], strict=True)][: args.texts]
    pairs = [(ref, t) for ref in images for t in texts]
    conn, child = multiprocessing.get_context("spawn").Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(child, args.latency, args.spread))
    server.start()
    try:
        base_url = conn.recv()
        probe = load_scorer(f"api:tiny-vlm@{base_url}", ScorerOptions())
        parts, _, _ = probe._encode([ref.load() for ref in images])  # the requests api: sends, built beforehand
        bodies = [probe._body(p, probe.question.format(t), 1) for p in parts for t in texts]
        plain_rate(base_url, bodies, 16)  # warm-up: the model runs once per request ...
        spotdiff_rate(base_url, pairs, args.concurrency)  # ... and both clients import what they use
        ours: list[float] = []
        plain: dict[int, list[float]] = {c: [] for c in args.plain}
        peaks: list[int] = []
        for _ in range(args.repeats):
            conn.send("peak")
            conn.recv()
            ours.append(spotdiff_rate(base_url, pairs, args.concurrency))
            conn.send("peak")
            peaks.append(conn.recv())
            for c in args.plain:
                plain[c].append(plain_rate(base_url, bodies, c))
    finally:
        conn.send("stop")
        server.join()
    medians = {c: statistics.median(rates) for c, rates in plain.items()}
    mine = statistics.median(ours)
    best = max(medians, key=medians.get)
    p99 = args.latency * math.exp(2.326 * args.spread)
    print(f"{len(pairs)} pairs ({args.images} images x {args.texts} texts), server latency: median "
          f"{args.latency:.3f} s, log-normal sigma {args.spread} (p99 {p99:.3f} s)")  # fmt: skip
    for c, rate in medians.items():
        print(f"  plain AsyncOpenAI, concurrency {c:4d}: {rate:8.1f} items/s")
    print(f"  api: (engine, concurrency {args.concurrency or probe.concurrency}, batch size "
          f"{probe.options.batch_size}; the server saw up to {max(peaks)} requests at once): {mine:8.1f} items/s")
    print(f"ratio api: / best plain (concurrency {best}): {mine / medians[best]:.3f} (goal >= 0.9; medians of "
          f"{args.repeats}); load average {load()}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
