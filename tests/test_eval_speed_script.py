"""``measurements/eval_speed.py``: how its device figure sizes its sides, runs the forward side, and reads the
ratios (the script is loaded by path; no model is built)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "measurements" / "eval_speed.py"


@pytest.fixture(scope="module")
def es() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))  # as when run as a script: its folder's rows.py
    spec = importlib.util.spec_from_file_location("eval_speed_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sides(calls: list) -> object:
    """Sides whose "time" (returned, as the patched ``timed`` reads it) is 1 ms per item for the gauge, 0.1 ms
    for the other."""

    def setup(n: int) -> list:
        def gauge() -> float:
            calls.append(("gauge", n))
            return n / 1000

        def other() -> float:
            calls.append(("other", n))
            return n / 10_000

        return [gauge, other]

    return setup


def test_measure_caps_the_count_and_can_time_the_gauge_alone_in_trials(es, monkeypatch) -> None:
    monkeypatch.setattr(es, "timed", lambda fn: fn())
    calls: list = []
    n, times = es.measure(_sides(calls), 100, 10.0, 2, gauge=0, cap=3000, trial_all=False)
    # trials: 100 items take 0.1 s -> 100 * 8 + 1 = 801 -> 0.801 s -> 6409, capped at 3000 -> stop at the cap
    assert n == 3000
    assert times == [3.0, 0.3]
    trials = [("gauge", 100), ("gauge", 801), ("gauge", 3000)]
    assert calls == trials + [("gauge", 3000), ("other", 3000)] * 2


def test_measure_times_every_side_in_trials_by_default(es, monkeypatch) -> None:
    monkeypatch.setattr(es, "timed", lambda fn: fn())
    calls: list = []
    n, _ = es.measure(_sides(calls), 100, 0.5, 1, gauge=0)  # as the CPU figures run it
    assert n == 626  # 100 items take 0.1 s -> 100 * 1.25 * 0.5 / 0.1 + 1 = 626 -> 0.626 s >= 0.5 s
    assert calls == [("gauge", 100), ("other", 100), ("gauge", 626), ("other", 626), ("gauge", 626), ("other", 626)]


def test_forward_side_takes_the_pool_in_turn_at_the_batch_sizes(es) -> None:
    torch = pytest.importorskip("torch")
    seen: list = []

    def features(pixel_values):
        seen.append((pixel_values.data_ptr(), len(pixel_values)))
        return pixel_values

    model = SimpleNamespace(get_image_features=features)
    scorer = SimpleNamespace(device="cpu", model=model, batch_size=4)
    pool = [torch.zeros(4, 3), torch.ones(4, 3)]
    run = es.forward_side(scorer, pool, 10, threads=1)  # batches of 4, 4, 2
    first, second = pool[0].data_ptr(), pool[1].data_ptr()
    assert seen == [(first, 4), (second, 4)]  # the warm-up: the pool once
    seen.clear()
    run()
    assert seen == [(first, 4), (second, 4), (first, 2)]


@pytest.mark.parametrize(
    ("arrays", "files", "peer", "start", "parts"),
    [
        (0.95, 0.92, 0.2, "nothing below the goal", ["4.60x the peer"]),
        (0.30, 0.28, 0.1, "the harness's own machinery", ["reaches 0.30 of the forward", "on the files 0.28"]),
        (0.95, 0.05, 0.05, "decoding and resizing the JPEGs on the CPU", ["1.00x the peer's images/s"]),
        (0.50, 0.10, 0.10, "decoding and resizing the JPEGs on the CPU", [", so its machinery bounds it next"]),
        (0.95, 0.05, 0.14, "the harness's decoding path", ["0.36x the peer's images/s (0.14 of the forward)"]),
    ],
)
def test_bound_names_what_limits_the_jpeg_figure(es, arrays, files, peer, start, parts) -> None:
    line = es.bound(arrays, files, peer)
    assert line.startswith(start)
    for part in parts:
        assert part in line
    assert ("machinery bounds it next" in line) == (start.startswith("decoding and") and arrays < es.IMAGE_GOAL)


@pytest.mark.parametrize(
    ("name", "vision_m", "text_m", "vocab"),
    [
        ("vit-b-32", 87.85, 63.43, 49_408),
        ("vit-l-14", 303.97, 123.65, 49_408),
        ("siglip-so400m", 428.23, 449.73, 32_000),
    ],
)
def test_the_named_models_have_their_architectures_sizes(es, name: str, vision_m: float, text_m: float,
                                                         vocab: int) -> None:  # fmt: skip
    """The random models are as large as the real ones: open_clip's model profile gives ViT-B-32 87.85M image and
    63.43M text parameters, ViT-L-14 303.97M and 123.65M (with a 49,408-token vocabulary); open_clip's
    ``create_model("ViT-SO400M-14-SigLIP-384")`` on the meta device 428.23M and 449.73M (a 32,000-token vocabulary).
    Built on the meta device, nothing is allocated."""
    import torch
    from transformers import CLIPModel, SiglipModel

    config = es.clip_config(name, vocab_size=vocab)
    with torch.device("meta"):
        model = (SiglipModel if es.CLIPS[name]["family"] == "siglip" else CLIPModel)(config)
    heads = {"vision": ("vision_model", "visual_projection"), "text": ("text_model", "text_projection")}
    vision, text = (sum(p.numel() for part in parts if hasattr(model, part) for p in getattr(model, part).parameters())
                    for parts in heads.values())  # fmt: skip
    assert vision / 1e6 == pytest.approx(vision_m, rel=0.01)
    assert text / 1e6 == pytest.approx(text_m, rel=0.01)
