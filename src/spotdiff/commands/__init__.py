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

from spotdiff.errors import ConfigError, SpotdiffError, file_system_error
from spotdiff.urls import redact_text
from spotdiff.version import __version__


class _StoreOnce(argparse._StoreAction):
    """The default action of every option: an option that takes one value, given twice, is an error
    (argparse would silently keep the last); options that collect values say ``action="append"``."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_once", set())
        if option_string is not None and self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} takes one value and was given twice")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose single-value options refuse to be repeated (sub-parsers too)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``spotdiff``: every sub-command's, or only ``command``'s when it names one (a run then
    imports no other command's module; ``spotdiff --help`` and an unknown name still see them all).

    >>> sorted(build_parser("runs")._subparsers._group_actions[0].choices)
    ['runs']
    """
    parser = Parser(
        prog="spotdiff",
        description="Does a vision-language or text-embedding model see a minimal change?",
    )
    parser.add_argument("--version", action="version", version=f"spotdiff {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = [m.name for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name) if not m.name.startswith("_")]
    for name in [command] if command in names else names:
        importlib.import_module(f"spotdiff.commands.{name}").register(subparsers)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The sub-command a command line runs: its first word after ``-v``, if any (else None)."""
    words = [w for w in argv if w not in ("-v", "--verbose")]
    return words[0] if words and not words[0].startswith("-") else None


def split_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[list[str], list[str], dict]:
    """A command line (without ``spotdiff``) read as ``parser`` would, without running anything: the
    sub-commands it names (``["synth", "spec"]``), then the positional arguments and the values of each
    option (by ``dest``) of the last one, as given. Reading stops at an option the parser does not know
    (argparse refuses it when the command runs).

    Args:
        parser: the parser of ``spotdiff`` (:func:`build_parser`).
        argv: the command line.

    Raises:
        ConfigError: ``argv`` names a sub-command ``spotdiff`` does not have.
    """
    words: list[str] = []
    positional: list[str] = []
    options: dict[str, list[str]] = {}
    tokens = list(argv)
    while tokens:
        token = tokens.pop(0)
        if token.startswith("-") and token != "-":
            name, equals, value = token.partition("=")
            action = parser._option_string_actions.get(name)
            if action is None or action.nargs not in (None, 0):
                break
            if not equals and action.nargs is None:  # the option's value is the next word
                value = tokens.pop(0) if tokens else ""
            options.setdefault(action.dest, []).append(value)
            continue
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None:
            positional.append(token)
        elif token in sub.choices:
            words.append(token)
            parser, options = sub.choices[token], {}
        else:
            where = " ".join(["spotdiff", *words])
            raise ConfigError(f"{where} has no sub-command {token!r}; it has {', '.join(sorted(sub.choices))}")
    if not words:
        raise ConfigError("names no spotdiff sub-command")
    return words, positional, options


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # one line per HTTP request (a served model's thousands) only with -v
    logging.getLogger("httpx2").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "include_path", None):
            from spotdiff.data.declared import include_folders

            include_folders(args.include_path)
        return int(args.func(args) or 0)
    except SpotdiffError as exc:  # one line, without a password any URL in it held
        print(f"spotdiff {args.command}: error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only file system, no permission: one line, not a traceback
        error = file_system_error(exc, _output(args))
        if error is None:
            raise
        print(f"spotdiff {args.command}: error: {redact_text(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"spotdiff {args.command}: interrupted; cached work is kept", file=sys.stderr)
        return 130


def _output(args: argparse.Namespace) -> object | None:
    """The folder a command writes (its ``--out``), named by an error whose file the system did not name."""
    for name in ("out", "step_out"):
        if getattr(args, name, None) is not None:
            return getattr(args, name)
    return None
