"""Each test of a declared benchmark registers it in a copy of the benchmark registry, dropped after the test, so
that the other tests (the generated reference pages, the data page) see the built-in benchmarks only."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spotdiff.benchmarks import BENCHMARKS


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    BENCHMARKS.names()  # the built-ins and plugins are discovered first, and kept
    monkeypatch.setattr(BENCHMARKS, "_items", dict(BENCHMARKS._items))
    monkeypatch.delenv("SPOTDIFF_INCLUDE_PATH", raising=False)


#: The declaration the tests start from (a CSV of minimal pairs), changed key by key by :func:`declare`.
BASE = {
    "spotdiff": 1, "name": "my-pairs", "title": "My pairs", "description": "photos with a caption and a minimal change",
    "paper": "unpublished", "reference": "https://example.org/my-pairs", "citation": "@misc{mine, title={My pairs}}",
    "license": "CC-BY-4.0", "protocols": ["i2t-top1"], "main_score": ["i2t-top1", "accuracy"], "images": "images",
    "data": [{"path": "pairs.csv"}],
    "cases": {"id": "{{ id }}", "subset": "{{ kind }}", "images": ["{{ image }}"],
              "texts": ["{{ caption }}", "{{ negative }}"], "truth": "first"},
}  # fmt: skip
KINDS = ("swap", "count", "colour")


def write_pairs(folder: Path, n: int = 6) -> Path:
    """``folder/pairs.csv`` (id, image, caption, negative, kind) and its ``n`` images in ``folder/images``."""
    from spotdiff.testing.tiny_models import tiny_images

    (folder / "images").mkdir(parents=True, exist_ok=True)
    lines = ["id,image,caption,negative,kind"]
    for i, image in enumerate(tiny_images(n, size=32)):
        image.save(folder / "images" / f"{i}.png")
        lines.append(f"p{i},{i}.png,a cat left of dog {i},a dog left of cat {i},{KINDS[i % 3]}")
    (folder / "pairs.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _declare(folder: Path, file: str = "pairs.yaml", **changes: object) -> Path:
    """:data:`BASE` with ``changes`` (``cases`` merged key by key; None removes a key) written as YAML in ``folder``."""
    decl = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for key, value in changes.items():
        if key == "cases" and isinstance(value, dict):
            decl["cases"].update(value)
            decl["cases"] = {k: v for k, v in decl["cases"].items() if v is not None}
        elif value is None:
            decl.pop(key, None)
        else:
            decl[key] = value
    path = folder / file
    path.write_text(yaml.safe_dump(decl, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    """A folder of minimal pairs: pairs.csv and images/."""
    return write_pairs(tmp_path / "pairs")


@pytest.fixture
def declare(pairs: Path):
    """``declare(**changes)``: the declaration of :data:`BASE` with ``changes`` written in the ``pairs`` folder
    (``file=`` its file name; ``cases`` merged key by key, None removing a key); its path."""
    return lambda file="pairs.yaml", **changes: _declare(pairs, file, **changes)
