"""``spotdiff review OUT``: review a synthesis run's items in the browser; ``--agreement`` compares reviewers.

Serves a local page (127.0.0.1, a free port, a random token in the printed URL) showing each item of
OUT's review sheet; the reviewer's decisions are saved at once to ``OUT/review.<reviewer>.csv``, which
``spotdiff synth ENGINE --from-review`` reads (several reviewers' files with ``--review-rule``). Ctrl-C or
SIGTERM stops the server and prints how far the review got.
"""

from __future__ import annotations

import argparse
import getpass
import json
from pathlib import Path

from spotdiff.commands._types import add_documented_parser, port
from spotdiff.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    summary = "review synthesized data in the browser (a local page; --agreement compares reviewers)"
    p = add_documented_parser(subparsers, "review", __doc__, summary)
    p.add_argument("out", type=Path, metavar="OUT", help="the folder a spotdiff synth run wrote")
    p.add_argument(
        "--reviewer",
        help="your name: your decisions go to OUT/review.NAME.csv, apart from other reviewers' (default: your "
        "login name); one review at a time per name",
    )
    p.add_argument("--port", type=port, default=0, help="the port on 127.0.0.1 (default 0: a free one)")
    p.add_argument(
        "--agreement",
        action="store_true",
        help="do not serve: report how far OUT's reviewers agree (Cohen's kappa for two, Fleiss' for more) and "
        "list their disagreements",
    )
    p.add_argument("--json", action="store_true", help="with --agreement: print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.agreement:
        return _agreement(args)
    if args.json:
        raise ConfigError("--json goes with --agreement")
    from spotdiff.diagnose.recorder import sigterm_as_interrupt
    from spotdiff.review.server import ReviewServer
    from spotdiff.review.session import ReviewSession

    with ReviewSession(args.out, args.reviewer or _login()) as session:  # held until the server stops
        server = ReviewServer(session, args.port)
        done = session.progress()
        print(f"spotdiff review: {done['total']} items ({session.kind.name}) in {session.out}")
        print(f"  your decisions ({done['decided']} so far) are saved at once to {session.file}")
        print("  open this page in a browser on this machine (Ctrl-C stops the server):")
        print(f"    {server.url}", flush=True)
        restore = sigterm_as_interrupt()  # SIGTERM (kill, a closed terminal's manager) ends it as Ctrl-C does
        try:
            server.run()
        finally:
            restore()
    done = session.progress()
    reader = session.kind.reader or _engine(session.out)
    print(
        f"spotdiff review: {done['decided']} of {done['total']} decided ({done['accepted']} accepted) in {session.file}"
    )
    print(f"  then: spotdiff synth {reader} --from-review {session.file} [other reviewers' files] --out DIR")
    return 0


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        raise ConfigError("cannot tell your login name: give --reviewer NAME") from None


def _engine(out: Path) -> str:
    """The engine that wrote ``out`` (its ``synth.json``), whose ``--from-review`` reads its pairs' sheet."""
    try:
        return str(json.loads((out / "synth.json").read_text(encoding="utf-8"))["engine"])
    except (OSError, ValueError, KeyError, TypeError):
        return "eqben"


def _agreement(args: argparse.Namespace) -> int:
    from spotdiff.review.agreement import agreement

    report = agreement(args.out)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(f"spotdiff review --agreement: {', '.join(report['reviewers'])} on {report['folder']}")
    left = report["not_decided_by_all"]
    print(f"  items decided by every reviewer: {report['compared']} of {report['items']}"
          + (f" ({left} left out: not decided by everyone yet)" if left else ""))  # fmt: skip
    print("  accepted: " + ", ".join(f"{n} {k}" for n, k in report["accepted"].items()))
    if report["observed"] is not None:
        print(f"  observed agreement: {100 * report['observed']:.1f}%")
    value = report["kappa"]
    shown = f"{value:.3f}" if value is not None else "undefined (no item, or every decision the same)"
    print(f"  {report['method']}: {shown}")
    print(f"  disagreements: {len(report['disagreements'])}")
    for d in report["disagreements"]:
        print(f"    {d['id']}: " + ", ".join(f"{n} {v}" for n, v in d["decisions"].items()))
    if report["edited_differently"]:
        print(f"  texts edited differently (--from-review refuses them until the reviewers agree): "
              f"{len(report['edited_differently'])}")  # fmt: skip
        for e in report["edited_differently"]:
            print(f"    {e['id']} {e['field']}: " + " / ".join(f"{n} {v!r}" for n, v in e["values"].items()))
    return 0
