"""``spotdiff demo``: the quick demo end to end, its resumption, and the helpers behind its steps.

The end-to-end test runs ``spotdiff demo --quick`` once (a few minutes on two idle cores) as a user
would, in a fresh folder, then checks what it wrote: the report, ``findings.json`` (every finding
with a boolean and numbers), ``summary.md``, ``demo_commands.sh`` and the stage records; a second
run must skip every stage and finish quickly.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spotdiff.demo import PROFILES, DemoConfig, plan
from spotdiff.optimize.tokenizer import build_tokenizer
from spotdiff.synth.canvas.derived import write_aro_set, write_spec_pairs

FINDINGS = (
    "base_cls_far_above_count_and_position",
    "hard_negatives_beat_plain",
    "cls_kept_with_hard_negatives",
    "hard_negatives_beat_same_data_ungrouped",
    "eqsim_beats_plain_on_eqben",
    "vgpt_debiasing",
    "zero_shot_kept_with_hard_negatives",
)


#: Far above the few minutes the quick demo takes on two busy cores: a hang fails here, not at CI's limit.
DEMO_TIMEOUT_S = 1200


def _run_demo(out: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("SPOTDIFF_STORE", None)
    argv = [sys.executable, "-m", "spotdiff", "demo", "--quick", "--out", str(out), "--workers", "2"]
    t0 = time.perf_counter()
    # its own session, so that a hang is ended with every stage process (a few minutes is normal)
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as popen:
        try:
            stdout, stderr = popen.communicate(timeout=DEMO_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            stdout, stderr = popen.communicate()
            pytest.fail(f"spotdiff demo --quick ran over {DEMO_TIMEOUT_S} s:\n{stdout[-4000:]}\n{stderr[-4000:]}")
    proc = subprocess.CompletedProcess(argv, popen.returncode, stdout, stderr)
    return proc, time.perf_counter() - t0


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("demo") / "spotdiff-demo"
    first, first_s = _run_demo(out)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    second, second_s = _run_demo(out)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
    return {"out": out, "first": first, "first_s": first_s, "second": second, "second_s": second_s}


def _numbers(entry: dict) -> None:
    assert isinstance(entry["value"], float | int) and math.isfinite(entry["value"]), entry
    lo, hi = entry["ci95"]
    assert lo <= entry["value"] <= hi, entry


@pytest.mark.slow
def test_quick_demo_writes_report_findings_and_commands(quick_demo: dict) -> None:
    out: Path = quick_demo["out"]
    stdout = quick_demo["first"].stdout
    for path in ("report/report.html", "report/report.md", "findings.json", "summary.md", "demo_commands.sh",
                 "figures/heldout-spec.png", "runs.sqlite"):  # fmt: skip
        assert (out / path).is_file(), path
    assert (out / "report/report.html").stat().st_size > 1000
    # progress per stage with elapsed time, the equivalent commands, and where the report is
    assert "$ spotdiff train --from-config small" in stdout
    assert "done in" in stdout and "report/report.html" in stdout
    findings = json.loads((out / "findings.json").read_text())
    assert findings["profile"] == "quick"
    for key in FINDINGS:
        assert isinstance(findings["findings"][key]["holds"], bool), key
    diag = findings["findings"]["base_cls_far_above_count_and_position"]["diagnosis"]
    _numbers(diag["cls"])
    for sub in ("absolute_size", "relative_size", "absolute_spatial", "relative_spatial", "existence", "count"):
        _numbers(diag[sub]["i2t"])
        _numbers(diag[sub]["t2i"])
    for model in ("base", "ft-plain", "ft-hn", "ft-eqsim", "ft-pairs"):
        for metric in ("spec_i2t", "spec_t2i", "cls_i2t", "eqben_group"):
            _numbers(findings["finetuning"][model][metric])
    cmp = findings["paired"]["hn - plain"]["spec_i2t"]
    assert 0.0 <= cmp["p_value"] <= 1.0 and len(cmp["ci95"]) == 2
    for name in ("eqben", "aro"):
        s = findings["findings"]["vgpt_debiasing"]["sets"][name]
        for variant in ("raw", "alpha=1", "tuned", "blind"):
            _numbers(s[variant])
        assert 0.0 <= s["alpha_star_val_mean"] <= 1.0
    assert all(v == 0 for v in findings["data"]["shared_instances"].values())
    assert findings["data"]["heldout_instances"]["heldout-zeroshot"] == PROFILES["quick"].zs_n
    # every fine-tune was evaluated while it trained: start and end with CIs, the paired change
    for model in ("ft-plain", "ft-hn", "ft-eqsim", "ft-pairs"):
        row = findings["retention"][model]
        for label, metric in (("zeroshot-classification", "top1"), ("coco-retrieval", "i2t_r1")):
            block = row[label][metric]
            _numbers(block["start"])
            _numbers(block["end"])
            assert row[label]["end_step"] == PROFILES["quick"].ft_steps and row[label]["start_step"] == 0
            change = block["change"]
            assert change["difference"] == pytest.approx(block["end"]["value"] - block["start"]["value"], abs=0.02)
            assert change["ci95"][0] <= change["difference"] <= change["ci95"][1]
        assert (out / "models" / model / "retention.png").is_file()
    # the runs at step 0 of every fine-tune evaluate the same base weights
    retention = findings["retention"]
    starts = {retention[m]["zeroshot-classification"]["top1"]["start"]["value"] for m in retention}
    assert len(starts) == 1
    assert "retention during training" in (out / "report/report.md").read_text()
    # every stage is a spotdiff command, saved in demo_commands.sh
    script = (out / "demo_commands.sh").read_text()
    for command in ("spotdiff synth corpus", "spotdiff synth spec", "spotdiff synth eqben", "spotdiff train",
                    "--loss spec-hn", "--loss eqsim", "spotdiff eval", "--subset cls", "--debias null",
                    "spotdiff demo train-captioner", "spotdiff report", "spotdiff demo findings",
                    "spotdiff synth zeroshot", "--eval zeroshot-classification=data/heldout-zeroshot",
                    "--eval coco-retrieval=data/heldout-aro"):  # fmt: skip
        assert command in script, command
    records = sorted(p.stem for p in (out / "stages").glob("*.json"))
    assert len(records) == len(plan(DemoConfig(quick=True)))


@pytest.mark.slow
def test_second_run_skips_every_stage(quick_demo: dict) -> None:
    out: Path = quick_demo["out"]
    n_stages = len(plan(DemoConfig(quick=True)))
    assert quick_demo["second"].stdout.count("up to date, skipped") == n_stages
    assert "$ spotdiff" not in quick_demo["second"].stdout
    assert quick_demo["second_s"] < max(90.0, 0.25 * quick_demo["first_s"])
    timing = json.loads((out / "findings.json").read_text())["timing"]
    assert len(timing["skipped_stages"]) == n_stages


@pytest.mark.slow
def test_findings_command_recomputes_from_the_folder(quick_demo: dict) -> None:
    out: Path = quick_demo["out"]
    before = json.loads((out / "findings.json").read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "spotdiff", "demo", "findings", str(out)],
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = json.loads((out / "findings.json").read_text())
    assert after["finetuning"] == before["finetuning"]
    assert after["paired"] == before["paired"]
    assert "Paired comparisons" in proc.stdout


@pytest.mark.slow
def test_the_printed_plan_is_the_demo(quick_demo: dict, tmp_path: Path) -> None:
    """`spotdiff demo --plan` prints the demo's plan file: `spotdiff run` of it on the demo's folder finds every
    stage up to date (same commands, same fingerprints), and the findings computed afterwards are the demo's."""
    out: Path = quick_demo["out"]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    before = json.loads((out / "findings.json").read_text())
    text = subprocess.run([sys.executable, "-m", "spotdiff", "demo", "--plan", "--quick", "--workers", "2"],
                          capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    plan_path = tmp_path / "demo-plan.yaml"
    plan_path.write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "spotdiff", "run", str(plan_path), "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    n_stages = len(plan(DemoConfig(quick=True)))
    assert f"0 stages ran, {n_stages} up to date" in run.stdout
    subprocess.run([sys.executable, "-m", "spotdiff", "demo", "findings", str(out)], capture_output=True, env=env,
                   check=True, timeout=600)  # fmt: skip
    after = json.loads((out / "findings.json").read_text())
    assert after["findings"] == before["findings"] and after["retention"] == before["retention"]


# ------------------------------------------------------------------------------------ fast unit tests
def test_plan_dependencies_and_fingerprints() -> None:
    stages = plan(DemoConfig(quick=True))
    names = [st.name for st in stages]
    assert len(set(names)) == len(names)
    for i, st in enumerate(stages):
        assert all(names.index(d) < i for d in st.deps), st.name  # the plan order respects dependencies
    prints: dict[str, str] = {}
    for st in stages:
        prints[st.name] = st.fingerprint(prints)
    # --workers does not change what a stage computes
    prints_w: dict[str, str] = {}
    for st in plan(DemoConfig(quick=True, workers=1)):
        prints_w[st.name] = st.fingerprint(prints_w)
    assert prints == prints_w
    # a different seed changes the data, and so every stage downstream
    prints_s: dict[str, str] = {}
    for st in plan(DemoConfig(quick=True, seed=1)):
        prints_s[st.name] = st.fingerprint(prints_s)
    assert all(prints[n] != prints_s[n] for n in names)
    assert PROFILES["quick"].base_steps < PROFILES["full"].base_steps


def test_step_helpers_round_trip_through_loaders(tmp_path: Path) -> None:
    from spotdiff.benchmarks import get_benchmark
    from spotdiff.optimize.data import read_captions
    from spotdiff.synth.canvas.corpus import write_corpus
    from spotdiff.synth.canvas.spec import write_spec

    spec = tmp_path / "spec"
    write_spec(spec, n=1, size=64, subsets=["count", "existence"])
    info = write_spec_pairs(spec, tmp_path / "pairs")
    pairs = read_captions(tmp_path / "pairs" / "captions.jsonl")
    assert info["pairs"] == len(pairs) == 9 + 2
    assert any(p.text.startswith("there are nine ") for p in pairs)
    assert all(p.image.load().size == (64, 64) for p in pairs)
    # cls is benchmark spec with --subset cls (one image against every class name)
    bench = get_benchmark("spec")(spec)
    cls_cases = bench.load("cls")
    assert cls_cases and all(c.truth.shape[0] == 1 and c.truth.sum() == 1 for c in cls_cases)
    assert all(c.subset == "cls" for c in cls_cases)
    assert {c.subset for c in bench.load()} == {"count", "existence"}  # "all" stays the six subsets

    corpus = tmp_path / "corpus"
    write_corpus(corpus, n=6, seed=3, size=64)
    write_aro_set(corpus, tmp_path / "aro")
    aro = get_benchmark("aro-coco-order")(tmp_path / "aro", pos_tagger="heuristic", tokenizer="regex")
    cases = aro.load()
    assert cases and all(c.truth.shape[0] == 1 and c.truth[0, 0] and len(c.texts) >= 2 for c in cases)
    assert all(c.images[0].load().size == (64, 64) for c in cases)

    tok_info = build_tokenizer([corpus / "captions.jsonl"], tmp_path / "tok")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert len(tok) == tok_info["vocab_size"] and tok.bos_token == "[DEC]"
    ids = tok("there are seven zebras in the image")["input_ids"]
    assert tok.unk_token_id not in ids  # unseen words are spelled out


def test_cls_retention_is_a_non_inferiority_claim() -> None:
    """'No drop larger than N points': holds when the paired CI's lower end lies above -N, whatever the
    size of a gain; a point estimate within N with a CI reaching below -N does not hold."""
    from spotdiff.demo.findings import finding_cls_kept
    from spotdiff.demo.profiles import CLS_MARGIN

    ft = {m: {"cls_i2t": {"value": v}} for m, v in (("ft-hn", 60.0), ("ft-plain", 50.0), ("base", 61.0))}

    def cmp(diff: float, lo: float, hi: float) -> dict:
        return {"difference": diff, "ci95": [lo, hi], "p_value": 0.5, "test": "mcnemar-exact"}

    paired = {"hn - plain": {"cls_i2t": cmp(10.0, 4.0, 16.0)}, "hn - base": {"cls_i2t": cmp(-1.0, -2.5, 0.5)}}
    f = finding_cls_kept(ft, paired)
    assert f["holds"] and f["no_drop_larger_than_margin"] == {"against_plain": True, "against_base": True}
    assert "no drop larger than" in f["claim"] and f["cls_hn_minus_plain"] == 10.0
    paired["hn - base"]["cls_i2t"] = cmp(-1.0, -CLS_MARGIN - 0.5, 1.5)  # within N on average, CI below -N
    assert not finding_cls_kept(ft, paired)["holds"]
