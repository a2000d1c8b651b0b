"""The SPEC canvas engine (SPEC Sec. 3.2, 3.3): definitions, measured labels, consistency,
determinism and the round trip through the ``spec`` loader."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from spotdiff.benchmarks.base import get_benchmark
from spotdiff.benchmarks.spec import SPEC_K
from spotdiff.errors import ConfigError, DataError
from spotdiff.synth import ENGINES
from spotdiff.synth.canvas.geometry import (
    GRID_POSITIONS,
    absolute_size_level,
    grid_position,
    relative_position,
    relative_size_level,
)
from spotdiff.synth.canvas.objects import (
    CATEGORIES,
    FolderObjectSource,
    ObjectLibrary,
    ProceduralObjectSource,
    draw_instance,
)
from spotdiff.synth.canvas.pipeline import Pipeline, make_pipeline
from spotdiff.synth.canvas.spec import LABELS, SUBSETS, SpecBuilder, caption, measured_label, write_spec
from spotdiff.synth.language import counted, pluralize, with_article

SIZE = 64  # the smallest size the engines promise, and the fastest


@lru_cache(maxsize=4)
def pipeline(size: int = SIZE) -> Pipeline:
    return make_pipeline(size)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---- definitions (SPEC Sec. 3.3) ----------------------------------------------------------------


def test_synthesized_candidate_sets_have_the_benchmarks_k():
    """Each subset's labels make the published candidate-set size K (SPEC Sec. 3.3, Table 1)."""
    assert {subset: len(LABELS[subset]) for subset in SUBSETS} == SPEC_K


def test_absolute_size_bands_follow_spec_eq1():
    assert absolute_size_level(0.0) == "small"
    assert absolute_size_level(0.2) == "small"
    assert absolute_size_level(0.3) is None  # safety gap
    assert absolute_size_level(0.4) == "medium"
    assert absolute_size_level(0.6) == "medium"
    assert absolute_size_level(0.7) is None
    assert absolute_size_level(0.8) == "large"
    assert absolute_size_level(1.0) == "large"


def test_relative_size_bands_follow_spec_eq2():
    assert relative_size_level(0.5) == "smaller than"
    assert relative_size_level(0.7) is None
    assert relative_size_level(0.9) == "equal to"
    assert relative_size_level(1.1) == "equal to"
    assert relative_size_level(1.5) is None
    assert relative_size_level(2.0) == "larger than"


def test_grid_and_relative_position():
    assert grid_position(10, 10, 90, 90) == "top-left"
    assert grid_position(45, 45, 90, 90) == "center"
    assert grid_position(89.9, 89.9, 90, 90) == "bottom-right"
    assert grid_position(30, 0, 90, 90) == "top"  # a centre on a cell border goes to the next cell
    assert relative_position((0, 0), (10, 1)) == "left of"
    assert relative_position((20, 0), (10, 1)) == "right of"
    assert relative_position((10, 0), (11, 20)) == "above"
    assert relative_position((10, 40), (11, 20)) == "below"
    assert relative_position((0, 0), (10, 10)) is None  # diagonal: ambiguous


def test_captions_differ_only_in_the_concept_words():
    for subset in SUBSETS:
        texts = [caption(subset, label, "apple", "car", "apples") for label in LABELS[subset]]
        assert len(set(texts)) == len(texts)
        assert all("apple" in t for t in texts)
    assert caption("count", 1, "bus", plural="buses") == "there is one bus in the image"
    assert caption("count", 3, "bus", plural="buses") == "there are three buses in the image"
    assert caption("relative_size", "equal to", "apple", "owl") == "a photo of an apple that is the same size as an owl"
    assert caption("relative_spatial", "left of", "umbrella", "car") == "a photo of an umbrella to the left of a car"
    assert with_article("apple") == "an apple" and pluralize("strawberry") == "strawberries"
    assert counted(2, "fish", "fish") == "two fish"


# ---- the object library -------------------------------------------------------------------------


