"""``spotdiff demo``: the whole synthesize -> diagnose -> optimize loop, offline, on embedded defaults.

With no argument it runs, on the CPU and without a network (about 12 minutes on 2 idle cores, 21
CPU-minutes; ``--quick`` is a shortened run of about a minute that exercises every stage):

1. **synthesize** (``spotdiff synth``): a training corpus of ordinary image-caption pairs
   (``corpus``, 64 px, *train* object instances), SPEC-style candidate sets for fine-tuning
   (``spec``, seed +2), and the held-out test sets, each from its own seed: SPEC's six subsets plus
   the ``cls`` object-classification folder (seed +1), an EqBen-style balanced set (seed +3) and a
   second corpus (seed +4) whose captions become an ARO-style set with word-shuffled negatives
   (written as ARO's COCO-Order Karpathy JSON, read by the ordinary ``aro-coco-order`` loader, and
   also the gallery of a held-out image-text retrieval set, ``coco-retrieval``), and a held-out
   zero-shot classification set (``spotdiff synth zeroshot``, seed +5: one object per image, balanced
   over the object classes, a six-template prompt ensemble).
   Object instances of the held-out sets are checked to be disjoint from the training data
   (``findings.json`` -> ``data``).
2. **train** a small Hugging Face CLIP from scratch on the corpus (``spotdiff train --from-config
   small``; a WordPiece vocabulary of the corpus words, ``spotdiff demo tokenizer``).
3. **diagnose** it on the held-out sets (``spotdiff eval``): SPEC I2T/T2I per subset, object
   classification ``cls`` (benchmark ``spec`` with ``--subset cls``: one image against
   ``"a photo of a {class}."`` for every class, i.e. top-1 zero-shot classification, ties failing),
   and the EqBen group score. As a diagnostic (kept out of the run store), the same cls images
   against prompts that also name the object's colour and texture, as every corpus caption does
   (``spotdiff demo cls-prompts``).
4. **fine-tune three ways** from that model with the same budget (steps, learning rate, warm-up and
   image-caption pairs per step): *plain* contrastive on the corpus (SPEC Table 3's "+ L_clip",
   Table 4's CLIP_FT), *+ hard negatives* (SPEC Eq. 9: whole SPEC candidate sets in the batch,
   ``--loss spec-hn``) and *+ EqSim* (EqBen Sec. 3 on the same candidate sets, ``--loss eqsim``);
   plus a control that sees the same SPEC images and captions as ordinary, ungrouped pairs
   (``spotdiff demo spec-pairs``), which separates the hard-negative loss from the extra data.
   Each is evaluated like the base; hard negatives vs plain is a paired test on the same units.
   While it trains, each fine-tune is evaluated on the held-out zero-shot set and the retrieval
   gallery at its first step, every ``ft_eval_every`` steps and its last (``spotdiff train --eval``):
   the retention curves go into the report, and a finding states each loss's change in zero-shot
   top-1 and retrieval R@1 from start to end, with paired 95% CIs on the same units.
5. **VisualGPTScore**: train a small BLIP captioner (``BlipForConditionalGeneration`` from a small
   config, ``spotdiff demo train-captioner``) on the same corpus and score the EqBen-style and the
   ARO-style sets with log P(t|i), raw (alpha = 0), PMI (alpha = 1) and alpha tuned by the paper's
   cross-validation, with P(t) from Gaussian-noise null images (``spotdiff eval --debias null``;
   every variant is a run in the run store, the alpha curve goes into the report).
6. **report** (``spotdiff report``: HTML + Markdown, tables with 95% bootstrap intervals, plots) and
   **findings** (``spotdiff demo findings``): ``findings.json`` with a boolean and the numbers for
   each paper finding, ``summary.md`` with the key tables.

Every stage is a ``spotdiff`` command of the bundled plan file ``demo/plan.yaml`` (:mod:`spotdiff.demo.plan`,
run by :mod:`spotdiff.plans`; ``spotdiff demo --plan`` prints it for ``spotdiff run``); the
demo prints each one as it starts and writes them all to ``OUT/demo_commands.sh`` (paths relative
to ``OUT``; the script ``cd``s there). Stages run in forked worker processes (``--workers`` at a
time, ``cpu_count // workers`` torch threads each), so the heavy imports happen once. Resumable: a
stage whose record (``OUT/stages/NAME.json``) holds the same fingerprint (its commands, parameters,
the spotdiff version and its inputs' fingerprints) and whose outputs exist is skipped, so a second
run only re-does the findings. Evaluation runs go to the demo's own run store ``OUT/runs.sqlite``
and cache ``OUT/cache``. Findings are reported as they come out: a finding that does not reproduce
is ``false`` in ``findings.json`` and said so in the summary.
"""


