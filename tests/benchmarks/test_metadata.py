"""A benchmark is declared once: the registry names it, the declaration checks itself, and every command
that describes a benchmark reads the same declaration."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.benchmarks.base import Benchmark
from spotdiff.benchmarks.metadata import BenchmarkMetadata
from spotdiff.benchmarks.shared import images_part
from spotdiff.benchmarks.sources import HubSource, ImagesSource, Part, RemoteFile, UrlSource, github_files
from spotdiff.cli import main
from spotdiff.errors import ConfigError
from spotdiff.registry import Registry

_COMMIT = "0" * 40


def _valid() -> BenchmarkMetadata:
    return BenchmarkMetadata(
        title="Toy (A et al., 2024)",
        description="Toy: a declaration for tests (A et al., 2024)",
        paper="A. Toy. 2024",
        reference="https://example.org/toy",
        citation="@misc{toy}",
        license="MIT",
        protocols=("i2t-top1", "group"),
        main_score=("i2t-top1", "accuracy"),
        layout="DIR/toy.json",
        parts=(
            Part("annotations", "annotations", github_files("a/toy", _COMMIT, [("toy.json", "toy.json", 1, "md5:00")])),
            images_part(("coco-val2017", "")),
        ),
        subsets=("x", "y"),
        groups=(("both", ("x", "y")),),
    )


def _licence_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("licence:")]


@pytest.mark.parametrize("name", BENCHMARKS.names())
def test_data_list_and_benchmarks_show_the_same_licence(name, tmp_path, capsys):
    assert main(["data", "list", name, "--root", str(tmp_path)]) == 0
    listed = _licence_lines(capsys.readouterr().out)
    assert main(["benchmarks", name]) == 0
    described = _licence_lines(capsys.readouterr().out)
    assert listed == described == [f"licence: {BENCHMARKS.get(name).metadata.license}"]


@pytest.mark.parametrize("name", BENCHMARKS.names())
def test_the_registry_names_every_benchmark_and_its_declaration(name):
    cls = BENCHMARKS.get(name)
    assert cls.name == cls.metadata.name == name
    meta = cls.metadata
    assert (cls.protocols, cls.subsets, cls.layout, cls.description) == (
        meta.protocols, meta.subsets, meta.layout, meta.description
    )


def test_a_registered_class_takes_its_name_from_the_decorator():
    registry: Registry[type[Benchmark]] = Registry(
        "benchmark", "spotdiff.benchmarks", on_register=BENCHMARKS.on_register
    )

    @registry.register("toy")
    class Toy(Benchmark):
        metadata = _valid()

    assert Toy.name == Toy.metadata.name == "toy"
    assert Toy.protocols == ("i2t-top1", "group") and Toy.subsets == ("x", "y")


def test_a_valid_declaration_passes():
    meta = _valid()
    assert meta.subset_groups == {"both": ("x", "y")}
    assert [p.name for p in meta.required] == ["annotations", "images"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"main_score": ("retrieval", "rsum")}, "main score's protocol 'retrieval' is not one of i2t-top1, group"),
        ({"groups": (("g", ("x", "z")),)}, "group 'g' names unknown subsets ['z']"),
        ({"protocols": ()}, "protocols must be non-empty"),
        ({"license": " "}, "license is empty"),
        ({"subsets": ("x", "x"), "groups": ()}, "repeated subset"),
        ({"parts": (_valid().parts[0], _valid().parts[0])}, "repeated data part in ['annotations', 'annotations']"),
        (
            {"parts": (Part("data", "both", HubSource("a/toy", "main", ("*.parquet",))),)},
            "part 'data': hub revision 'main' is not a commit",
        ),
        (
            {"parts": (Part("a", "annotations", UrlSource((RemoteFile("https://x/a.json", "a.json"),),
                                                          "github.com/a/toy")),)},
            "part 'a': github.com/a/toy is not pinned to a commit",
        ),
        (
            {"parts": (Part("a", "annotations", UrlSource((RemoteFile("https://x/main/a.json", "a.json"),),
                                                          "github.com/a/toy", _COMMIT)),)},
            f"is not at revision {_COMMIT}",
        ),
        (
            {"parts": (Part("images", "images", ImagesSource((("no-such-images", ""),), "images")),)},
            "unknown image collections ['no-such-images']",
        ),
    ],
)
def test_a_declaration_that_contradicts_itself_fails_at_once(change, message):
    with pytest.raises(ConfigError, match=re.escape("benchmark declaration 'Toy (A et al., 2024)'")) as err:
        replace(_valid(), **change)
    assert message in str(err.value)


def test_a_benchmark_without_a_declaration_cannot_register():
    with pytest.raises(ConfigError, match="declares no metadata"):
        @BENCHMARKS.register("undeclared")
        class Undeclared(Benchmark):
            pass


def test_a_part_that_does_not_exist_is_named():
    with pytest.raises(ConfigError, match="has no data part 'nope'; parts: annotations, images"):
        _valid().part("nope")


# ------------------------------------------------------------------------------------- loader options


def test_an_unknown_option_is_refused_with_the_known_ones_and_a_suggestion(tmp_path, capsys):
    """`-o all_record=true` on VALSE, or ARO-Order's pos_tagger on ARO's VG-Relation, no longer pass unread."""
    from spotdiff.testing.formats import write_aro_vg_relation, write_valse

    valse = write_valse(tmp_path / "valse")
    argv = ["eval", "--model", "hf-clip:/nowhere", "--benchmark", "valse", "--data", str(valse), "--no-store",
            "--no-cache", "-o", "all_record=true"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "benchmark 'valse' has no option 'all_record'; did you mean 'all_records'? (its options: " in err
    assert "all_records, image_root, images)" in err and "Traceback" not in err
    aro = write_aro_vg_relation(tmp_path / "aro")
    refused = r"'aro-vg-relation' has no option 'pos_tagger' \(its options: crop, image_root, images"
    with pytest.raises(ConfigError, match=refused):
        BENCHMARKS.get("aro-vg-relation")(aro, pos_tagger="heuristik")
    with pytest.raises(ConfigError, match=r"'spec' has no option 'images' \(its options: image_root\)"):
        BENCHMARKS.get("spec")(tmp_path, images=str(tmp_path))
    assert BENCHMARKS.get("valse")(valse, all_records="true").options == {"all_records": "true"}


@pytest.mark.parametrize("name", sorted(BENCHMARKS.names()))
def test_every_declared_option_is_read_by_the_loader(name):
    """A declared option that no code reads would be accepted and ignored: each is named in its class's module."""
    import inspect

    from spotdiff.benchmarks import _io

    cls = BENCHMARKS.get(name)
    modules = {inspect.getmodule(k) for k in cls.__mro__ if issubclass(k, Benchmark)} | {_io}  # _io: images_dir
    code = "\n".join(line for m in modules for line in inspect.getsource(m).splitlines() if "option_names" not in line)
    for option in cls.known_options():
        assert f'"{option}"' in code, (name, option)


