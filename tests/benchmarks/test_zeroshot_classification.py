"""Zero-shot classification: the three on-disk formats, class-name and template options, the built-in
datasets, errors naming the file and record, and accuracy equal to a direct computation with the
model's own forward."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.zeroshot import SKIP_NOT_IMAGE, TarMemberImage
from spotdiff.benchmarks.zeroshot_data import CIFAR100_CLASSES, CIFAR_TEMPLATES, DATASETS, IMAGENET_TEMPLATES
from spotdiff.cases import ArrayImage, FileImage
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.errors import ConfigError, DataError
from spotdiff.testing.formats import (
    ZEROSHOT_CLASSES,
    write_zeroshot_cifar,
    write_zeroshot_folder,
    write_zeroshot_wds,
)
from spotdiff.testing.tiny_models import make_tiny_clip


def load(root: Path, **options):
    bench = get_benchmark("zeroshot-classification")(root, **options)
    return bench, bench.load()


def test_image_folder(tmp_path):
    root = write_zeroshot_folder(tmp_path / "f", n_per_class=2)
    bench, cases = load(root)
    assert bench.format == "folder"
    folders = sorted(c.replace(" ", "_") for c in ZEROSHOT_CLASSES)
    assert cases[0].texts == tuple(folders)  # folder names, sorted, when no class names are given
    assert len(cases) == 2 * len(ZEROSHOT_CLASSES)
    assert bench.report.skipped == {SKIP_NOT_IMAGE: 1}
    case = cases[0]
    assert case.prompts == IMAGENET_TEMPLATES  # CLIP_benchmark's fallback templates
    assert case.truth.shape == (1, len(folders)) and case.truth[0, folders.index(case.tags["label"])]
    assert isinstance(case.images[0], FileImage) and case.id == f"test/{folders[0]}/0.png"
    names = tmp_path / "names.json"
    names.write_text(json.dumps([f.replace("_", " ") for f in folders]), encoding="utf-8")
    templates = tmp_path / "t.json"
    templates.write_text(json.dumps(["a photo of a {c}.", "itap of my {c}."]), encoding="utf-8")
    _, cases = load(root, classnames=str(names), templates=str(templates))
    assert "red car" in cases[0].texts and cases[0].prompts == ("a photo of a {c}.", "itap of my {c}.")


def test_webdataset_reads_tar_members_in_place(tmp_path):
    root = write_zeroshot_wds(tmp_path / "w", n=9, shards=2)
    bench, cases = load(root)
    assert bench.format == "wds" and len(cases) == 9
    assert cases[0].texts == ZEROSHOT_CLASSES
    assert cases[0].prompts == ("a photo of a {c}.", "a drawing of the {c}.")
    by_id = {c.id: c for c in cases}
    case = by_id["test/1/s0000003"]
    assert case.tags["label"] == ZEROSHOT_CLASSES[3]
    ref = case.images[0]
    assert isinstance(ref, TarMemberImage) and ref.load().size == (36, 36)
    assert ref.key.startswith("tar:") and ref.key != by_id["test/0/s0000000"].images[0].key
    # a built-in name of the hub's webdatasets reads the same files
    _, again = load(root, dataset="vtab-cifar10")
    assert [c.id for c in again] == [c.id for c in cases]


def test_cifar_pickles_and_builtin_lists(tmp_path):
    root = write_zeroshot_cifar(tmp_path / "c100", n=7, kind="cifar100")
    bench, cases = load(root)
    assert bench.format == "cifar" and bench.dataset.name == "cifar100"
    assert cases[0].texts == CIFAR100_CLASSES and cases[0].prompts == CIFAR_TEMPLATES
    assert isinstance(cases[0].images[0], ArrayImage) and cases[0].images[0].load().size == (32, 32)
    assert len(CIFAR_TEMPLATES) == 18 and len(IMAGENET_TEMPLATES) == 80 == len(set(IMAGENET_TEMPLATES))
    # the stored label names must be the built-in dataset's
    import pickle

    meta = root / "cifar-100-python" / "meta"
    meta.write_bytes(pickle.dumps({"fine_label_names": ["x"] * 100}))
    with pytest.raises(DataError, match="not cifar100's"):
        load(root)
    with pytest.raises(ConfigError, match="holds cifar100"):
        load(root, dataset="cifar10")


class _Exploit:
    """An object whose unpickling writes a file: what a downloaded CIFAR pickle could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return Path.write_text, (self.marker, "ran")


