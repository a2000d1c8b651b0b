"""The source catalog against the registry and the real files, and the peers' benchmark names."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from spotdiff.benchmarks import ALIASES, BENCHMARKS, canonical_benchmark, get_benchmark
from spotdiff.benchmarks.sources import HubSource, ImagesSource, UrlSource
from spotdiff.cli import main
from spotdiff.data import CATALOG, COLLECTIONS, benchmark_sources
from spotdiff.data.digests import file_digests
from spotdiff.errors import ConfigError
from spotdiff.testing.tiny_models import make_tiny_clip, tiny_images


def test_every_registered_benchmark_has_sources_and_back():
    assert set(CATALOG) == set(BENCHMARKS.names())
    assert len(CATALOG) == 29


#: The hub sources whose commit no copy here could read when they were declared (the fetch records it).
UNPINNED = {"bivlc", "colorswap", "mmvp-vlm", "mmvp", "naturalbench", "naturalbench-retrieval", "vismin"}
#: The same for the shared collections (Vinoground's gated hub dataset).
UNPINNED_COLLECTIONS = {"vinoground-hub"}


def test_declarations_are_well_formed():
    unpinned = set()
    for decl in CATALOG.values():
        assert decl.required, decl.name
        assert len({p.name for p in decl.parts}) == len(decl.parts)
        for part in decl.parts:
            source = part.source
            if isinstance(source, HubSource) and source.revision is None:
                unpinned.add(decl.name)
            elif isinstance(source, HubSource):
                assert re.fullmatch(r"[0-9a-f]{40}", source.revision), (decl.name, part.name)
            if isinstance(source, UrlSource) and source.revision:
                assert all(source.revision in f.url for f in source.files)
            if isinstance(source, ImagesSource):
                assert all(c in COLLECTIONS for c, _ in source.folders)
    assert unpinned == UNPINNED
    unpinned = set()
    for coll in COLLECTIONS.values():
        if isinstance(coll.source, HubSource) and coll.source.revision is None:
            unpinned.add(coll.name)
        elif isinstance(coll.source, HubSource):
            assert re.fullmatch(r"[0-9a-f]{40}", coll.source.revision)
    assert unpinned == UNPINNED_COLLECTIONS


@pytest.mark.parametrize(
    ("benchmark", "folder"),
    [("visla-generic", "visla"), ("visla-spatial", "visla"), ("sugarcrepe", "sugarcrepe"), ("valse", "valse"),
     ("vl-checklist", "vl_checklist")],
)
def test_pinned_checksums_match_the_real_files(benchmark, folder, shared_data):
    """The catalog's pins are the files' real digests (the copies in ../shared are byte-identical)."""
    files = benchmark_sources(benchmark).part("annotations").source.files
    checked = 0
    for remote in files:
        local = shared_data / folder / remote.path
        if not local.is_file():
            assert remote.checksum.algorithm == "git-blob-sha1"  # the files no copy here holds
            continue
        assert file_digests(local, [remote.checksum.algorithm])[remote.checksum.algorithm] == remote.checksum.value
        assert local.stat().st_size == remote.size
        checked += 1
    assert checked == len(files) - (10 if benchmark == "vl-checklist" else 0)


def test_git_blob_ids_are_what_git_computes(shared_data):
    path = shared_data / "visla" / "Generic_VISLA.tsv"
    data = path.read_bytes()
    # the blob id of this file in Sri-Harsha/visla_benchmark's tree (git ls-tree)
    assert file_digests(path, ["git-blob-sha1"])["git-blob-sha1"] == hashlib.sha1(
        b"blob %d\0" % len(data) + data).hexdigest()


@pytest.mark.parametrize(
    ("alias", "name", "subset"),
    [("AROCocoOrder", "aro-coco-order", None), ("AROFlickrOrder", "aro-flickr-order", None),
     ("AROVisualRelation", "aro-vg-relation", None), ("AROVisualAttribution", "aro-vg-attribution", None),
     ("SugarCrepe", "sugarcrepe", None), ("Winoground", "winoground", None), ("sugar_crepe", "sugarcrepe", None),
     ("sugar_crepe/replace_rel", "sugarcrepe", "replace_rel"), ("spec", "spec", None)],
)
def test_aliases_resolve_everywhere(alias, name, subset):
    assert canonical_benchmark(alias) == (name, subset)
    assert get_benchmark(alias).name == name
    assert benchmark_sources(alias).name == name


def test_an_unknown_name_is_still_an_error():
    with pytest.raises(ConfigError, match="unknown benchmark"):
        get_benchmark("AROCocoOrderr")
    assert set(ALIASES.values()) <= set(BENCHMARKS.names())


def test_clip_benchmark_subset_alias_evaluates_that_subset(tmp_path, shared_data):
    """``--benchmark sugar_crepe/swap_att`` is SugarCrepe's swap_att subset, recorded under spotdiff's name."""
    records = json.loads((shared_data / "sugarcrepe" / "swap_att.json").read_text())
    data = tmp_path / "sc"
    (data / "images").mkdir(parents=True)
    picked = {k: records[k] for k in list(records)[:3]}
    for (key, record), image in zip(picked.items(), tiny_images(3), strict=True):
        record["filename"] = f"{key}.png"
        image.save(data / "images" / f"{key}.png")
    (data / "swap_att.json").write_text(json.dumps(picked))
    model = "hf-clip:" + str(make_tiny_clip(tmp_path / "clip"))
    out = tmp_path / "out"
    assert main(["eval", "--model", model, "--benchmark", "sugar_crepe/swap_att", "--data", str(data), "--out",
                 str(out), "--no-store", "--no-cache", "-q", "--n-boot", "20"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["benchmark"] == "sugarcrepe" and metrics["subset"] == "swap_att"
    assert metrics["n_cases"] == 3
