"""``spotdiff report`` and ``spotdiff compare``: tables with significance marks, plots, galleries,
provenance, CSV/LaTeX export, and the HTML page checked in a real headless Chromium.

Runs come from two tiny random CLIP models evaluated with ``run_eval`` on Winoground and ARO
VG-Relation fixture files (real images; ARO with bounding-box crops), plus synthetic runs written
straight into the store (:mod:`spotdiff.testing.synthetic_runs`). The browser tests take the ``chromium``
fixture (tests/conftest.py): they skip when Chromium, chromedriver or selenium is missing, and fail instead
when ``SPOTDIFF_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from spotdiff.cases import Case
from spotdiff.cli import main
from spotdiff.diagnose.runner import EvalConfig, run_eval
from spotdiff.diagnose.store import RunStore
from spotdiff.protocols import TESTS, UnitTable, evaluate_table, get_protocol, paired_comparison
from spotdiff.report.build import build_report, write_report
from spotdiff.report.collect import (
    build_tables,
    evaluation_from_units,
    load_run_data,
    select_runs,
    short_model,
)
from spotdiff.report.compare import compare_runs, format_comparison
from spotdiff.report.equivariance import equivariance_scores_from_matrices
from spotdiff.report.export import latex_escape, table_latex
from spotdiff.report.gallery import score_entries
from spotdiff.report.html import render_html
from spotdiff.report.plots import alpha_curves
from spotdiff.testing.formats import write_aro_vg_relation, write_winoground
from spotdiff.testing.synthetic_runs import fill_store
from spotdiff.testing.tiny_models import make_tiny_clip
from spotdiff.version import __version__


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two tiny CLIPs x (Winoground, ARO VG-Relation) evaluated for real, plus synthetic runs."""
    root = tmp_path_factory.mktemp("report")
    models = [make_tiny_clip(root / f"clip{s}", seed=s) for s in (0, 1)]
    data = {
        "winoground": write_winoground(root / "wino", n=8, seed=0),
        "aro-vg-relation": write_aro_vg_relation(root / "aro", n=8, seed=0),
    }
    store_path = root / "runs.sqlite"
    ids: dict[tuple[str, int], str] = {}
    for k, model in enumerate(models):
        for bench, path in data.items():
            config = EvalConfig(
                model=f"hf-clip:{model}",
                benchmark=bench,
                data=path,
                store=store_path,
                progress=False,
                n_boot=100,
                device="cpu",
                seed=0,
            )
            ids[(bench, k)] = run_eval(config).run_id
    store = RunStore(store_path)
    synth = fill_store(
        store,
        models=3,
        benchmarks=("sugarcrepe", "valse", "spec", "coco-retrieval", "eqben"),
        n_cases=30,
        n_boot=100,
    )
    store.close()
    return {"root": root, "store": store_path, "ids": ids, "synthetic": synth, "data": data}


