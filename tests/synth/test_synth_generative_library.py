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
