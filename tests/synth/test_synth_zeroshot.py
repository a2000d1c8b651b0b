"""``spotdiff synth zeroshot``: balanced classes, held-out instances, and a set the zero-shot loader reads."""

from __future__ import annotations

import json

from spotdiff.benchmarks import get_benchmark
from spotdiff.synth.canvas.zeroshot import TEMPLATES, write_zeroshot


def test_zeroshot_set_round_trips_through_the_loader(tmp_path):
    info = write_zeroshot(tmp_path / "zs", n=8, seed=2, size=64)
    bench = get_benchmark("zeroshot-classification")(tmp_path / "zs")
    cases = bench.load()
    assert info["images"] == len(cases) == 8 and bench.format == "folder"
    assert cases[0].prompts == TEMPLATES and len(cases[0].texts) == info["classes"]
    meta = [json.loads(line) for line in (tmp_path / "zs" / "metadata.jsonl").read_text().splitlines()]
    assert len({m["label"] for m in meta}) == 8  # the first images take the classes in turn
    assert all(m["object"]["seed"] % 2 == 0 for m in meta)  # the test half of the instance seeds
    by_image = {f"test/{m['image']}": m["label"] for m in meta}
    assert all(by_image[c.id] == c.tags["label"] for c in cases)
    assert all(c.images[0].load().size == (64, 64) for c in cases)
    again = tmp_path / "again"
    write_zeroshot(again, n=8, seed=2, size=64)
    assert (again / "metadata.jsonl").read_bytes() == (tmp_path / "zs" / "metadata.jsonl").read_bytes()