from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict

from spotdiff.demo.findings import compute_findings, finding_flags, instance_overlap, write_findings
from spotdiff.demo.plan import plan
from spotdiff.demo.profiles import DEFAULT_OUT, PROFILES, DemoConfig, Profile
from spotdiff.demo.summary import summary_text
from spotdiff.errors import ConfigError
from spotdiff.jsonio import write_json
from spotdiff.plans import Runner, preload, threads_per_worker, write_commands
from spotdiff.version import __version__

__all__ = [
    "DEFAULT_OUT",
    "PROFILES",
    "DemoConfig",
    "Profile",
    "compute_findings",
    "finding_flags",
    "instance_overlap",
    "plan",
    "run_demo",
    "summary_text",
]


def run_demo(
    config: DemoConfig, *, run_command: Callable[[list[str]], int], echo: Callable[[str], None] = print
) -> dict:
    """Run (or resume) the whole demo, each command through ``run_command`` (``spotdiff.commands.main``);
    return the findings."""
    if config.workers < 1:
        raise ConfigError("--workers must be at least 1")
    out = config.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    marker = out / "demo.json"
    if any(out.iterdir()) and not marker.is_file():
        raise ConfigError(f"--out {out} is not empty and was not written by `spotdiff demo`; choose another folder")
    p = config.profile
    t0, c0 = time.perf_counter(), _cpu()
    echo(
        f"spotdiff demo ({p.name}) -> {out}\n"
        f"  {config.workers} stage(s) at a time, {threads_per_worker(config.workers)} torch thread(s) each; "
        f"commands in {out / 'demo_commands.sh'}, logs in {out / 'logs'}"
    )
    write_json(marker, {"spotdiff": __version__, "profile": asdict(p), "seed": config.seed}, indent=1)
    stages = plan(config)
    write_commands(
        stages,
        out / "demo_commands.sh",
        title=f"The commands `spotdiff demo{' --quick' if config.quick else ''} --seed {config.seed}` runs, in order.",
        epilogue=["# findings.json and summary.md from the runs above", "spotdiff demo findings .", ""],
    )
    preload()
    from transformers import BlipForConditionalGeneration, CLIPModel  # noqa: F401  (the demo's models, once)

    runner = Runner(out, stages, run_command=run_command, workers=config.workers, echo=echo)
    runner.run()
    echo(f"{runner.stamp()} {'findings':20s} findings.json and summary.md")
    findings = compute_findings(out)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    findings["timing"] = {
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "skipped_stages": runner.skipped,
        "stages": {
            name: {"wall_s": rec.get("wall_s"), "cpu_s": rec.get("cpu_s"), "skipped": name in runner.skipped}
            for name, rec in runner.records.items()
        },
    }
    write_findings(out, findings)
    echo("")
    echo(summary_text(findings))
    echo("")
    echo(f"spotdiff demo: done in {wall:.0f} s (cpu {cpu:.0f} s, all processes)")
    report = out / "report"
    echo(f"  report:   {report / 'report.html'}  and  {report / 'report.md'}")
    echo(f"  summary:  {out / 'summary.md'}")
    echo(f"  findings: {out / 'findings.json'}")
    echo(f"  commands: {out / 'demo_commands.sh'}")
    return findings


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
