"""Evaluation-engine speed and memory, measured side by side in one run (issue "Diagnose").

Prints four figures, each a ratio of two measurements taken in this process on the same model and
the same items, so machine noise affects both sides alike:

1. harness throughput / raw model forward on the same unique items (goal >= 0.9);
2. speed-up over the per-record loop of the published SPEC code (each image->text record encodes
   its query image and K captions, each text->image record its query caption and K images) on
   SPEC-style 9 x 9 cases (goal >= 5x), and over the per-case loop of Winoground-style code on
   2 x 2 cases;
3. a warm-cache re-run against a cold run (goal >= 20x);
4. peak resident memory of text-only runs of 10k and 100k cases (goal: it streams, memory does
   not grow with the number of cases).

The model is a small random CLIP (96-pixel ViT, 4 layers, width 256) built from a config and
saved with ``save_pretrained``, loaded through ``hf-clip:PATH`` like any user checkpoint; the
memory runs use a tiny sentence-transformer. Usage: ``python benchmarks/eval_speed.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from spotdiff.cases import ArrayImage, Case  # noqa: E402
from spotdiff.diagnose.engine import Engine  # noqa: E402
from spotdiff.scorers import ScorerOptions, load_scorer  # noqa: E402
from spotdiff.testing.tiny_models import make_tiny_image_processor, make_tiny_sentence_transformer, make_tiny_tokenizer  # noqa: E402

WORDS = (
    "a the red blue green small large cat dog cup bowl left right above below two three four on of"
).split()


def make_small_clip(out: Path) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPModel

    tok = make_tiny_tokenizer(out, max_length=32)
    tower = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 4}
    config = CLIPConfig(
        text_config={**tower, "vocab_size": len(tok), "max_position_embeddings": 32, "pad_token_id": 0,
                     "bos_token_id": 2, "eos_token_id": 3},
        vision_config={**tower, "image_size": 96, "patch_size": 16},
        projection_dim=128,
    )  # fmt: skip
    torch.manual_seed(0)
    CLIPModel(config).eval().save_pretrained(out)
    make_tiny_image_processor(out, kind="clip", size=96)
    return out


def random_text(rng: np.random.Generator, n_words: int = 8) -> str:
    return " ".join(rng.choice(WORDS, size=n_words))


def spec_cases(n_cases: int, k: int, seed: int) -> list[Case]:
    """K x K cases with distinct images and captions (diagonal truth), as SPEC's sets are."""
    rng = np.random.default_rng(seed)
    cases = []
    for c in range(n_cases):
        images = tuple(
            ArrayImage(rng.integers(0, 256, (96, 96, 3), dtype=np.uint8), name=f"c{c}i{i}") for i in range(k)
        )
        texts = tuple(f"{random_text(rng)} {c} {i}" for i in range(k))
        cases.append(Case(f"c{c}", texts, np.eye(k, dtype=bool), images, {"subset": "s"}))
    return cases


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_of(rounds: int, *fns) -> list[float]:
    """The fastest of ``rounds`` interleaved timings of each function (noise hits both sides)."""
    times = [[timed(fn) for fn in fns] for _ in range(rounds)]
    return [min(col) for col in zip(*times, strict=True)]


