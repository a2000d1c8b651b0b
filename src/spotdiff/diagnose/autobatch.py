"""``--batch-size auto``: the largest batch that fits on the GPU, found once per model and remembered.

:func:`largest_batch` runs the model on worst-case inputs (:meth:`spotdiff.scorers.Scorer.probe_batch`:
blank images through the model's own preprocessing, texts at the tokenizer's maximum length). It
doubles the batch from ``start`` until the device runs out of memory or ``limit`` is reached, then
bisects between the largest size that ran and the smallest that did not; a start that does not fit
is halved first. :func:`resolve_batch_size` remembers the answer in ``<cache>/batch_sizes.json``
under the model's identity digest and the device (its name and memory), so later runs of that
model on that kind of device skip the search. On a CPU (or MPS) there is no device memory to probe:
``auto`` is the default batch size, and a message says so.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Callable
from pathlib import Path

from spotdiff.errors import ConfigError
from spotdiff.jsonio import write_json
from spotdiff.scorers.base import Scorer

log = logging.getLogger(__name__)

#: The batch size when none is given, and what ``auto`` means off CUDA.
DEFAULT_BATCH_SIZE = 32
#: The search stops here: larger batches gain little throughput and cost pinned host memory (the
#: input pipeline keeps about four batches in flight).
MAX_AUTO_BATCH = 1024
#: The file under the cache directory that remembers each model's batch size on each device.
REMEMBERED = "batch_sizes.json"


def _fits(probe: Callable[[int], None], n: int) -> bool:
    """Whether ``probe(n)`` runs; an out-of-memory error frees what it left and says no."""
    import torch

    try:
        probe(n)
        return True
    except torch.cuda.OutOfMemoryError:
        if torch.cuda.is_available():  # give the failed batch's blocks back before the next try
            gc.collect()
            torch.cuda.empty_cache()
        return False


def largest_batch(
    probe: Callable[[int], None], *, start: int = DEFAULT_BATCH_SIZE, limit: int = MAX_AUTO_BATCH
) -> int:
    """The largest ``n <= limit`` for which ``probe(n)`` runs without ``torch.cuda.OutOfMemoryError``
    (memory grows with ``n``, so the sizes that run are those below a threshold).

    >>> largest_batch(lambda n: None, limit=100)
    100
    """
    n = max(1, min(start, limit))
    fails: int | None = None
    while not _fits(probe, n):
        fails = n
        if n == 1:
            raise ConfigError("--batch-size auto: even one item does not fit in the device memory")
        n //= 2
    fits = n
    while fails is None and fits < limit:
        n = min(2 * fits, limit)
        if _fits(probe, n):
            fits = n
        else:
            fails = n
    while fails is not None and fails - fits > 1:
        mid = (fits + fails) // 2
        if _fits(probe, mid):
            fits = mid
        else:
            fails = mid
    return fits


def device_fingerprint(device: str) -> str:
    """The CUDA device's name and total memory (a batch size that fits one GPU may not fit another)."""
    import torch

    index = torch.device(device).index
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
    return f"{props.name}:{props.total_memory}"


def resolve_batch_size(
    scorer: Scorer, cache_dir: str | Path | None, *, fingerprint: str | None = None, say: Callable[[str], None] = print
) -> int:
    """What ``--batch-size auto`` means for ``scorer``: remembered, searched on CUDA, or the default.

    Args:
        scorer: the loaded model.
        cache_dir: where the answer is remembered (None: searched every time).
        fingerprint: the device's identity (default: :func:`device_fingerprint`).
        say: where the one-line message goes.
    """
    device = str(getattr(scorer, "device", scorer.options.device))
    if not device.startswith("cuda"):
        say(f"--batch-size auto: the model runs on {device}, which has no device memory to probe; "
            f"using batch size {DEFAULT_BATCH_SIZE}")  # fmt: skip
        return DEFAULT_BATCH_SIZE
    key = f"{scorer.identity_digest()}|{fingerprint or device_fingerprint(device)}"
    path = Path(cache_dir) / REMEMBERED if cache_dir is not None else None
    remembered: dict = {}
    if path is not None and path.is_file():
        try:
            remembered = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
    if isinstance(remembered.get(key), int):
        say(f"--batch-size auto: batch size {remembered[key]} (found earlier for this model and device, {path})")
        return int(remembered[key])
    def probe(n: int) -> None:  # the scorer batches by its options, so the probe sets them to n
        scorer.options.batch_size = n
        scorer.probe_batch(n)

    try:
        n = largest_batch(probe)
    except NotImplementedError:
        scorer.options.batch_size = DEFAULT_BATCH_SIZE
        say(f"--batch-size auto: {scorer.spec} cannot be probed; using batch size {DEFAULT_BATCH_SIZE}")
        return DEFAULT_BATCH_SIZE
    say(f"--batch-size auto: batch size {n} is the largest that fits (searched up to {MAX_AUTO_BATCH})")
    if path is not None:
        remembered[key] = n
        write_json(path, remembered)
    return n