def test_library_has_20_plus_distinct_nameable_categories():
    assert len(CATEGORIES) >= 20
    source = ProceduralObjectSource(resolution=128)
    rng = np.random.default_rng(0)
    digests = set()
    for name in CATEGORIES:
        inst = source.sample(rng, category=name)
        image = draw_instance(inst, 128)
        alpha = np.asarray(image.getchannel("A"))
        assert (alpha >= 128).mean() > 0.05, name  # something is drawn
        assert (alpha == 0).any(), name  # and it is a cut-out, not a full square
        colours = np.asarray(image.convert("RGB"))[alpha >= 128]
        assert len(np.unique(colours.reshape(-1, 3), axis=0)) >= 3, name  # more than a flat blob
        digests.add(hashlib.sha256(image.tobytes()).hexdigest())
    assert len(digests) == len(CATEGORIES)


def test_instances_are_deterministic_and_splits_are_disjoint():
    source = ProceduralObjectSource(resolution=96)
    a = source.sample(np.random.default_rng(5), split="test")
    b = source.sample(np.random.default_rng(5), split="test")
    assert a == b and draw_instance(a, 96).tobytes() == draw_instance(b, 96).tobytes()
    test_seeds = {source.sample(np.random.default_rng(i), split="test").seed % 2 for i in range(20)}
    train_seeds = {source.sample(np.random.default_rng(i), split="train").seed % 2 for i in range(20)}
    assert test_seeds == {0} and train_seeds == {1}


def test_fit_area_hits_the_target_on_measured_pixels():
    lib = ObjectLibrary(ProceduralObjectSource(resolution=128))
    inst = lib.source.sample(np.random.default_rng(1), category="apple")
    for target in (100.0, 400.0, 1500.0):
        placed = lib.fit_area(inst, target, max_w=64, max_h=64)
        assert abs(placed.box_area - target) / target < 0.12


# ---- property tests: labels match geometry, candidates differ only in the property ------------


