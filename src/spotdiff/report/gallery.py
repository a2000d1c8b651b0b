"""Failure galleries: the cases models get wrong, with thumbnails, candidate texts and scores.

Texts and images are re-read through the benchmark's loader from the run's recorded data, only while
its digest still matches. A case is a model's failure when any unit's outcome is below 1; cases are
picked round-robin over the models, hardest (failed by the most models) first.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.cases import Case, FileImage, NpyImage
from spotdiff.report.collect import ResultTable, RunData, unit_scores
from spotdiff.video.clips import VideoRef

#: Tags with more distinct values than this (among the shown cases) get no filter option.
MAX_TAG_VALUES = 24


@dataclass
class Thumb:
    data_uri: str
    jpeg: bytes
    description: str
    width: int
    height: int

    @property
    def display(self) -> tuple[int, int]:
        """Displayed size: small crops are scaled up so that their longer side is at least 64 px."""
        scale = max(1.0, 64.0 / max(self.width, self.height, 1))
        return round(self.width * scale), round(self.height * scale)


@dataclass
class ModelScores:
    """One model's view of a case: outcomes per unit and the score matrix."""

    label: str
    run_id: str
    failed: bool
    outcomes: list[dict[str, Any]]  # the failed units' outcomes (at most MAX_OUTCOMES)
    values: list[float | None]  # aligned with the case's score_labels


@dataclass
class GalleryCase:
    case_id: str
    subset: str
    tags: dict[str, str]
    texts: list[str] | None
    roles: list[str]
    truth: list[list[bool]] | None
    thumbs: list[Thumb]
    models: list[ModelScores]
    needs: str
    score_labels: list[str] = field(default_factory=list)
    score_classes: list[str] = field(default_factory=list)

    @property
    def failed_by(self) -> list[str]:
        return [m.label for m in self.models if m.failed]

    @property
    def positives(self) -> list[bool]:
        """Per text: whether it is true for some image (or for the implicit image of a text-only case)."""
        if self.truth is None or self.texts is None:
            return [False] * len(self.texts or [])
        return [any(row[t] for row in self.truth if t < len(row)) for t in range(len(self.texts))]

    @property
    def tag_pairs(self) -> list[str]:
        return [f"{k}={v}" for k, v in sorted(self.tags.items()) if k != "subset"]


@dataclass
class Gallery:
    table_slug: str
    cases: list[GalleryCase]
    models: list[str]
    subsets: list[str]
    tag_options: list[str]
    n_failures: dict[str, int]  # model label -> failed cases (all, not only those shown)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------- case loading
class CaseSource:
    """Loads the cases of recorded runs through the benchmark loaders, once per data location."""

    def __init__(self) -> None:
        self._loaded: dict[tuple, tuple[dict[str, Case], str | None]] = {}

    def cases(self, runs: Sequence[RunData], wanted: set[str]) -> tuple[dict[str, Case], str | None]:
        """The wanted cases (by id) and a note when they could not be read."""
        notes = []
        for rd in runs:
            r = rd.run
            options = (r.info or {}).get("options") or {}
            key = (r.benchmark, r.data_path, json.dumps(options, sort_keys=True, default=str), r.data_digest, r.subset)
            if key not in self._loaded:
                self._loaded[key] = self._load(r.benchmark, r.data_path, options, r.data_digest, r.subset)
            found, note = self._loaded[key]
            if note is None:
                missing = wanted - set(found)
                return found, (f"{len(missing)} cases not found in the data" if missing else None)
            notes.append(note)
        return {}, notes[0] if notes else "no data location recorded"

    @staticmethod
    def _load(
        benchmark: str, data_path: str, options: dict, digest: str, subset: str | None = None
    ) -> tuple[dict[str, Case], str | None]:
        """The run's cases (its subset only, when it evaluated one: some subsets, such as SPEC's
        ``cls``, are read only when asked for)."""
        from spotdiff.benchmarks import get_benchmark
        from spotdiff.data import resolve_data
        from spotdiff.errors import SpotdiffError

        try:
            # a run's folder that is gone: its fetched copy in the data home (the digest check below still applies)
            data_path = str(resolve_data(benchmark, data_path if Path(data_path).exists() else None))
            bench = get_benchmark(benchmark)(data_path, **options)
            if bench.data_digest() != digest:
                return {}, f"texts and images not shown: the data at {data_path} changed since the run"
            return {c.id: c for c in bench.confined_cases(subset)}, None
        except (SpotdiffError, OSError, TypeError, ValueError) as exc:
            return {}, f"texts and images not shown: cannot read {benchmark} data at {data_path} ({exc})"


#: Frames in a clip's thumbnail: a strip of this many, uniformly sampled, side by side.
STRIP_FRAMES = 4


