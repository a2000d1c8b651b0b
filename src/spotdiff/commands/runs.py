"""``spotdiff runs``: list the runs in the run store, show one, or push one to the hub (``--push-to-hub``)."""

from __future__ import annotations

import argparse

from spotdiff.commands._types import add_store_option
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError
from spotdiff.jsonio import dumps
from spotdiff.report.hub import check_push, push_stored_run


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("runs", help="list runs in the run store")
    p.add_argument("run_id", nargs="?", help="show one run in full (id or unique prefix)")
    add_store_option(p)
    p.add_argument("--benchmark", help="only runs of this benchmark")
    p.add_argument(
        "--push-to-hub",
        metavar="REPO",
        help="commit the run's metrics, per-unit records and a dataset card to this hub dataset repository",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with RunStore(args.store, create=False) as store:
        if args.push_to_hub:
            if not args.run_id:
                raise ConfigError("--push-to-hub pushes one run: give its id (spotdiff runs RUN_ID --push-to-hub REPO)")
            check_push(args.push_to_hub)
            print(f"pushed to {push_stored_run(store, args.run_id, args.push_to_hub)}")
            return 0
        if args.run_id:
            r = store.get(args.run_id)
            print(dumps(r.__dict__, indent=2))
            return 0
        rows = store.runs(benchmark=args.benchmark)
    if not rows:
        print(f"no runs in {store.path}")
        return 0
    print(f"{'id':12}  {'created':25}  {'status':8}  {'benchmark':20}  {'protocol':14}  {'n':>6}  model")
    for r in rows:
        state, _, reason = r.status.partition(": ")  # "failed: <why>", as the store records it
        print(
            f"{r.id:12}  {r.created:25}  {state:8}  {r.benchmark:20}  {r.protocol:14}  "
            f"{r.n_cases if r.n_cases is not None else '-':>6}  {r.model}"
        )
        if reason:
            print(f"{'':12}  why: {' '.join(reason.split())}")
    return 0
