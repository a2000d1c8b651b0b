"""``spotdiff models``: the registered scorer families and their spec syntax."""

from __future__ import annotations

import argparse
import inspect

from spotdiff.scorers import ALIASES, SCORERS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("models", help="list scorer families and the model spec syntax")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("Model spec syntax: FAMILY:NAME_OR_PATH (a hub name, or a local directory / checkpoint)\n")
    for prefix, factory in SCORERS.items():
        doc = inspect.getdoc(factory) or ""
        caps = getattr(factory, "capabilities", None)
        line = f"{prefix}:"
        if caps:
            line += f"  [{', '.join(sorted(caps))}]"
        print(line)
        if doc:
            print("    " + doc.splitlines()[0])
    if ALIASES:
        print("\nAliases:")
        for alias, spec in sorted(ALIASES.items()):
            print(f"  {alias} -> {spec}")
    return 0
