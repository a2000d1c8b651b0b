"""Run under ``torchrun`` by test_synth_distributed.py: every engine through ``synthesize`` in one launch.

``python synth_launch.py SPEC.json``: SPEC maps an output folder to ``[engine, config keyword arguments]``;
with ``"kill": [rank, items]`` that rank kills itself (SIGKILL) after making that many items, as a crashed
or preempted process would; with ``"fail": [rank, items]`` it raises instead.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch.distributed as dist
import torch.distributed.fsdp  # noqa: F401  (before the group, as spotdiff.ranks.Group does: see there)

from spotdiff.synth import ENGINES
from spotdiff.synth import run as synth_run
from spotdiff.synth.run import synthesize

PATHS = {"annotations", "videos", "vsr", "images", "relations", "pairs", "from_review", "objects", "instance_cache"}


def _config(cls, options: dict):
    values = {}
    for name, value in options.items():
        if name in PATHS and value is not None:
            value = tuple(Path(v) for v in value) if isinstance(value, list) else Path(value)
        elif isinstance(value, list):
            value = tuple(value)
        values[name] = value
    return cls.config_class(**values)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    dist.init_process_group("gloo")  # once for the launch: synthesize uses it and leaves it open
    kill, fail = spec.pop("kill", None), spec.pop("fail", None)
    fault = kill or fail
    if fault is not None and dist.get_rank() == fault[0]:
        made = {"n": 0}
        real = synth_run._Journaled.__call__

        def faulty(journaled, task):
            if made["n"] == fault[1]:
                if kill:
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError(f"injected failure after {made['n']} items")
            made["n"] += 1
            return real(journaled, task)

        synth_run._Journaled.__call__ = faulty
    for out, (engine, options) in spec.items():
        cls = ENGINES.get(engine)
        synthesize(cls(_config(cls, options)), Path(out), quiet=True)
    dist.barrier()  # no rank tears down gloo while another still talks to it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
