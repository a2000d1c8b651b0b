"""The text-to-image instance library of the generative backend (SPEC Sec. 3.2.1-3.2.2), in batches.

On the real diffusers pipeline with tiny weights (:mod:`spotdiff.testing.tiny_diffusion`): photos
rendered in batches of 3 equal those rendered one by one (each keeps its own seed), in fewer pipeline
calls; a second run serves the library from the disk cache with no pipeline call; batches finished
before a failure are kept and reused.
"""

from __future__ import annotations

import numpy as np
import pytest

from spotdiff.synth.diffusion.models import load_diffusion
from spotdiff.synth.diffusion.stages import TextToImageSource

#: the largest difference, in 8-bit levels, allowed between a photo rendered in a batch and alone:
#: floating-point noise of batched matrix products (on the CPU in fp32 it measured 0)
LEVELS = 2


class Counting:
    """Wraps a pipeline: records the number of prompts of each call; ``fail_at``: that call raises."""

    def __init__(self, pipeline, fail_at: int | None = None) -> None:
        self.pipeline = pipeline
        self.fail_at = fail_at
        self.calls: list[int] = []

    def __call__(self, **kwargs):
        self.calls.append(len(kwargs["prompt"]))
        if len(self.calls) == self.fail_at:
            raise RuntimeError("out of memory (injected)")
        return self.pipeline(**kwargs)


@pytest.fixture(scope="module")
def t2i(tiny_generative):
    return load_diffusion("text2image", tiny_generative.t2i, "cpu")


def _source(pipeline, cache, batch_size, model, library_size=3):
    return TextToImageSource(
        pipeline,
        model=model,
        classes=("cat", "dog"),
        size=32,
        steps=2,
        cache_dir=cache,
        library_size=library_size,
        batch_size=batch_size,
    )


def test_batches_of_three_equal_one_by_one_in_fewer_calls(t2i, tiny_generative, tmp_path):
    one, three = Counting(t2i), Counting(t2i)
    alone = _source(one, tmp_path / "alone", 1, tiny_generative.t2i)
    batched = _source(three, tmp_path / "batched", 3, tiny_generative.t2i)
    assert alone.render_library() == batched.render_library() == 6
    assert one.calls == [1] * 6 and three.calls == [3, 3]  # batches span classes when rendered ahead
    assert batched.calls == 2 and batched.rendered == 6
    # the cache key is the prompt and the seed, not the batch: the same file names
    names = sorted(p.name for p in (tmp_path / "alone").glob("*.png"))
    assert names == sorted(p.name for p in (tmp_path / "batched").glob("*.png")) and len(names) == 6
    photos = []
    for category in ("cat", "dog"):
        for inst in batched.library(category):
            a, b = np.asarray(alone.generate(inst), int), np.asarray(batched.generate(inst), int)
            assert a.shape == (32, 32, 3) and np.allclose(a, b, rtol=0, atol=LEVELS)
            photos.append(a)
    assert all(np.abs(photos[0] - p).max() > 10 for p in photos[1:])  # each seed its own photo


def test_a_case_draws_from_the_library_rendered_in_batches_then_reused(t2i, tiny_generative, tmp_path):
    counting = Counting(t2i)
    source = _source(counting, tmp_path / "cache", 3, tiny_generative.t2i, library_size=6)
    rng = np.random.default_rng(0)
    drawn = [source.sample(rng, category="cat") for _ in range(40)]
    library = source.library("cat")
    assert set(drawn) == set(library) and all(i.seed % 2 == 0 for i in drawn)
    assert {i.seed for i in source.library("cat", "train")}.isdisjoint(i.seed for i in library)
    source.generate(library[4])  # renders its run of three: library[3:6]
    assert counting.calls == [3] and len(list((tmp_path / "cache").glob("*.png"))) == 3
    for inst in drawn:
        source.generate(inst)
    assert counting.calls == [3, 3] and source.rendered == 6

    again = _source(None, tmp_path / "cache", 3, tiny_generative.t2i, library_size=6)
    for inst in drawn:
        again.generate(inst)
    assert again.calls == 0 and again.cache_hits == len(drawn) and again._pipeline is None  # no model loaded
    assert again.render_library(["cat"]) == 0