def _check_case(subset: str, case, size: int) -> None:
    assert len(case.renders) == len(LABELS[subset]) == len(case.texts)
    for label, r in zip(case.labels, case.renders, strict=True):
        # measured from the label map, independently of the engine's own bookkeeping
        lm = r.label_map
        for i, obj in enumerate(r.objects):
            ys, xs = np.nonzero(lm == i + 1)
            assert len(xs) == obj.mask_area == obj.full_mask_area  # fully visible, never occluded
            assert obj.bbox == (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
        assert measured_label(subset, r, size) == label
        targets = r.of_role("target")
        if subset == "absolute_size":
            assert absolute_size_level(targets[0].box_area / size**2) == label
        if subset == "count":
            assert len(targets) == label
            boxes = [o.bbox for o in r.objects]
            for k, a in enumerate(boxes):  # count without overlaps
                for b in boxes[k + 1 :]:
                    assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
    # pixel-level consistency: outside the masks of the objects that differ (as the label maps measure them,
    # so the anti-aliased rim of a cut-out counts as outside), two candidates are identical
    arrays = [np.asarray(r.image) for r in case.renders]
    for i in range(len(case.renders)):
        for j in range(i + 1, len(case.renders)):
            pi, pj = set(case.renders[i].placements), set(case.renders[j].placements)
            changed = pi ^ pj
            assert changed, "two candidates must differ"
            assert all(p.role == "target" for p in changed)  # only the object under test changes
            inside = np.zeros((size, size), dtype=bool)
            for r in (case.renders[i], case.renders[j]):
                ids = [k + 1 for k, p in enumerate(r.placements) if p in changed]
                inside |= np.isin(r.label_map, ids)
            assert np.array_equal(arrays[i][~inside], arrays[j][~inside])
    # identical appearance: fully opaque object pixels are the cut-out's own pixels in every image
    lib = pipeline(size).library
    for r, arr in zip(case.renders, arrays, strict=True):
        for p in r.placements:
            layer = np.asarray(lib.placed(p.instance, p.w, p.h).layer)
            opaque = layer[..., 3] == 255
            ys, xs = np.nonzero(opaque)
            assert np.array_equal(arr[ys + p.y, xs + p.x], layer[ys, xs, :3])


@settings(max_examples=48, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subset=st.sampled_from(SUBSETS), seed=st.integers(0, 2**31 - 1), index=st.integers(0, 10_000))
def test_every_label_matches_measured_geometry_and_only_the_property_changes(subset, seed, index):
    case = SpecBuilder(pipeline(SIZE), seed).build(subset, index)
    _check_case(subset, case, SIZE)


@pytest.mark.parametrize("subset", SUBSETS)
def test_cases_at_224(subset):
    case = SpecBuilder(pipeline(224), 3).build(subset, 0)
    _check_case(subset, case, 224)
    assert case.renders[0].image.size == (224, 224)


def test_background_is_shared_within_a_case_and_varies_between_cases():
    b = SpecBuilder(pipeline(SIZE), 0)
    c0, c1 = b.build("existence", 0), b.build("existence", 1)
    assert c0.background.tobytes() != c1.background.tobytes()
    # the "no" image is the background with only the distractor on it
    r = c0.renders[0]
    assert [p.role for p in r.placements] == ["distractor"]


# ---- writing and reading back -------------------------------------------------------------------


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("spec") / "data"
    write_spec(out, n=2, seed=11, size=SIZE, workers=1)
    return out


def test_spec_layout_and_schema(spec_dir):
    for subset in SUBSETS:
        folder = spec_dir / subset
        i2t = json.loads((folder / "image2text.json").read_text())
        t2i = json.loads((folder / "text2image.json").read_text())
        k = len(LABELS[subset])
        assert len(i2t) == len(t2i) == 2 * k
        for rec in i2t:
            assert set(rec) == {"query", "keys", "label"}
            assert (folder / rec["query"]).is_file() and not rec["query"].startswith("/")
            assert len(rec["keys"]) == k
        for rec in t2i:
            assert all((folder / p).is_file() for p in rec["keys"])
        cls = json.loads((folder / "classification.json").read_text())
        assert set(cls["classes"]) == set(CATEGORIES)
        assert len(cls["items"]) == 2 * k and all(it["label"] in cls["classes"] for it in cls["items"])
        meta = json.loads((folder / "metadata.json").read_text())
        for case in meta["cases"]:
            for m in case["measured"]:
                assert m["measured"] == m["label"]
    cls_i2t = json.loads((spec_dir / "cls" / "image2text.json").read_text())
    assert len(cls_i2t) == 12 and len(cls_i2t[0]["keys"]) == len(CATEGORIES)
    with Image.open(spec_dir / "cls" / cls_i2t[0]["query"]) as im:
        assert im.size == (SIZE, SIZE)


def test_spec_round_trip_through_the_loader(spec_dir):
    loader = get_benchmark("spec")(spec_dir)
    cases = loader.load()
    assert len(cases) == 12
    by_subset = {}
    for case in cases:
        by_subset.setdefault(case.subset, []).append(case)
        k = len(LABELS[case.subset])
        assert case.shape == (k, k) and case.tags["form"] == "set"
        assert np.array_equal(case.truth, np.eye(k, dtype=bool))
        for image in case.images:
            assert image.load().size == (SIZE, SIZE)
    assert set(by_subset) == set(SUBSETS)
    # the loader pairs each image with the caption the engine wrote for it
    meta = json.loads((spec_dir / "count" / "metadata.json").read_text())["cases"]
    texts = {tuple(sorted(c["texts"])): dict(zip(c["images"], c["texts"], strict=True)) for c in meta}
    for case in by_subset["count"]:
        mapping = texts[tuple(sorted(case.texts))]
        for image, text in zip(case.images, case.texts, strict=True):
            assert mapping[str(Path(image.path).relative_to(spec_dir / "count"))] == text


def test_same_seed_gives_byte_identical_output_whatever_the_workers(tmp_path, spec_dir):
    write_spec(tmp_path / "a", n=2, seed=11, size=SIZE, workers=2)
    assert tree_digest(tmp_path / "a") == tree_digest(spec_dir)
    write_spec(tmp_path / "b", n=2, seed=12, size=SIZE, workers=1, subsets=["count"], cls=False)
    assert tree_digest(tmp_path / "b")["count/image2text.json"] != tree_digest(spec_dir)["count/image2text.json"]


def test_folder_of_user_cutouts(tmp_path):
    src = ProceduralObjectSource(resolution=96)
    rng = np.random.default_rng(0)
    (tmp_path / "objs" / "red fox").mkdir(parents=True)
    for k in range(2):
        draw_instance(src.sample(rng, category="cat"), 96).save(tmp_path / "objs" / "red fox" / f"{k}.png")
        draw_instance(src.sample(rng, category="cup"), 96).save(tmp_path / "objs" / f"mug_{k}.png")
        draw_instance(src.sample(rng, category="bus"), 96).save(tmp_path / "objs" / f"bus{k}.png")
    folder = FolderObjectSource(tmp_path / "objs")
    assert folder.categories() == ["bus", "mug", "red fox"]
    p = make_pipeline(SIZE, objects=tmp_path / "objs")
    for subset in ("relative_spatial", "count"):
        case = SpecBuilder(p, 2).build(subset, 0)
        assert {i.category for i in case.instances.values()} <= {"bus", "mug", "red fox"}
    from spotdiff.synth.canvas.eqben import EqbenBuilder

    pair = EqbenBuilder(p, 2).build("eqbenkubric_attr", 0)  # no colours known: the size changes
    assert pair.changed == ["object_size"]
    Image.new("RGB", (8, 8)).save(tmp_path / "objs" / "flat_0.png")
    flat = FolderObjectSource(tmp_path / "objs")
    inst = flat.sample(np.random.default_rng(0), category="flat")
    with pytest.raises(DataError, match="alpha"):
        flat.generate(inst)


def test_errors_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="image-size"):
        make_pipeline(16)
    with pytest.raises(ConfigError, match="unknown SPEC subset"):
        write_spec(tmp_path / "x", n=1, size=SIZE, subsets=["sizes"])
    with pytest.raises(ConfigError, match="backend"):
        make_pipeline(64, backend="magic")
    with pytest.raises(ConfigError, match="does not exist"):
        FolderObjectSource(tmp_path / "nope")
    assert set(ENGINES.names()) >= {"spec", "eqben", "visla", "corpus"}
    assert GRID_POSITIONS[4] == "center"


