"""The demo's key tables and verdicts, as text for the terminal and Markdown for ``summary.md``."""

from __future__ import annotations

from typing import Any

from spotdiff.demo.profiles import CLIP_MODELS, CLS_MARGIN, PAIRS, RETENTION_EVALS
from spotdiff.synth.canvas.spec import SUBSETS as SPEC_SUBSETS


def _fmt(entry: dict | None, digits: int = 1) -> str:
    if not entry or entry.get("value") is None:
        return "-"
    ci = entry.get("ci95")
    if ci and ci[0] is not None:
        return f"{entry['value']:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return f"{entry['value']:.{digits}f}"


def _fmt_cmp(c: dict | None) -> str:
    if not c:
        return "-"
    ci = [float("nan") if v is None else v for v in (c.get("ci95") or [None, None])]
    return (
        f"{c['difference']:+.1f} [{ci[0]:+.1f}, {ci[1]:+.1f}], p = {c['p_value']:.3g} ({c['test']}; "
        f"{c.get('n_cases', '?')} cases, {c.get('n_units', '?')} units)"
    )


def _yes(b: bool) -> str:
    return "REPRODUCED" if b else "NOT reproduced"


def summary_tables(findings: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """The key tables as ``(title, header, rows)``."""
    f = findings["findings"]
    diag = f["base_cls_far_above_count_and_position"]["diagnosis"]
    t1 = [["cls (object class)", _num(diag["cls"]["chance"]), _fmt(diag["cls"]), "-"]]
    attr = f["base_cls_far_above_count_and_position"].get("cls_attribute_prompts")
    if attr:
        t1.append(["cls, colour/texture prompts (diagnostic)", _num(diag["cls"]["chance"]), _fmt(attr), "-"])
    for sub in SPEC_SUBSETS:
        d = diag[sub]
        t1.append([sub, _num(d["chance"]), _fmt(d["i2t"]), _fmt(d["t2i"])])
    ft = findings["finetuning"]
    t2 = [
        [
            ft[m]["label"],
            _fmt(ft[m]["spec_i2t"]),
            _fmt(ft[m]["spec_t2i"]),
            _fmt(ft[m]["cls_i2t"]),
            _fmt(ft[m]["eqben_group"]),
        ]
        for m in CLIP_MODELS
    ]
    labels = {"hn": "hard negatives", "eqsim": "EqSim", "plain": "plain", "pairs": "SPEC pairs ungrouped",
              "base": "base"}  # fmt: skip
    t3 = []
    for a, b in PAIRS:
        c = findings["paired"].get(f"{a} - {b}", {})
        t3.append(
            [f"{labels[a]} - {labels[b]}"]
            + [_fmt_cmp(c.get(k)) for k in ("spec_i2t", "spec_t2i", "cls_i2t", "eqben_group")]
        )
    sets = f["vgpt_debiasing"]["sets"]
    t4 = []
    for name, label in (("eqben", "EqBen-style (balanced)"), ("aro", "ARO-style (shuffled words)")):
        s = sets[name]
        alpha = s.get("alpha_star_val_mean")
        alpha_txt = "-" if alpha is None else f"{alpha:.3f} ± {s.get('alpha_star_val_std') or 0:.3f}"
        tuned = s.get("tuned_test_score_mean")
        tuned_txt = "-" if tuned is None else f"{tuned:.1f} ± {s.get('tuned_test_score_std') or 0:.1f}"
        paired = _fmt_cmp((s.get("paired") or {}).get("tuned - raw"))
        t4.append([f"{label}: {s.get('metric')}", _num(s.get("chance")), _fmt(s.get("raw")), _fmt(s.get("alpha=1")),
                   tuned_txt, alpha_txt, paired, _fmt(s.get("blind"))])  # fmt: skip
    t5 = []
    for model, row in (findings.get("retention") or {}).items():
        cells = [row["label"]]
        for label, _, metrics in RETENTION_EVALS:
            for metric in metrics:
                block = (row.get(label) or {}).get(metric) or {}
                start, end = block.get("start"), block.get("end")
                cells.append(f"{_fmt(start)} -> {_fmt(end)}; {_fmt_cmp(block.get('change'))}" if start else "-")
        zs = (row.get(RETENTION_EVALS[0][0]) or {}).get(RETENTION_EVALS[0][2][0]) or {}
        cells.append(_fmt_cmp(zs.get("minus_plain")) if model != "ft-plain" else "-")
        t5.append(cells)
    headers = [f"{label} {m} (start -> end; change)" for label, _, ms in RETENTION_EVALS for m in ms]
    retention_table = (
        "Retention during fine-tuning (held-out sets evaluated at the first and last step, %, 95% CI; change = "
        "end - start, paired on the same units)",
        ["model", *headers, f"{RETENTION_EVALS[0][0]} {RETENTION_EVALS[0][2][0]} at the end - plain"],
        t5,
    )
    return [
        (
            "Base CLIP on the held-out SPEC set (accuracy %, 95% CI)",
            ["subset", "chance", "I2T", "T2I"],
            t1,
        ),
        (
            "Fine-tuning with the same budget (held-out sets, %, 95% CI)",
            ["model", "SPEC I2T (all)", "SPEC T2I (all)", "cls I2T", "EqBen group"],
            t2,
        ),
        (
            "Paired comparisons, pooled over the held-out set (difference in points, 95% CI, p; test; cases and "
            "units: SPEC's K x K cases are resampled and swapped whole)",
            ["comparison", "SPEC I2T", "SPEC T2I", "cls I2T", "EqBen group"],
            t3,
        ),
        (
            "VisualGPTScore raw vs debiased (%, 95% CI; tuned = cross-validated test score, mean ± std)",
            [
                "set: metric",
                "chance",
                "raw",
                "alpha=1",
                "tuned (CV test)",
                "alpha* (val)",
                "tuned - raw (paired)",
                "blind P(t)",
            ],
            t4,
        ),
        retention_table,
    ]


def _num(x: Any) -> str:
    return "-" if x is None else f"{x:.1f}"


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _verdicts(findings: dict) -> list[str]:
    f = findings["findings"]
    v = f["vgpt_debiasing"]
    kept = f["cls_kept_with_hard_negatives"]
    kept_cmp = kept.get("comparisons") or {}
    return [
        f"- base: cls far above count and position (CIs): {_yes(f['base_cls_far_above_count_and_position']['holds'])}"
        f" (with colour/texture prompts, diagnostic: "
        f"{_yes(f['base_cls_far_above_count_and_position'].get('holds_with_attribute_prompts', False))})",
        f"- hard negatives beat plain fine-tuning (paired 95% CI > 0, I2T and T2I): "
        f"{_yes(f['hard_negatives_beat_plain']['holds'])}",
        f"- cls with hard negatives, no drop larger than {CLS_MARGIN:g} points (paired 95% CI above "
        f"-{CLS_MARGIN:g}): {_yes(kept['holds'])} (HN - plain {_fmt_cmp(kept_cmp.get('plain'))}; "
        f"HN - base {_fmt_cmp(kept_cmp.get('base'))})",
        f"- hard negatives beat the same SPEC data ungrouped (gain from the loss, not the data): "
        f"{_yes(f['hard_negatives_beat_same_data_ungrouped']['holds'])}",
        f"- EqSim beats plain on the EqBen-style group score: {_yes(f['eqsim_beats_plain_on_eqben']['holds'])}",
        f"- VisualGPTScore: debiasing (cross-validated alpha) beats raw on the balanced set: "
        f"{_yes(v['balanced_debiasing_helps'])}; alpha* >= 0.5 there: {_yes(v['balanced_alpha_star_high'])} "
        f"(alpha=1 itself beats raw: {_yes(v['balanced_alpha1_beats_raw'])}); raw already strong on the ARO-style "
        f"set: {_yes(v['aro_raw_already_strong'])}; alpha* <= 0.3 there: {_yes(v['aro_alpha_star_low'])}",
        f"- hard negatives keep held-out zero-shot top-1 (paired 95% CI of the change above -{CLS_MARGIN:g} points): "
        f"{_yes(f.get('zero_shot_kept_with_hard_negatives', {}).get('holds', False))} "
        f"(change {_fmt_cmp(f.get('zero_shot_kept_with_hard_negatives', {}).get('change'))})",
    ]


def summary_text(findings: dict) -> str:
    parts = []
    for title, header, rows in summary_tables(findings):
        parts += [title, _text_table(header, rows), ""]
    parts.append("Findings:")
    parts += _verdicts(findings)
    if findings.get("note"):
        parts.append(f"Note: {findings['note']}")
    shared = findings.get("data", {}).get("shared_instances", {})
    if shared:
        parts.append(f"Object instances shared between training and held-out data: {shared}")
    return "\n".join(parts)


def summary_markdown(findings: dict) -> str:
    lines = [f"# spotdiff demo ({findings.get('profile')}, seed {findings.get('seed')})", ""]
    if findings.get("note"):
        lines += [f"> {findings['note']}", ""]
    lines += ["## Findings", "", *_verdicts(findings), ""]
    for title, header, rows in summary_tables(findings):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    lines += [
        "Held-out SPEC examples: [figures/heldout-spec.png](figures/heldout-spec.png). Full report: "
        "[report/report.html](report/report.html), [report/report.md](report/report.md). Every number: "
        "[findings.json](findings.json); the commands: [demo_commands.sh](demo_commands.sh).",
        "",
    ]
    t = findings.get("timing")
    if t:
        lines += [f"Wall {t['wall_s']} s, CPU {t['cpu_s']} s (all processes).", ""]
    return "\n".join(lines)