def harness_vs_raw(model: str, n_images: int, n_texts: int) -> None:
    scorer = load_scorer(model, ScorerOptions(device="cpu", batch_size=64))
    cases = spec_cases(n_images // 8, 8, seed=1)
    refs = [r for c in cases for r in c.images]
    rng = np.random.default_rng(2)
    texts = [f"{random_text(rng)} {i}" for i in range(n_texts)]
    pil = [r.load() for r in refs]
    scorer.encode_images(pil[:64]), scorer.encode_texts(texts[:64])  # warm-up

    def raw() -> None:
        for s in range(0, len(pil), 64):
            scorer.encode_images(pil[s : s + 64])
        for s in range(0, len(texts), 64):
            scorer.encode_texts(texts[s : s + 64])

    def harness() -> None:
        engine = Engine(scorer, None, progress=False)
        engine.embed_images(refs)
        engine.embed_texts(texts)

    t_raw, t_harness = best_of(3, raw, harness)
    print(f"1. harness vs raw forward ({len(refs)} images + {len(texts)} texts, images decoded by the harness "
          f"only): raw {t_raw:.2f}s, harness {t_harness:.2f}s, throughput ratio {t_raw / t_harness:.2f} "
          f"(goal >= 0.9)")  # fmt: skip


def per_record_loop(scorer, case: Case) -> None:
    """The published SPEC evaluation: every record re-encodes its query and all its candidates."""
    images = [r.load() for r in case.images]
    for img in images:  # image -> text records
        scorer.encode_images([img])
        scorer.encode_texts(list(case.texts))
    for text in case.texts:  # text -> image records
        scorer.encode_texts([text])
        scorer.encode_images(images)


def per_case_loop(scorer, case: Case) -> None:
    """Winoground-style code: each case encodes its own images and texts once."""
    scorer.encode_images([r.load() for r in case.images])
    scorer.encode_texts(list(case.texts))


def speedup_over_loops(model: str, n9: int, n2: int) -> None:
    scorer = load_scorer(model, ScorerOptions(device="cpu", batch_size=64))
    for k, n, loop, label in ((9, n9, per_record_loop, "SPEC per-record loop"),
                              (2, n2, per_case_loop, "per-case loop")):  # fmt: skip
        cases = spec_cases(n, k, seed=10 + k)
        t_loop, t_engine = best_of(
            2,
            lambda cases=cases, loop=loop: [loop(scorer, c) for c in cases],
            lambda cases=cases: list(Engine(scorer, None, progress=False).case_matrices(cases, "image-text")),
        )
        print(f"2. {k}x{k} cases (n={n}): {label} {t_loop:.2f}s, engine {t_engine:.2f}s, "
              f"speed-up {t_loop / t_engine:.1f}x" + (" (goal >= 5x)" if k == 9 else ""))  # fmt: skip


def warm_vs_cold(model: str, n_cases: int, tmp: Path) -> None:
    scorer = load_scorer(model, ScorerOptions(device="cpu", batch_size=64))
    cases = spec_cases(n_cases, 9, seed=3)
    cache = tmp / "cache"

    def run() -> None:
        engine = Engine(scorer, cache, progress=False)
        list(engine.case_matrices(cases, "image-text"))
        engine.close()

    t_cold, t_warm = timed(run), timed(run)
    print(f"3. cold run {t_cold:.2f}s, warm-cache re-run {t_warm:.3f}s, speed-up {t_cold / t_warm:.0f}x "
          f"(goal >= 20x; {n_cases} 9x9 cases)")  # fmt: skip


_MEMORY_CHILD = """
import resource, sys
from pathlib import Path
from spotdiff.diagnose.runner import EvalConfig, run_eval
config = EvalConfig(model=sys.argv[1], benchmark="visla-generic", data=Path(sys.argv[2]), protocol="t2t",
                    use_store=True, store=Path(sys.argv[3]), out=Path(sys.argv[4]), progress=False, n_boot=200,
                    batch_size=256)
result = run_eval(config)
print(result.n_cases, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def write_visla_tsv(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = ["filename\tcaption\tsecond positive\tnegative_caption"]
    for i in range(n):
        p1 = f"{random_text(rng)} {i}"
        rows.append(f"{i:012d}.jpg\t{p1}\t{random_text(rng)} {i}\t{p1} not")
    path.write_text("\r\n".join(rows) + "\r\n", encoding="utf-8")


def memory_streaming(sizes: list[int], tmp: Path) -> None:
    model = "sentence-transformers:" + str(make_tiny_sentence_transformer(tmp / "st"))
    peaks = []
    for n in sizes:
        data = tmp / f"visla{n}"
        data.mkdir()
        write_visla_tsv(data / "Generic_VISLA.tsv", n, seed=n)
        out = subprocess.run(
            [sys.executable, "-c", _MEMORY_CHILD, model, str(data), str(tmp / f"runs{n}.sqlite"), str(tmp / f"o{n}")],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        cases, peak = out.stdout.split()[-2:]
        peaks.append(int(peak))
        print(f"4. text-only run, {int(cases):,} cases: peak RSS {int(peak)} MiB")
    print(f"   peak memory ratio {sizes[-1] // sizes[0]}x cases -> {peaks[-1] / peaks[0]:.2f}x memory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (CI smoke run)")
    args = parser.parse_args()
    q = args.quick
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        model = "hf-clip:" + str(make_small_clip(tmp / "clip"))
        print(json.dumps({"model": "small random CLIP (96px ViT-4L-256, text 4L-256)", "quick": q}))
        harness_vs_raw(model, 128 if q else 512, 512 if q else 2048)
        speedup_over_loops(model, 2 if q else 4, 64 if q else 256)
        warm_vs_cold(model, 8 if q else 24, tmp)
        memory_streaming([2_000, 20_000] if q else [10_000, 100_000], tmp)


if __name__ == "__main__":
    main()
