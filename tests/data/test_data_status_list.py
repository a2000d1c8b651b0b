"""``spotdiff data list / path / verify`` and the statuses behind them: absent, partial (a part that
failed its checksum is never marked ready), ready, verified, corrupt, manual; shared image
collections fetched once and linked."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

from spotdiff.benchmarks.shared import COLLECTIONS
from spotdiff.cli import main
from spotdiff.data import benchmark_sources, benchmark_state, fetch_benchmark, resolve_data, verify_benchmark
from spotdiff.data.fetch import FetchIncomplete
from spotdiff.data.home import SHARED, STAGING
from spotdiff.errors import ConfigError


def _serve_sugarcrepe_annotations(files, shared_data):
    for remote in benchmark_sources("sugarcrepe").part("annotations").source.files:
        files.add_url(remote.url, shared_data / "sugarcrepe" / remote.path)


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_list_shows_every_benchmark_absent_with_its_sources(home, capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("visla-generic", "sugarcrepe", "winoground", "spec", "aro-coco-order", "crepe", "flickr-retrieval"):
        assert f"{name}  [absent]" in out
    assert "hub dataset facebook/winoground@b400e1735490" in out and "[gated]" in out
    assert "mteb/ARO-COCO-order@53c20afc02a8" in out and "[optional]" in out
    assert "images-hake  manual" in out and "[manual step]" in out
    assert "https://forms.illinois.edu/sec/229675" in out  # Flickr30K's form
    assert "licence: MIT" in out


def test_a_rejected_download_leaves_the_benchmark_partial_and_nothing_half_installed(files, home, shared_data,
                                                                                     capsys):
    _serve_sugarcrepe_annotations(files, shared_data)
    coco = COLLECTIONS["coco-val2017"].source.files[0]
    files.add_url(coco.url, _zip({"val2017/000000397133.jpg": b"not the COCO archive"}))
    with pytest.raises(FetchIncomplete) as info:
        fetch_benchmark("sugarcrepe", progress=False)
    assert "the server has a file of" in str(info.value) and coco.url in str(info.value)
    outcomes = {o.part: o.status for o in info.value.outcomes}
    assert outcomes == {"annotations": "fetched", "images": "missing"}
    state = benchmark_state(benchmark_sources("sugarcrepe"))
    assert state.status == "partial"
    assert state.parts["annotations"].status == "ready" and state.parts["images"].status == "absent"
    assert not (home / "sugarcrepe" / "images").exists()
    collection = home / SHARED / "coco-val2017"
    assert not [p for p in collection.rglob("*") if p.is_file()]  # no archive, no partial file, no image
    assert main(["data", "list", "sugarcrepe"]) == 0
    out = capsys.readouterr().out
    assert "sugarcrepe  [partial]" in out and "coco-val2017           absent" in out
    # a partial benchmark is still found, with a warning, by commands without --data
    assert resolve_data("sugar_crepe/swap_att") == home / "sugarcrepe"


def test_shared_images_are_fetched_once_and_linked(files, home, monkeypatch):
    """VISLA Generic and SugarCrepe share COCO val2017: one download, one link each."""
    archive = _zip({"val2017/000000397133.jpg": b"jpeg bytes", "val2017/000000000139.jpg": b"more"})
    digest = hashlib.sha256(archive).hexdigest()
    coll = COLLECTIONS["coco-val2017"]
    remote = coll.source.files[0]
    patched = type(remote)(remote.url, remote.path, type(remote.checksum)("sha256", digest, "test"), len(archive),
                           remote.unpack)
    monkeypatch.setitem(COLLECTIONS, "coco-val2017", type(coll)(coll.name, coll.title,
                                                                type(coll.source)((patched,), coll.source.origin),
                                                                coll.license))
    files.add_url(remote.url, archive)
    fetch_benchmark("visla-generic", role="images", progress=False)
    fetch_benchmark("sugarcrepe", role="images", progress=False)
    gets = [r for r in files.requests_for("/images.cocodataset.org/zips/val2017.zip") if r.method == "GET"]
    assert len(gets) == 1
    for name in ("visla-generic", "sugarcrepe"):
        link = home / name / "images"
        assert link.is_symlink() and (link / "000000397133.jpg").read_bytes() == b"jpeg bytes"
        assert benchmark_state(benchmark_sources(name)).parts["images"].status == "ready"
    checks = verify_benchmark("sugarcrepe")
    assert [(c.part, c.ok) for c in checks] == [("annotations", None), ("images", True)]


def test_verify_marks_verified_then_catches_a_changed_file(files, home, shared_data, capsys):
    _serve_sugarcrepe_annotations(files, shared_data)
    fetch_benchmark("sugarcrepe", role="annotations", progress=False)
    assert main(["data", "verify", "sugarcrepe"]) == 0
    assert "sugarcrepe/annotations: verified" in capsys.readouterr().out
    assert benchmark_state(benchmark_sources("sugarcrepe")).parts["annotations"].status == "verified"
    path = home / "sugarcrepe" / "swap_obj.json"
    path.write_bytes(path.read_bytes().replace(b"a", b"b", 1))
    assert main(["data", "verify", "sugarcrepe"]) == 2
    out = capsys.readouterr().out
    assert "sugarcrepe/annotations: CORRUPT" in out and "swap_obj.json" in out
    assert benchmark_state(benchmark_sources("sugarcrepe")).parts["annotations"].status == "corrupt"


def test_path_and_resolve_data(home, capsys):
    assert main(["data", "path", "spec"]) == 1
    captured = capsys.readouterr()
    assert captured.out.strip() == str(home / "spec") and "spotdiff data fetch spec" in captured.err
    with pytest.raises(ConfigError, match="looked in"):
        resolve_data("spec")
    assert resolve_data("spec", home / "elsewhere") == home / "elsewhere"


def test_manual_parts_say_what_to_do_and_count_once_done(files, home, shared_data):
    """VL-CheckList's HAKE images need a person; fetch names the route, and the part is ready once done."""
    decl = benchmark_sources("vl-checklist")
    hake = decl.part("images-hake")
    with pytest.raises(FetchIncomplete, match="manual step needed") as info:
        fetch_benchmark("vl-checklist", parts=["images-hake"], progress=False)
    assert "DirtyHarryLYL/HAKE" in str(info.value) and str(home / "vl-checklist" / "images" / "hake") in str(info.value)
    for rel in hake.source.expect:
        (home / "vl-checklist" / rel).mkdir(parents=True)
    assert fetch_benchmark("vl-checklist", parts=["images-hake"], progress=False)[0].status == "present"
    assert benchmark_state(decl).parts["images-hake"].status == "ready"


