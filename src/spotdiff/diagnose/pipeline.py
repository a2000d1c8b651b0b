"""The input pipeline: the model's next batches are decoded, preprocessed and tokenised on the other
cores while it runs the current one.

CLIP_benchmark and clip-retrieval feed CLIP models from a ``torch.utils.data.DataLoader`` whose
worker processes decode the images and apply the model's own preprocessing (clip-retrieval also
pins memory and keeps two batches per worker in flight). spotdiff does the same, batch by batch:

* images: a DataLoader (``batch_size=None``) with ``workers`` processes (default: every core this
  process may use; none for images already in memory with nothing to prepare) over pieces of the
  engine's batches: each batch is cut into one piece per worker, so all workers decode each batch
  together and the first one is ready after one piece's worth of decoding, whatever the number of
  workers; the pieces (in page-locked memory when the model runs on CUDA) are copied to the device
  and concatenated there, in order. At most
  ``prefetch`` pieces per worker, so about ``prefetch`` batches, are in flight. A worker decodes
  its piece and runs the scorer's image preprocessor (:meth:`spotdiff.scorers.Scorer.image_preprocessor`)
  when it has one, so the calling process only copies pixels to the device (without blocking) and
  runs the forward pass. For a model on CUDA, where that preprocessing is resizing and cropping
  followed by arithmetic (:meth:`~spotdiff.scorers.base.ImagePreprocessor.splits`: CLIP's and SigLIP's
  processors, open_clip's transform), workers stop at the resized ``uint8`` pixels and the rescaling
  and normalising run on the GPU, as timm's ``PrefetchLoader`` and FFCV do: a quarter of float32's
  bytes go through shared memory, page-locked memory and the bus. (On the CPU the arithmetic would
  only move from the workers to the model's process.) With
  ``decode_device`` set (``spotdiff eval --gpu-decode``), workers read the JPEG bytes and the calling
  process decodes them on that device (``torchvision.io.decode_jpeg``,
  nvJPEG on CUDA) and preprocesses them as tensor operations there.
* texts: one thread tokenises the next batches (the fast tokenizers run in Rust, without the GIL)
  while the model encodes the current one, at most ``prefetch + 1`` batches ahead.

Batches come out in the order they went in, and each image is computed by the same code whatever
the number of workers, so no score depends on it. A piece whose loading fails in a worker is loaded
again in the calling process, so the error raised there is the original one (a DataError naming
the image), after every earlier batch has been handed over.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from spotdiff.cases import FileImage, ImageRef, fits_pixel_limit
from spotdiff.errors import ConfigError
from spotdiff.processes import cap_workers, torch_threads, usable_cores
from spotdiff.scorers.base import ImagePreprocessor, Prepared

#: Pieces in flight per worker (DataLoader ``prefetch_factor``; about as many whole batches), and
#: text batches tokenised ahead. Four rather than DataLoader's default two: slack that absorbs the
#: jitter of a shared machine when decoding and the model take about as long.
PREFETCH = 4

_JPEG_MAGIC = b"\xff\xd8\xff"


def default_workers() -> int:
    """Every core this process may use (:func:`spotdiff.processes.usable_cores`)."""
    return usable_cores()


class _Failed:
    """What a worker returns for a piece that raised; the calling process loads it again."""


@dataclass(frozen=True)
class _Jpegs:
    """A piece's JPEG files as 1-D ``uint8`` tensors, to be decoded on the device."""

    data: list


