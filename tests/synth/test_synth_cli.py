"""``spotdiff synth``: every engine from the command line, determinism across runs, the contact
sheet, and one SPEC dataset scored end to end by ``spotdiff eval`` with a tiny random CLIP."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from PIL import Image

from spotdiff.cli import main


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    common = ["--seed", "5", "--image-size", "64", "--workers", "1"]
    assert main(["synth", "spec", "--out", str(root / "spec"), "--n", "1", *common]) == 0
    assert main(["synth", "eqben", "--out", str(root / "eqben"), "--n", "1", *common]) == 0
    assert main(["synth", "visla", "--out", str(root / "visla"), "--n", "4", *common]) == 0
    assert main(["synth", "corpus", "--out", str(root / "corpus"), "--n", "6", *common]) == 0
    return root


def test_cli_writes_every_engine_with_a_summary(outputs):
    for name in ("spec", "eqben", "visla", "corpus"):
        record = json.loads((outputs / name / "synth.json").read_text())
        assert record["engine"] == name and record["options"]["seed"] == 5
    assert (outputs / "spec" / "count" / "image2text.json").is_file()
    assert (outputs / "eqben" / "all_select.json").is_file()
    assert (outputs / "visla" / "Spatial_VISLA.tsv").is_file()
    assert (outputs / "corpus" / "captions.jsonl").is_file()


def test_cli_is_deterministic_and_guards_the_output_folder(outputs, tmp_path, capsys):
    args = ["synth", "eqben", "--out", str(tmp_path / "eqben"), "--n", "1", "--seed", "5", "--image-size", "64"]
    assert main([*args, "--workers", "2"]) == 0
    assert digest(tmp_path / "eqben") == digest(outputs / "eqben")
    capsys.readouterr()
    assert main(args) == 0  # the same run again: complete, nothing to do, nothing touched
    assert "complete; nothing to do" in capsys.readouterr().out
    assert main([*args[:-1], "32"]) == 2  # other options: refused, naming the difference
    assert "image_size: 64 -> 32" in capsys.readouterr().err
    assert main([*args[:-1], "32", "--overwrite"]) == 0
    assert main([*args, "--overwrite"]) == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    assert main(["synth", "spec", "--out", str(tmp_path / "mine"), "--overwrite"]) == 2
    assert (tmp_path / "mine" / "notes.txt").is_file()
    assert main(["synth", "spec", "--out", str(tmp_path / "s"), "--image-size", "8"]) == 2
    assert main(["synth", "list"]) == 0
    assert "visla" in capsys.readouterr().out


def test_contact_sheets(outputs, tmp_path):
    for name in ("spec", "eqben", "visla", "corpus"):
        out = tmp_path / f"{name}.png"
        assert main(["synth", "contact-sheet", str(outputs / name), "--out", str(out), "--thumb", "64"]) == 0
        with Image.open(out) as im:
            assert im.size[0] > 100 and im.size[1] > 64
    assert main(["synth", "contact-sheet", str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2


def test_generated_spec_data_is_scored_by_eval(outputs, tmp_path):
    from spotdiff.testing import tiny_models

    clip = tiny_models.make_tiny_clip(tmp_path / "clip")
    res = tmp_path / "res"
    argv = [
        "eval",
        "--model",
        f"hf-clip:{clip}",
        "--benchmark",
        "spec",
        "--data",
        str(outputs / "spec"),
        "--out",
        str(res),
        "--no-store",
        "--no-cache",
        "-q",
        "--n-boot",
        "10",
        "--device",
        "cpu",
    ]
    assert main(argv) == 0
    metrics = json.loads((res / "metrics.json").read_text())
    assert metrics.get("n_cases", 6) == 6
    assert set(metrics["metrics"]) >= {"all", "count", "existence", "absolute_size"}


def test_synth_json_records_the_options_alone(outputs):
    options = json.loads((outputs / "spec" / "synth.json").read_text())["options"]
    assert sorted(options) == sorted(
        ["backend", "cls", "image_size", "n", "objects", "scenes", "seed", "subsets", "from_review", "review_rule"]
    )


def test_engines_take_the_config_the_command_parses(outputs, tmp_path):
    from spotdiff.commands import build_parser
    from spotdiff.commands.synth import engine_config
    from spotdiff.synth.canvas.corpus import CorpusConfig, CorpusEngine
    from spotdiff.synth.canvas.spec import SpecConfig, SpecEngine
    from spotdiff.synth.text.visla import VislaConfig, VislaEngine

    def parse(*argv: str):
        return build_parser().parse_args(["synth", *argv, "--out", str(tmp_path / "x")])

    args = parse("spec", "--n", "1", "--subsets", "count, existence", "--no-cls", "--objects", "./o", "--scenes=snow")
    assert engine_config(SpecEngine, args) == SpecConfig(
        n=1,
        subsets=("count", "existence"),
        cls=False,
        objects=Path("o"),
        scenes=("snow",),
        workers=None,
    )
    corpus = CorpusConfig(n=100, image_size=64, workers=3)
    assert engine_config(CorpusEngine, parse("corpus", "--workers", "3")) == corpus
    args = parse("visla", "--relations", "r.csv", "--negations", "--workers", "1")
    assert engine_config(VislaEngine, args) == VislaConfig(n=20, relations=Path("r.csv"), negations=True, workers=1)
    # the same files as `spotdiff synth spec` with the same options (synth.json is the command's record)
    SpecEngine(SpecConfig(n=1, seed=5, image_size=64)).write(tmp_path / "spec")
    expected = {k: v for k, v in digest(outputs / "spec").items() if k != "synth.json"}
    assert digest(tmp_path / "spec") == expected


def test_workers_are_capped_at_the_usable_cores(caplog, capsys):
    """`synth --workers 1000` starts one process per usable core, not 1,000, and says so; 0 is refused."""
    from spotdiff.processes import usable_cores
    from spotdiff.synth.canvas.corpus import CorpusConfig, CorpusEngine

    cores = usable_cores()
    with caplog.at_level("WARNING", logger="spotdiff.provenance"):
        assert CorpusEngine(CorpusConfig(n=2, workers=1000)).config.workers == cores
    assert f"--workers 1000 is more than the {cores} cores this process may use: {cores} workers" in caplog.text
    caplog.clear()
    assert CorpusEngine(CorpusConfig(n=2, workers=1)).config.workers == 1 and not caplog.text
    with pytest.raises(SystemExit):
        main(["synth", "corpus", "--out", "never", "--workers", "0"])
    assert "argument --workers: must be >= 1, got 0" in capsys.readouterr().err
