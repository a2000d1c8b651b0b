"""The Python API: load_model / load_benchmark / evaluate / evaluate_grid, plugins, defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import spotdiff
from spotdiff.cli import main
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.testing.formats import write_winoground
from spotdiff.testing.tiny_models import make_tiny_blip_retrieval, make_tiny_clip, tiny_images


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_clip(tmp_path_factory.mktemp("api") / "clip")


def _direct_clip(path: Path, images: list[Image.Image], texts: list[str]) -> np.ndarray:
    from transformers import AutoProcessor, CLIPModel

    model, proc = CLIPModel.from_pretrained(path).eval(), AutoProcessor.from_pretrained(path)
    with torch.no_grad():
        img = model.get_image_features(pixel_values=proc(images=images, return_tensors="pt")["pixel_values"])
        tok = proc.tokenizer(texts, padding=True, return_tensors="pt")
        txt = model.get_text_features(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"])
    img = getattr(img, "pooler_output", img)
    txt = getattr(txt, "pooler_output", txt)
    img, txt = img / img.norm(dim=-1, keepdim=True), txt / txt.norm(dim=-1, keepdim=True)
    return (img @ txt.T).numpy()


def test_score_a_folder_in_three_lines(clip: Path, tmp_path: Path) -> None:
    """Paths, PIL images and arrays all score; the matrix equals the model's own forward."""
    images = tiny_images(3)
    for k, im in enumerate(images):
        im.save(tmp_path / f"{k}.png")
    texts = ["a red cup", "a blue bowl on a table"]

    model = spotdiff.load_model(f"hf-clip:{clip}", device="cpu")
    scores = model(sorted(tmp_path.glob("*.png")), texts)

    expected = _direct_clip(clip, [Image.open(p).convert("RGB") for p in sorted(tmp_path.glob("*.png"))], texts)
    assert scores.shape == (3, 2)
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    np.testing.assert_allclose(model(images, texts), scores, atol=1e-6)  # PIL images, same pixels
    arrays = [np.asarray(im) for im in images]
    np.testing.assert_allclose(model(arrays, texts), scores, atol=1e-6)
    emb = model.embed_images(arrays)
    assert emb.shape[0] == 3 and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(emb @ model.embed_texts(texts).T, scores, atol=1e-5)


def test_pair_scorer_is_callable(tmp_path: Path) -> None:
    blip = make_tiny_blip_retrieval(tmp_path / "blip")
    model = spotdiff.load_model(f"blip-itm:{blip}", device="cpu")
    images, texts = tiny_images(2), ["a cup", "a bowl", "a cat"]
    scores = model(images, texts)
    assert scores.shape == (2, 3) and np.all((scores >= 0) & (scores <= 1))
    rows = model.score_pairs(images, [texts, texts])
    np.testing.assert_allclose(scores, np.stack(rows), atol=1e-6)


def test_text_only_model_refuses_images() -> None:
    model = spotdiff.load_model("minilm", device="cpu")
    with pytest.raises(ConfigError, match="does not score images"):
        model(tiny_images(1), ["a cat"])
    assert model.embed_texts(["a cat", "a dog"]).shape[0] == 2


def test_load_benchmark_and_evaluate_equal_the_cli(clip: Path, tmp_path: Path) -> None:
    data = write_winoground(tmp_path / "wino", n=5)
    bench = spotdiff.load_benchmark("winoground", data)
    assert len(bench) == 5 and bench.report.cases == 5 and bench.metadata.main_score == ("group", "group")
    assert all(c.shape == (2, 2) for c in bench)

    store = tmp_path / "runs.sqlite"
    result = spotdiff.evaluate(f"hf-clip:{clip}", "winoground", data, store=store, cache=None, n_boot=200, seed=3)
    assert main(["eval", "--model", f"hf-clip:{clip}", "--benchmark", "winoground", "--data", str(data),
                 "--store", str(store), "--no-cache", "--n-boot", "200", "--seed", "3", "--out", str(tmp_path / "o"),
                 "-q"]) == 0  # fmt: skip
    cli = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert result.protocol == cli["protocol"] == "group" and result.n_cases == cli["n_cases"] == 5
    for metric in ("text", "image", "group"):
        assert result.metrics["all"][metric] == pytest.approx(cli["metrics"]["all"][metric], abs=0.005)
    with RunStore(store) as rs:
        stored = rs.get(result.run_id)
    assert stored.metrics == result.metrics and stored.model == f"hf-clip:{clip}"

    frame = result.to_pandas()
    assert len(frame) == 5 and set(frame["case"]) == {c.id for c in bench}
    assert frame["group"].mean() * 100 == pytest.approx(result.metrics["all"]["group"])
    assert {"subset", "text", "image", "tag"} <= set(frame.columns)
    first = result.cases[0]
    assert np.asarray(first["scores"]).shape == (2, 2)


