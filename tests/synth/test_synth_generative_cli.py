"""``spotdiff synth spec --backend generative`` on tiny real models, scored by ``spotdiff eval``.

The SPEC set goes through the real diffusers text-to-image pipeline (the paper's object prompt),
Grounding DINO + SAM isolation, the canvas and the progressive inpainted background (SPEC Sec. 3.2),
is written in the published format, and a second run, rendering one prompt per call instead of
three, reuses the on-disk instance library and writes the same bytes.
"""

from __future__ import annotations

import json

from spotdiff.commands import main
from spotdiff.synth.canvas.spec import SUBSETS


def _synth(models, out, cache, batch_size):
    argv = ["synth", "spec", "--backend", "generative", "--out", str(out), "--n", "1"]
    argv += ["--subsets", "absolute_spatial,count", "--no-cls", "--image-size", "64", "--workers", "1"]
    argv += ["--t2i", models.t2i, "--inpaint", models.inpaint, "--detector", models.detector]
    argv += ["--segmenter", models.segmenter, "--steps", "2", "--object-size", "32"]
    argv += ["--instance-cache", str(cache), "--device", "cpu", "--library-size", "4", "--batch-size", str(batch_size)]
    return main(argv)


def test_generative_spec_set_is_written_cached_and_scored(tiny_generative, tmp_path):
    from spotdiff.testing import tiny_models

    cache = tmp_path / "instances"
    assert _synth(tiny_generative, tmp_path / "spec", cache, 3) == 0
    record = json.loads((tmp_path / "spec" / "synth.json").read_text())
    assert record["options"]["t2i"] == tiny_generative.t2i and record["options"]["steps"] == 2
    # the batch size does not change a byte, so a run may resume under another one: not part of the options
    assert "batch_size" not in record["options"] and record["options"]["library_size"] == 4
    pipeline = record["summary"]["pipeline"]
    assert pipeline["object_source"] == "text-to-image" and pipeline["isolator"] == "grounding-dino+sam"
    assert pipeline["background"] == "inpaint"
    cached = sorted(p.name for p in cache.glob("*.png"))
    assert cached and set(SUBSETS) >= {"absolute_spatial", "count"}

    assert _synth(tiny_generative, tmp_path / "again", cache, 1) == 0  # every instance from the cache
    assert sorted(p.name for p in cache.glob("*.png")) == cached
    for image in (tmp_path / "spec").rglob("*.png"):
        assert image.read_bytes() == (tmp_path / "again" / image.relative_to(tmp_path / "spec")).read_bytes()

    clip = tiny_models.make_tiny_clip(tmp_path / "clip")
    res = tmp_path / "res"
    argv = ["eval", "--model", f"hf-clip:{clip}", "--benchmark", "spec", "--data", str(tmp_path / "spec")]
    argv += ["--out", str(res), "--no-store", "--no-cache", "-q", "--n-boot", "10", "--device", "cpu"]
    assert main(argv) == 0
    metrics = json.loads((res / "metrics.json").read_text())
    assert set(metrics["metrics"]) >= {"all", "absolute_spatial", "count"}