def _jpeg_bytes(refs: Sequence[ImageRef]) -> list | None:
    """The bytes of every image of a piece, or None unless all are whole JPEG files within the pixel limit
    (a decompression bomb never reaches the GPU decoder: the CPU path refuses it, naming the file)."""
    import torch

    out = []
    for ref in refs:
        if not isinstance(ref, FileImage) or ref.bbox is not None:
            return None
        try:
            data = ref.path.read_bytes()
        except OSError:
            return None  # the decoding path raises the error that names the image
        if not data.startswith(_JPEG_MAGIC) or not fits_pixel_limit(data):
            return None
        out.append(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    return out


def _as_is(item: Any) -> Any:
    return item


def _split(batches: Sequence[Sequence[int]], workers: int) -> tuple[list[Sequence[int]], list[int]]:
    """Each batch cut into ``min(workers, len(batch))`` consecutive pieces of near-equal size; the
    pieces in order, and how many each batch has."""
    pieces: list[Sequence[int]] = []
    counts = []
    for batch in batches:
        k = max(1, min(workers, len(batch)))
        bounds = [round(j * len(batch) / k) for j in range(k + 1)]
        pieces += [batch[bounds[j] : bounds[j + 1]] for j in range(k)]
        counts.append(k)
    return pieces, counts


class _ImageBatches:
    """The DataLoader's map-style dataset: item ``i`` is piece ``i``'s images, decoded and
    preprocessed (or its JPEG bytes). A plain class at module level, so that it pickles when the
    workers are spawned rather than forked."""

    def __init__(
        self,
        refs: Sequence[ImageRef],
        pieces: Sequence[Sequence[int]],
        prepare: ImagePreprocessor | None,
        *,
        jpeg: bool,
        split: bool,
    ) -> None:
        self.refs, self.pieces, self.prepare, self.jpeg, self.split = refs, pieces, prepare, jpeg, split

    def __len__(self) -> int:
        return len(self.pieces)

    def load(self, i: int, *, jpeg: bool = True) -> Any:
        refs = [self.refs[j] for j in self.pieces[i]]
        if jpeg and self.jpeg:
            raw = _jpeg_bytes(refs)
            if raw is not None:
                return _Jpegs(raw)
        images = [ref.load() for ref in refs]
        if self.prepare is None:
            return images
        return self.prepare.resized(images) if self.split else self.prepare(images)

    def __getitem__(self, i: int) -> Any:
        try:
            return self.load(i)
        except Exception:
            return _Failed()


class InputPipeline:
    """Prepared batches for the model, produced ahead of it (see the module docstring).

    Args:
        workers: image worker processes, at most :func:`default_workers` (more are capped, with a warning);
            0 loads in the calling process; None: :func:`default_workers`.
        device: where the model runs (memory is pinned for CUDA).
        decode_device: decode JPEG files there (GPU decoding), or None to decode in the workers.
        prefetch: pieces in flight per worker (about as many whole batches), and text batches
            tokenised ahead.
        uint8: workers hand over resized ``uint8`` pixels, finished where the model runs, when the preprocessor
            :meth:`~spotdiff.scorers.base.ImagePreprocessor.splits`; None: when the model runs on CUDA.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        device: str = "cpu",
        decode_device: str | None = None,
        prefetch: int = PREFETCH,
        uint8: bool | None = None,
    ) -> None:
        if workers is not None and workers < 0:
            raise ConfigError(f"--workers must be 0 or more, got {workers}")
        self.workers = default_workers() if workers is None else cap_workers(int(workers))
        self.device = str(device)
        self.decode_device = decode_device
        self.prefetch = max(1, int(prefetch))
        self._uint8 = uint8

    @functools.cached_property
    def pin(self) -> bool:
        """Whether batches go to page-locked memory (a model on CUDA); asked when the first batch is prepared,
        so that a run that prepares none never imports torch."""
        import torch

        return self.device.startswith("cuda") and torch.cuda.is_available()

    def images(
        self, refs: Sequence[ImageRef], batches: Sequence[Sequence[int]], prepare: ImagePreprocessor | None
    ) -> Iterator[Any]:
        """Each batch of ``refs`` (index lists), in order: ``prepare``'s :class:`Prepared` pixels, or
        the decoded images when ``prepare`` is None.

        Each batch is split into one piece per worker, so every worker works on the first batch and
        the model waits for one piece's worth of decoding before it starts, whatever the number of
        workers; the pieces are joined again in order. Images already in memory with nothing to prepare
        are handed over by the calling process: a worker would only copy them through a pipe.
        """
        import torch
        from torch.utils.data import DataLoader

        jpeg = self.decode_device is not None and prepare is not None and prepare.on_tensors()
        idle = prepare is None and all(ref.in_memory for ref in refs)
        pieces, counts = _split(batches, 1 if idle else self.workers)
        uint8 = self.pin if self._uint8 is None else self._uint8
        # not beside GPU decoding, whose pieces come finished: one batch's pieces must be alike to be joined
        split = uint8 and not jpeg and prepare is not None and prepare.splits()
        dataset = _ImageBatches(refs, pieces, prepare, jpeg=jpeg, split=split)
        workers = min(self.workers, len(pieces)) if len(pieces) > 1 and not idle else 0
        loader = DataLoader(
            dataset,
            batch_size=None,
            shuffle=False,
            num_workers=workers,
            collate_fn=_as_is,
            pin_memory=self.pin,
            prefetch_factor=self.prefetch if workers else None,
            generator=torch.Generator(),  # worker seeds drawn here, not from the global generator
        )
        stream = iter(loader)
        start = 0
        try:
            for k in counts:
                with torch_threads(1 if workers == 0 else None):  # as in a worker: no oversubscribed thread pool
                    parts = [self._piece(dataset, start + j, next(stream), prepare) for j in range(k)]
                start += k
                if k == 1:
                    yield parts[0]
                elif isinstance(parts[0], Prepared):
                    yield Prepared.join(parts)  # concatenated where the model runs
                else:
                    yield [image for part in parts for image in part]
        finally:
            del stream  # stops the workers when the consumer stops early

    def _piece(self, dataset: Any, i: int, item: Any, prepare: ImagePreprocessor | None) -> Any:
        if isinstance(item, _Failed):
            item = dataset.load(i)  # raises the worker's error here, with its own message
        if isinstance(item, _Jpegs):
            item = self._decode(item, prepare) or dataset.load(i, jpeg=False)
        return item

    def _decode(self, jpegs: _Jpegs, prepare: ImagePreprocessor) -> Prepared | None:
        """The batch decoded and preprocessed on ``decode_device``; None when the decoder refuses a
        file (corrupt, or a JPEG variant it does not support): the batch then takes the CPU path."""
        from torchvision.io import ImageReadMode, decode_jpeg

        try:
            images = decode_jpeg(jpegs.data, mode=ImageReadMode.RGB, device=self.decode_device)
        except RuntimeError:
            return None
        return prepare.from_uint8(images, str(self.decode_device))

    def texts(
        self,
        texts: Sequence[str],
        batches: Sequence[Sequence[int]],
        prepare: Callable[[Sequence[str]], Prepared] | None,
    ) -> Iterator[Any]:
        """Each batch of ``texts``, in order: ``prepare``'s tokens (tokenised in a thread, ahead of the
        consumer), or the strings when ``prepare`` is None."""

        def load(idx: Sequence[int]) -> Any:
            chunk = [texts[j] for j in idx]
            if prepare is None:
                return chunk
            tokens = prepare(chunk)
            return tokens.pin_memory() if self.pin else tokens

        if prepare is None or len(batches) <= 1:
            yield from (load(idx) for idx in batches)
            return
        with ThreadPoolExecutor(1, thread_name_prefix="spotdiff-tokenize") as pool:
            pending: deque = deque()
            try:
                for idx in batches:
                    pending.append(pool.submit(load, idx))
                    if len(pending) > self.prefetch:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()
