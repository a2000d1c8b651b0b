"""Sharded evaluation on several processes: ``torchrun`` / ``accelerate launch`` of ``spotdiff eval``.

A launcher starts one process per rank and sets ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK`` (and
``MASTER_ADDR`` / ``MASTER_PORT``). :func:`detect` reads them; :func:`run_eval_distributed` then:

1. every rank checks the benchmark, subset and protocol (config errors before any work);
2. rank 0 chooses a run token and the cache directory (``--cache``, or with ``--no-cache`` a fresh
   temporary directory under ``$SPOTDIFF_DIST_TMPDIR`` or the system temp folder), folds in shards
   left by killed runs, and shares both with the other ranks;
3. every rank loads the model (on ``cuda:LOCAL_RANK`` when the device is ``auto`` or ``cuda`` and
   CUDA is available), streams all cases, and computes only the unique items whose content key
   hashes to it (``sha256(key) % WORLD_SIZE``: texts by text key, images by image key, image-text
   pairs of a pair scorer by their image's key) into its own shard file
   ``<cache>/shards/<token>-rank<r>.sqlite``, reading the main cache for what is already there;
4. the ranks exchange their status (a failing rank makes every rank fail with a message naming it);
5. rank 0 merges the shards into the main cache and runs the ordinary single-process path
   (:func:`spotdiff.diagnose.runner.run_eval`), which finds every item cached, so the outputs are those of
   a single-process run; the other ranks return ``None`` and write nothing.

Only a few small Python objects cross processes (the token, the directory, per-rank status), so the
process group uses ``gloo`` whatever the device (``$SPOTDIFF_DIST_BACKEND`` overrides it, e.g.
``nccl``). ``$SPOTDIFF_DIST_TIMEOUT`` (seconds, default 6 hours) bounds how long ranks wait for each
other. Multi-node runs need the cache directory on a file system that every node sees.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from spotdiff.diagnose.cache import CACHE_FILE, Cache, Shard, merge_shards
from spotdiff.diagnose.engine import cache_digest, check_capability
from spotdiff.diagnose.recorder import EvalConfig, EvalResult
from spotdiff.diagnose.runner import load_eval_scorer, make_engine, resolve, run_eval, stream_cases
from spotdiff.errors import ConfigError
from spotdiff.ranks import DistEnv, Group, detect, owner, rank_device, step
from spotdiff.scorers import Scorer
from spotdiff.seeding import seed_everything

log = logging.getLogger(__name__)

# -- the sharded run --------------------------------------------------------------------------------


def _prepare(config: EvalConfig) -> tuple[str, str, bool]:
    """Rank 0: the run token, the cache directory (made if needed), whether it is temporary."""
    temporary = config.cache is None
    if temporary:
        base = os.environ.get("SPOTDIFF_DIST_TMPDIR") or None
        cache_dir = Path(tempfile.mkdtemp(prefix="spotdiff-shards-", dir=base))
    else:
        cache_dir = Path(config.cache).expanduser().resolve()
        cache_dir.mkdir(parents=True, exist_ok=True)
        added = merge_shards(cache_dir)  # shards of killed runs: their work is reused, not redone
        if added:
            log.info("merged %d cached items left in shards by an earlier run", added)
    with Cache(cache_dir, ""):  # the main cache exists before the ranks read it
        pass
    return uuid.uuid4().hex[:12], str(cache_dir), temporary


def _prefill(config: EvalConfig, env: DistEnv, scorer: Scorer, cache_dir: Path, token: str) -> dict:
    """Compute this rank's share of the unique items into its shard; return its counts."""
    if not (cache_dir / CACHE_FILE).is_file():
        raise ConfigError(
            f"rank {env.rank}: cache directory {cache_dir} (prepared by rank 0) is not visible here; "
            "pass --cache DIR on a file system that every node shares (or set SPOTDIFF_DIST_TMPDIR with --no-cache)"
        )
    bench, protocol = resolve(config, scorer.capabilities)
    check_capability(scorer, protocol.needs)
    world, rank = env.world_size, env.rank
    with Shard(cache_dir, cache_digest(scorer, config.gpu_decode), f"{token}-rank{env.rank}") as shard:
        engine = make_engine(config, scorer, cache=shard.cache, progress=config.progress and env.is_main)
        cases = stream_cases(bench, config.subset, config.limit)
        engine.prefill(cases, protocol.needs, owns=lambda key: owner(key, world) == rank)
        rows = shard.rows()
    stats = {"rank": rank, "shard": str(shard.path), "rows": rows, **engine.stats}
    done, cached = engine.stats["computed"], engine.stats["cached"]
    log.info("rank %d/%d: computed %d items, %d already cached", rank, world, done, cached)
    return stats


def run_eval_distributed(config: EvalConfig, env: DistEnv | None = None) -> EvalResult | None:
    """:func:`spotdiff.diagnose.runner.run_eval` sharded over the processes of a launch.

    Returns rank 0's result (identical to a single-process run's) on rank 0 and None elsewhere.
    Without a launch (``env`` None and nothing in the environment) it is plain ``run_eval``.
    """
    env = env or detect()
    if env is None:
        return run_eval(config)
    resolve(config)  # unknown benchmark / subset / protocol: fail on every rank before any work
    if config.judge is not None:
        raise ConfigError("--judge runs in one process: a sharded run (torchrun, accelerate launch) takes none")
    seed_everything(config.seed)
    group = Group(env)
    cache_dir: Path | None = None
    temporary = False
    try:
        try:
            token, cache_str, temporary = step(group, lambda: _prepare(config) if env.is_main else None)[0]
            cache_dir = Path(cache_str)
            device = rank_device(config.device, env.local_rank)
            holder: dict[str, Scorer] = {}

            def work() -> dict:
                holder["scorer"] = load_eval_scorer(config, device)
                return _prefill(config, env, holder["scorer"], cache_dir, token)

            per_rank = step(group, work)
            group.finish()
        finally:
            group.close()
        if not env.is_main:
            return None
        for stats in per_rank:
            if stats["rows"] and not Path(stats["shard"]).exists():
                log.warning(
                    "cache shard %s of rank %d is not visible to rank 0 (merged by a concurrent run, or "
                    "not on a shared file system); rank 0 computes whatever is missing",
                    stats["shard"],
                    stats["rank"],
                )
        merge_shards(cache_dir)
        info = {
            "distributed": {
                "world_size": env.world_size,
                "computed": [s["computed"] for s in per_rank],
                "cached": [s["cached"] for s in per_rank],
            }
        }
        final = dataclasses.replace(config, cache=cache_dir, device=device, extra_info={**config.extra_info, **info})
        return run_eval(final, scorer=holder["scorer"])
    finally:
        if env.is_main and temporary and cache_dir is not None:
            shutil.rmtree(cache_dir, ignore_errors=True)