@pytest.fixture(scope="module")
def rendered(tiny_store: dict) -> dict:
    store = RunStore(tiny_store["store"])
    report = build_report(store, title="tiny report")
    out = tiny_store["root"] / "out"
    written = write_report(report, out)
    store.close()
    return {"report": report, "out": out, "written": written, "html": written["html"].read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def answer_reports(tiny_store: dict) -> dict:
    """A 2-model x 3-benchmark grid report (benchmarks in a given order) and a demo-style report
    opening with a findings.json made from paired comparisons of its runs."""
    root = tiny_store["root"] / "answers"
    store = RunStore(root / "runs.sqlite")
    data = {"winoground": tiny_store["data"]["winoground"]}
    fill_store(store, models=2, benchmarks=GRID_ORDER, n_cases=30, n_boot=50, data=data)
    runs = {(r.benchmark, r.model): r for r in store.runs()}
    wino = [runs[("winoground", f"synthetic-model-0{k}")].id for k in (1, 0)]
    cmp = paired_comparison(
        *(evaluation_from_units("group", store.units(r), seed=0) for r in wino), "group", n_boot=200
    )
    entry = runs[("valse", "synthetic-model-00")]
    findings = {
        "findings": {
            "stronger_model_wins": {
                "holds": cmp.ci[0] > 0,
                "claim": "the stronger synthetic model beats the weaker on Winoground's group score",
                "comparison": {"winoground_group": {**cmp.as_json(), "difference": cmp.difference}},
            },
            "valse_above_chance": {
                "holds": False,
                "claim": "the weaker model is far above chance on VALSE",
                "entry": {"value": entry.metrics["all"]["acc"], "ci95": entry.metrics["all"]["acc_ci95"],
                          "run_id": entry.id},
            },
        }
    }  # fmt: skip
    (root / "findings.json").write_text(json.dumps(findings))
    out = {}
    for kind, extra in (("grid", {"benchmarks": list(GRID_ORDER)}), ("demo", {"findings": root / "findings.json"})):
        report = build_report(store, title=f"{kind} report", **extra)
        written = write_report(report, root / kind)
        out[kind] = {"report": report, "written": written, "html": written["html"].read_text(encoding="utf-8")}
    store.close()
    return out


GRID_ORDER = ("valse", "winoground", "sugarcrepe")


def _store_with(tmp_path: Path, outcomes: dict[str, list[float]], *, subsets: list[str] | None = None) -> RunStore:
    """A store with one i2t-top1 run per model whose per-case accuracy is given."""
    store = RunStore(tmp_path / "runs.sqlite")
    protocol = get_protocol("i2t-top1")
    for model, values in outcomes.items():
        table = UnitTable()
        units = []
        for i, v in enumerate(values):
            subset = subsets[i] if subsets else "s"
            tags = {"subset": subset}
            table.add(str(i), str(i), tags, {"accuracy": float(v)})
            units.append(
                {
                    "unit_id": str(i),
                    "case_id": str(i),
                    "subset": subset,
                    "scores": [[1.0, 0.0]],
                    "outcomes": {"accuracy": float(v)},
                    "tags": tags,
                }
            )
        metrics = evaluate_table(protocol, table, n_boot=50, seed=0).metrics
        rid = store.start_run(
            benchmark="sugarcrepe",
            subset=None,
            protocol="i2t-top1",
            model=model,
            model_identity={"m": model},
            data_path="/nowhere",
            data_digest="0" * 64,
            seed=0,
            version=__version__,
            info={"n_boot": 50},
        )
        store.add_units(rid, units)
        store.finish_run(rid, metrics, len(values))
    return store


# ------------------------------------------------------------------------------------------ tables
def test_best_cell_marked_only_when_significant(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    strong = (rng.random(80) < 0.9).astype(float)
    weak = (rng.random(80) < 0.4).astype(float)
    close = strong.copy()
    close[:2] = 1 - close[:2]  # differs from `strong` on two cases only
    store = _store_with(tmp_path, {"strong": strong, "weak": weak})
    (table,) = build_tables(load_run_data(store, select_runs(store)))
    cells = {row.label: row.cells[("all", "accuracy")] for row in table.rows}
    assert cells["strong"].best and not cells["weak"].best
    assert cells["strong"].p_value < 0.05 and cells["strong"].test == "mcnemar-exact"
    assert len(table.tests) == 1 and table.tests[0]["other"] == "weak"

    store2 = _store_with(tmp_path / "b", {"strong": strong, "close": close, "weak": weak})
    (table2,) = build_tables(load_run_data(store2, select_runs(store2)))
    assert not any(c.best for row in table2.rows for c in row.cells.values())
    top = max(table2.rows, key=lambda r: r.cells[("all", "accuracy")].value)
    assert top.cells[("all", "accuracy")].p_value >= 0.05  # the runner-up stops the claim


def test_ties_single_models_and_different_units_are_not_marked(tmp_path: Path) -> None:
    same = np.ones(30)
    store = _store_with(tmp_path, {"a": same, "b": same})
    (table,) = build_tables(load_run_data(store, select_runs(store)))
    assert not any(c.best for row in table.rows for c in row.cells.values())
    assert table.column_of("all", "accuracy").note == "tie for the top value"

    store1 = _store_with(tmp_path / "one", {"only": same})
    (table1,) = build_tables(load_run_data(store1, select_runs(store1)))
    assert not table1.rows[0].cells[("all", "accuracy")].best

    store2 = _store_with(tmp_path / "diff", {"a": np.ones(40)})
    _store_with(tmp_path / "diff", {"b": np.zeros(30)})  # same store file, other units
    (table2,) = build_tables(load_run_data(store2, select_runs(store2)))
    assert not any(c.best for row in table2.rows for c in row.cells.values())
    assert "no paired test" in table2.column_of("all", "accuracy").note


def test_fast_mcnemar_equals_paired_comparison(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    subsets = ["x" if i % 3 else "y" for i in range(60)]
    outcomes = {f"m{k}": (rng.random(60) < 0.3 + 0.2 * k).astype(float) for k in range(3)}
    store = _store_with(tmp_path, outcomes, subsets=subsets)
    runs = load_run_data(store, select_runs(store))
    from spotdiff.report.collect import _fast_mcnemar

    for a in runs:
        for b in runs:
            if a is b:
                continue
            for scope in (None, "x", "y"):
                fast = _fast_mcnemar(a, b, "accuracy", scope)
                ref = paired_comparison(a.evaluation(), b.evaluation(), "accuracy", subset=scope, n_boot=0)
                assert fast is not None and ref.test == "mcnemar-exact"
                assert fast.p_value == pytest.approx(ref.p_value) and fast.difference == pytest.approx(ref.difference)


def test_tables_match_the_store_and_carry_provenance(rendered: dict, tiny_store: dict) -> None:
    report = rendered["report"]
    store = RunStore(tiny_store["store"])
    by_id = {r.id: r for r in store.runs()}
    assert len(report.runs) == len(by_id)
    assert {t.benchmark for t in report.tables} >= {"winoground", "aro-vg-relation", "valse", "coco-retrieval"}
    for table in report.tables:
        for row in table.rows:
            for (subset, metric), cell in row.cells.items():
                stored = by_id[cell.run_id].metrics[subset][metric]
                assert cell.value == pytest.approx(stored)
    wino = next(t for t in report.tables if t.benchmark == "winoground")
    assert wino.columns[0].subset == "all" and {c.metric for c in wino.columns} == {
        "text",
        "image",
        "group",
    }
    aro = next(t for t in report.tables if t.benchmark == "aro-vg-relation")
    assert aro.subsets == ["all"]  # the single subset repeats "all"; its columns are dropped
    html = rendered["html"]
    for rid, run in by_id.items():
        assert f'id="run-{rid}"' in html and run.data_digest[:12] in html
    # every value cell names its run, model identity, data digest, seed and version
    blocks = re.findall(r'<table class="results".*?</table>', html, flags=re.S)
    titles = [t for b in blocks for t in re.findall(r'<td class="[^"]*" title="([^"]*)">', b)]
    assert titles and all("run " in t and "data " in t and "seed " in t and "spotdiff " in t for t in titles)


def test_short_model_and_latex_escape() -> None:
    assert short_model("minilm") == "minilm"
    long = "hf-clip:/very/long/path/to/some/checkpoints/run-2024-05-01/step_000100"
    assert short_model(long) == "hf-clip:…/run-2024-05-01/step_000100"
    assert latex_escape("a_b & 50% #1") == r"a\_b \& 50\% \#1"


# ------------------------------------------------------------------------------------------ summary
def test_grid_summary_main_scores_in_the_given_order(answer_reports: dict) -> None:
    report = answer_reports["grid"]["report"]
    sm = report.summary
    assert sm.kind == "grid" and sm.order == list(GRID_ORDER)
    assert [sec.benchmark for sec in report.sections] == list(GRID_ORDER)  # sections follow the summary
    (table,) = sm.tables
    assert table.header == ["run", "valse acc", "winoground group", "sugarcrepe accuracy"]
    assert [row[0].text for row in table.rows] == ["synthetic-model-00", "synthetic-model-01"]
    for j, bench in enumerate(GRID_ORDER, start=1):
        result = next(t for t in report.tables if t.benchmark == bench)
        metric = table.header[j].split()[1]
        for row, cells in zip(result.rows, table.rows, strict=True):
            cell = row.cells[("all", metric)]
            assert cells[j].text == f"{cell.value:.2f} [{cell.ci[0]:.1f}, {cell.ci[1]:.1f}]"
            assert cells[j].best == cell.best
    assert any("(every unit pooled)" in n and "ties: strict" in n for n in table.notes)
    html = answer_reports["grid"]["html"]
    assert html.index('id="summary"') < html.index('id="bench-valse"') < html.index('id="bench-winoground"')


def test_demo_summary_lists_findings_and_orders_by_them(answer_reports: dict) -> None:
    sm = answer_reports["demo"]["report"].summary
    assert sm.kind == "demo" and [f.name for f in sm.findings] == ["stronger_model_wins", "valse_above_chance"]
    win = sm.findings[0]
    assert win.tests == ["mcnemar-exact"] and "winoground_group: group +" in win.numbers[0]
    assert sm.order == ["winoground", "valse", "sugarcrepe"]  # named by the findings first
    html = answer_reports["demo"]["html"]
    assert html.index("REPRODUCED" if win.holds else "NOT reproduced") < html.index('id="bench-winoground"')
    md = answer_reports["demo"]["written"]["md"].read_text()
    assert md.index("## Findings") < md.index("## Run labels") < md.index("## winoground")


def test_cli_report_with_findings(answer_reports: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = answer_reports["demo"]["written"]["html"].parents[1]
    args = ["report", "--store", str(root / "runs.sqlite"), "--out", str(tmp_path / "rep"), "--no-cases"]
    assert main([*args, "--gallery-limit", "0", "--findings", str(root / "findings.json")]) == 0
    assert 'data-kind="demo"' in (tmp_path / "rep" / "report.html").read_text()
    (tmp_path / "bad.json").write_text(json.dumps({"findings": {"x": {"holds": "yes", "claim": "c"}}}))
    capsys.readouterr()
    assert main([*args, "--findings", str(tmp_path / "bad.json")]) != 0
    assert "bad.json" in capsys.readouterr().err


def test_two_run_summary_is_their_paired_differences(tiny_store: dict) -> None:
    store = RunStore(tiny_store["store"])
    a, b = tiny_store["ids"][("winoground", 0)], tiny_store["ids"][("winoground", 1)]
    report = build_report(store, [a, b], gallery_limit=0, load_cases=False)
    sm = report.summary
    assert sm.kind == "comparison"
    ref = compare_runs(a, b, store=store)
    (table,) = sm.tables
    assert [[c.text for c in row[:2]] for row in table.rows] == [[c.scope, c.metric] for c in ref.results]
    assert [row[4].text for row in table.rows] == [
        f"{c.difference:+.2f} [{c.ci[0]:+.2f}, {c.ci[1]:+.2f}]" for c in ref.results
    ]
    assert "A = clip0" in table.notes[0] and "B = clip1" in table.notes[0]


def test_labels_in_tables_legends_and_galleries(rendered: dict) -> None:
    report = rendered["report"]
    labels = {k.label for k in report.key}
    assert len(labels) == len(report.key) and {"clip0", "clip1", "synthetic-model-00"} <= labels
    for sec in report.sections:
        for ts in sec.tables:
            assert len({row.label for row in ts.table.rows}) == len(ts.table.rows)
            for plot in ts.plots:
                if plot.key.endswith("-bars"):
                    assert list(plot.legend) == [row.label for row in ts.table.rows]
                assert len(set(plot.legend)) == len(plot.legend)
    html = rendered["html"]
    assert html.count("data-legend=") >= 1 and "&#34;clip0&#34;" in html


def test_run_key_shows_recorded_diagnostics(tmp_path: Path) -> None:
    store = _store_with(tmp_path, {"m": np.ones(10), "n": np.zeros(10)})
    run = next(r for r in store.runs() if r.model == "m")
    store.finish_run(run.id, run.metrics, run.n_cases, info={**run.info, "diagnostics": {"tie_rate": 12.5}})
    report = build_report(store, load_cases=False)
    entry = next(k for k in report.key if k.label == "m")
    assert entry.diagnostics == {run.id: {"tie_rate": 12.5}}
    assert next(k for k in report.key if k.label == "n").diagnostics == {}
    html = render_html(report)
    key = html.split('id="key"')[1].split("</section>")[0]
    assert "tie_rate 12.50" in key and "tie_rate = units whose candidates tied" in key and "yes_rate" not in key


# ------------------------------------------------------------------------------------------ files
def test_report_files_csv_latex_markdown(rendered: dict) -> None:
    out, report = rendered["out"], rendered["report"]
    for table in report.tables:
        rows = list(csv.DictReader(io.StringIO((out / "tables" / f"{table.slug}.csv").read_text())))
        assert rows and rows[0]["benchmark"] == table.benchmark and rows[0]["run_id"]
        n_cells = sum(len(r.cells) for r in table.rows)
        assert len(rows) == n_cells - sum(1 for r in table.rows for s, _ in r.cells if s not in table.subsets)
        tex = (out / "tables" / f"{table.slug}.tex").read_text()
        assert tex.count("\\begin{tabular}") == 1 and "\\bottomrule" in tex
        assert tex.count("\\textbf{") == sum(
            c.best for r in table.rows for c in r.cells.values() if c.subset in table.subsets
        )
    prov = list(csv.DictReader(io.StringIO((out / "tables" / "provenance.csv").read_text())))
    assert {p["id"] for p in prov} == {rd.id for rd in report.runs}
    assert all(len(p["data_digest"]) == 64 and p["version"] == __version__ and p["seed"] == "0" for p in prov)
    assert (out / "tables" / "provenance.tex").read_text().count("\\texttt{") >= len(prov)
    md = (out / "report.md").read_text()
    assert "## winoground" in md and "| model |" in md and "## Provenance" in md
    for link in re.findall(r"\]\((figures/[^)]+)\)", md):
        assert (out / link).is_file(), link
    assert "figures/thumbs/" in md  # gallery thumbnails as files for Markdown


def test_html_works_offline(rendered: dict, answer_reports: dict) -> None:
    """No resource is fetched: no http(s) or protocol-relative address in an attribute, a CSS url() or an
    @import; the print stylesheet is inline."""
    for html in (rendered["html"], answer_reports["grid"]["html"], answer_reports["demo"]["html"]):
        remote = re.findall(
            r"""(?:\b[\w-]+\s*=\s*["']?|url\(\s*["']?|@import\s+["']?)\s*(?:https?:)?//[^\s"')>]*""", html
        )
        assert not remote, remote[:5]
        assert "@media print" in html


def test_html_is_self_contained(rendered: dict) -> None:
    html = rendered["html"]
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert '<link rel="stylesheet"' not in html and "<script src" not in html
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert srcs and all(s.startswith(("data:image/png;base64,", "data:image/jpeg;base64,")) for s in srcs)


def test_plots_present(rendered: dict) -> None:
    keys = {p.key for s in rendered["report"].sections for ts in s.tables for p in ts.plots}
    keys |= {p.key for s in rendered["report"].sections for p in s.plots}
    assert {"winoground-group-bars", "winoground-group-equivariance", "eqben-group-equivariance"} <= keys
    assert "sugarcrepe-i2t-top1-alpha" in keys  # synthetic runs carry info["alpha_curve"]
    for key in keys:
        data = (rendered["out"] / "figures" / f"{key}.png").read_bytes()
        assert data.startswith(b"\x89PNG")


def test_equivariance_matches_losses() -> None:
    """The report's NumPy scores equal the torch computation the training diagnostics use."""
    import torch

    from spotdiff.protocols.equivariance import equivariance_score

    m = np.random.default_rng(0).normal(size=(50, 2, 2))
    torch_scores = equivariance_score(torch.tensor(m)).numpy()
    np.testing.assert_allclose(equivariance_scores_from_matrices(m), torch_scores, rtol=1e-12)


def test_alpha_curve_both_formats(tmp_path: Path) -> None:
    store = _store_with(tmp_path, {"a": np.ones(10), "b": np.zeros(10)})
    runs = store.runs()
    infos = [
        {"alpha": [0, 0.5, 1], "accuracy": [50, 60, 55]},
        {"alphas": [0, 0.5, 1], "curves": {"accuracy": [40, 45, None]}, "alpha": 0.5, "metric": "accuracy"},
    ]
    for run, curve in zip(runs, infos, strict=True):
        store.finish_run(run.id, run.metrics, run.n_cases, info={**run.info, "alpha_curve": curve})
    (table,) = build_tables(load_run_data(store, select_runs(store)), test=False)
    curves = alpha_curves(table)
    assert set(curves) == {"a", "b"}
    tuned = {k: v["tuned"] for k, v in curves.items()}
    assert sorted(tuned.values(), key=str) == [0.5, None]


# ------------------------------------------------------------------------------------------ gallery
def test_gallery_thumbnails_crops_and_filters(rendered: dict, tiny_store: dict) -> None:
    sections = {ts.table.benchmark: ts for s in rendered["report"].sections for ts in s.tables}
    aro = sections["aro-vg-relation"].gallery
    assert aro is not None and aro.cases and not aro.notes
    records = json.loads((tiny_store["data"]["aro-vg-relation"] / "visual_genome_relation.json").read_text())
    for gc in aro.cases:
        rec = records[int(gc.case_id)]
        (thumb,) = gc.thumbs
        assert (thumb.width, thumb.height) == (rec["bbox_w"], rec["bbox_h"])  # the crop, not the whole image
        assert gc.texts == [rec["false_caption"], rec["true_caption"]]
        failing = [m for m in gc.models if m.failed]
        assert failing and all(len(m.values) == len(gc.score_labels) == 2 for m in failing)
        assert gc.score_classes == ["", "pos"]
        assert (
            any(o.startswith("relation=") for o in aro.tag_options) or len({c.tags["relation"] for c in aro.cases}) < 2
        )
    wino = sections["winoground"].gallery
    assert wino is not None and all(len(gc.thumbs) == 2 for gc in wino.cases)
    assert sections["coco-retrieval"].gallery is None and sections["coco-retrieval"].gallery_note
    valse = sections["valse"].gallery  # synthetic data: no texts, but ids, tags and scores
    assert valse is not None and valse.cases and valse.cases[0].texts is None
    assert any("cannot read" in n for n in valse.notes)


def test_gallery_hides_texts_when_data_changed(tiny_store: dict, tmp_path: Path) -> None:
    data = tmp_path / "wino"
    shutil.copytree(tiny_store["data"]["winoground"], data)
    store = RunStore(tmp_path / "runs.sqlite")
    model = next(tiny_store["root"].glob("clip0"))
    run_eval(
        EvalConfig(
            model=f"hf-clip:{model}",
            benchmark="winoground",
            data=data,
            store=tmp_path / "runs.sqlite",
            progress=False,
            n_boot=10,
            device="cpu",
        )
    )
    lines = (data / "examples.jsonl").read_text().splitlines()
    (data / "examples.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    report = build_report(store)
    gallery = report.sections[0].tables[0].gallery
    assert gallery is not None and gallery.cases and all(gc.texts is None for gc in gallery.cases)
    assert any("changed since the run" in n for n in gallery.notes)


def test_score_entries_labels() -> None:
    truth = [[True, True, False]]
    tt = score_entries(np.eye(3), "text-text", truth, ("p1", "p2", "n"))
    assert [(lab, cls) for lab, cls, _ in tt] == [("p1·p2", "pos"), ("p1·n", ""), ("p2·n", "")]
    big = np.arange(25, dtype=float).reshape(5, 5)
    entries = score_entries(big, "image-text", np.eye(5, dtype=bool).tolist(), ())
    assert entries[:2] == [("I1 true", "pos", 0.0), ("I1 best false", "", 4.0)]
    assert len(score_entries(big, "image-text", None, ())) == 16


# ------------------------------------------------------------------------------------------ compare
def test_compare_runs(tiny_store: dict) -> None:
    store = RunStore(tiny_store["store"])
    a, b = tiny_store["ids"][("winoground", 0)], tiny_store["ids"][("winoground", 1)]
    cmp = compare_runs(a, b, store=store, n_boot=200)
    scopes = {c.scope for c in cmp.results}
    assert scopes == {"all", "subset_mean", "Object", "Relation", "Both"}
    ref_a = evaluation_from_units("group", store.units(a), seed=0)
    ref_b = evaluation_from_units("group", store.units(b), seed=0)
    ref = paired_comparison(ref_a, ref_b, "group", n_boot=200)
    got = next(c for c in cmp.results if c.scope == "all" and c.metric == "group")
    assert got == ref
    text = format_comparison(cmp)
    assert a in text and b in text and "mcnemar-exact" in text
    with pytest.raises(Exception, match="not comparable"):
        compare_runs(a, tiny_store["ids"][("aro-vg-relation", 0)], store=store)
    loaded = [(store.get(r), list(store.units(r))) for r in (a, b)]  # a report's runs, already in memory
    assert compare_runs(*loaded, n_boot=200).results == cmp.results
    assert compare_runs(loaded[0], b, store=store, n_boot=200).results == cmp.results


def test_compare_on_common_units(tmp_path: Path) -> None:
    store = _store_with(tmp_path, {"a": np.ones(40)})
    _store_with(tmp_path, {"b": np.zeros(30)})
    a, b = (r.id for r in sorted(store.runs(), key=lambda r: r.model))
    cmp = compare_runs(a, b, store=store, n_boot=50)
    assert any("30 units present in both" in n for n in cmp.notes)
    assert cmp.results[0].n_units == 30 and cmp.results[0].difference == pytest.approx(100.0)


def test_cli_report_and_compare(tiny_store: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = tiny_store["ids"][("aro-vg-relation", 0)], tiny_store["ids"][("aro-vg-relation", 1)]
    out = tmp_path / "rep"
    rc = main(["report", a[:6], b, "--store", str(tiny_store["store"]), "--out", str(out), "--title", "two runs"])
    assert rc == 0
    html = (out / "report.html").read_text()
    assert "<title>two runs</title>" in html and html.count('<tr id="run-') == 2
    assert (out / "tables" / "aro-vg-relation-aro-macro.tex").is_file()
    rc = main(
        [
            "compare",
            a,
            b,
            "--store",
            str(tiny_store["store"]),
            "--csv",
            str(tmp_path / "c.csv"),
            "--latex",
            str(tmp_path / "c.tex"),
            "--n-boot",
            "100",
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0 and "macro_accuracy" in printed and "A-B [95% CI]" in printed
    rows = list(csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text())))
    assert {r["metric"] for r in rows} == {"macro_accuracy", "accuracy"}
    assert rows[0]["test"] in TESTS
    assert "\\begin{tabular}" in (tmp_path / "c.tex").read_text()
    rc = main(["report", "nope", "--store", str(tiny_store["store"]), "--out", str(out)])
    assert rc == 2


def test_report_latex_marks_best(tmp_path: Path) -> None:
    store = _store_with(tmp_path, {"good_model": np.ones(60), "bad": np.zeros(60)})
    (table,) = build_tables(load_run_data(store, select_runs(store)))
    tex = table_latex(table)
    assert "\\textbf{100.00}" in tex and "good\\_model" in tex


# ------------------------------------------------------------------------------------------ VISLA
def test_visla_lexical_overlap_from_real_data(shared_data: Path, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    fill_store(
        store,
        models=2,
        benchmarks=("visla-spatial",),
        n_cases=60,
        n_boot=20,
        data={"visla-spatial": shared_data / "visla"},
    )
    report = build_report(store)
    (sec,) = report.sections
    (plot,) = sec.plots
    assert plot.key == "visla-spatial-lexical-overlap" and "missing" not in plot.caption
    gallery = sec.tables[0].gallery
    assert (
        gallery is not None and gallery.cases and gallery.cases[0].texts and gallery.cases[0].roles == ["p1", "p2", "n"]
    )


# ------------------------------------------------------------------------------------------ browser
#: What the first screen shows, and the labels of the legends, galleries and run key, read in the page.
_ANSWER_JS = """
const sm = document.getElementById('summary');
const box = sm ? sm.getBoundingClientRect() : null;
const heading = sm ? sm.querySelector('h2').getBoundingClientRect() : null;
const legends = Array.from(document.querySelectorAll('figure.plot[data-legend]'))
  .map(f => [f.id, JSON.parse(f.dataset.legend)]);
const galleries = Array.from(document.querySelectorAll('.gallery')).map(g => {
  const runs = {};
  g.querySelectorAll('tr[data-model]').forEach(r => {
    (runs[r.dataset.model] = runs[r.dataset.model] || new Set()).add(r.dataset.run);
  });
  const perCase = Array.from(g.querySelectorAll('article.case')).map(c =>
    Array.from(c.querySelectorAll('tr[data-model]')).map(r => r.dataset.model));
  return [g.id, Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, Array.from(v)])), perCase];
});
return {
  summary_top: box ? box.top : null, heading_bottom: heading ? heading.bottom : null,
  height: window.innerHeight, kind: sm ? sm.dataset.kind : null,
  first_section: document.querySelector('section.benchmark').id,
  legends: legends, galleries: galleries,
  key: Array.from(document.querySelectorAll('table.runkey tr[data-label]')).map(r => r.dataset.label),
};
"""


def _check_answer_first(driver, path: Path, kind: str, first_benchmark: str) -> dict:
    """Open the page: the summary's heading lies within the first screen and comes before every section;
    no legend of a figure, no gallery case and no gallery repeats a label for different runs."""
    driver.get(path.resolve().as_uri())
    state = driver.execute_script(_ANSWER_JS)
    assert state["kind"] == kind, state["kind"]
    assert 0 <= state["summary_top"] < state["height"] and state["heading_bottom"] < state["height"], state
    assert state["first_section"] == f"bench-{first_benchmark}"
    assert len(set(state["key"])) == len(state["key"]) > 0
    for fig, legend in state["legends"]:
        assert len(set(legend)) == len(legend), (fig, legend)
    for gallery, runs, cases in state["galleries"]:
        assert all(len(ids) == 1 for ids in runs.values()), (gallery, runs)  # one run per label
        assert len({ids[0] for ids in runs.values()}) == len(runs), (gallery, runs)  # one label per run
        assert all(len(set(labels)) == len(labels) for labels in cases), gallery
    return state


@pytest.mark.slow
def test_reports_open_on_their_answer_in_chromium(answer_reports: dict, chromium) -> None:
    driver = chromium
    grid = _check_answer_first(driver, answer_reports["grid"]["written"]["html"], "grid", GRID_ORDER[0])
    assert any(legend for _, legend in grid["legends"]) and grid["galleries"]
    demo = _check_answer_first(driver, answer_reports["demo"]["written"]["html"], "demo", "winoground")
    assert demo["key"] == ["synthetic-model-00", "synthetic-model-01"]
    shown = driver.execute_script(
        "return Array.from(document.querySelectorAll('article.finding')).map(a => a.getBoundingClientRect().top)"
    )
    assert len(shown) == 2 and shown[0] < demo["height"]  # the first finding is on the first screen


@pytest.mark.slow
def test_report_in_headless_chromium(rendered: dict, tmp_path: Path, chromium) -> None:
    driver = chromium
    first = rendered["report"].summary.order[0]
    labels = _check_answer_first(driver, rendered["written"]["html"], "grid", first)
    assert {"clip0", "clip1"} <= set(labels["key"]) and labels["legends"]
    assert driver.title == "tiny report"
    state = driver.execute_script(
        """
        const imgs = Array.from(document.images);
        return {
          tables: document.querySelectorAll('main table.results').length,
          rows: document.querySelectorAll('main table.results tbody tr').length,
          images: imgs.length,
          loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
          plots: document.querySelectorAll('figure.plot img').length,
          thumbs: document.querySelectorAll('.thumbs img').length,
          cards: document.querySelectorAll('article.case').length,
        };"""
    )
    report = rendered["report"]
    assert state["tables"] == len(report.tables)
    assert state["rows"] == sum(len(t.rows) for t in report.tables)
    assert state["images"] > 0 and state["loaded"] == state["images"], state
    assert state["plots"] >= len(report.tables) and state["thumbs"] > 0 and state["cards"] > 0
    # the filters: pick a model in the ARO gallery and check that only its failures stay visible
    counts = driver.execute_script(
        """
        const g = document.getElementById('gallery-aro-vg-relation-aro-macro');
        const sel = g.querySelector('select[data-filter="model"]');
        const before = g.querySelector('.count').textContent;
        sel.value = sel.options[1].value;
        sel.dispatchEvent(new Event('change'));
        const shown = Array.from(g.querySelectorAll('article.case')).filter(c => !c.hidden);
        const ok = shown.every(c => c.dataset.models.includes('|' + sel.value + '|'));
        return [before, g.querySelector('.count').textContent, ok, shown.length];"""
    )
    assert counts[2], counts  # every visible card was failed by the chosen model
    assert counts[1].endswith("cases shown") and counts[3] >= 1
    driver.execute_script("document.getElementById('gallery-winoground-group').scrollIntoView()")
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, errors
    shot = tmp_path / "report.png"
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
    keep = os.environ.get("SPOTDIFF_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report.png")


def test_compare_requires_two_runs(tiny_store: dict) -> None:
    store = RunStore(tiny_store["store"])
    a = tiny_store["ids"][("winoground", 0)]
    with pytest.raises(Exception, match="two different runs"):
        compare_runs(a, a, store=store)


def test_cases_are_independent_of_store_unit_order(tmp_path: Path) -> None:
    """Reports read units with their own query; it agrees with RunStore.units."""
    store = _store_with(tmp_path, {"a": np.array([1, 0, 1, 1.0])})
    (rd,) = load_run_data(store, select_runs(store))
    ref = list(store.units(rd.id))
    from spotdiff.report.collect import unit_scores

    assert [u["unit_id"] for u in rd.units] == [u["unit_id"] for u in ref]
    assert [unit_scores(u) for u in rd.units] == [u["scores"] for u in ref]
    assert [u["outcomes"] for u in rd.units] == [u["outcomes"] for u in ref]


def test_case_type_roundtrip_for_synthetic() -> None:
    from spotdiff.testing.synthetic_runs import make_cases

    for bench in ("winoground", "visla-generic", "spec", "valse", "coco-retrieval"):
        cases = make_cases(bench, 6)
        assert cases and all(isinstance(c, Case) for c in cases)