def test_evaluate_picks_the_protocol_the_model_serves(shared_data: Path, caplog: pytest.LogCaptureFixture) -> None:
    """minilm serves text-text only: visla's first protocol (image-text) is skipped for T2T, and said."""
    with caplog.at_level("INFO"):
        result = spotdiff.evaluate("minilm", "visla-generic", shared_data / "visla", use_store=False, cache=None,
                                   n_boot=0, progress=False, limit=60)  # fmt: skip
    assert result.protocol == "visla-t2t" and result.n_cases == 60
    assert "--protocol not given: using visla-t2t" in caplog.text
    assert result.metrics["all"]["accuracy"] == pytest.approx(100 * result.to_pandas()["accuracy"].mean())


def test_evaluate_rejects_unknown_settings(clip: Path, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        spotdiff.evaluate(f"hf-clip:{clip}", "winoground", tmp_path, batchsize=4)
    with pytest.raises(TypeError, match=r"evaluate_grid\(\) got unexpected keyword arguments \['batchsize'\]"):
        spotdiff.evaluate_grid([f"hf-clip:{clip}"], ["winoground"], {}, batchsize=4)


def test_evaluate_signature_is_the_eval_settings() -> None:
    """Every keyword is an EvalConfig field (the CLI's settings) and is documented under Args:."""
    import inspect

    from spotdiff.api import EVALUATE_SETTINGS
    from spotdiff.diagnose.runner import EvalConfig

    params = inspect.signature(spotdiff.evaluate).parameters
    assert list(params)[:3] == ["model", "benchmark", "data"]
    assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in EVALUATE_SETTINGS)
    assert set(EvalConfig.__dataclass_fields__) >= EVALUATE_SETTINGS
    assert {"subset", "protocol", "out", "batch_size", "limit", "cache", "store", "n_boot", "ties"} <= EVALUATE_SETTINGS
    args = spotdiff.evaluate.__doc__.split("Args:")[1]
    assert all(f"\n        {k}: " in args for k in params)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"batch_size": 0}, "--batch-size must be a positive integer or 'auto', got 0"),
        ({"ties": "maybe"}, "unknown tie rule 'maybe'; expected one of strict, argmax"),
        ({"protocol": "nope"}, "benchmark 'winoground' does not support protocol 'nope'"),
        ({"subset": "nope"}, "benchmark 'winoground' has no subset 'nope'"),
    ],
)
def test_evaluate_bad_values_are_config_errors(clip: Path, tmp_path: Path, setting: dict, message: str) -> None:
    data = write_winoground(tmp_path / "wino", n=2)
    with pytest.raises(ConfigError, match=message):
        spotdiff.evaluate(f"hf-clip:{clip}", "winoground", data, use_store=False, cache=None, n_boot=0, **setting)


def test_result_is_a_view_of_the_run(clip: Path, tmp_path: Path) -> None:
    from spotdiff.diagnose.runner import EvalResult

    data = write_winoground(tmp_path / "wino", n=3)
    model = spotdiff.load_model(f"hf-clip:{clip}", device="cpu", batch_size=2)
    result = spotdiff.evaluate(model, "winoground", data, use_store=False, cache=None, n_boot=0, progress=False)
    assert isinstance(result.run, EvalResult) and model.options.batch_size == 2  # the scorer's own batch size
    assert result.metrics is result.run.metrics and result.cases is result.run.cases
    assert (result.model, result.benchmark, result.protocol, result.n_cases) == (f"hf-clip:{clip}", "winoground",
                                                                                 "group", 3)  # fmt: skip
    assert result.run_id is None and result.load_report == result.run.load_report
    assert result.model_identity["spec"] == f"hf-clip:{clip}"
    assert repr(result) == f"Result(model='hf-clip:{clip}', benchmark='winoground', protocol='group', n_cases=3)"


def test_public_names_are_exported() -> None:
    from spotdiff import api

    for name in ("load_model", "load_benchmark", "evaluate", "evaluate_grid", "Grid", "Result", "LoadedBenchmark"):
        assert getattr(spotdiff, name) is getattr(api, name) and name in spotdiff.__all__
    assert set(spotdiff.__all__) <= set(dir(spotdiff))


