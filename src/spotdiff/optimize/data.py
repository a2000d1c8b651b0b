"""Training data: ordinary image-caption pairs and whole candidate sets (cases), mixed per step.

Pairs come from ``captions.jsonl`` files, cases from any benchmark loader (anchors and their hard
negatives); :class:`EpochSampler` makes a step's items a function of ``(seed, step)``. Details:
docs/training.md.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from spotdiff.cases import Case, FileImage, ImageRef
from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    """An ordinary image-text pair."""

    image: ImageRef
    text: str


def read_captions(path: str | Path) -> list[Pair]:
    """The pairs of a ``captions.jsonl`` file (``{"image": ..., "caption": ...}`` per line)."""
    path = Path(path)
    pairs: list[Pair] = []
    for n, record in iter_jsonl(path):
        if not isinstance(record, dict) or not isinstance(record.get("image"), str):
            raise DataError("each line needs an 'image' path", file=path, record=f"line {n}", field="image")
        texts = record.get("captions", record.get("caption"))
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
            raise DataError("needs a non-empty 'caption' string", file=path, record=f"line {n}", field="caption")
        image_path = Path(record["image"])
        if not image_path.is_absolute():
            image_path = path.parent / image_path
        if not image_path.is_file():
            raise DataError(f"image not found: {image_path}", file=path, record=f"line {n}", field="image")
        image = FileImage(image_path)
        pairs.extend(Pair(image, t) for t in texts)
    if not pairs:
        raise DataError("no image-caption pairs", file=path)
    return pairs


@dataclass(frozen=True)
class PreparedCase:
    """A case as training anchors: ``anchors[p] = (image index, text index)`` into the case, and
    for each anchor its hard-negative texts and images (indices into the case)."""

    case_id: str
    images: tuple[ImageRef, ...]
    texts: tuple[str, ...]
    anchors: tuple[tuple[int, int], ...]
    hn_texts: tuple[tuple[int, ...], ...]
    hn_images: tuple[tuple[int, ...], ...]


def prepare_case(case: Case) -> PreparedCase | None:
    """Anchors and hard negatives of a case (see docs/training.md); None when it has none."""
    if not case.images:
        return None
    truth = case.truth
    used_texts: set[int] = set()
    anchors: list[tuple[int, int]] = []
    for i in range(truth.shape[0]):
        for t in range(truth.shape[1]):
            if truth[i, t] and t not in used_texts:
                anchors.append((i, t))
                used_texts.add(t)
                break
    if not anchors:
        return None
    hn_texts = tuple(tuple(t for t in range(truth.shape[1]) if not truth[i, t]) for i, _ in anchors)
    hn_images = tuple(tuple(j for j in range(truth.shape[0]) if not truth[j, t]) for _, t in anchors)
    return PreparedCase(case.id, tuple(case.images), tuple(case.texts), tuple(anchors), hn_texts, hn_images)


def prepare_cases(cases: Sequence[Case]) -> list[PreparedCase]:
    out, skipped = [], 0
    for case in cases:
        prepared = prepare_case(case)
        if prepared is None:
            skipped += 1
        else:
            out.append(prepared)
    if skipped:
        log.warning("skipped %d cases without images or without a matched pair", skipped)
    return out


class EpochSampler:
    """Deterministic sampling without replacement: an endless stream of seeded permutations.

    ``take(step, k)`` returns items ``step*k .. step*k + k - 1`` of the stream, where epoch ``e``
    is ``randperm(n)`` under seed ``(seed, e)``.

    Args:
        n: the number of items.
        seed: the run's seed.
        stream: keeps the streams of one seed apart (captions 1, cases 2).
    """

    def __init__(self, n: int, seed: int, stream: int = 0) -> None:
        self.n = n
        self.seed = seed
        self.stream = stream
        self._perms: OrderedDict[int, list[int]] = OrderedDict()

    def _perm(self, epoch: int) -> list[int]:
        if epoch not in self._perms:
            g = torch.Generator().manual_seed((self.seed * 1_000_003 + self.stream * 7_919 + epoch) % (2**63))
            self._perms[epoch] = torch.randperm(self.n, generator=g).tolist()
            while len(self._perms) > 3:
                self._perms.popitem(last=False)
        return self._perms[epoch]

    def take(self, step: int, k: int) -> list[int]:
        if self.n == 0 or k <= 0:
            return []
        return [self._perm(pos // self.n)[pos % self.n] for pos in range(step * k, step * k + k)]


@dataclass
class Batch:
    """One global step's data: what to encode, and how anchors and hard negatives index into it."""

    images: list[ImageRef] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    cap_img: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    cap_txt: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    case_img: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    case_txt: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    case_group: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    hn_text: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.long))
    hn_text_mask: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.bool))
    hn_image: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.long))
    hn_image_mask: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.bool))

    @property
    def n_pairs(self) -> int:
        return len(self.cap_img) + len(self.case_img)


def pad_rows(rows: Sequence[Sequence[int]], pad_value: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged integer rows as a ``[len(rows), longest]`` long tensor padded with ``pad_value``, and the
    boolean mask of the real entries."""
    width = max((len(r) for r in rows), default=0)
    idx = torch.full((len(rows), width), pad_value, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for p, row in enumerate(rows):
        if row:
            idx[p, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[p, : len(row)] = True
    return idx, mask


def build_batch(pairs: Sequence[Pair], cases: Sequence[PreparedCase]) -> Batch:
    """The :class:`Batch` of some caption pairs and some whole cases."""
    b = Batch()
    b.images = [p.image for p in pairs]
    b.texts = [p.text for p in pairs]
    b.cap_img = torch.arange(len(pairs), dtype=torch.long)
    b.cap_txt = torch.arange(len(pairs), dtype=torch.long)
    case_img, case_txt, group, hn_t, hn_i = [], [], [], [], []
    for g, case in enumerate(cases):
        i0, t0 = len(b.images), len(b.texts)
        b.images.extend(case.images)
        b.texts.extend(case.texts)
        for (i, t), neg_t, neg_i in zip(case.anchors, case.hn_texts, case.hn_images, strict=True):
            case_img.append(i0 + i)
            case_txt.append(t0 + t)
            group.append(g)
            hn_t.append([t0 + x for x in neg_t])
            hn_i.append([i0 + x for x in neg_i])
    b.case_img = torch.tensor(case_img, dtype=torch.long)
    b.case_txt = torch.tensor(case_txt, dtype=torch.long)
    b.case_group = torch.tensor(group, dtype=torch.long)
    b.hn_text, b.hn_text_mask = pad_rows(hn_t)
    b.hn_image, b.hn_image_mask = pad_rows(hn_i)
    return b


class PixelCache:
    """Preprocessed ``pixel_values`` per image key, bounded (oldest entries dropped first)."""

    def __init__(self, max_items: int = 50_000) -> None:
        self.max_items = max_items
        self._items: OrderedDict[str, torch.Tensor] = OrderedDict()

    def pixels(self, refs: Sequence[ImageRef], preprocess) -> torch.Tensor:
        keys = [ref.key for ref in refs]
        missing = {k: ref for k, ref in zip(keys, refs, strict=True) if k not in self._items}
        fresh: dict[str, torch.Tensor] = {}
        if missing:
            values = preprocess([ref.load() for ref in missing.values()])
            fresh = dict(zip(missing, values, strict=True))
        out = torch.stack([fresh[k] if k in fresh else self._items[k] for k in keys])
        self._items.update(fresh)
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)
        return out
