"""Vinoground: the hub dataset's layout (vinoground.csv, the video folders, the shared copy linked as
Vinoground/), its quirks, and protocol group equal to a transcription of the authors' eval/imagebind_eval.py on
score tables with ties, in strict and argmax modes."""

from __future__ import annotations

import csv
import dataclasses
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.errors import DataError
from spotdiff.protocols import get_protocol
from spotdiff.protocols.stats import evaluate
from spotdiff.testing.hub_repos import vinoground_repo
from spotdiff.video.clips import VideoRef


def unpack(files: dict[str, bytes], root: Path) -> Path:
    """The hub repository's files in ``root``, its archives unzipped there (as ``spotdiff data fetch`` leaves
    them, and as the authors' README says: ``unzip vinoground_videos.zip``)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if name.endswith(".zip"):
            zipfile.ZipFile(io.BytesIO(data)).extractall(root)
        else:
            (root / name).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return unpack(vinoground_repo(n=4), tmp_path_factory.mktemp("vinoground"))


def test_reads_the_hub_layout(data: Path, tmp_path: Path) -> None:
    bench = get_benchmark("vinoground")(data)
    cases = bench.load()
    rows = list(csv.DictReader(io.StringIO((data / "vinoground.csv").read_text())))
    assert [c.id for c in cases] == ["0", "1", "2", "3"] and bench.report.records == 4
    first = cases[0]
    assert first.texts == (rows[0]["pos_cap"], rows[0]["neg_cap"]) and "," in first.texts[0]  # quoted in the CSV
    assert first.truth.tolist() == [[True, False], [False, True]]
    assert [ref.path.name for ref in first.images] == ["0_pos.mp4", "0_neg.mp4"]
    assert all(isinstance(ref, VideoRef) and ref.start is None for ref in first.images)
    assert first.tags == {"subset": "action", "major": "action", "minor": "", "pos_vid": "vid0a", "neg_vid": "vid0b"}
    assert cases[1].tags["minor"] == "interaction;cyclical" and cases[1].subset == "object"
    assert [c.id for c in get_benchmark("vinoground")(data).load("viewpoint")] == ["2"]
    linked = tmp_path / "home"  # spotdiff data fetch's layout: the shared copy linked as Vinoground/
    linked.mkdir()
    (linked / "Vinoground").symlink_to(data)
    first = get_benchmark("vinoground")(linked, image_root=str(data)).load()[0]
    assert first.images[0].path == linked / "Vinoground/vinoground_videos/0_pos.mp4"


def test_bad_rows_name_file_line_and_field(tmp_path: Path) -> None:
    root = unpack(vinoground_repo(n=3), tmp_path)
    path = root / "vinoground.csv"
    text = path.read_text()
    path.write_text(text.replace("\n2,viewpoint,", "\n7,viewpoint,"))
    with pytest.raises(DataError, match=r"index '7' at position 2") as err:
        get_benchmark("vinoground")(root).load()
    assert "vinoground.csv" in str(err.value) and "line 4" in str(err.value)
    path.write_text(text.replace("\n1,object,", "\n1,scenery,"))
    with pytest.raises(DataError, match=r"unknown major category 'scenery'.*major|major.*unknown major"):
        get_benchmark("vinoground")(root).load()


def _official_scores(results: np.ndarray) -> tuple[float, float, float]:
    """The loop of eval/imagebind_eval.py (github.com/Vinoground/Vinoground, commit 06a5715), transcribed:
    ``results`` is per pair ``videos @ texts.T`` ([pos, neg] x [pos_cap, neg_cap]); divided by the pairs."""
    text_correct = video_correct = group_correct = 0
    for r in results:
        video_correct += r[0][0] > r[1][0] and r[1][1] > r[0][1]
        text_correct += r[0][0] > r[0][1] and r[1][1] > r[1][0]
        group_correct += r[0][0] > r[1][0] and r[1][1] > r[0][1] and r[0][0] > r[0][1] and r[1][1] > r[1][0]
    n = len(results)
    return text_correct / n, video_correct / n, group_correct / n


def test_group_equals_imagebind_eval_with_ties(data: Path) -> None:
    cases = get_benchmark("vinoground")(data).load()
    rng = np.random.default_rng(2)
    scores = rng.integers(0, 3, size=(400, 2, 2)).astype(float)  # [pair, video, caption]: many ties
    chosen = [dataclasses.replace(cases[k % len(cases)], id=str(k)) for k in range(len(scores))]
    metrics = evaluate(get_protocol("group"), chosen, list(scores), n_boot=0).metrics["all"]
    text, video, group = _official_scores(scores)
    ours = (metrics["text"], metrics["image"], metrics["group"])
    assert ours == pytest.approx((100 * text, 100 * video, 100 * group))
    argmax = evaluate(get_protocol("group", "argmax"), chosen, list(scores), n_boot=0).metrics["all"]
    # argmax: a tie goes to the candidate listed first, so pos (listed first) wins its ties, neg loses them
    text_a = np.mean([r[0][0] >= r[0][1] and r[1][1] > r[1][0] for r in scores])
    video_a = np.mean([r[0][0] >= r[1][0] and r[1][1] > r[0][1] for r in scores])
    group_a = np.mean([r[0][0] >= r[0][1] and r[1][1] > r[1][0] and r[0][0] >= r[1][0] and r[1][1] > r[0][1]
                       for r in scores])  # fmt: skip
    assert (argmax["text"], argmax["image"], argmax["group"]) == pytest.approx((100 * text_a, 100 * video_a,
                                                                                100 * group_a))  # fmt: skip
