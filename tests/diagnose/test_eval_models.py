"""`spotdiff eval` end to end: tiny models built from configs, saved, and loaded by path.

Every model family is evaluated through the command line on fixture datasets written in the
published formats with real image files, for each protocol that applies (the engine's own tests,
matrices against the model's outputs included, are in test_engine.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.diagnose.engine import Engine
from spotdiff.diagnose.store import RunStore
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.testing.formats import write_aro_vg_relation, write_karpathy, write_spec, write_winoground
from spotdiff.testing.tiny_models import (
    make_tiny_blip_retrieval,
    make_tiny_clip,
    make_tiny_open_clip,
    make_tiny_siglip,
    make_tiny_tokenizer,
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def data(root: Path) -> dict[str, Path]:
    return {
        "winoground": write_winoground(root / "winoground", n=6),
        "spec": write_spec(root / "spec", n=2),
        "aro-vg-relation": write_aro_vg_relation(root / "aro", n=6),
        "coco-retrieval": write_karpathy(root / "coco", "coco", n_images=4),
        "valse": _write_valse(root / "valse"),
        "visla-generic": _write_visla(root / "visla"),
    }


def _write_valse(root: Path) -> Path:
    """Two VALSE records (published schema) and their images."""
    from PIL import Image

    (root / "images").mkdir(parents=True)
    records = {}
    for i in range(3):
        name = f"v7w_{i}.jpg"
        Image.new("RGB", (40, 30), (40 * i, 90, 200 - 30 * i)).save(root / "images" / name)
        records[f"counting_{i}"] = {
            "dataset": "visual7w", "original_split": "test", "dataset_idx": str(i),
            "linguistic_phenomena": "counting", "image_file": name, "caption": f"there are {i + 1} cats",
            "foil": f"there are {i + 5} cats", "classes": str(i + 1), "classes_foil": str(i + 5),
            "mturk": {"foil": 0, "caption": 3, "other": 0},
        }  # fmt: skip
    (root / "counting-hard.json").write_text(json.dumps(records), encoding="utf-8")
    return root


def _write_visla(root: Path) -> Path:
    from PIL import Image

    (root / "images").mkdir(parents=True)
    rows = ["filename\tcaption\tsecond positive\tnegative_caption"]
    for i in range(4):
        name = f"{i:012d}.jpg"
        Image.new("RGB", (36, 28), (60 * i, 30, 90)).save(root / "images" / name)
        rows.append(f"{name}\ta red cup on the table {i}\tthe table has a red cup {i}\ta red cup under the table {i}")
    (root / "Generic_VISLA.tsv").write_text("\r\n".join(rows) + "\r\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def models(root: Path) -> dict[str, str]:
    config, ckpt = make_tiny_open_clip(root / "openclip")
    return {
        "hf-clip": f"hf-clip:{make_tiny_clip(root / 'clip')}",
        "hf-siglip": f"hf-siglip:{make_tiny_siglip(root / 'siglip')}",
        "blip-itc": f"blip-itc:{make_tiny_blip_retrieval(root / 'blip')}",
        "blip-itm": f"blip-itm:{root / 'blip'}",
        "open-clip": f"open-clip:{config}@{ckpt}",
    }


CASES = [
    ("hf-clip", "winoground", "group", ("text", "image", "group")),
    ("hf-clip", "spec", "spec", ("i2t", "t2i")),
    ("hf-clip", "aro-vg-relation", "i2t-top1", ("accuracy",)),
    ("hf-clip", "coco-retrieval", "retrieval", ("i2t_r1", "t2i_r5")),
    ("hf-clip", "visla-generic", "i2t", ("accuracy", "p1_n", "p2_n")),
    ("hf-clip", "visla-generic", "t2t", ("accuracy", "p1_n", "p2_n")),
    ("hf-clip", "valse", "valse-pairwise", ("acc_r",)),
    ("hf-siglip", "winoground", "group", ("group",)),
    ("hf-siglip", "spec", "spec", ("i2t",)),
    ("blip-itc", "winoground", "group", ("group",)),
    ("blip-itc", "visla-generic", "t2t", ("accuracy",)),
    ("blip-itm", "valse", "valse-prob", ("acc", "p_c", "p_f", "min_pc_pf")),
    ("blip-itm", "winoground", "group", ("group",)),
    ("open-clip", "winoground", "group", ("group",)),
    ("open-clip", "coco-retrieval", "retrieval", ("i2t_r1",)),
]


@pytest.mark.parametrize(("family", "benchmark", "protocol", "metrics"), CASES)
def test_eval_by_path(
    family: str, benchmark: str, protocol: str, metrics: tuple[str, ...], models, data, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite"

    def argv(out: Path) -> list[str]:
        return [
            "eval", "--model", models[family], "--benchmark", benchmark, "--data", str(data[benchmark]),
            "--protocol", protocol, "--out", str(out), "--store", str(store), "--cache", str(tmp_path / "cache"),
            "--quiet", "--n-boot", "200", "--batch-size", "3",
        ] + (["--subset", "counting-hard"] if benchmark == "valse" else [])  # fmt: skip

    out, out2 = tmp_path / "out", tmp_path / "out2"
    assert main(argv(out)) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["benchmark"] == benchmark and result["model"] == models[family]
    for metric in metrics:
        value = result["metrics"]["all"][metric]
        assert 0.0 <= value <= 100.0
        lo, hi = result["metrics"]["all"][f"{metric}_ci95"]
        assert lo <= hi
    lines = (out / "scores.jsonl").read_text().splitlines()
    assert len(lines) == result["n_cases"] > 0
    (run,) = RunStore(store).runs()
    assert run.status == "done" and run.model_identity["weights_sha256"]
    # a second run reads everything from the cache and gives the same per-case scores
    assert main(argv(out2)) == 0
    assert (out2 / "scores.jsonl").read_text() == (out / "scores.jsonl").read_text()


def test_missing_model_path_is_a_clear_error(data, tmp_path: Path, capsys) -> None:
    argv = ["eval", "--model", f"hf-clip:{tmp_path / 'nope'}", "--benchmark", "winoground",
            "--data", str(data["winoground"]), "--no-store", "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 2
    assert str(tmp_path / "nope") in capsys.readouterr().err


def test_unknown_protocol_is_refused_before_loading(data, capsys) -> None:
    argv = ["eval", "--model", "hf-clip:/does/not/matter", "--benchmark", "winoground",
            "--data", str(data["winoground"]), "--protocol", "retrieval", "--no-store", "--quiet"]  # fmt: skip
    assert main(argv) == 2
    assert "does not support protocol 'retrieval'" in capsys.readouterr().err


def test_benchmarks_command_lists_every_benchmark(capsys) -> None:
    assert main(["benchmarks"]) == 0
    out = capsys.readouterr().out
    names = ["visla-generic", "visla-spatial", "sugarcrepe", "valse", "vl-checklist", "eqben", "winoground",
             "spec", "aro-vg-relation", "aro-vg-attribution", "aro-coco-order", "aro-flickr-order", "crepe",
             "coco-retrieval", "flickr-retrieval"]  # fmt: skip
    for name in names:
        assert f"\n{name}\n" in f"\n{out}", name
    assert out.count("data layout:") >= len(names)


def test_models_command_lists_families(capsys) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for prefix in ("hf-clip:", "hf-siglip:", "blip-itm:", "blip-itc:", "open-clip:", "sentence-transformers:"):
        assert prefix in out
    assert "minilm ->" in out


def test_tokenizer_fixture_is_offline(tmp_path: Path) -> None:
    tok = make_tiny_tokenizer(tmp_path)
    assert tok("a red cup")["input_ids"][0] == tok.cls_token_id


def test_valse_prob_ranks_on_the_itm_match_logit(models, data) -> None:
    """blip-itm hands valse-prob its (no-match, match) ITM logits, equal to the model's own forward;
    acc_r ranks the match logit (VALSE's code), p_c / p_f threshold softmax(logits)[1] at 0.5."""
    import torch
    from transformers import BlipForImageTextRetrieval

    from spotdiff.protocols import get_protocol

    scorer = load_scorer(models["blip-itm"], ScorerOptions(device="cpu", batch_size=2))
    cases = get_benchmark("valse")(data["valse"]).load("counting-hard")
    mats = list(Engine(scorer, None, progress=False).case_matrices(cases, "match-prob"))
    model = BlipForImageTextRetrieval.from_pretrained(models["blip-itm"].split(":", 1)[1]).eval()
    protocol = get_protocol("valse-prob")
    for case, m in zip(cases, mats, strict=True):
        assert m.shape == (1, 2, 2)
        pixels = scorer.image_processor(images=[case.images[0].load()] * 2, return_tensors="pt")["pixel_values"]
        tok = scorer.tokenizer(list(case.texts), padding=True, return_tensors="pt")
        with torch.no_grad():
            direct = model(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"], pixel_values=pixels,
                           use_itm_head=True).itm_score.numpy()  # fmt: skip
        np.testing.assert_allclose(m[0], direct, atol=1e-4)
        (out,) = protocol.outcomes(case, m)
        prob = torch.softmax(torch.from_numpy(direct), dim=-1)[:, 1].numpy()
        assert out["acc_r"] == float(direct[0, 1] > direct[1, 1])
        assert out["p_c"] == float(prob[0] > 0.5) and out["p_f"] == float(prob[1] < 0.5)