def test_cifar_pickles_run_no_code(tmp_path):
    """Arrays pickled in every protocol (the official files are Python 2 pickles: protocol 2) load; a
    pickle naming anything else is refused unread, one error naming the file."""
    import pickle

    root = write_zeroshot_cifar(tmp_path / "c10", n=3)
    batch = root / "cifar-10-batches-py" / "test_batch"
    original = pickle.loads(batch.read_bytes())
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        batch.write_bytes(pickle.dumps(original, protocol=protocol))
        assert len(load(root)[1]) == 3
    marker = tmp_path / "code-ran"
    batch.write_bytes(pickle.dumps({**original, "labels": _Exploit(marker)}))
    with pytest.raises(DataError, match=r"names pathlib\S*\.Path\.write_text, which a CIFAR file never holds") as info:
        load(root)
    assert info.value.file == str(batch) and "could run code" in str(info.value) and not marker.exists()


def test_imagenet_needs_its_class_names(tmp_path):
    root = write_zeroshot_folder(tmp_path / "in", n_per_class=1, split="val")
    with pytest.raises(ConfigError, match=r"en_classnames\.json") as info:
        load(root, dataset="imagenet1k")
    assert DATASETS["imagenet1k"].classnames_source.sha256 in str(info.value)
    names = tmp_path / "en_classnames.json"  # CLIP_benchmark's file: an object keyed by dataset name
    names.write_text(json.dumps({"imagenet1k": [f"class {k}" for k in range(1000)]}), encoding="utf-8")
    with pytest.raises(DataError, match="1000 class names"):
        load(root, dataset="imagenet1k", classnames=str(names))  # 6 folders, not 1,000
    names.write_text(json.dumps({"cars": ["a"]}), encoding="utf-8")
    with pytest.raises(DataError, match="imagenet1k"):
        load(root, dataset="imagenet1k", classnames=str(names))


