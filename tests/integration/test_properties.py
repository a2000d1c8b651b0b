"""Property-based tests (hypothesis) of every loader and every protocol on generated inputs.

Loaders: records are generated, written in the benchmark's published format, loaded back, and the
cases must hold exactly what was written (ids, texts after the loader's documented whitespace rule,
truth, images, subsets, skip counts). Then a valid file is damaged at random (a value replaced by any
JSON value, bytes cut, inserted or flipped): a loader may accept it or raise a SpotdiffError, but
never fail with any other exception.

Protocols: for every registered protocol, random valid cases with random score matrices (ties and
NaN included) obey the invariants that make the numbers trustworthy: outcomes are 0/1 (or NaN where a
unit has no such query), raising true scores never hurts, a NaN never helps, strictly increasing
transforms of rank-based scores change nothing, aggregates are percentages with ordered confidence
intervals, per-subset metrics equal an evaluation of that subset alone, and the protocol-specific
identities hold (VISLA accuracy <= min(P1-N, P2-N), VALSE acc = (p_c + p_f) / 2, R@1 <= R@5 <= R@10).
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from spotdiff.benchmarks import BENCHMARKS, get_benchmark
from spotdiff.benchmarks.retrieval import pre_caption
from spotdiff.cases import ArrayImage, Case, FileImage
from spotdiff.errors import SpotdiffError
from spotdiff.protocols import PROTOCOLS, evaluate, get_protocol

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------ text strategies
_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp"))
#: A non-blank text without surrounding whitespace (any Unicode letters, marks, symbols, spaces).
core = st.text(_CHARS, min_size=1, max_size=24).map(str.strip).filter(bool)
#: The same with optional surrounding whitespace (loaders that strip must strip it).
padded = st.tuples(st.sampled_from(["", " ", "  ", "\u00a0"]), core, st.sampled_from(["", " ", " \u2003"])).map(
    "".join
)
tsv_text = padded.filter(lambda t: "\t" not in t)
name = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=10)


def load(bench: str, root: Path, subset: str | None = None, **options) -> tuple[list[Case], dict]:
    loader = get_benchmark(bench)(root, **options)
    cases = list(loader.cases(subset))
    loader.data_digest()  # every data file is readable
    return cases, loader.report.as_dict()


def write_json(path: Path, data, *, ascii_only: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=ascii_only), encoding="utf-8")
    return path


def image_paths(case: Case) -> list[Path]:
    return [Path(r.path) for r in case.images if isinstance(r, FileImage)]


# ------------------------------------------------------------------------------------- VISLA
@SETTINGS
@given(rows=st.lists(st.tuples(name, tsv_text, tsv_text, tsv_text, st.booleans()), min_size=1, max_size=8))
@pytest.mark.parametrize("bench", ["visla-generic", "visla-spatial"])
def test_visla_round_trip(bench: str, rows) -> None:
    spatial = bench == "visla-spatial"
    loader = get_benchmark(bench)
    lines = ["\t".join(loader.header)]
    for fname, p1, p2, neg, empty in rows:
        cells = [f"{fname}.jpg", p1, p2, "" if (spatial and empty) else neg]
        lines.append("\t".join([*cells, "irrelevant"] if spatial else cells))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / loader.file_name).write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
        cases, report = load(bench, Path(tmp))
    kept = [(k, r) for k, r in enumerate(rows, start=1) if not (spatial and r[4])]
    assert len(cases) == len(kept)
    assert report["skipped"].get("spatial row without a negative caption", 0) == len(rows) - len(kept)
    for case, (row_no, (fname, p1, p2, neg, _)) in zip(cases, kept, strict=True):
        first, second, negative = case.texts
        assert case.id == f"{loader.subset_name}/{row_no}"
        assert negative == neg.strip() and sorted((first, second)) == sorted((p1.strip(), p2.strip()))
        assert Levenshtein.distance(first, negative) <= Levenshtein.distance(second, negative)
        assert case.roles == ("p1", "p2", "n") and case.truth.tolist() == [[True, True, False]]
        assert image_paths(case)[0].name == f"{fname}.jpg"


# -------------------------------------------------------------------------------- SugarCrepe
@SETTINGS
@given(data=st.data())
def test_sugarcrepe_round_trip(data) -> None:
    from spotdiff.benchmarks.sugarcrepe import SUBSETS

    files = {
        subset: data.draw(st.dictionaries(name, st.tuples(name, padded, padded), max_size=4)) for subset in SUBSETS
    }
    with tempfile.TemporaryDirectory() as tmp:
        for subset, records in files.items():
            write_json(
                Path(tmp) / f"{subset}.json",
                {k: {"filename": f, "caption": c, "negative_caption": n} for k, (f, c, n) in records.items()},
            )
        cases, report = load("sugarcrepe", Path(tmp))
    expected = [(s, k, r) for s, records in files.items() for k, r in records.items()]
    assert len(cases) == len(expected) == report["records"]
    for case, (subset, key, (fname, cap, neg)) in zip(cases, expected, strict=True):
        assert case.id == f"{subset}/{key}" and case.subset == subset
        assert case.texts == (cap.strip(), neg.strip()) and case.truth.tolist() == [[True, False]]
        assert image_paths(case)[0].name == fname


# ------------------------------------------------------------------------------------- VALSE
@SETTINGS
@given(data=st.data(), keep_all=st.booleans())
def test_valse_round_trip(data, keep_all: bool) -> None:
    from spotdiff.benchmarks.valse import SUBSETS

    record = st.tuples(name, padded, padded, st.integers(0, 3))
    files = {subset: data.draw(st.dictionaries(name, record, max_size=3)) for subset in SUBSETS}
    with tempfile.TemporaryDirectory() as tmp:
        for subset, records in files.items():
            samples = {
                k: {"image_file": f, "caption": c, "foil": fo, "dataset": "coco", "linguistic_phenomena": "x",
                    "mturk": {"caption": v, "foil": 0, "other": 1}}
                for k, (f, c, fo, v) in records.items()
            }  # fmt: skip
            write_json(Path(tmp) / f"{subset}.json", samples)
        cases, report = load("valse", Path(tmp), all_records=keep_all)
    expected = [(s, k, r) for s, records in files.items() for k, r in records.items() if keep_all or r[3] >= 2]
    assert len(cases) == len(expected)
    assert sum(report["skipped"].values()) == report["records"] - len(expected)
    for case, (subset, key, (_, cap, foil, votes)) in zip(cases, expected, strict=True):
        assert case.id == f"{subset}/{key}" and case.texts == (cap.strip(), foil.strip())
        if keep_all:
            assert case.tags["valid"] == ("1" if votes >= 2 else "0")


# ------------------------------------------------------------------------------ VL-CheckList
_VLC_FOLDERS = ("Attribute/color", "Relation/action", "Object/Location/center", "Object/Size/large")


@SETTINGS
@given(data=st.data(), all_pairs=st.booleans())
def test_vl_checklist_round_trip(data, all_pairs: bool) -> None:
    pairs = st.integers(1, 3).flatmap(lambda n: st.tuples(st.lists(padded, min_size=n, max_size=n),
                                                            st.lists(padded, min_size=n, max_size=n)))  # fmt: skip
    files = {
        folder: data.draw(st.lists(st.tuples(name, pairs), max_size=4))
        for folder in data.draw(st.lists(st.sampled_from(_VLC_FOLDERS), min_size=1, max_size=4, unique=True))
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for folder, records in files.items():
            anno = f"data/{folder.replace('/', '_')}.json"
            yaml = root / "corpus" / "v1" / folder / "vg.yaml"
            yaml.parent.mkdir(parents=True, exist_ok=True)
            yaml.write_text(f"ANNO_PATH: {anno}\nIMG_ROOT: vg/\nTYPE: TUPLE_JSON\n", encoding="utf-8")
            write_json(root / anno, [[f"{img}.jpg", {"POS": pos, "NEG": neg}] for img, (pos, neg) in records])
            for img, _ in records:  # the official loader keeps a record only if its image exists
                write_text(root / "images" / "vg" / f"{img}.jpg", "")
        cases, _ = load("vl-checklist", root, pairs="all" if all_pairs else "first")
    expected = []
    for folder in sorted(files, key=lambda f: f.split("/")):  # the loader reads the yaml files in path order
        corpus = "_".join([*folder.split("/"), "vg"])
        for idx, (img, (pos, neg)) in enumerate(files[folder]):
            for i in range(len(pos) if all_pairs else 1):
                expected.append((f"{corpus}/{idx}/{i}", (pos[i].strip(), neg[i].strip()), img, folder))
    assert sorted((c.id, c.texts) for c in cases) == sorted((e[0], e[1]) for e in expected)
    by_id = {e[0]: e for e in expected}
    for case in cases:
        _, _, img, folder = by_id[case.id]
        assert image_paths(case)[0].parts[-2:] == ("vg", f"{img}.jpg")
        assert case.subset == "/".join(folder.split("/")[:2])


# -------------------------------------------------------------------------------- Winoground
@SETTINGS
@given(
    records=st.lists(
        st.tuples(padded, padded, st.sampled_from(["Object", "Relation", "Both"]), st.sampled_from(["", "Symbolic"])),
        max_size=6,
    ),
    subset=st.sampled_from([None, "Object", "Relation", "Both"]),
)
def test_winoground_round_trip(records, subset) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        lines = [
            json.dumps({"id": 10 * i, "image_0": f"ex_{i}_img_0", "image_1": f"ex_{i}_img_1", "caption_0": c0,
                        "caption_1": c1, "tag": "Noun", "secondary_tag": sec, "num_main_preds": 1,
                        "collapsed_tag": tag})
            for i, (c0, c1, tag, sec) in enumerate(records)
        ]  # fmt: skip
        (Path(tmp) / "examples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        cases, _ = load("winoground", Path(tmp), subset)
    expected = [(i, r) for i, r in enumerate(records) if subset is None or r[2] == subset]
    assert len(cases) == len(expected)
    for case, (i, (c0, c1, tag, sec)) in zip(cases, expected, strict=True):
        assert case.id == str(10 * i) and case.texts == (c0, c1)  # verbatim
        assert case.truth.tolist() == [[True, False], [False, True]]
        assert case.subset == tag and case.tags["secondary_tag"] == sec
        assert [p.name for p in image_paths(case)] == [f"ex_{i}_img_0.png", f"ex_{i}_img_1.png"]


# ------------------------------------------------------------------------------------- EqBen
@SETTINGS
@given(data=st.data())
def test_eqben_round_trip(data) -> None:
    from spotdiff.benchmarks.eqben import SUBSETS

    record = st.tuples(st.sampled_from(SUBSETS), name, name, padded, padded)
    records = data.draw(st.lists(record, max_size=6))
    subset = data.draw(st.sampled_from([None, *SUBSETS]))
    with tempfile.TemporaryDirectory() as tmp:
        write_json(
            Path(tmp) / "all_select.json",
            [{"image0": f"{s}/{a}.png", "image1": f"{s}/{b}.png", "caption0": c0, "caption1": c1}
             for s, a, b, c0, c1 in records],
        )  # fmt: skip
        cases, _ = load("eqben", Path(tmp), subset)
    expected = [(i, r) for i, r in enumerate(records) if subset is None or r[0] == subset]
    assert len(cases) == len(expected)
    for case, (i, (s, a, b, c0, c1)) in zip(cases, expected, strict=True):
        assert case.id == str(i) and case.subset == s and case.texts == (c0, c1)
        assert case.truth.tolist() == [[True, False], [False, True]]
        assert [p.parts[-2:] for p in image_paths(case)] == [(s, f"{a}.png"), (s, f"{b}.png")]


# -------------------------------------------------------------------------------------- SPEC
@SETTINGS
@given(data=st.data())
def test_spec_round_trip(data) -> None:
    """Every true (image, caption) pair of every record is a true entry of exactly one case query,
    and complete candidate sets become K x K cases."""
    k_size = data.draw(st.integers(2, 4))
    n_sets = data.draw(st.integers(1, 3))
    i2t, t2i, truths = [], [], set()
    for s in range(n_sets):
        images = [f"images/set{s}_{k}.png" for k in range(k_size)]
        captions = data.draw(st.lists(core, min_size=k_size, max_size=k_size, unique=True))
        captions = [f"{c} #{s}" for c in captions]  # distinct across sets
        for k in range(k_size):
            truths.add((images[k], captions[k]))
            order = data.draw(st.permutations(range(k_size)))
            if data.draw(st.booleans()) or s == 0:
                i2t.append({"query": images[k], "keys": [captions[j] for j in order], "label": order.index(k)})
            if data.draw(st.booleans()) or s == 0:
                t2i.append({"query": captions[k], "keys": [images[j] for j in order], "label": order.index(k)})
    with tempfile.TemporaryDirectory() as tmp:
        write_json(Path(tmp) / "count" / "image2text.json", i2t)
        write_json(Path(tmp) / "count" / "text2image.json", t2i)
        cases, report = load("spec", Path(tmp))
    assert report["records"] == len(i2t) + len(t2i)
    found = Counter()
    for case in cases:
        names = [f"images/{p.name}" for p in image_paths(case)]
        for i, t in zip(*np.nonzero(case.truth), strict=True):
            found[(names[i], case.texts[t])] += 1
        if case.tags["form"] == "set":
            assert case.truth.shape == (k_size, k_size) and (case.truth == np.eye(k_size)).all()
    queried = {(r["query"], r["keys"][r["label"]]) for r in i2t} | {(r["keys"][r["label"]], r["query"]) for r in t2i}
    assert set(found) == queried and queried <= truths
    assert sum(c.tags["form"] == "set" for c in cases) >= 1  # set 0 is complete


# --------------------------------------------------------------------------------------- ARO
@SETTINGS
@given(
    records=st.lists(
        st.tuples(name, st.integers(0, 50), st.integers(0, 50), st.integers(1, 60), st.floats(0.5, 60), padded,
                  padded, name, name),
        max_size=6,
    ),
    kind=st.sampled_from(["relation", "attribution"]),
)  # fmt: skip
def test_aro_visual_genome_round_trip(records, kind: str) -> None:
    bench = f"aro-vg-{kind}"
    with tempfile.TemporaryDirectory() as tmp:
        data = []
        for img, x, y, w, h, true, false, g0, g1 in records:
            rec = {"image_path": f"{img}.jpg", "bbox_x": x, "bbox_y": y, "bbox_w": w, "bbox_h": h,
                   "true_caption": true, "false_caption": false}  # fmt: skip
            rec.update({"relation_name": g0} if kind == "relation" else {"attributes": [g0, g1]})
            data.append(rec)
        write_json(Path(tmp) / f"visual_genome_{kind}.json", data)
        cases, _ = load(bench, Path(tmp))
    assert len(cases) == len(records)
    for i, (case, (img, x, y, w, h, true, false, g0, g1)) in enumerate(zip(cases, records, strict=True)):
        assert case.id == str(i) and case.texts == (false, true) and case.truth.tolist() == [[False, True]]
        ref = case.images[0]
        assert Path(ref.path).name == f"{img}.jpg" and ref.bbox == (x, y, w, h)
        assert case.tags.get("relation", case.tags.get("attributes")) == (g0 if kind == "relation" else f"{g0}_{g1}")


_WORDS = ("a", "the", "dog", "cat", "red", "small", "is", "on", "under", "table", "man", "riding", "horse", "two")


@settings(max_examples=15, deadline=None)
@given(
    captions=st.lists(
        st.lists(st.lists(st.sampled_from(_WORDS), min_size=2, max_size=12).map(" ".join), min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    ),
    bench=st.sampled_from(["aro-coco-order", "aro-flickr-order"]),
    seed=st.integers(0, 3),
)
def test_aro_order_cases_are_word_permutations(captions, bench: str, seed: int) -> None:
    file = "coco_karpathy_test.json" if bench == "aro-coco-order" else "flickr30k_test.json"
    options = {"pos_tagger": "heuristic", "tokenizer": "regex", "seed": seed}
    with tempfile.TemporaryDirectory() as tmp:
        write_json(Path(tmp) / file, [{"image": f"img{i}.jpg", "caption": [c + "." for c in caps]}
                                      for i, caps in enumerate(captions)])  # fmt: skip
        cases, report = load(bench, Path(tmp), **options)
        again, _ = load(bench, Path(tmp), **options)
    assert [c.texts for c in cases] == [c.texts for c in again]  # seeded: the same perturbations
    total = sum(len(caps) for caps in captions)
    assert len(cases) + report["skipped"].get(
        "order: every perturbation identical to the true caption", 0
    ) == total == report["records"]
    originals = {(f"img{i}.jpg", j): c for i, caps in enumerate(captions) for j, c in enumerate(caps)}
    for case in cases:
        image, j = case.id.rsplit("#", 1)
        true = case.texts[0]
        assert true == pre_caption(originals[(image, int(j))] + ".", 30)
        assert case.truth[0].tolist() == [True] + [False] * (len(case.texts) - 1)
        for negative in case.texts[1:]:
            assert negative != true and sorted(negative.split()) == sorted(true.split())


# ------------------------------------------------------------------------------------- CREPE
@SETTINGS
@given(
    rows=st.lists(st.tuples(st.integers(1, 10**6), padded, st.lists(padded, max_size=4)), max_size=5),
    syst=st.lists(st.tuples(st.integers(1, 10**6), padded, st.lists(padded, max_size=3),
                            st.lists(padded, max_size=2)), max_size=4),
)  # fmt: skip
def test_crepe_round_trip(rows, syst) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "prod_hard_negatives" / "swap" / "prod_vg_hard_negs_swap_complexity_5.csv"
        path.parent.mkdir(parents=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["", "image_id", "x", "y", "width", "height", "caption", "hard_negs"])
            for n, (img, cap, negs) in enumerate(rows):
                w.writerow([n, img, 1, 2, 30, 20, cap, str(negs)])
        path = root / "syst_hard_negatives" / "syst_vg_hard_negs_unseen_compounds_in_laion.csv"
        path.parent.mkdir(parents=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["image_id", "x", "y", "width", "height", "caption", "valid_hard_negs_atom",
                        "valid_hard_negs_comp"])  # fmt: skip
            for img, cap, atom, comp in syst:
                w.writerow([img, 0, 0, 5.5, 7, cap, str(atom), str(comp)])
        cases, report = load("crepe", root)
    expected = [("prod/swap/complexity_5", n, cap, negs) for n, (_, cap, negs) in enumerate(rows)]
    for t, col in (("atom", 2), ("comp", 3)):
        expected += [(f"syst/{t}/unseen_compounds_in_laion", n, r[1], r[col]) for n, r in enumerate(syst)]
    assert not report["skipped"]  # a row with no negatives is the caption alone, as CREPE's code scores it
    assert sorted((c.id, c.texts) for c in cases) == sorted(
        (f"{s}/{n}", (cap.strip(), *(x.strip() for x in negs))) for s, n, cap, negs in expected
    )
    for case in cases:
        assert case.truth[0].tolist() == [True] + [False] * (len(case.texts) - 1)


# --------------------------------------------------------------------------------- retrieval
@SETTINGS
@given(
    records=st.lists(st.lists(padded, min_size=1, max_size=6), min_size=1, max_size=5),
    bench=st.sampled_from(["coco-retrieval", "flickr-retrieval"]),
)
def test_retrieval_gallery_round_trip(records, bench: str) -> None:
    file = "coco_karpathy_test.json" if bench == "coco-retrieval" else "flickr30k_test.json"
    with tempfile.TemporaryDirectory() as tmp:
        write_json(Path(tmp) / file, [{"image": f"im/{i}.jpg", "caption": caps} for i, caps in enumerate(records)])
        (case,), _ = load(bench, Path(tmp), pre_caption="false")
    assert case.texts == tuple(t for caps in records for t in caps)  # verbatim, file order
    owner = [i for i, caps in enumerate(records) for _ in caps]
    expected = np.zeros((len(records), len(owner)), dtype=bool)
    expected[owner, np.arange(len(owner))] = True
    assert (case.truth == expected).all()
    assert [p.name for p in image_paths(case)] == [f"{i}.jpg" for i in range(len(records))]


# ------------------------------------------------------------------------ damaged files (fuzz)
def _valid_dataset(bench: str, root: Path) -> list[Path]:
    """A small valid dataset for ``bench`` in ``root``; returns its annotation files."""
    import spotdiff.testing.formats as ff

    if bench.startswith("visla"):
        loader = get_benchmark(bench)
        extra = ["x"] if bench == "visla-spatial" else []
        rows = ["\t".join(loader.header), *("\t".join([f"{i}.jpg", "a dog", "the dog", "a cat", *extra])
                                            for i in range(3))]  # fmt: skip
        return [write_text(root / loader.file_name, "\r\n".join(rows))]
    if bench == "sugarcrepe":
        from spotdiff.benchmarks.sugarcrepe import SUBSETS

        rec = {"0": {"filename": "a.jpg", "caption": "a dog", "negative_caption": "a cat"}}
        return [write_json(root / f"{s}.json", rec) for s in SUBSETS]
    if bench == "valse":
        from spotdiff.benchmarks.valse import SUBSETS

        rec = {"7": {"image_file": "a.jpg", "caption": "a dog", "foil": "a cat", "dataset": "d",
                     "linguistic_phenomena": "p", "mturk": {"caption": 3}}}  # fmt: skip
        return [write_json(root / f"{s}.json", rec) for s in SUBSETS]
    if bench == "vl-checklist":
        write_text(root / "corpus/v1/Attribute/color/vaw.yaml", "ANNO_PATH: data/c.json\nIMG_ROOT: vg/\n")
        return [write_json(root / "data/c.json", [["1.jpg", {"POS": ["a red dog"], "NEG": ["a blue dog"]}]]),
                root / "corpus/v1/Attribute/color/vaw.yaml"]  # fmt: skip
    if bench == "winoground":
        ff.write_winoground(root, n=2)
        return [root / "examples.jsonl"]
    if bench == "eqben":
        ff.write_eqben(root, n=3)
        return [root / "all_select.json"]
    if bench == "spec":
        ff.write_spec(root, n=1, subsets=("existence", "relative_size"))
        return sorted(root.glob("*/*.json"))
    if bench.startswith("aro-vg"):
        kind = bench.removeprefix("aro-vg-")
        (ff.write_aro_vg_relation if kind == "relation" else ff.write_aro_vg_attribution)(root, n=3)
        return [root / f"visual_genome_{kind}.json"]
    if bench in ("aro-coco-order", "coco-retrieval"):
        ff.write_karpathy(root, "coco", n_images=2)
        return [root / "coco_karpathy_test.json"]
    if bench in ("aro-flickr-order", "flickr-retrieval"):
        ff.write_karpathy(root, "flickr", n_images=2)
        return [root / "flickr30k_test.json"]
    if bench == "crepe":
        ff.write_crepe(root, n=2, prod_types=("atom",), complexities=(4,))
        return sorted(root.rglob("*.csv"))
    if bench == "zeroshot-classification":
        ff.write_zeroshot_wds(root, n=4, shards=2)
        return [root / "classnames.txt", root / "zeroshot_classification_templates.txt",
                root / "test" / "nshards.txt", root / "test" / "0.tar"]  # fmt: skip
    if bench == "bivlc":  # parquet only: byte damage
        from spotdiff.testing.hub_repos import bivlc_repo

        for rel, blob in bivlc_repo(n=2).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(blob)
        return sorted(root.rglob("*.parquet"))
    if bench == "naturalbench":  # parquet only: byte damage
        from spotdiff.testing.hub_repos import naturalbench_repo

        for rel, blob in naturalbench_repo(n=2).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(blob)
        return sorted(root.rglob("*.parquet"))
    if bench == "naturalbench-retrieval":  # the archive's content
        import io
        import zipfile

        from spotdiff.testing.hub_repos import naturalbench_retrieval_repo

        with zipfile.ZipFile(io.BytesIO(naturalbench_retrieval_repo(n=2)["NaturalBench-Retrieval.zip"])) as zf:
            zf.extractall(root)
        return [root / "NaturalBench-Retrieval" / "metadata.json"]
    if bench == "colorswap":  # the README's JSON layout
        rec = {"id": 0, "caption_1": "a red cup on a blue mat", "caption_2": "a blue cup on a red mat",
               "image_1": "images/img_0_1.png", "image_2": "images/img_0_2.png", "image_source": "midjourney",
               "caption_source": "human"}  # fmt: skip
        return [write_json(root / "test.json", [rec])]
    if bench == "sugarcrepe-pp":
        ff.write_sugarcrepe_pp(root)
        return sorted(root.glob("*.json"))
    if bench == "mmvp-vlm":
        ff.write_mmvp_vlm(root, n_pairs=2)
        return [root / "Questions.csv"]
    if bench == "mmvp":
        ff.write_mmvp(root, ff.mmvp_rows(4))
        return [root / "Questions.csv"]
    if bench == "vismin":
        ff.write_vismin(root, n=2)
        return sorted(root.rglob("*.parquet"))
    if bench == "whatsup":
        ff.write_whatsup(root)
        return sorted(root.glob("*.json"))
    return _valid_video_dataset(bench, root)


def _valid_video_dataset(bench: str, root: Path) -> list[Path]:
    """A valid dataset of a video benchmark in ``root``, and its files that may be damaged."""
    if bench in ("vinoground", "vinoground-lmm"):  # the hub dataset, archives unpacked
        from spotdiff.testing.hub_repos import unpack_repo, vinoground_repo

        unpack_repo(vinoground_repo(n=2, frames=2), root)
        return [root / "vinoground.csv", root / "vinoground_textscore.json", root / "vinoground_videoscore.json"]
    if bench == "vitatecs":
        from spotdiff.testing.videos import write_vitatecs

        write_vitatecs(root, frames=2)
        return sorted(root.glob("data/*.jsonl"))
    if bench == "eqben-clips":  # metadata.json as spotdiff synth eqben-video writes it, each source's frames
        from spotdiff.testing.videos import encode_numbered

        (root / "videos").mkdir()
        encode_numbered(root / "videos" / "v.mp4", 4, 2)
        pairs = [{"image0": f"{s}/v/0.png", "image1": f"{s}/v/1.png", "caption0": "a dog", "caption1": "a cat",
                  "video": "v", **frames} for s, frames in (("eqbenag", {"frames": [1, 3]}),
                  ("eqbengebc", {"frames": [["at", 0.5], ["after", 1.0]]}), ("eqbenyoucook2", {"times": [0.2, 1.5]}))]
        return [write_json(root / "metadata.json", {"pairs": pairs})]
    raise AssertionError(f"no valid dataset writer for {bench}; add one")


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _nodes(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, (*path, i))


def _replace(value, path, new):
    if not path:
        return new
    value[path[0]] = _replace(value[path[0]], path[1:], new)
    return value


def _mutate_json(text: str, draw: Callable) -> str | None:
    try:
        if text.lstrip().startswith(("[", "{")):
            data = json.loads(text)
            nodes = list(_nodes(data))
            return json.dumps(_replace(data, draw(st.sampled_from(nodes)), draw(json_values)))
        lines = text.splitlines()
        k = draw(st.integers(0, len(lines) - 1))
        data = json.loads(lines[k])  # JSON lines
        lines[k] = json.dumps(_replace(data, draw(st.sampled_from(list(_nodes(data)))), draw(json_values)))
        return "\n".join(lines)
    except json.JSONDecodeError:
        return None  # not a JSON file


def _mutate_bytes(raw: bytes, draw: Callable) -> bytes:
    i = draw(st.integers(0, len(raw)))
    j = draw(st.integers(i, min(len(raw), i + 40)))
    how = draw(st.sampled_from(["truncate", "delete", "insert", "replace"]))
    junk = draw(st.binary(min_size=1, max_size=12) | st.sampled_from([b"\t", b'"', b"\n", b"\xff\xfe", b"\x00", b","]))
    if how == "truncate":
        return raw[:i]
    if how == "delete":
        return raw[:i] + raw[j:]
    if how == "insert":
        return raw[:i] + junk + raw[i:]
    return raw[:i] + junk + raw[j:]


_OPTIONS = {"aro-coco-order": {"pos_tagger": "heuristic", "tokenizer": "regex"},
            "aro-flickr-order": {"pos_tagger": "heuristic", "tokenizer": "regex"}}  # fmt: skip


@pytest.mark.parametrize("bench", sorted(BENCHMARKS.names()))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_files_raise_only_spotdiff_errors(bench: str, data) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = _valid_dataset(bench, root)
        load(bench, root, **_OPTIONS.get(bench, {}))  # the undamaged dataset loads
        target = data.draw(st.sampled_from(files))
        mutated = None
        if data.draw(st.booleans()) and target.suffix not in (".tar", ".parquet"):  # binary files: byte damage only
            mutated = _mutate_json(target.read_text(encoding="utf-8"), data.draw)
        if mutated is not None:
            target.write_text(mutated, encoding="utf-8")
        else:
            target.write_bytes(_mutate_bytes(target.read_bytes(), data.draw))
        try:
            cases, _ = load(bench, root, **_OPTIONS.get(bench, {}))
        except SpotdiffError as exc:
            assert str(exc)  # a message, naming what went wrong
            return
        for case in cases:  # whatever was accepted is a well-formed case
            assert isinstance(case, Case) and all(isinstance(t, str) and t.strip() for t in case.texts)


# --------------------------------------------------------------------------------- protocols
_IMAGES = [ArrayImage(np.full((2, 2, 3), k, dtype=np.uint8), name=f"im{k}") for k in range(40)]


def _case(cid: str, truth, subset: str, *, images: int | None = None, roles=(), **tags) -> Case:
    truth = np.asarray(truth, dtype=bool)
    n_images = truth.shape[0] if images is None else images
    return Case(
        id=cid,
        texts=tuple(f"{cid} text {k}" for k in range(truth.shape[1])),
        truth=truth,
        images=tuple(_IMAGES[:n_images]),
        tags={"subset": subset, **tags},
        roles=tuple(roles),
    )


@st.composite
def protocol_case(draw, protocol: str, cid: str) -> Case:
    subset = draw(st.sampled_from(["a", "b"]))
    if protocol == "group":
        k = draw(st.integers(2, 4))
        return _case(cid, np.eye(k, dtype=bool)[list(draw(st.permutations(range(k))))], subset)
    if protocol == "spec":
        rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        truth = np.array(draw(st.lists(st.lists(st.booleans(), min_size=cols, max_size=cols), min_size=rows,
                                       max_size=rows)), dtype=bool)  # fmt: skip
        return _case(cid, truth, subset)
    if protocol == "retrieval":
        n, per = draw(st.integers(1, 5)), draw(st.integers(1, 3))
        truth = np.zeros((n, n * per), dtype=bool)
        truth[np.repeat(np.arange(n), per), np.arange(n * per)] = True
        return _case(cid, truth, subset)
    if protocol == "naturalbench":  # 2 images x 2 questions, the published gold pattern
        return _case(cid, np.eye(2, dtype=bool), subset, answers=draw(st.sampled_from(["Yes/No", "A/B"])))
    if protocol == "vinoground":  # 4 questions, each about its own video, either letter right
        truth = np.diag(draw(st.lists(st.booleans(), min_size=4, max_size=4)))
        return _case(cid, truth, subset, answers="A/B", reader="first-char", pairs="diagonal")
    if protocol == "answer":  # MMVP: 2 images x 1 lettered question, either answer right for either image
        truth = np.array(draw(st.lists(st.booleans(), min_size=2, max_size=2)))[:, None]
        return _case(cid, truth, subset, answers="A/B", reader="letter")
    if protocol in ("valse-pairwise", "valse-prob"):
        return _case(cid, [[True, False]] if draw(st.booleans()) else [[False, True]], subset)
    if protocol.startswith("visla"):
        roles = list(draw(st.permutations(["p1", "p2", "n"])))
        images = 0 if protocol == "visla-t2t" else 1
        return _case(cid, [[r != "n" for r in roles]], subset, images=images, roles=roles)
    m = draw(st.integers(2, 6))  # one positive among m texts
    truth = np.zeros((1, m), dtype=bool)
    truth[0, draw(st.integers(0, m - 1))] = True
    tags = {"relation": draw(st.sampled_from(["on", "holding", "next to"]))} if protocol == "aro-macro" else {}
    return _case(cid, truth, subset, images=0 if protocol == "blind-top1" else 1, **tags)


def _shape(protocol: str, case: Case) -> tuple[int, ...]:
    if get_protocol(protocol).needs == "text-text":
        return (len(case.texts), len(case.texts))
    if get_protocol(protocol).needs == "answer-prob":  # [image, question, candidate answer]
        return (*case.truth.shape, 2)
    return case.truth.shape


@st.composite
def scored(draw, protocol: str):
    cases = [draw(protocol_case(protocol, f"c{k}")) for k in range(draw(st.integers(1, 6)))]
    values = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) if protocol == "valse-prob" else st.integers(-2, 2).map(float)
    mats = []
    for c in cases:
        shape = _shape(protocol, c)
        size = int(np.prod(shape))
        m = np.array(draw(st.lists(values, min_size=size, max_size=size)))
        mats.append(m.reshape(shape))
    return cases, mats


def _truth_mask(protocol: str, case: Case) -> np.ndarray:
    """The score entries whose increase can only help (the true pairs)."""
    if get_protocol(protocol).needs == "text-text":  # VISLA T2T: S(P1, P2) and S(P2, P1)
        pos = np.flatnonzero(case.truth[0])
        mask = np.zeros((3, 3), dtype=bool)
        mask[pos[0], pos[1]] = mask[pos[1], pos[0]] = True
        return mask
    if get_protocol(protocol).needs == "answer-prob":  # the gold answer's log-probability
        return np.stack([case.truth, ~case.truth], axis=-1)
    return case.truth


#: Unit metrics that describe the answers rather than score them (no better-is-higher order).
DESCRIPTIVE = ("yes_rate", "gen_yes_rate", "unparsed", "no_answer")


def _outcome_array(protocol: str, case: Case, scores: np.ndarray) -> np.ndarray:
    p = get_protocol(protocol)
    metrics = [m for m in p.unit_metrics if m not in DESCRIPTIVE]
    return np.array([[o.get(m, np.nan) for m in metrics] for o in p.outcomes(case, scores)], dtype=float)


#: Protocols on score matrices (the answer-based protocols take a chat model's answers, not scores:
#: tests/protocols/test_choice_protocol.py checks "choice").
_ANSWER_NEEDS = ("choice", "choice-text")
PROTOCOL_NAMES = sorted(p for p in PROTOCOLS.names() if get_protocol(p).needs not in _ANSWER_NEEDS)
#: Protocols whose outcomes depend only on the order of scores (not valse-prob's 0.5 threshold).
RANK_BASED = [p for p in PROTOCOL_NAMES if p != "valse-prob"]


@pytest.mark.parametrize("protocol", PROTOCOL_NAMES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_protocol_invariants(protocol: str, data) -> None:
    cases, mats = data.draw(scored(protocol))
    p = get_protocol(protocol)
    for case, s in zip(cases, mats, strict=True):
        out = _outcome_array(protocol, case, s)
        ids = p.unit_ids(case, len(out))
        assert len(ids) == len(set(ids)) == len(out)
        allowed = {"valse-prob": {0.0, 0.5, 1.0}, "naturalbench": {0.0, 0.25, 0.5, 0.75, 1.0},
                   "answer": {0.0, 0.5, 1.0}}.get(protocol, {0.0, 1.0})  # fmt: skip
        assert set(out[~np.isnan(out)].tolist()) <= allowed
        # raising the true entries never hurts
        up = s + np.where(_truth_mask(protocol, case), data.draw(st.sampled_from([0.25, 1.0, 5.0])), 0.0)
        if protocol == "valse-prob":
            up = np.clip(up, 0.0, 1.0)
        better = _outcome_array(protocol, case, up)
        assert np.all((better >= out) | np.isnan(out)), (case.truth, s, up)
        # a NaN never helps
        nan = s.copy()
        nan.flat[data.draw(st.integers(0, s.size - 1))] = np.nan
        worse = _outcome_array(protocol, case, nan)
        assert np.all((worse <= out) | np.isnan(out) | np.isnan(worse))
        # a strictly increasing transform changes nothing where only the order matters
        if protocol in RANK_BASED:
            assert np.array_equal(_outcome_array(protocol, case, np.exp(s) * 3 - 7), out, equal_nan=True)
    ev = evaluate(protocol, cases, mats, n_boot=50, seed=1)
    for subset, values in ev.metrics.items():
        for metric in p.metrics:
            v = values.get(metric)
            if v is None or np.isnan(v):
                continue
            assert -1e-9 <= v <= (600 if metric == "rsum" else 100) + 1e-9
            lo, hi = values.get(f"{metric}_ci95", (v, v))
            if lo is not None and hi is not None and not (np.isnan(lo) or np.isnan(hi)):
                assert lo <= hi + 1e-9
        if subset in ev.mean_scopes:  # an unweighted mean over subsets (subset_mean)
            for metric, v in values.items():
                if not metric.endswith("_ci95"):
                    parts = [ev.metrics[s].get(metric, np.nan) for s in ev.mean_scopes[subset]]
                    assert v == pytest.approx(float(np.mean(parts)), nan_ok=True)
        elif subset != "all":  # a subset's metrics equal an evaluation of that subset alone
            part = [(c, m) for c, m in zip(cases, mats, strict=True) if c.subset == subset]
            alone = evaluate(protocol, [c for c, _ in part], [m for _, m in part], n_boot=0).metrics["all"]
            point = {k: v for k, v in values.items() if not k.endswith("_ci95")}
            assert point == pytest.approx(alone, nan_ok=True)
    m = ev.metrics["all"]
    if protocol.startswith("visla"):
        assert m["accuracy"] <= min(m["p1_n"], m["p2_n"]) + 1e-9
    if protocol == "valse-prob":
        assert m["acc"] == pytest.approx((m["p_c"] + m["p_f"]) / 2)
        assert m["min_pc_pf"] == pytest.approx(min(m["p_c"], m["p_f"]))
    if protocol == "retrieval":
        for d in ("i2t", "t2i"):
            r1, r5, r10 = (m[f"{d}_r{k}"] for k in (1, 5, 10))
            assert np.isnan(r1) or r1 <= r5 <= r10
    # the streaming table and the whole-list evaluation agree
    from spotdiff.protocols import UnitTable, evaluate_table

    table = UnitTable()
    for case, s in zip(cases, mats, strict=True):
        table.add_case(p, case, s)
    assert evaluate_table(p, table, n_boot=0).metrics["all"] == pytest.approx(
        evaluate(protocol, cases, mats, n_boot=0).metrics["all"], nan_ok=True
    )


def test_every_loader_and_protocol_is_covered() -> None:
    covered = {
        "visla-generic", "visla-spatial", "sugarcrepe", "valse", "vl-checklist", "winoground", "eqben", "spec",
        "aro-vg-relation", "aro-vg-attribution", "aro-coco-order", "aro-flickr-order", "crepe", "coco-retrieval",
        "flickr-retrieval", "zeroshot-classification", "whatsup", "mmvp-vlm", "sugarcrepe-pp", "colorswap", "bivlc",
        "naturalbench", "naturalbench-retrieval",
        "vismin", "mmvp", "vinoground", "vinoground-lmm", "vitatecs", "eqben-clips",
    }  # fmt: skip
    assert set(BENCHMARKS.names()) <= covered, set(BENCHMARKS.names()) - covered
    assert PROTOCOL_NAMES  # every registered protocol is parametrized above
