"""The demo as a plan: every stage is a list of ordinary ``spotdiff`` commands (stages as data).

:func:`plan` returns the stages of one demo run in dependency order; the ``collect`` functions read
what each stage's commands wrote into the stage's record, for the findings.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from spotdiff.demo.profiles import (
    ARO_OPTIONS,
    CACHE,
    CLIP_MODELS,
    FINETUNES,
    MODEL_LABELS,
    RETENTION_EVALS,
    SPEC_K,
    STORE,
    DemoConfig,
    Profile,
)
from spotdiff.plans import Stage


def _cmd(text: str) -> list[str]:
    return shlex.split(text)


def _eval_cmd(model: str, benchmark: str, data: str, out: str, p: Profile, seed: int, extra: str = "") -> list[str]:
    return _cmd(
        f"eval --model {model} --benchmark {benchmark} --data {data} {extra} --out {out} --store {STORE} "
        f"--cache {CACHE} --batch-size 128 --n-boot {p.n_boot} --seed {seed} -q"
    )


def plan(config: DemoConfig) -> list[Stage]:
    """The stages of a demo run, in an order that respects their dependencies."""
    p, s, w = config.profile, config.seed, config.workers
    common = f"--image-size {p.image_size} --workers {w}"
    vgpt = (
        f"--debias null --alpha tune --store {STORE} --cache {CACHE} --batch-size 64 --n-boot {p.n_boot} --seed {s} -q"
    )
    corpus = "data/corpus/captions.jsonl"
    stages: list[Stage] = [
        Stage(
            "synth-corpus",
            "training corpus (image-caption pairs)",
            [_cmd(f"synth corpus --out data/corpus --n {p.corpus_n} --seed {s} {common}")],
            ["data/corpus"],
        ),
        Stage(
            "synth-heldout-spec",
            "held-out SPEC set (six subsets + cls)",
            [
                _cmd(f"synth spec --out data/heldout-spec --n {p.spec_test_n} --seed {s + 1} {common}"),
                _cmd("synth contact-sheet data/heldout-spec --out figures/heldout-spec.png"),
            ],
            ["data/heldout-spec", "figures/heldout-spec.png"],
        ),
        Stage(
            "synth-train-spec",
            "SPEC candidate sets for fine-tuning",
            [_cmd(f"synth spec --out data/train-spec --n {p.spec_train_n} --seed {s + 2} --no-cls {common}")],
            ["data/train-spec"],
        ),
        Stage(
            "synth-heldout-eqben",
            "held-out EqBen-style balanced set",
            [_cmd(f"synth eqben --out data/heldout-eqben --n {p.eqben_n} --seed {s + 3} {common}")],
            ["data/heldout-eqben"],
        ),
        Stage(
            "synth-heldout-aro",
            "held-out corpus -> ARO-style set (COCO-Order Karpathy JSON)",
            [
                _cmd(f"synth corpus --out data/heldout-corpus --n {p.aro_n} --seed {s + 4} {common}"),
                _cmd("demo aro-set --corpus data/heldout-corpus --out data/heldout-aro"),
            ],
            ["data/heldout-corpus", "data/heldout-aro"],
        ),
        Stage(
            "synth-heldout-zeroshot",
            "held-out zero-shot classification set (balanced classes, prompt ensemble)",
            [_cmd(f"synth zeroshot --out data/heldout-zeroshot --n {p.zs_n} --seed {s + 5} {common}")],
            ["data/heldout-zeroshot"],
        ),
        Stage(
            "spec-pairs",
            "SPEC training sets as ordinary pairs (plain control)",
            [_cmd("demo spec-pairs --data data/train-spec --out data/train-spec-pairs")],
            ["data/train-spec-pairs"],
            deps=("synth-train-spec",),
        ),
        Stage(
            "cls-prompts",
            "held-out cls with colour/texture prompts (diagnostic)",
            [_cmd("demo cls-prompts --data data/heldout-spec --out data/heldout-cls-attr")],
            ["data/heldout-cls-attr"],
            deps=("synth-heldout-spec",),
        ),
        Stage(
            "tokenizer",
            "WordPiece vocabulary of the corpus",
            [_cmd(f"demo tokenizer --captions {corpus} --out models/tokenizer")],
            ["models/tokenizer"],
            deps=("synth-corpus",),
        ),
        Stage(
            "train-base",
            "CLIP from scratch on the corpus",
            [
                _cmd(
                    f"train --from-config small --tokenizer models/tokenizer --captions {corpus} --loss clip "
                    f"--steps {p.base_steps} --batch-size {p.base_batch} --lr {p.base_lr} "
                    f"--warmup-steps {p.base_warmup} --seed {s} --log-every 50 --out models/base"
                )
            ],
            ["models/base"],
            deps=("synth-corpus", "tokenizer"),
            collect=lambda out: _train_summary(out / "models/base"),
        ),
    ]
    # the fine-tunes: same steps, learning rate and image-caption pairs per step. plain: the corpus
    # only (SPEC Table 3 "+ L_clip", Table 4 CLIP_FT); hn / eqsim: the corpus plus whole SPEC
    # candidate sets; pairs: the corpus plus the same SPEC images and captions as ordinary pairs
    pairs_per_case = sum(SPEC_K.values()) / len(SPEC_K)  # anchors per SPEC case, on average
    plain_batch = p.ft_batch + round(p.ft_cases * pairs_per_case)
    # every fine-tune is evaluated on the held-out zero-shot and retrieval sets while it trains
    retention = " ".join(f"--eval {target}" for _, target, _ in RETENTION_EVALS)
    retention += f" --eval-every {p.ft_eval_every} --eval-n-boot {p.n_boot} --eval-batch-size 128 --store {STORE}"
    for name, loss in FINETUNES:
        if name == "plain":
            data = f"--captions {corpus} --batch-size {plain_batch}"
            deps: tuple[str, ...] = ("train-base",)
        elif name == "pairs":
            data = f"--captions {corpus} --captions data/train-spec-pairs/captions.jsonl --batch-size {plain_batch}"
            deps = ("train-base", "spec-pairs")
        else:
            data = (
                f"--captions {corpus} --cases spec=data/train-spec --batch-size {p.ft_batch} "
                f"--cases-per-step {p.ft_cases}"
            )
            deps = ("train-base", "synth-train-spec")
        out = f"models/ft-{name}"
        stages.append(
            Stage(
                f"train-ft-{name}",
                f"fine-tune: {MODEL_LABELS['ft-' + name]}",
                [
                    _cmd(
                        f"train --model hf-clip:models/base {data} --loss {loss} --steps {p.ft_steps} "
                        f"--lr {p.ft_lr} --warmup-steps {p.ft_warmup} --seed {s} --log-every 50 {retention} "
                        f"--out {out}"
                    )
                ],
                [out],
                deps=(*deps, "synth-heldout-zeroshot", "synth-heldout-aro"),
                collect=lambda o, out=out: {**_train_summary(o / out), "retention": _retention(o / out)},
            )
        )
    for model in CLIP_MODELS:
        spec = f"hf-clip:models/{model}"
        keys = ["spec", "cls", "eqben"]
        commands = [
            _eval_cmd(spec, "spec", "data/heldout-spec", f"evals/{model}-spec", p, s),
            _eval_cmd(spec, "spec", "data/heldout-spec", f"evals/{model}-cls", p, s, "--subset cls"),
            _eval_cmd(spec, "eqben", "data/heldout-eqben", f"evals/{model}-eqben", p, s),
        ]
        deps = ("train-base" if model == "base" else f"train-{model}", "synth-heldout-spec", "synth-heldout-eqben")
        if model == "base":  # the diagnostic cls with the corpus's caption style; kept out of the run store
            keys.append("cls_attr")
            commands.append(
                _cmd(
                    f"eval --model {spec} --benchmark spec --data data/heldout-cls-attr --subset cls "
                    f"--out evals/base-cls-attr --no-store --cache {CACHE} --batch-size 128 --n-boot {p.n_boot} "
                    f"--seed {s} -q"
                )
            )
            deps = (*deps, "cls-prompts")
        outs = [f"evals/{model}-{k.replace('_', '-')}" for k in keys]
        stages.append(
            Stage(
                f"eval-{model}",
                f"evaluate {MODEL_LABELS[model]} on the held-out sets",
                commands,
                outs,
                deps=deps,
                collect=lambda o, keys=keys, outs=outs: {
                    k: _metrics_file(o / d) for k, d in zip(keys, outs, strict=True)
                },
            )
        )
    aro_options = " ".join(f"-o {o}" for o in ARO_OPTIONS)
    stages += [
        Stage(
            "train-captioner",
            "BLIP captioner on the corpus",
            [
                _cmd(
                    f"demo train-captioner --captions {corpus} --tokenizer models/tokenizer --steps {p.cap_steps} "
                    f"--batch-size {p.cap_batch} --lr {p.cap_lr} --image-size {p.image_size} --seed {s} "
                    f"--out models/captioner"
                )
            ],
            ["models/captioner"],
            deps=("synth-corpus", "tokenizer"),
            collect=lambda out: _json(out / "models/captioner/captioner_train.json", summary=True),
        ),
        Stage(
            "vgpt-eqben",
            "VisualGPTScore raw vs debiased on the EqBen-style set",
            [
                _cmd(
                    f"eval --model vgpt:models/captioner --benchmark eqben --data data/heldout-eqben {vgpt} "
                    "--out evals/vgpt-eqben"
                )
            ],
            ["evals/vgpt-eqben"],
            deps=("train-captioner", "synth-heldout-eqben"),
            collect=lambda out: _debias_file(out / "evals/vgpt-eqben"),
        ),
        Stage(
            "vgpt-aro",
            "VisualGPTScore raw vs debiased on the ARO-style set",
            [
                _cmd(
                    f"eval --model vgpt:models/captioner --benchmark aro-coco-order --data data/heldout-aro "
                    f"{aro_options} {vgpt} --out evals/vgpt-aro"
                )
            ],
            ["evals/vgpt-aro"],
            deps=("train-captioner", "synth-heldout-aro"),
            collect=lambda out: _debias_file(out / "evals/vgpt-aro"),
        ),
    ]
    evals = tuple(st.name for st in stages if st.name.startswith(("eval-", "vgpt-")))
    stages.append(
        Stage(
            "report",
            "HTML + Markdown report",
            [_cmd(f"report --out report --store {STORE} --title 'spotdiff demo ({p.name})'")],
            ["report"],
            deps=evals,
        )
    )
    return stages


def _json(path: Path, summary: bool = False) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    if summary:
        data = {k: v for k, v in data.items() if k not in ("losses",)}
    return data


def _metrics_file(folder: Path) -> dict:
    data = _json(folder / "metrics.json")
    return {"run_id": data.get("run_id"), "n_cases": data.get("n_cases"), "metrics": data.get("metrics", {})}


def _debias_file(folder: Path) -> dict:
    """What ``spotdiff eval --debias`` wrote: per variant its run id and metrics, alpha*, the prior."""
    data = _json(folder / "metrics.json")
    deb = data.get("debias") or {}
    cv = {k: v for k, v in (deb.get("cross_validation") or {}).items() if not isinstance(v, list)}
    return {
        "protocol": data.get("protocol"),
        "metric": deb.get("metric"),
        "n_cases": data.get("n_cases"),
        "load_report": data.get("load_report"),
        "alpha_tuned": deb.get("alpha"),
        "alpha_star_all": deb.get("alpha_star_all"),
        "cross_validation": cv,
        "prior": deb.get("prior"),
        "variants": {
            name: {"run_id": (deb.get("run_ids") or {}).get(name), "metrics": metrics}
            for name, metrics in (deb.get("variants") or {}).items()
        },
    }


def _retention(folder: Path) -> dict:
    """Per evaluated set, the run ids at the first and the last evaluation (``OUT/eval_log.jsonl``)."""
    log = folder / "eval_log.jsonl"
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: dict[str, dict] = {}
    for row in sorted(rows, key=lambda r: r["step"]):
        entry = out.setdefault(row["label"], {"start": row["run_id"], "start_step": row["step"]})
        entry.update(end=row["run_id"], end_step=row["step"])
    return out


def _train_summary(folder: Path) -> dict:
    data = _json(folder / "train_summary.json")
    log = folder / "train_log.jsonl"
    first = None
    if log.is_file():
        lines = [ln for ln in log.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if lines:
            first = json.loads(lines[0]).get("loss")
    return {
        "steps": data.get("step"),
        "first_loss": first,
        "final_loss": data.get("final_loss"),
        "steps_per_s": data.get("steps_per_s"),
    }