def test_fetch_ignores_parts_that_do_not_match_the_role(home):
    from spotdiff.data import select_parts

    decl = benchmark_sources("aro-coco-order")
    assert [p.name for p in select_parts(decl, role="annotations")] == ["annotations"]
    assert [p.name for p in select_parts(decl, role="images")] == ["images"]
    assert [p.name for p in select_parts(decl, parts=["mieb"], role="annotations")] == ["mieb"]  # parquet: both
    assert not (home / "aro-coco-order" / STAGING).exists()


def test_report_finds_the_fetched_copy_when_the_recorded_folder_is_gone(files, home, shared_data, tmp_path):
    from spotdiff.benchmarks import get_benchmark
    from spotdiff.report.gallery import CaseSource

    _serve_sugarcrepe_annotations(files, shared_data)
    fetch_benchmark("sugarcrepe", role="annotations", progress=False)
    digest = get_benchmark("sugarcrepe")(home / "sugarcrepe").data_digest()
    gone = str(tmp_path / "moved-away")
    cases, note = CaseSource._load("sugarcrepe", gone, {}, digest, "swap_obj")
    assert note is None and len(cases) == 245
    other, note = CaseSource._load("sugarcrepe", gone, {}, "0" * 64, "swap_obj")
    assert other == {} and "changed since the run" in note
    _, note = CaseSource._load("vl-checklist", gone, {}, digest)  # not fetched either: says where it looked
    assert f"looked in {home / 'vl-checklist'}" in note