def test_the_2024_benchmarks_say_what_every_metric_reproduces(capsys) -> None:
    """`spotdiff benchmarks NAME` lists every metric of every protocol of the 2023-2024 benchmarks with the
    paper table or the authors' function it reproduces (or that it is spotdiff's own reading); a source
    naming a metric its protocol does not report, or a protocol the benchmark does not have, is refused."""
    from spotdiff.benchmarks.suites import suite_benchmarks
    from spotdiff.commands.benchmarks import metric_rows
    from spotdiff.protocols import get_protocol

    for name in suite_benchmarks("compositionality-2024"):
        bench = BENCHMARKS.get(name)
        missing = [(p, m) for p, m, source in metric_rows(bench) if source is None]
        assert not missing, f"{name}: no source for {missing}"
        for protocol, metrics, _ in bench.metadata.metric_sources:
            assert set(metrics) <= set(get_protocol(protocol).metrics), (name, protocol, metrics)
    assert main(["benchmarks", "whatsup"]) == 0
    out = capsys.readouterr().out
    assert "metrics (what each reproduces):" in out
    assert "whatsup: pair_accuracy: Table 3's pair and set accuracy of the controlled sets" in out
    with pytest.raises(ConfigError, match="metric source 'answer'"):
        replace(_valid(), metric_sources=(("answer", ("pair",), "MMVP"),))


def test_every_benchmark_that_reads_generated_answers_names_its_readings(capsys) -> None:
    """Issue 45, item 7: a benchmark with a protocol that reads generated answers (``gen_*`` metrics) declares
    how it reads them, one reading the default; where a loader option chooses the reading, the options listed
    are exactly those it takes, its default first; `spotdiff benchmarks NAME` prints them, a peer's included."""
    import importlib

    from spotdiff.benchmarks.metadata import Reading
    from spotdiff.protocols import get_protocol

    reading = [n for n in BENCHMARKS.names()
               if any(m.startswith("gen_") for p in BENCHMARKS.get(n).protocols for m in get_protocol(p).metrics)]
    assert {"mmvp", "vismin", "vinoground-lmm", "naturalbench", "colorswap", "eqben", "winoground"} <= set(reading)
    for name in reading:
        readings = BENCHMARKS.get(name).metadata.readings
        assert [r.default for r in readings].count(True) == 1, name
    for name, module in (("mmvp", "mmvp"), ("vismin", "vismin"), ("vinoground-lmm", "vinoground")):
        loader = importlib.import_module(f"spotdiff.benchmarks.{module}")
        offered = [r.choice.removeprefix("-o reader=") for r in BENCHMARKS.get(name).metadata.readings
                   if r.choice.startswith("-o reader=")]  # fmt: skip
        assert offered == list(loader.READERS), name  # every option documented, in order, the default first
        assert BENCHMARKS.get(name).metadata.readings[0].default
    assert main(["benchmarks", "mmvp"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "readings of generated answers" in out
    assert "default: -o reader=lmms-eval (lmms-eval's): _extract_answer_letter" in out
    assert "-o reader=corrected (spotdiff's)" in out and "-o reader=strict (spotdiff's)" in out
    assert "--judge SPEC (the authors'): scripts/gpt_grader.py" in out
    assert main(["benchmarks", "vinoground-lmm"]) == 0
    assert "not offered (lmms-eval's): the vinoground task" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(ConfigError, match="exactly one offered reading is the default, got 2"):
        replace(_valid(), readings=(Reading("-o reader=a", "x", "r", True), Reading("-o reader=b", "x", "r", True)))
