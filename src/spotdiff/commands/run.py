"""``spotdiff run PLAN.yaml``: a study as a file of stages of ordinary spotdiff commands.

The stages run in dependency order, independent ones in parallel up to ``--workers``; each is
skipped when its fingerprint and outputs are unchanged, and printed as the command it runs. The plan
format: :mod:`spotdiff.plans.file`. ``spotdiff demo --plan`` prints the demo as such a file.

Before anything runs (``--dry-run`` too), every stage command must name a sub-command spotdiff has, and
no stage may run (``spotdiff run``) a plan that is running already: itself, or a plan that runs it back.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from spotdiff.commands._types import folder
from spotdiff.errors import ConfigError, DataError
from spotdiff.plans import Runner, Terminated, preload, write_commands
from spotdiff.plans.file import CommandCheck, Plan, load_plan


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a study: a YAML plan of spotdiff commands (resumable)",
        description="Run the stages of PLAN (YAML: name, vars, store, stages of `run` commands with their "
        "`outputs` and the stages they run `after`) in dependency order, independent ones in parallel; a stage "
        "whose commands, inputs and outputs are unchanged is skipped. Commands run in --out.",
    )
    p.add_argument("plan", type=Path, help="the plan file (YAML)")
    p.add_argument("--out", type=folder, help="the folder the commands run in (default: the plan file's folder)")
    p.add_argument("--workers", type=int, default=2, help="stages run at a time (default 2)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override one of the plan's vars (repeatable)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the commands in order, run nothing")
    p.set_defaults(func=run)


def _overrides(items: Sequence[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` values as a mapping."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        overrides[key] = value
    return overrides


def run(args: argparse.Namespace) -> int:
    from spotdiff.commands import build_parser, main, split_command

    parser = build_parser()

    def check(argv: Sequence[str]) -> str | None:
        try:
            split_command(parser, argv)
        except ConfigError as exc:
            return str(exc)
        return None

    plan = load_plan(args.plan, _overrides(args.set), check)
    out = (args.out or args.plan.resolve().parent).resolve()
    refuse_cycles(args.plan, plan, out, parser, check)
    out.mkdir(parents=True, exist_ok=True)
    title = f"The commands of plan {plan.name!r}, in order."
    script = write_commands(plan.stages, out / "plan_commands.sh", title=title)
    if args.dry_run:
        print(script.read_text(encoding="utf-8"), end="")
        return 0
    print(f"spotdiff run {args.plan} -> {out} ({len(plan.stages)} stages, {args.workers} at a time)")
    preload()
    runner = Runner(out, plan.stages, run_command=main, workers=args.workers, store=plan.store)
    try:
        runner.run()
    except Terminated:
        print(
            "spotdiff run: terminated (SIGTERM); the running stages were stopped and left unfinished; "
            "run the plan again to resume",
            file=sys.stderr,
        )
        return 143
    done = [name for name in runner.order if name not in runner.skipped]
    print(f"{runner.stamp()} plan {plan.name!r}: {len(done)} stages ran, {len(runner.skipped)} up to date")
    return 0


def refuse_cycles(
    path: Path, plan: Plan, out: Path, parser: argparse.ArgumentParser, check: CommandCheck, chain: tuple = ()
) -> None:
    """Refuse a plan with a stage that runs (``spotdiff run``) a plan running already: itself, or one of
    the plans that run it (``chain``); the plans its stages run are checked in turn, where they exist.

    Args:
        path: the plan file.
        plan: its contents.
        out: the folder its commands run in (a stage's relative paths start there).
        parser: the parser of ``spotdiff``.
        check: checks each stage command of the plans run (:func:`spotdiff.plans.file.parse_plan`).
        chain: the plans running it, outermost first.
    """
    from spotdiff.commands import split_command

    chain = (*chain, Path(path).resolve())
    for stage in plan.stages:
        for argv in stage.commands:
            words, positional, options = split_command(parser, argv)
            if words != ["run"] or not positional:
                continue
            nested = (out / positional[0]).resolve()
            if nested in chain:
                cycle = " -> ".join(str(p) for p in (*chain[chain.index(nested) :], nested))
                raise DataError(f"runs the plan {nested}, which is running already ({cycle}); a plan cannot run "
                                "itself", file=path, record=stage.name, field="run")  # fmt: skip
            if nested.is_file():
                nested_out = (out / options["out"][-1]).resolve() if options.get("out") else nested.parent
                inner = load_plan(nested, _overrides(options.get("set", [])), check)
                refuse_cycles(nested, inner, nested_out, parser, check, chain)
