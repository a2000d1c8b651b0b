"""Argument types shared by the sub-commands: each bad value is refused by argparse with one line
(``spotdiff eval: error: argument --seed: ...``) before any work starts. One function per kind of
value; the ``--store`` option is declared once (:func:`add_store_option`), and a sub-command described by a
module docstring is added by :func:`add_documented_parser`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

#: NumPy's legacy generator takes seeds in ``[0, 2**32)`` (``numpy.random.seed``).
SEED_LIMIT = 2**32
#: What ``--store`` defaults to (:func:`spotdiff.diagnose.store.default_store_path`).
STORE_DEFAULT = "$SPOTDIFF_STORE or ~/.local/share/spotdiff/runs.sqlite"


def _integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None


def seed(value: str) -> int:
    """A random seed: an integer in ``[0, 2**32)``, the range NumPy accepts.

    >>> seed("7")
    7
    """
    n = _integer(value)
    if not 0 <= n < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"a seed lies in 0..{SEED_LIMIT - 1} (NumPy's range), got {value}")
    return n


def positive_int(value: str) -> int:
    """An integer >= 1 (a count that must not be empty: ``--limit``, ``--batch-size``).

    >>> positive_int("3")
    3
    """
    n = _integer(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return n


def port(value: str) -> int:
    """A TCP port, 0 meaning a free one the system picks.

    >>> port("0"), port("8888")
    (0, 8888)
    """
    n = _integer(value)
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"a port lies in 0..65535 (0: a free one), got {value}")
    return n


def nonnegative_int(value: str) -> int:
    """An integer >= 0 (a count where 0 means none or off: ``--save-every``).

    >>> nonnegative_int("0")
    0
    """
    n = _integer(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return n


def n_boot(value: str) -> int:
    """Bootstrap resamples (``--n-boot``): an integer from 0 (no intervals) to
    :data:`~spotdiff.protocols.stats.MAX_N_BOOT`, refused above it with the memory it would take.

    >>> n_boot("1000")
    1000
    """
    from spotdiff.errors import ConfigError
    from spotdiff.protocols.stats import check_n_boot

    try:
        return check_n_boot(_integer(value))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--n-boot ")) from None


def positive_float(value: str) -> float:
    """A finite number > 0 (``--lr``).

    >>> positive_float("5e-5")
    5e-05
    """
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {value}")
    return x


def store_file(value: str) -> Path:
    """A run store's file (``--store``): refused if it names a folder.

    Args:
        value: the path given.
    """
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a folder; give the run store's file, e.g. {path / 'runs.sqlite'}")
    return path


def folder(value: str) -> Path:
    """A folder spotdiff creates or writes into (``--cache``, ``--out``): refused if it is a file.

    Args:
        value: the path given.
    """
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a file; give a folder")
    return path


def add_store_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "runs") -> None:
    """The ``--store`` option: the run store file of ``what`` (default :data:`STORE_DEFAULT`).

    Args:
        parser: the parser or group to add it to.
        what: what the store holds, for the help text.
    """
    parser.add_argument(
        "--store", type=store_file, metavar="FILE", help=f"run store file of the {what} (default {STORE_DEFAULT})"
    )


def add_include_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The ``--include-path`` option: folders of benchmark declarations the command also knows by name
    (the dispatcher registers them before the command runs; ``$SPOTDIFF_INCLUDE_PATH`` adds more).

    Args:
        parser: the parser or group to add it to.
    """
    parser.add_argument(
        "--include-path", action="append", default=[], type=Path, metavar="DIR",
        help="a folder of benchmark declarations (*.yaml, docs/declared.md) whose benchmarks are then known by "
        "name (repeatable; $SPOTDIFF_INCLUDE_PATH lists more, separated by ':')",
    )  # fmt: skip


def add_documented_parser(
    subparsers: argparse._SubParsersAction, name: str, doc: str | None, help: str | None
) -> argparse.ArgumentParser:
    """Add sub-command ``name`` whose ``--help`` shows ``doc`` (its module's docstring) as written, line breaks and
    lists kept, after the one-line ``help`` that the parent's ``--help`` lists."""
    return subparsers.add_parser(name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
