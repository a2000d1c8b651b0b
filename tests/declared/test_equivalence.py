"""The example declarations (examples/benchmarks/) of five built-ins of different shapes give the cases and the
metrics of the built-in loaders on the same data: SugarCrepe (JSON objects keyed by id; fixtures and the real
files), Winoground (the gated hub parquet, fetched by `spotdiff data fetch FILE` from the loopback hub),
NaturalBench (hub parquet, 2 images x 2 questions with candidate answers), VISLA Generic (the real TSV, positives
ordered by edit distance) and VITATECS (JSON lines and videos)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.api import evaluate, load_benchmark, load_model
from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import Case
from spotdiff.cli import main
from spotdiff.data import benchmark_dir
from spotdiff.protocols import evaluate as evaluate_cases
from spotdiff.protocols import get_protocol
from spotdiff.testing.formats import write_sugarcrepe
from spotdiff.testing.hub_repos import naturalbench_repo, winoground_repo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "benchmarks"


def _unit(*parts: str) -> float:
    """A number in [0, 1) fixed by ``parts``: a score that depends on content only."""
    return int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:8], "big") / 2**64


def _image_id(ref, by_key: bool) -> str:
    return ref.key if by_key else Path(ref.path).name


def content_scores(case: Case, needs: str, by_key: bool = True) -> np.ndarray:
    """A model whose scores follow the case's content (images by content key or file name, texts): two loaders
    of the same cases get the same matrices, and a text or image that differs changes them."""
    images = [_image_id(r, by_key) for r in case.images] or [""]
    if needs == "text-text":
        return np.array([[_unit(*sorted((a, b))) for b in case.texts] for a in case.texts])
    if needs == "answer-prob":
        answers = case.tags["answers"].split("/")
        return np.log([[[_unit(i, q, a) for a in answers] for q in case.texts] for i in images])
    return np.array([[_unit(i, t) for t in case.texts] for i in images])


def assert_same(declared: list[Case], builtin: list[Case], by_key: bool = True) -> None:
    """The same cases, in the same order: ids, texts, truth, images, tags, roles."""
    assert len(declared) == len(builtin) > 0
    for d, b in zip(declared, builtin, strict=True):
        assert (d.id, d.texts, d.tags, d.roles) == (b.id, b.texts, b.tags, b.roles)
        assert d.truth.tolist() == b.truth.tolist()
        assert [_image_id(r, by_key) for r in d.images] == [_image_id(r, by_key) for r in b.images]


def assert_same_metrics(declared: list[Case], builtin: list[Case], protocol: str, groups: dict,
                        by_key: bool = True) -> dict:  # fmt: skip
    needs = get_protocol(protocol).needs
    runs = [evaluate_cases(protocol, cases, [content_scores(c, needs, by_key) for c in cases], n_boot=200,
                           groups=groups).metrics for cases in (declared, builtin)]  # fmt: skip
    assert json.dumps(runs[0], sort_keys=True) == json.dumps(runs[1], sort_keys=True)  # NaN equal to NaN
    return runs[0]


def _both(example: str, builtin: str, data: Path | None = None) -> tuple[list[Case], list[Case], dict]:
    declared = load_benchmark(str(EXAMPLES / example), data)
    folder = data or declared.loader.root
    reference = get_benchmark(builtin)(folder)
    return list(declared), reference.load(), reference.metadata.subset_groups


def test_sugarcrepe_declaration_reads_the_builtin_cases(tmp_path: Path) -> None:
    declared, builtin, groups = _both("sugarcrepe.yaml", "sugarcrepe", write_sugarcrepe(tmp_path / "sc", n=2))
    assert_same(declared, builtin)
    metrics = assert_same_metrics(declared, builtin, "i2t-top1", groups)
    assert set(metrics) >= {"all", "subset_mean", "REPLACE", "swap_att"}
    assert declared[0].texts[0] == "a" + declared[0].texts[0][1:].rstrip()  # the fixture's trailing space is gone


@pytest.mark.shared
def test_sugarcrepe_declaration_on_the_real_files(shared_data: Path) -> None:
    declared, builtin, groups = _both("sugarcrepe.yaml", "sugarcrepe", shared_data / "sugarcrepe")
    assert len(declared) == 7511
    assert_same(declared, builtin, by_key=False)  # the COCO images are not here: compared by file name
    assert_same_metrics(declared, builtin, "i2t-top1", groups, by_key=False)


@pytest.mark.shared
def test_visla_generic_declaration_on_the_real_file(shared_data: Path) -> None:
    """The positives ordered by edit distance to the negative (a template with the edit_distance filter), and the
    tags swapped, d_p1_n, d_p2_n, as the built-in loader computes them."""
    declared, builtin, groups = _both("visla-generic.yaml", "visla-generic", shared_data / "visla")
    assert len(declared) == 973 and sum(c.tags["swapped"] == "1" for c in declared) > 0
    assert_same(declared, builtin, by_key=False)
    for protocol in ("visla-t2t", "visla-i2t"):
        assert_same_metrics(declared, builtin, protocol, groups, by_key=False)


def test_winoground_declaration_fetches_the_hub_parquet(hub, capsys) -> None:
    """`spotdiff data fetch FILE` brings the declared hub source (pinned revision) into the data home with the
    fetch code of every benchmark; the declaration then reads the image bytes lazily, as the built-in does."""
    hub.add_repo("facebook/winoground", winoground_repo(n=6), revision="b400e173549071916ad1b3d449293bc8d8b4b763")
    assert main(["data", "fetch", str(EXAMPLES / "winoground.yaml"), "-q"]) == 0
    assert "winoground-declared/data-0: fetched" in capsys.readouterr().out
    declared, builtin, groups = _both("winoground.yaml", "winoground")
    assert declared[0].images[0].load().size == (40, 32)
    assert_same(declared, builtin)
    assert_same_metrics(declared, builtin, "group", groups)
    manifest = json.loads((benchmark_dir("winoground-declared") / "spotdiff-manifest.json").read_text())
    assert manifest["parts"]["data-0"]["revision"] == "b400e173549071916ad1b3d449293bc8d8b4b763"


def test_naturalbench_declaration_reads_questions_and_answers(hub) -> None:
    """2 images x 2 questions, the suffix per question type appended by a template, the candidate answers and
    the truth from the gold columns (answers, reader tags); the unpinned source is fetched at main's commit."""
    hub.add_repo("BaiqiL/NaturalBench", naturalbench_repo(n=6, shards=2), revision="c" * 40)
    assert main(["data", "fetch", str(EXAMPLES / "naturalbench.yaml"), "-q"]) == 0
    declared, builtin, groups = _both("naturalbench.yaml", "naturalbench")
    assert {c.tags["answers"] for c in declared} == {"Yes/No", "A/B"}
    assert_same(declared, builtin)
    assert_same_metrics(declared, builtin, "naturalbench", groups)


def test_vitatecs_declaration_reads_the_clips(tmp_path: Path) -> None:
    """Videos named by two columns (videos/<src_dataset>/<video_name>), ids from the JSON-lines line numbers, the
    aspects in the paper's order; then the same metrics from a real video model (a tiny X-CLIP) end to end."""
    from spotdiff.testing.tiny_models import make_tiny_xclip
    from spotdiff.testing.videos import write_vitatecs

    data = write_vitatecs(tmp_path / "vitatecs")
    declared, builtin, _ = _both("vitatecs.yaml", "vitatecs", data)
    assert_same(declared, builtin)
    model = load_model(f"xclip:{make_tiny_xclip(tmp_path / 'xclip')}", device="cpu")
    settings = {"use_store": False, "cache": None, "n_boot": 50, "workers": 0, "progress": False}
    runs = [evaluate(model, name, data, **settings) for name in (str(EXAMPLES / "vitatecs.yaml"), "vitatecs")]
    assert json.dumps(runs[0].metrics) == json.dumps(runs[1].metrics) and runs[0].n_cases == len(builtin)