def test_an_engine_is_declared_in_its_class_statement():
    """Options, loader and review writer as class keywords, the description its docstring; a config with
    --from-review needs a writer; a canvas engine's own options reach its writer by name."""
    from dataclasses import dataclass

    from spotdiff.synth import CanvasConfig, ReviewOptions, SynthEngine
    from spotdiff.synth.canvas.eqben import EqbenConfig, EqbenEngine, write_from_review

    assert (EqbenEngine.config_class, EqbenEngine.benchmark, EqbenEngine.reviewed) == (
        EqbenConfig, "eqben", write_from_review,
    )  # fmt: skip
    assert EqbenEngine.description.startswith("EqBen-Kubric-style location") and "\n" not in EqbenEngine.description

    @dataclass(frozen=True)
    class Reviewed(ReviewOptions, CanvasConfig):
        extra: int = 3

    with pytest.raises(TypeError, match="names no reviewed writer"):

        class Unwritable(SynthEngine, config=Reviewed):
            def make(self, out: Path) -> dict:
                return {}

    arguments = Reviewed(n=2, seed=5, image_size=32, workers=1).arguments()
    assert {k: v for k, v in arguments.items() if k != "pipeline"} == {
        "n": 2, "seed": 5, "size": 32, "workers": 1, "extra": 3,
    }  # fmt: skip
    assert EqbenConfig(subsets=("location",), sd_pairs=4).arguments().keys() >= {"subsets", "sd_pairs", "pipeline"}
