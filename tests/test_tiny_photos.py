"""``spotdiff.testing.tiny_models.write_photos``: the photo-like JPEG files of the speed scripts (eval_speed.py's
device figure, pipeline_speed.py), written in parts and by forked processes, file for file the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spotdiff.processes import can_fork
from spotdiff.testing.tiny_models import write_photos


def _bytes(paths: list[Path]) -> list[bytes]:
    return [p.read_bytes() for p in paths]


def test_photos_are_distinct_jpegs_of_the_size_asked(tmp_path: Path) -> None:
    paths = write_photos(tmp_path, 5, size=(64, 48))
    assert [p.name for p in paths] == [f"{i:05d}.jpg" for i in range(5)]
    assert sorted(tmp_path.iterdir()) == paths
    for path in paths:
        with Image.open(path) as image:
            assert (image.format, image.mode, image.size) == ("JPEG", "RGB", (64, 48))
    assert len(set(_bytes(paths))) == 5  # distinct content: the engine's content keys tell them apart
    pixels = np.asarray(Image.open(paths[0]), dtype=np.int16)
    assert 4 < np.abs(np.diff(pixels, axis=1)).mean() < 40  # a noisy smooth scene, neither flat nor white noise


@pytest.mark.skipif(not can_fork(), reason="needs fork")
def test_a_set_written_in_parts_or_by_workers_is_the_same(tmp_path: Path) -> None:
    whole = write_photos(tmp_path / "whole", 6, size=(32, 24), seed=3)
    write_photos(tmp_path / "parts", 2, size=(32, 24), seed=3)
    parts = write_photos(tmp_path / "parts", 6, start=2, size=(32, 24), seed=3, workers=2)
    assert _bytes(parts) == _bytes(whole)
    other_seed = write_photos(tmp_path / "other", 6, size=(32, 24), seed=4)
    assert not set(_bytes(other_seed)) & set(_bytes(whole))
