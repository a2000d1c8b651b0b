"""EqBen pairs (EqBen App. B.4/B.5), VISLA triplets (VISLA Sec. 3.3, App. C.1) and the training
corpus: one-slot caption changes, measured relations, pixel-level minimality, loader round trips."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from spotdiff.benchmarks.base import get_benchmark
from spotdiff.errors import DataError
from spotdiff.synth.canvas.corpus import write_corpus
from spotdiff.synth.canvas.eqben import (
    COUNTS,
    LOCATIONS,
    RELATION,
    SUBSETS,
    VERBS,
    EqbenBuilder,
    changed_slots,
    sd_caption_pair,
    write_eqben,
)
from spotdiff.synth.canvas.pipeline import make_pipeline
from spotdiff.synth.canvas.spec import write_spec
from spotdiff.synth.output import case_rng
from spotdiff.synth.text.visla import (
    HEADER,
    RELATIONS,
    Annotation,
    VislaBuilder,
    contradicts,
    equivalent_forms,
    jaccard,
    mine_triplet,
    read_relations,
    visla_measured_relation,
    write_visla,
)

SIZE = 64


@lru_cache(maxsize=2)
def pipeline(size: int = SIZE):
    return make_pipeline(size)


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---- EqBen ------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subset=st.sampled_from(SUBSETS), seed=st.integers(0, 2**31 - 1), index=st.integers(0, 10_000))
def test_eqben_pairs_change_one_slot_and_only_the_changed_objects(subset, seed, index):
    pair = EqbenBuilder(pipeline(), seed).build(subset, index)
    assert len(pair.changed) == 1 and pair.captions[0] != pair.captions[1]
    s0, s1 = pair.slots
    if subset == "eqbenkubric_loc":
        assert pair.changed == ["location"] and s0["verb"] in VERBS
        assert RELATION[s0["location"]] != RELATION[s1["location"]]
        assert s0["location"] in LOCATIONS and s1["location"] in LOCATIONS
    elif subset == "eqbenkubric_cnt":
        assert pair.changed == ["counts"] and {s0["counts"], s1["counts"]} <= set(COUNTS)
        for r, c in zip(pair.renders, (s0["counts"], s1["counts"]), strict=True):
            assert len(r.of_role("object")) == c
    else:
        assert pair.changed in (["object"], ["object_size"])
        if pair.changed == ["object_size"]:  # small (<= 4% of the image) vs large (>= 8%)
            areas = {}
            for r, sl in zip(pair.renders, pair.slots, strict=True):
                pl = next(p for p in r.placements if p.role == "object")
                x0, y0, x1, y1 = pipeline().canvas.box(pl)
                areas[sl["object_size"]] = (x1 - x0) * (y1 - y0) / SIZE**2
            assert areas["small"] <= 0.04 and areas["large"] >= 0.08
    # words outside the changed slot are identical (count agreement aside)
    if subset != "eqbenkubric_cnt":
        w0, w1 = pair.captions[0].split(), pair.captions[1].split()
        changed_value = " ".join(str(s[pair.changed[0]]) for s in pair.slots)
        assert set(w0) ^ set(w1) <= set(changed_value.split())
    # pixels outside the layers that differ are identical
    a, b = (np.asarray(r.image) for r in pair.renders)
    changed = set(pair.renders[0].placements) ^ set(pair.renders[1].placements)
    assert changed and all(p.role == "object" for p in changed)
    outside = np.ones((SIZE, SIZE), dtype=bool)
    for p in changed:
        outside[max(0, p.y) : p.y + p.h, max(0, p.x) : p.x + p.w] = False
    assert np.array_equal(a[outside], b[outside])


def test_eqben_sd_caption_pairs_follow_fig15():
    kinds = set()
    for i in range(60):
        pair = sd_caption_pair(case_rng(0, 14, i))
        kinds.add(pair["aspect"])
        assert pair["caption0"] != pair["caption1"]
        assert len(changed_slots(pair["slots0"], pair["slots1"])) == 1
    assert kinds == {"object change", "scene change", "attribute change"}


@pytest.fixture(scope="module")
def eqben_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eqben") / "data"
    write_eqben(out, n=2, seed=4, size=SIZE)
    return out


def test_eqben_round_trip_through_the_loader(eqben_dir, tmp_path):
    records = json.loads((eqben_dir / "all_select.json").read_text())
    assert len(records) == 6
    for r in records:
        assert set(r) == {"image0", "image1", "caption0", "caption1"}
        assert r["image0"].split("/")[0] in SUBSETS and (eqben_dir / "images" / r["image0"]).is_file()
    cases = get_benchmark("eqben")(eqben_dir).load()
    assert len(cases) == 6
    assert {c.subset for c in cases} == set(SUBSETS)
    for c in cases:
        assert c.shape == (2, 2) and np.array_equal(c.truth, np.eye(2, dtype=bool))
        assert all(im.load().size == (SIZE, SIZE) for im in c.images)
    meta = json.loads((eqben_dir / "metadata.json").read_text())["pairs"]
    assert all(len(m["changed"]) == 1 for m in meta)
    sd = json.loads((eqben_dir / "eqbensd_captions.json").read_text())
    assert len(sd) == 2
    write_eqben(tmp_path / "again", n=2, seed=4, size=SIZE, workers=2)
    assert digest(tmp_path / "again") == digest(eqben_dir)


# ---- VISLA ------------------------------------------------------------------------------------


def test_relation_table_is_consistent():
    for rel in RELATIONS.values():
        if rel.inverse is not None:
            assert RELATIONS[rel.inverse].inverse in (rel.name, None) or rel.name == "contains"
        for other in rel.contradicts:
            assert other in RELATIONS
    assert contradicts(("cat", "inside", "box"), ("cat", "outside", "box"))
    assert contradicts(("box", "contains", "cat"), ("cat", "outside", "box"))  # via the inverse reading
    assert not contradicts(("cat", "left of", "dog"), ("dog", "right of", "cat"))  # the same fact
    assert ("dog", "right of", "cat") in equivalent_forms("cat", "left of", "dog")
    assert jaccard("The cat is on the bed.", "The cat is under the bed.") == pytest.approx(4 / 6)


def test_mining_gives_inverse_positive_and_contradicting_negative():
    pool = [
        Annotation("1.jpg", "cat", "inside", "basket", "The cat is in the basket."),
        Annotation("2.jpg", "cat", "outside", "basket"),
        Annotation("3.jpg", "pizza", "inside", "oven"),
    ]
    t = mine_triplet(pool[0], pool, np.random.default_rng(0))
    assert t["p1"] == "The cat is in the basket."
    assert t["p2"] == "The basket contains the cat."  # swapped, inverse relation (VISLA Sec. 3.3)
    assert t["n"] == "The cat is outside the basket."
    assert [c["jaccard"] for c in t["candidates"]] == sorted((c["jaccard"] for c in t["candidates"]), reverse=True)
    assert len(t["candidates"]) == 3
    assert t["irrelevant"] == "The pizza is inside the oven."
    # positives far apart lexically, the negative close (App. C.1)
    assert Levenshtein.distance(t["p1"], t["p2"]) > Levenshtein.distance(t["p1"], t["n"])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), index=st.integers(0, 10_000))
def test_canvas_scenes_show_the_annotated_relation(seed, index):
    ann, rendered, _scene = VislaBuilder(pipeline(), seed).scene(index)
    assert visla_measured_relation(rendered, SIZE) == ann.relation
    t = mine_triplet(ann, [ann], np.random.default_rng(0))
    assert contradicts(ann.triple, _triple_of(t["n"], ann))


def _triple_of(text: str, ann: Annotation) -> tuple[str, str, str]:
    """Parse 'The S is <phrase> the O.' back into a triple (only for our own sentences)."""
    body = text.rstrip(".")[4:]
    for s, o in ((ann.subject, ann.object), (ann.object, ann.subject)):
        if body.startswith(s + " "):
            rest = body[len(s) + 1 :]
            if rest.startswith("contains the "):
                return (s, "contains", o)
            phrase = rest[3:].rsplit(" the ", 1)[0]
            for rel in RELATIONS.values():
                if phrase in rel.phrasings:
                    return (s, rel.name, o)
    raise AssertionError(text)


def test_tsv_header_and_line_endings_match_the_published_file(shared_data, tmp_path):
    real = (shared_data / "visla" / "Spatial_VISLA.tsv").read_bytes()
    write_visla(tmp_path / "v", relations_file=_relations(tmp_path))
    ours = (tmp_path / "v" / "Spatial_VISLA.tsv").read_bytes()
    assert ours.split(b"\r\n")[0] == real.split(b"\r\n")[0]
    assert real.count(b"\r\n") == real.count(b"\n") and ours.count(b"\r\n") == ours.count(b"\n")


def _relations(tmp_path: Path) -> Path:
    path = tmp_path / "rel.jsonl"
    path.write_text('{"image": "a.jpg", "subject": "cat", "relation": "in", "object": "box"}\n')
    return path


def test_user_relation_files_jsonl_and_csv(tmp_path):
    jl = tmp_path / "rel.jsonl"
    jl.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"image": "a.jpg", "subject": "Cat", "relation": "on", "object": "bed"},
                {
                    "image": "b.jpg",
                    "subject": "cup",
                    "relation": "to the left of",
                    "object": "plate",
                    "caption": "A cup sits left of a plate.",
                },
                {"image": "c.jpg", "subject": "dog", "relation": "near", "object": "tree"},
            )
        )
    )
    anns = read_relations(jl)
    assert [a.relation for a in anns] == ["on top of", "left of", "near"] and anns[0].subject == "cat"
    summary = write_visla(tmp_path / "out", relations_file=jl)
    assert summary["triplets"] == 3
    raw = (tmp_path / "out" / "Spatial_VISLA.tsv").read_bytes()
    lines = raw.split(b"\r\n")
    assert lines[0].decode() == "\t".join(HEADER) and lines[-1] == b"" and b"\n" not in raw.replace(b"\r\n", b"")
    row = lines[2].decode().split("\t")
    assert row[:2] == ["b.jpg", "A cup sits left of a plate."]
    assert row[2].startswith("The plate is ") and "right" in row[2] and row[2].endswith(" the cup.")
    csvf = tmp_path / "rel.csv"
    csvf.write_text("image,subject,relation,object\nx.png,book,under,lamp\n")
    assert read_relations(csvf)[0].triple == ("book", "under", "lamp")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"image": "a", "subject": "x", "relation": "sideways", "object": "y"}\n')
    with pytest.raises(DataError, match="unknown relation"):
        read_relations(bad)


@pytest.fixture(scope="module")
def visla_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("visla") / "data"
    write_visla(out, n=12, seed=2, size=SIZE)
    return out


def test_visla_round_trip_and_edit_distance_report(visla_dir, tmp_path):
    cases = get_benchmark("visla-spatial")(visla_dir).load()
    assert len(cases) == 12
    for c in cases:
        assert c.shape == (1, 3) and c.roles == ("p1", "p2", "n")
        assert c.images[0].load().size == (SIZE, SIZE)
    report = json.loads((visla_dir / "edit_distance.json").read_text())
    assert report["positives_p1_p2"]["mean"] > report["negative_p1_n"]["mean"]
    assert (visla_dir / "edit_distance.png").is_file()
    rels = [json.loads(line) for line in (visla_dir / "relations.jsonl").read_text().splitlines()]
    assert len(rels) == 12 and all("measured" in r for r in rels)
    write_visla(tmp_path / "again", n=12, seed=2, size=SIZE, workers=2)
    assert digest(tmp_path / "again") == digest(visla_dir)


# ---- corpus -----------------------------------------------------------------------------------


def test_corpus_is_disjoint_from_the_test_engines(tmp_path):
    write_corpus(tmp_path / "corpus", n=16, seed=0, size=SIZE)
    rows = [json.loads(line) for line in (tmp_path / "corpus" / "captions.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and all(set(r) == {"image", "caption"} for r in rows)
    assert all((tmp_path / "corpus" / r["image"]).is_file() for r in rows)
    meta = [json.loads(line) for line in (tmp_path / "corpus" / "metadata.jsonl").read_text().splitlines()]
    train = {(o["category"], o["seed"]) for m in meta for o in m["objects"]}
    assert all(seed % 2 == 1 for _, seed in train)
    write_spec(tmp_path / "spec", n=2, seed=0, size=SIZE, cls=False)
    test = set()
    for sub in ("count", "existence"):
        for case in json.loads((tmp_path / "spec" / sub / "metadata.json").read_text())["cases"]:
            test |= {(o["category"], o["seed"]) for o in case["objects"].values()}
    assert test and not (train & test)
    assert len({r["caption"] for r in rows}) > 8
