"""``spotdiff demo``: the whole synthesize -> diagnose -> optimize loop, offline, on embedded defaults.

Its stages (synthesize, train, diagnose, fine-tune three ways, VisualGPTScore, report and findings) are
``spotdiff`` commands of the bundled plan file ``demo/plan.yaml`` (:mod:`spotdiff.demo.plan`), run by
:mod:`spotdiff.plans`; :mod:`spotdiff.demo.findings` checks the papers' findings on what they wrote.
What each stage does, and why: docs/plans.md.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from spotdiff.demo.findings import compute_findings, finding_flags, instance_overlap, write_findings
from spotdiff.demo.plan import plan
from spotdiff.demo.profiles import DEFAULT_OUT, PROFILES, STORE, DemoConfig, Profile
from spotdiff.demo.summary import summary_text
from spotdiff.errors import ConfigError, SpotdiffError
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
    return the findings.

    Args:
        config: the demo's profile, seed, output folder and worker count.
        run_command: executes one ``spotdiff`` argv and returns its exit status.
        echo: prints each stage's command as it starts.
    """
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
        epilogue=[
            "# findings.json and summary.md from the runs above, then the report again, opening with the findings",
            "spotdiff demo findings .",
            shlex.join(_report_argv(p.name, Path("."))),
            "",
        ],
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
    echo(f"{runner.stamp()} {'report':20s} the report again, opening with the findings")
    if run_command(_report_argv(p.name, out)[1:]) != 0:
        raise SpotdiffError(f"the report with the findings failed; see {out / 'report'}")
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


def _report_argv(profile: str, out: Path) -> list[str]:
    """``spotdiff report`` of the demo's runs, opening with its findings (run after findings.json is written)."""
    return ["spotdiff", "report", "--out", str(out / "report"), "--store", str(out / STORE),
            "--title", f"spotdiff demo ({profile})", "--findings", str(out / "findings.json")]  # fmt: skip


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