def thumbnail(ref: Any, size: int = 128) -> Thumb | None:
    """A JPEG thumbnail of an image reference (crops applied by the reference), as a data URI; of a clip
    (:class:`~spotdiff.video.clips.VideoRef`), a strip of :data:`STRIP_FRAMES` of its frames, ``size / 2`` high."""
    try:
        if isinstance(ref, VideoRef):
            image = ref.strip(STRIP_FRAMES, height=max(16, size // 2))
        else:
            image = ref.load()
            image.thumbnail((size, size))
    except Exception:  # a missing or unreadable image must not stop the report
        return None
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=80)
    data = buf.getvalue()
    uri = "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
    return Thumb(uri, data, ref.describe(), image.width, image.height)


# --------------------------------------------------------------------------------- selection
def _failed(units: list[dict]) -> bool:
    for u in units:
        for v in (u.get("outcomes") or {}).values():
            if v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v < 1:
                return True
    return False


#: Score entries shown per model; larger matrices show each image's true and best false score.
MAX_ENTRIES = 16
#: Failed units listed per model and case.
MAX_OUTCOMES = 6


def score_entries(
    matrix: Any, needs: str, truth: list[list[bool]] | None, roles: Sequence[str]
) -> list[tuple[str, str, float | None]]:
    """``(label, css class, value)`` of the entries of one score matrix worth showing.

    ``I2·T1`` is image 2 against text 1 (``p1·n`` two texts of a text-text matrix, by role when the
    case has roles; ``P(T2)`` a text-only prior); the class is ``pos`` for a true pair. Matrices with
    more than :data:`MAX_ENTRIES` entries show, per image, the lowest true and the highest false
    score when the truth is known, otherwise their first entries.

    Args:
        matrix: the unit's score matrix (a vector for a one-row matrix).
        needs: the protocol's need (``image-text``, ``text-text``, ``text-prior``).
        truth: the case's truth matrix, when the case could be read.
        roles: the case's text roles (``p1``, ``n``, ...), possibly empty.
    """
    arr = np.asarray(matrix, dtype=float)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        return []
    n_rows, n_cols = arr.shape

    def val(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    def t(j: int) -> str:  # short role names (p1, p2, n) read better than T1..T3
        return roles[j] if j < len(roles) and len(roles[j]) <= 4 else f"T{j + 1}"

    tr = np.asarray(truth, dtype=bool) if truth is not None else None
    out: list[tuple[str, str, float | None]] = []
    if needs == "text-text":
        pos = tr[0] if tr is not None and tr.shape[1] == n_cols else np.zeros(n_cols, dtype=bool)
        for i in range(n_rows):
            for j in range(i + 1, n_cols):
                out.append((f"{t(i)}·{t(j)}", "pos" if pos[i] and pos[j] else "", val(arr[i, j])))
        return out[:MAX_ENTRIES]
    if needs == "text-prior":
        known = tr is not None and tr.shape[1] == n_cols
        return [(f"P({t(j)})", "pos" if known and tr[0, j] else "", val(arr[0, j])) for j in range(n_cols)][
            :MAX_ENTRIES
        ]
    known = tr is not None and tr.shape == arr.shape
    if arr.size <= MAX_ENTRIES or not known:
        for i in range(n_rows):
            for j in range(n_cols):
                out.append((f"I{i + 1}·{t(j)}", "pos" if known and tr[i, j] else "", val(arr[i, j])))
        return out[:MAX_ENTRIES]
    for i in range(n_rows):
        true_s, false_s = arr[i, tr[i]], arr[i, ~tr[i]]
        if true_s.size:
            out.append((f"I{i + 1} true", "pos", val(true_s.min())))
        if false_s.size:
            out.append((f"I{i + 1} best false", "", val(false_s.max())))
    return out


Units = dict[str, tuple[str, list[dict]]]  # case id -> (run id, the case's units in that run)


def _units_by_row(table: ResultTable) -> dict[str, Units]:
    """Each row's units by case; a case in several of a row's runs keeps the first run's units."""
    per_row: dict[str, Units] = {}
    for row in table.rows:
        cases: Units = {}
        for rd in row.runs:
            for u in rd.units:
                entry = cases.setdefault(u["case_id"], (rd.id, []))
                if entry[0] == rd.id:
                    entry[1].append(u)
        per_row[row.label] = cases
    return per_row


def _pick_cases(failures: dict[str, list[str]], limit: int) -> list[str]:
    """Up to ``limit`` failed cases, round-robin over the models, each model's hardest (failed by the most
    models) first; returned hardest first."""
    hardness: dict[str, int] = {}
    for ids in failures.values():
        for c in ids:
            hardness[c] = hardness.get(c, 0) + 1
    queues = {lab: sorted(ids, key=lambda c: (-hardness[c], c)) for lab, ids in failures.items()}
    chosen: list[str] = []
    taken: set[str] = set()
    pos = dict.fromkeys(queues, 0)
    while len(chosen) < limit and any(pos[lab] < len(q) for lab, q in queues.items()):
        for lab, q in queues.items():
            while pos[lab] < len(q) and q[pos[lab]] in taken:
                pos[lab] += 1
            if pos[lab] < len(q) and len(chosen) < limit:
                chosen.append(q[pos[lab]])
                taken.add(q[pos[lab]])
                pos[lab] += 1
    return sorted(chosen, key=lambda c: (-hardness[c], c))


def _load_cases(
    table: ResultTable, source: CaseSource | None, chosen: list[str], needs: str
) -> tuple[dict[str, Case], list[str]]:
    """The chosen cases as the benchmark's loader reads them, and the notes on what cannot be shown."""
    notes: list[str] = []
    loaded: dict[str, Case] = {}
    if source is not None and chosen:
        loaded, note = source.cases(table.runs, set(chosen))
        if note:
            notes.append(note)
    elif source is None:
        notes.append("texts and images not loaded (--no-cases)")
    if needs == "image-text" and table.protocol == "retrieval":
        notes.append("retrieval units are queries against the whole gallery; matrices are not shown")
    return loaded, notes


def _model_scores(
    per_row: dict[str, Units], cid: str, needs: str, truth: list[list[bool]] | None, roles: list[str]
) -> tuple[list[ModelScores], list[str], list[str]]:
    """Each model's view of case ``cid``, with the score labels and classes of the first failed matrix."""
    labels: list[str] = []
    classes: list[str] = []
    models = []
    for lab, cases in per_row.items():
        if cid not in cases:
            continue
        run_id, us = cases[cid]
        failed = _failed(us)
        values: list[float | None] = []
        if failed:
            matrix = next((m for m in (unit_scores(u) for u in us) if m is not None), None)
            if matrix is not None:
                entries = score_entries(matrix, needs, truth, roles)
                if not labels:
                    labels, classes = [e[0] for e in entries], [e[1] for e in entries]
                values = [e[2] for e in entries][: len(labels)]
        bad = [{"unit": u["unit_id"], **(u.get("outcomes") or {})} for u in us if _failed([u])]
        models.append(ModelScores(lab, run_id, failed, bad[:MAX_OUTCOMES], values))
    return models, labels, classes


class _Thumbnails:
    """Thumbnails of a gallery's images, each made once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._made: dict[str, Thumb | None] = {}

    def of(self, case: Case | None) -> list[Thumb]:
        thumbs: list[Thumb] = []
        for ref in case.images if case is not None else []:
            key = ref.describe() if isinstance(ref, (FileImage, NpyImage, VideoRef)) else ref.key
            if key not in self._made:
                self._made[key] = thumbnail(ref, self.size)
            if self._made[key] is not None:
                thumbs.append(self._made[key])
        return thumbs


def _gallery_case(
    cid: str, case: Case | None, per_row: dict[str, Units], needs: str, thumbs: _Thumbnails
) -> GalleryCase:
    """Case ``cid`` as the gallery shows it (``case`` None: ids, tags and scores only)."""
    first_units = next(cases[cid][1] for cases in per_row.values() if cid in cases)
    tags = {k: str(v) for k, v in (first_units[0].get("tags") or {}).items()}
    truth = case.truth.tolist() if case is not None else None
    roles = list(case.roles) if case is not None else []
    models, labels, classes = _model_scores(per_row, cid, needs, truth, roles)
    return GalleryCase(
        case_id=cid,
        subset=tags.get("subset") or first_units[0]["subset"],
        tags=tags,
        texts=list(case.texts) if case is not None else None,
        roles=roles,
        truth=truth,
        thumbs=thumbs.of(case),
        models=models,
        needs=needs,
        score_labels=labels,
        score_classes=classes,
    )


def _tag_options(cases: list[GalleryCase]) -> list[str]:
    """``KEY=VALUE`` filters: tags with 2 to :data:`MAX_TAG_VALUES` values among the cases, not all numbers."""
    values: dict[str, set[str]] = {}
    for gc in cases:
        for k, v in gc.tags.items():
            if k != "subset":
                values.setdefault(k, set()).add(v)
    return sorted(
        f"{k}={v}"
        for k, vs in values.items()
        if 1 < len(vs) <= MAX_TAG_VALUES and not all(_is_number(v) for v in vs)
        for v in vs
    )


def build_gallery(table: ResultTable, source: CaseSource | None, *, limit: int = 40, thumb_size: int = 128) -> Gallery:
    """The failure gallery of one result table.

    Args:
        table: the result table.
        source: where the cases' texts and images are read (None: ids, tags and scores only).
        limit: cases shown at most.
        thumb_size: the thumbnails' longer side in pixels.
    """
    from spotdiff.protocols import get_protocol

    needs = get_protocol(table.protocol).needs
    per_row = _units_by_row(table)
    failures = {lab: [c for c, (_, us) in cases.items() if _failed(us)] for lab, cases in per_row.items()}
    chosen = _pick_cases(failures, limit)
    loaded, notes = _load_cases(table, source, chosen, needs)
    thumbs = _Thumbnails(thumb_size)
    out = [_gallery_case(cid, loaded.get(cid), per_row, needs, thumbs) for cid in chosen]
    return Gallery(
        table_slug=table.slug,
        cases=out,
        models=[row.label for row in table.rows],
        subsets=sorted({gc.subset for gc in out}),
        tag_options=_tag_options(out),
        n_failures={lab: len(ids) for lab, ids in failures.items()},
        notes=notes,
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