def test_grid_of_two_models_and_two_benchmarks(clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Each cell is its own run; one table; a cell the model cannot serve is n/a (does not apply), not dropped
    and not a failure; --report renders."""
    clip2 = make_tiny_clip(tmp_path / "clip2", seed=1)
    wino = write_winoground(tmp_path / "wino", n=4)
    spec_dir = tmp_path / "spec"
    from spotdiff.testing.formats import write_spec

    write_spec(spec_dir, n=2)
    store = tmp_path / "runs.sqlite"
    argv = ["eval", "--model", f"hf-clip:{clip}", "--model", f"hf-clip:{clip2}", "--model", "minilm",
            "--benchmark", "winoground", "--benchmark", "spec", "--data", f"winoground={wino}",
            "--data", f"spec={spec_dir}", "--store", str(store), "--no-cache", "--n-boot", "50", "-q",
            "--out", str(tmp_path / "out"), "--report", str(tmp_path / "report")]  # fmt: skip
    assert main(argv) == 0  # minilm serves no protocol of the image benchmarks: those cells do not apply
    out = capsys.readouterr().out
    assert "3 models x 2 benchmarks" in out and "winoground group" in out and "spec i2t" in out
    assert out.count("n/a (does not apply): minilm on") == 2
    assert "serves none of its protocols: group (image-text)" in out
    assert "n/a: minilm" not in out
    with RunStore(store) as rs:
        runs = rs.runs(status="done")
    assert len(runs) == 4 and {r.benchmark for r in runs} == {"winoground", "spec"}
    assert (tmp_path / "report" / "report.html").is_file()
    cell = tmp_path / "out" / f"hf-clip_{str(clip).strip('/').replace('/', '_')}" / "winoground" / "metrics.json"
    assert json.loads(cell.read_text())["benchmark"] == "winoground"

    nothing = ["eval", "--model", "minilm", "--benchmark", "winoground", "--benchmark", "spec", "--data",
               f"winoground={wino}", "--data", f"spec={spec_dir}", "--no-store", "--no-cache", "-q"]  # fmt: skip
    assert main(nothing) == 1  # no cell applies: nothing was evaluated
    asked = ["eval", "--model", f"hf-clip:{clip}", "--model", "minilm", "--benchmark", "winoground", "--benchmark",
             "spec", "--data", f"winoground={wino}", "--data", f"spec={spec_dir}", "--protocol", "group",
             "--no-store", "--no-cache", "--n-boot", "0", "-q"]  # fmt: skip
    capsys.readouterr()
    assert main(asked) == 1  # a protocol asked for that a model cannot serve is a failure
    assert "n/a: minilm on winoground" in capsys.readouterr().out


def test_models_file_and_suite_expand(tmp_path: Path, shared_data: Path, capsys: pytest.CaptureFixture) -> None:
    models = tmp_path / "models.txt"
    models.write_text("# the offline text model\nminilm  # all-MiniLM-L6-v2\n\n", encoding="utf-8")
    visla = shared_data / "visla"
    argv = ["eval", "--models", str(models), "--suite", "visla", "--data", f"visla-generic={visla}",
            "--data", f"visla-spatial={visla}", "--no-store", "--no-cache", "--n-boot", "0", "-q",
            "--limit", "40"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 models x 2 benchmarks" in out and "visla-generic accuracy" in out and "visla-spatial accuracy" in out
    assert out.count("minilm") == 1  # one row


def test_single_value_options_refuse_repetition(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--model", "minilm", "--benchmark", "visla-generic", "--subset", "a", "--subset", "b"])
    assert "--subset takes one value and was given twice" in capsys.readouterr().err
    assert main(["eval", "--model", "minilm", "--benchmark", "visla-generic", "--benchmark", "visla-spatial",
                 "--data", "somewhere"]) == 2  # fmt: skip
    assert "give --data NAME=DIR for each" in capsys.readouterr().err


def test_third_party_plugins_register_through_entry_points(tmp_path: Path, shared_data: Path) -> None:
    """A package registers a scorer family and a benchmark without forking (entry points), as documented."""
    site = tmp_path / "site"
    (site / "myplugin").mkdir(parents=True)
    (site / "myplugin" / "__init__.py").write_text(textwrap.dedent('''
        import numpy as np
        from spotdiff.benchmarks.visla import VislaGeneric
        from spotdiff.scorers import EmbeddingScorer, ScorerOptions


        class WordCount(EmbeddingScorer):
            """A toy text model: bag of letters."""
            capabilities = frozenset({"text-text"})

            def identity(self):
                return {"spec": self.spec, "class": "WordCount", "config": "1", "weights": None}

            def encode_images(self, images):
                raise ValueError("no images")

            def encode_texts(self, texts):
                v = np.array([[t.count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], np.float32) + 1e-3
                return v / np.linalg.norm(v, axis=1, keepdims=True)


        def make(rest: str, options: ScorerOptions) -> WordCount:
            return WordCount(f"letters:{rest}", options)


        class MyVisla(VislaGeneric):
            name = "my-visla"
    '''), encoding="utf-8")
    dist = site / "myplugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplugin\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(
        "[spotdiff.scorers]\nletters = myplugin:make\n\n[spotdiff.benchmarks]\nmy-visla = myplugin:MyVisla\n",
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    run = [sys.executable, "-m", "spotdiff"]
    models = subprocess.run([*run, "models"], env=env, capture_output=True, text=True, check=True)
    assert "letters" in models.stdout
    benches = subprocess.run([*run, "benchmarks"], env=env, capture_output=True, text=True, check=True)
    assert "my-visla" in benches.stdout
    ev = subprocess.run([*run, "eval", "--model", "letters:x", "--benchmark", "my-visla", "--data",
                         str(shared_data / "visla"), "--no-store", "--no-cache", "--n-boot", "0", "-q"],
                        env=env, capture_output=True, text=True)  # fmt: skip
    assert ev.returncode == 0, ev.stderr
    assert "my-visla | letters:x | 973 cases" in ev.stdout
