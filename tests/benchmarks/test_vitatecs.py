"""VITATECS: the repository's data/<Aspect>.jsonl layout with its quirks (repeated lines, a video in two
aspects, \\u escapes, VATEX clip names), the videos a user downloads, and protocol i2t-top1 equal to the
authors' per-aspect accuracy (transcribed) on score tables with ties, in strict and argmax modes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.errors import DataError
from spotdiff.protocols import get_protocol
from spotdiff.protocols.stats import evaluate
from spotdiff.testing.videos import VITATECS_LINES, write_vitatecs
from spotdiff.video.clips import VideoRef


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_vitatecs(tmp_path_factory.mktemp("vitatecs"))


def test_reads_the_repository_layout(data: Path) -> None:
    bench = get_benchmark("vitatecs")(data)
    cases = bench.load()
    assert [c.id for c in cases] == ["Direction/1", "Direction/2", "Direction/3", "Sequence/1", "Type/1", "Type/2"]
    assert bench.report.records == 6 == bench.report.cases  # a repeated line is a case, as the authors count it
    first = cases[0]
    assert first.texts == VITATECS_LINES[0][3:] and first.truth.tolist() == [[True, False]]
    assert first.roles == ("caption", "counterfactual") and first.subset == "Direction"
    assert first.tags == {"subset": "Direction", "src_dataset": "MSRVTT", "video_name": "video9770.mp4"}
    (video,) = cases[1].images
    assert isinstance(video, VideoRef) and video.path == data / "videos/VATEX/9HuUeribSjI_000000_000010.mp4"
    assert cases[1].texts[0] == "a man runs up to a pi\u00f1ata and kicks it down"  # the file's \u00f1 escape
    assert cases[0].images[0].key == cases[2].images[0].key  # one video, one key: scored once
    assert cases[1].images[0].key == cases[4].images[0].key  # a video in two aspects
    assert [c.id for c in get_benchmark("vitatecs")(data).load("Type")] == ["Type/1", "Type/2"]
    with pytest.raises(DataError, match=r"no VITATECS file Intensity.jsonl"):
        get_benchmark("vitatecs")(data).load("Intensity")
    moved = data / "elsewhere"
    (data / "videos").rename(moved)
    try:
        (ref,) = get_benchmark("vitatecs")(data, videos=str(moved)).load()[0].images
        assert ref.path == moved / "MSRVTT/video9770.mp4"
    finally:
        moved.rename(data / "videos")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("aspect", "Type", "aspect 'Type' in the file of Direction"), ("src_dataset", "YouCook2", "unknown src_dataset"),
     ("caption", "", "caption")],
)  # fmt: skip
def test_bad_lines_name_file_line_and_field(tmp_path: Path, field: str, value: str, message: str) -> None:
    root = write_vitatecs(tmp_path)
    path = root / "data/Direction.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record[field] = value
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=message) as err:
        get_benchmark("vitatecs")(root).load()
    assert "Direction.jsonl" in str(err.value) and "line 2" in str(err.value) and field in str(err.value)


def test_a_video_outside_the_data_is_refused(tmp_path: Path) -> None:
    root = write_vitatecs(tmp_path)
    path = root / "data/Sequence.jsonl"
    record = json.loads(path.read_text())
    record["video_name"] = "../../../../etc/passwd"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError, match=r"outside the data.*Sequence/1|Sequence/1.*outside the data"):
        get_benchmark("vitatecs")(root).load()


def _official_accuracy(caption_scores: np.ndarray, counterfactual_scores: np.ndarray) -> float:
    """eval_epoch of X-CLIP/eval_vitatecs_xclip.py (github.com/lscpku/VITATECS, commit 58bff59), per aspect:
    ``correct += (caption_score > counterfactual_score).sum().item()``, ``acc = correct / total``."""
    total, correct = 0, 0
    total += len(caption_scores)
    correct += int((caption_scores > counterfactual_scores).sum())
    return correct / total


@pytest.mark.parametrize("ties", ["strict", "argmax"])
def test_accuracy_per_aspect_equals_the_authors_with_ties(data: Path, ties: str) -> None:
    cases = get_benchmark("vitatecs")(data).load()
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 3, size=(300, 1, 2)).astype(float)  # [line, video, (caption, counterfactual)]: ties
    chosen = [dataclasses.replace(cases[k % len(cases)], id=f"{k}") for k in range(len(scores))]
    metrics = evaluate(get_protocol("i2t-top1", ties), chosen, list(scores), n_boot=0).metrics
    for aspect in ("Direction", "Sequence", "Type"):
        mine = np.array([c.subset == aspect for c in chosen])
        caption, counterfactual = scores[mine, 0, 0], scores[mine, 0, 1]
        if ties == "argmax":  # the caption is listed first: a tie goes to it
            counterfactual = counterfactual - 0.5
        assert metrics[aspect]["accuracy"] == pytest.approx(100 * _official_accuracy(caption, counterfactual))
