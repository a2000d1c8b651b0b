"""Sub-commands of the ``spotdiff`` CLI, one module each, and the dispatcher :func:`main`.

Each command module defines ``register(subparsers)``, which adds its parser and sets
``func=run`` as the parser default; ``run(args)`` returns the exit status. Command modules parse
arguments and print; the work is done by the library they call.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

from spotdiff import __version__
from spotdiff.errors import SpotdiffError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spotdiff",
        description="Does a vision-language or text-embedding model see a minimal change?",
    )
    parser.add_argument("--version", action="version", version=f"spotdiff {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"spotdiff.commands.{info.name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SpotdiffError as exc:
        print(f"spotdiff {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"spotdiff {args.command}: interrupted; cached work is kept", file=sys.stderr)
        return 130