def test_batches_finished_before_a_failure_are_kept(t2i, tiny_generative, tmp_path):
    failing = Counting(t2i, fail_at=2)
    first = _source(failing, tmp_path / "cache", 2, tiny_generative.t2i)
    with pytest.raises(RuntimeError, match="injected"):
        first.render_library()
    kept = sorted((tmp_path / "cache").glob("*"))
    assert len(kept) == 2 and all(p.suffixes == [".png"] for p in kept)  # no half-written file

    counting = Counting(t2i)
    resumed = _source(counting, tmp_path / "cache", 2, tiny_generative.t2i)
    assert resumed.render_library() == 4 and counting.calls == [2, 2]
    clean = _source(Counting(t2i), tmp_path / "clean", 2, tiny_generative.t2i)
    clean.render_library()
    for inst in clean.library("cat") + clean.library("dog"):
        assert np.array_equal(np.asarray(resumed.generate(inst)), np.asarray(clean.generate(inst)))


def test_grounding_dino_and_sam_take_a_library_batch_at_once(t2i, tiny_generative, tmp_path):
    """The photos of a library batch go through Grounding DINO and SAM as one batch each (SPEC Sec. 3.2.2),
    and give the cut-outs that one photo at a time gives."""
    from spotdiff.synth.canvas.objects import ObjectLibrary
    from spotdiff.synth.diffusion.stages import GroundingSamIsolator

    source = _source(t2i, tmp_path / "cache", 3, tiny_generative.t2i)
    isolator = GroundingSamIsolator(tiny_generative.detector, tiny_generative.segmenter)
    calls = {"detector": 0, "segmenter": 0}
    for kind in calls:
        model = getattr(isolator, kind)[0]
        real = model.forward

        def counted(*args, _real=real, _kind=kind, **kwargs):
            calls[_kind] += 1
            return _real(*args, **kwargs)

        model.forward = counted
    library = ObjectLibrary(source, isolator)
    first = source.library("cat")[0]
    library.cutout(first)  # the whole block of three: one detector and one segmenter call
    assert calls == {"detector": 1, "segmenter": 1}
    for inst in source.library("cat"):
        batched = np.asarray(library.cutout(inst).image)
        alone = np.asarray(isolator.isolate(source.generate(inst), inst))
        assert batched.shape == alone.shape and np.array_equal(batched[..., 3], alone[..., 3])
    assert calls == {"detector": 4, "segmenter": 4}  # the block was not isolated again; three single calls


def test_backgrounds_are_made_in_batches_and_cached_by_content(tiny_generative, tmp_path):
    """SPEC Sec. 3.2.4's backgrounds (an initial one expanded by inpainting) made ahead in batches of three,
    each from its own generators, equal the ones made one at a time; a second run finds them in the cache."""
    from spotdiff.synth.diffusion.stages import make_generative_stages

    def stages(batch_size, cache):
        _source, _isolator, background = make_generative_stages(
            t2i_model=tiny_generative.t2i, inpaint_model=tiny_generative.inpaint, detector=tiny_generative.detector,
            segmenter=tiny_generative.segmenter, device="cpu", steps=2, cache_dir=cache, batch_size=batch_size,
        )  # fmt: skip
        return background

    rngs = lambda: [np.random.default_rng(k) for k in range(4)]  # noqa: E731 - four cases' generators
    batched = stages(3, tmp_path / "a")
    assert batched.prefetch(32, rngs()) == 4 and batched.calls == 4  # two batches, two pipelines each
    alone = stages(1, tmp_path / "b")
    for rng_a, rng_b in zip(rngs(), rngs(), strict=True):
        (a, scene_a), (b, scene_b) = batched.fill(32, rng_a), alone.fill(32, rng_b)
        assert scene_a == scene_b and np.allclose(np.asarray(a, int), np.asarray(b, int), rtol=0, atol=LEVELS)
    assert batched.calls == 4 and alone.calls == 8  # the prefetched backgrounds came from the cache
    again = stages(3, tmp_path / "a")
    assert again.prefetch(32, rngs()) == 0 and again.calls == 0 and again._inpaint is None