def test_bad_inputs_name_the_file_and_record(tmp_path):
    root = write_zeroshot_wds(tmp_path / "w", n=4, shards=1)
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(["a photo of a {c}.", "a photo"]), encoding="utf-8")
    with pytest.raises(DataError) as info:
        load(root, templates=str(bad))
    assert info.value.file == str(bad) and info.value.record == "1" and info.value.field == "template"
    (root / "classnames.txt").write_text("cat\ndog\n", encoding="utf-8")
    with pytest.raises(DataError, match="outside the 2 classes"):
        load(root)
    (root / "test" / "nshards.txt").write_text("3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"shard 1\.tar is missing"):
        load(root)
    with pytest.raises(ConfigError, match="unknown zero-shot dataset"):
        load(root, dataset="imagenet-22k")


def _direct_zero_shot(model_dir: Path, cases) -> dict[str, float]:
    """CLIP_benchmark's computation with the model's own forward: the classifier is the mean of the
    L2-normalised template embeddings per class, normalised again; logits = image @ classifier."""
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    model = CLIPModel.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    proc = AutoImageProcessor.from_pretrained(model_dir)
    names, templates = cases[0].texts, cases[0].prompts
    with torch.no_grad():
        weights = []
        for name in names:
            enc = tok([t.replace("{c}", name) for t in templates], padding=True, return_tensors="pt")
            emb = model.get_text_features(**enc)
            emb = getattr(emb, "pooler_output", emb)
            mean = torch.nn.functional.normalize(emb, dim=-1).mean(dim=0)
            weights.append(mean / mean.norm())
        classifier = torch.stack(weights, dim=1)
        pixels = proc(images=[c.images[0].load() for c in cases], return_tensors="pt")["pixel_values"]
        img = model.get_image_features(pixel_values=pixels)
        img = torch.nn.functional.normalize(getattr(img, "pooler_output", img), dim=-1)
        logits = (img @ classifier).numpy()
    target = np.array([names.index(c.tags["label"]) for c in cases])
    assert len({tuple(np.sort(row)[-2:]) for row in logits}) == len(cases)  # no ties to argue about
    pred = logits.argmax(axis=1)
    top5 = np.argsort(-logits, axis=1)[:, :5]
    recall = [np.mean(pred[target == k] == k) for k in np.unique(target)]
    return {
        "top1": 100 * float(np.mean(pred == target)),
        "top5": 100 * float(np.mean([t in row for t, row in zip(target, top5, strict=True)])),
        "mean_per_class_recall": 100 * float(np.mean(recall)),
    }


def test_accuracy_equals_a_direct_computation_with_the_same_templates(tmp_path):
    model = make_tiny_clip(tmp_path / "clip", seed=3)
    data = write_zeroshot_wds(tmp_path / "w", n=18, shards=2, templates=("a photo of a {c}.", "the {c} on a table."))
    result = run_eval(
        EvalConfig(
            model=f"hf-clip:{model}",
            benchmark="zeroshot-classification",
            data=data,
            device="cpu",
            use_store=False,
            progress=False,
            n_boot=50,
        )
    )
    _, cases = load(data)
    expected = _direct_zero_shot(model, cases)
    got = result.metrics["all"]
    for metric, value in expected.items():
        assert got[metric] == pytest.approx(value, abs=1e-9), metric
    lo, hi = got["top1_ci95"]
    assert lo <= got["top1"] <= hi
    assert result.n_cases == 18 and len(result.units) == 18


def test_cli_cache_and_prefill_serve_the_prompt_ensembles(tmp_path, capsys):
    from spotdiff.cli import main
    from spotdiff.diagnose.engine import Engine
    from spotdiff.scorers import ScorerOptions, load_scorer

    model = make_tiny_clip(tmp_path / "clip", seed=1)
    data = write_zeroshot_cifar(tmp_path / "c10", n=6)
    args = ["eval", "--model", f"hf-clip:{model}", "--benchmark", "zeroshot-classification", "--data", str(data),
            "--cache", str(tmp_path / "cache"), "--no-store", "--n-boot", "20", "--device", "cpu", "-q",
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(args) == 0
    assert "top1" in capsys.readouterr().out
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["protocol"] == "zeroshot" and metrics["n_cases"] == 6
    lines = (tmp_path / "out" / "scores.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert len(first["scores"][0]) == 10 and first["correct"]["rank"] >= 0
    # prefill (what each rank of a sharded run does) encodes every filled prompt once; the matrices
    # then come from the cache alone
    _, cases = load(data)
    scorer = load_scorer(f"hf-clip:{model}", ScorerOptions(device="cpu"))
    with Engine(scorer, tmp_path / "cache2", progress=False) as engine:
        engine.prefill(cases, "image-text")
        assert engine.stats["computed"] == 6 + 10 * 18  # images + class names x CIFAR templates
    with Engine(scorer, tmp_path / "cache2", progress=False) as engine:
        mats = list(engine.case_matrices(cases, "image-text"))
        assert engine.stats["computed"] == 0
    reference = [np.array(json.loads(line)["scores"]) for line in lines]
    for got, want in zip(mats, reference, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_hub_parquet_with_classlabel_names(tmp_path):
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    rng = np.random.default_rng(0)
    rows = []
    for k in range(5):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(buf, format="PNG")
        rows.append({"img": {"bytes": buf.getvalue(), "path": None}, "label": k % 3})
    features = {"img": {"_type": "Image"}, "label": {"names": ["cat", "dog", "bird"], "_type": "ClassLabel"}}
    table = pa.Table.from_pylist(rows).replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})}
    )
    (tmp_path / "hub" / "data").mkdir(parents=True)
    pq.write_table(table, tmp_path / "hub" / "data" / "test-00000-of-00001.parquet", row_group_size=2)
    bench, cases = load(tmp_path / "hub")
    assert bench.format == "parquet" and len(cases) == 5
    assert cases[0].texts == ("cat", "dog", "bird")
    assert [c.tags["label"] for c in cases[:4]] == ["cat", "dog", "bird", "cat"]
    assert cases[4].images[0].load().size == (8, 8)
    pq.write_table(pa.Table.from_pylist([{"x": 1, "label": 0}]), tmp_path / "hub" / "data" / "test-0.parquet")
    (tmp_path / "hub" / "data" / "test-00000-of-00001.parquet").unlink()
    with pytest.raises(DataError, match="no image / img"):
        load(tmp_path / "hub")


def test_imagenet_hub_webdataset_reads_its_test_split(tmp_path):
    """clip-benchmark/wds_imagenet1k has train and test, no val: with no split= the loader reads test
    from the webdataset and val from torchvision's folder."""
    names = tuple(f"class {k}" for k in range(1000))
    listing = tmp_path / "en_classnames.json"
    listing.write_text(json.dumps({"imagenet1k": list(names)}), encoding="utf-8")
    root = write_zeroshot_wds(tmp_path / "wds_imagenet1k", n=4, shards=1, classes=names)
    bench, cases = load(root, dataset="imagenet1k", classnames=str(listing))
    assert (bench.split, bench.format, len(cases)) == ("test", "wds", 4)
    assert cases[0].id.startswith("test/0/")
    folder = write_zeroshot_folder(tmp_path / "in", n_per_class=1, split="val")
    assert get_benchmark("zeroshot-classification")(folder, dataset="imagenet1k").split == "val"
