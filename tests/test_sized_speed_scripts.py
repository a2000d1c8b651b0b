"""The speed scripts the GPU run calls at real model sizes (issue 47): ``measurements/sized_models.py``'s configs
have the published parameter counts (built on the meta device), and ``vqa_prefix_speed.py`` and
``synth_generative_speed.py`` run end to end on the CPU with their tiny models, writing ``--json`` rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"
sys.path.insert(0, str(MEASUREMENTS))

import sized_models  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """SmolLM2's tokenizer folder as ``gpu_run.py prepare`` writes it for the GPU machine."""
    return sized_models.write_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.mark.parametrize("name", ["qwen2-vl-2b", "llava-1.5-7b", "sd15-unet", "sd15-inpaint-unet", "sd15-vae",
                                  "sd15-text"])  # fmt: skip
def test_sized_models_have_the_published_parameter_counts(name: str, tokenizer_dir: Path) -> None:
    published = sized_models.PUBLISHED_M[name.replace("inpaint-", "")] * 1e6
    if name == "llava-1.5-7b":  # SmolLM2's tokenizer is longer than Llama-2's 32064 rows: embeddings and lm_head
        from transformers import AutoTokenizer

        rows = sized_models.llava_vocab(len(AutoTokenizer.from_pretrained(tokenizer_dir)) + 1)
        assert rows > 32064
        published += (rows - 32064) * 4096 * 2
    got = sized_models.parameter_count(name, tokenizer_dir)
    assert abs(got - published) / published < 0.002, (name, got, published)


def _run(script: str, tmp_path: Path, *flags: str) -> dict:
    out = tmp_path / f"{script}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(MEASUREMENTS / f"{script}.py"), *flags, "--json", str(out)], check=True,
                   env=env, capture_output=True, timeout=600)  # fmt: skip
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny-llava"])  # "tiny" (Qwen2-VL): test_gpu_run_script.py
def test_vqa_prefix_speed_writes_its_rows_on_the_cpu(model: str, tmp_path: Path) -> None:
    got = _run("vqa_prefix_speed", tmp_path, "--model", model, "--cases", "1", "0", "--rounds", "1",
               "--image-tokens", "16")  # fmt: skip
    assert got["script"] == "vqa_prefix_speed" and got["model"] == model
    figures = [(r["figure"], r["limit_side"], r["image_tokens"], r["shape"]) for r in got["rows"]]
    assert figures == [
        ("VQAScore pairs/s, reuse over t2v_metrics", "t2v_metrics", 16, "2 x 2"),
        ("VQAScore pairs/s, reuse over no-reuse", "no-reuse", 16, "2 x 2"),
    ]
    for r in got["rows"]:
        seconds = r["seconds"]
        assert r["value"] == pytest.approx(4 / seconds["reuse"]) and r["unit"] == "pairs/s"
        assert r["limit"] == pytest.approx(4 / seconds[r["limit_side"]])
        assert r["ratio"] == pytest.approx(seconds[r["limit_side"]] / seconds["reuse"])
        assert r["goal"] is None and r["bound"] == ""  # no goal: a speed-up over the peer; no profile on the CPU
        assert r["dlog"] < 1e-4  # no-reuse (and Qwen2-VL's peer) score what reuse scores
