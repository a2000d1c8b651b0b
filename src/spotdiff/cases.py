"""The case model: every benchmark reduces to small matching problems.

A :class:`Case` holds a few images (lazy references, never decoded at load time), a few texts, and
the ground truth of which image goes with which text (``truth[i, t]``). Tags carry the subset and
any other grouping a benchmark publishes (phenomenon, relation, tag, ...). Protocols turn a case's
score matrix into metrics; see ``spotdiff.protocols``. :data:`TIES` names how a tie between the
true candidate and a false one is decided (``spotdiff eval --ties``), which loaders and protocols
both read.
"""

from __future__ import annotations

import hashlib
import io
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError, DataError

#: The tie rules (``spotdiff eval --ties``), the default first: ``strict`` (a tie is a loss) and
#: ``argmax`` (a tie goes to the candidate listed first; :func:`spotdiff.protocols.base.beats`).
TIES = ("strict", "argmax")


def check_ties(ties: str) -> str:
    """``ties`` when it is one of :data:`TIES`, else a :class:`ConfigError`."""
    if ties not in TIES:
        raise ConfigError(f"unknown tie rule {ties!r}; expected one of {', '.join(TIES)}")
    return ties


def _sha256(*parts: Any) -> str:
    """The SHA-256 of the concatenated ``parts`` (bytes or buffers, hashed in place, not copied)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()


#: References below this many are keyed in the calling thread: a pool would cost more than it saves.
_POOL_MIN = 64


def content_keys(refs: Sequence[ImageRef], threads: int) -> list[str]:
    """Each reference's :attr:`~ImageRef.key`, computed on ``threads`` threads: ``hashlib`` releases the GIL
    while it hashes a large buffer, so file digests and in-memory pixels are hashed on several cores at once
    (from Python 3.12, whose ``cached_property`` no longer holds one lock for all instances).

    Args:
        refs: image references.
        threads: threads to hash on; 1 or fewer: the calling thread.

    >>> content_keys([ArrayImage(np.zeros((2, 2, 3), np.uint8))], 4)[0][:6]
    'array:'
    """
    if threads <= 1 or len(refs) < _POOL_MIN:
        return [ref.key for ref in refs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix="spotdiff-keys") as pool:
        return list(pool.map(lambda ref: ref.key, refs, chunksize=max(1, len(refs) // (4 * threads))))


def file_digest(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class ImageRef(ABC):
    """A lazy reference to an image. ``load()`` decodes it; ``key`` identifies its content.

    Two references with the same content (same file bytes and crop, same array) have the same key,
    so the engine encodes each distinct image once whatever its position in the data.
    """

    #: Already decoded in memory: loading it is a copy, nothing for the input pipeline's workers to do ahead.
    in_memory: ClassVar[bool] = False
    #: What the reference is called in messages ("image"; a clip's is "video").
    what: ClassVar[str] = "image"

    @abstractmethod
    def load(self) -> Image.Image:
        """The decoded RGB image."""

    @property
    @abstractmethod
    def key(self) -> str:
        """A content key: equal for equal content, whatever the location."""

    @abstractmethod
    def describe(self) -> str:
        """A short human-readable location, used in error messages and reports."""

    def _file_digest(self, path: Path) -> str:
        """:func:`file_digest` of ``path``; an unreadable file is a :class:`DataError` naming this reference."""
        try:
            return file_digest(path)
        except OSError as exc:
            raise DataError(f"cannot read {self.what} {self.describe()}: {exc}") from exc

    def _decode_error(self, exc: Exception) -> DataError:
        return DataError(f"cannot decode image {self.describe()}: {exc}")

    def _decode(self, source: Any, bbox: tuple | None) -> Image.Image:
        """An encoded image (a path or a binary file object) decoded to RGB (:func:`to_rgb`) and cropped to
        ``bbox``; a file that does not decode, or whose header declares more than twice PIL's
        ``Image.MAX_IMAGE_PIXELS`` (a decompression bomb: a few kilobytes that would decode to gigabytes),
        is a :class:`DataError` naming this reference."""
        try:
            with Image.open(source) as im:
                im.load()
                image = to_rgb(im)
        except Image.DecompressionBombError as exc:
            raise DataError(
                f"image {self.describe()} is refused as a possible decompression bomb: {exc.args[0]} "
                f"(Pillow's limit, 2 x Image.MAX_IMAGE_PIXELS); if the image is genuine, resize it"
            ) from exc
        except (OSError, ValueError, SyntaxError) as exc:
            raise self._decode_error(exc) from exc
        return _crop(image, bbox)


@dataclass(frozen=True, eq=False)
class FileImage(ImageRef):
    """An image file (any format PIL reads), optionally cropped to ``bbox = (x, y, w, h)``.

    Crops follow ARO VG-Relation/Attribution (``image.crop((x, y, x + w, y + h))``).
    """

    path: Path
    bbox: tuple[float, float, float, float] | None = None

    @cached_property
    def key(self) -> str:  # type: ignore[override]
        return f"file:{self._file_digest(self.path)}" + _crop_suffix(self.bbox)

    def load(self) -> Image.Image:
        return self._decode(self.path, self.bbox)

    def describe(self) -> str:
        return str(self.path) + (f" (crop {self.bbox})" if self.bbox else "")


def fits_pixel_limit(data: bytes) -> bool:
    """Whether encoded image bytes declare, in their header (nothing is decoded), no more pixels than
    the decompression-bomb limit :meth:`ImageRef.load` applies; bytes Pillow cannot open do not fit either
    (a decoder other than Pillow's is then not given them, and loading them names the file).

    Args:
        data: an encoded image file's bytes.
    """
    try:
        with Image.open(io.BytesIO(data)):
            return True
    except (Image.DecompressionBombError, OSError, ValueError, SyntaxError):
        return False


#: Modes of 16-bit greyscale images (PNG, TIFF; ``I``: how older Pillow opens them), whose values
#: ``convert("RGB")`` clips at 255 instead of scaling: all but the darkest greys would turn white.
SIXTEEN_BIT_MODES = frozenset({"I;16", "I;16B", "I;16L", "I;16N", "I"})


def to_rgb(image: Image.Image) -> Image.Image:
    """A new RGB image of ``image``; 16-bit greyscale (:data:`SIXTEEN_BIT_MODES`) scaled to 8 bits,
    ``round(v * 255 / 65535)``, rather than clipped at 255.

    Args:
        image: a decoded image in any mode.

    >>> import numpy as np
    >>> grey = Image.fromarray(np.array([[0, 257, 32896, 65535]], dtype=np.uint16))
    >>> grey.mode, np.asarray(to_rgb(grey))[0, :, 0].tolist()
    ('I;16', [0, 1, 128, 255])
    """
    if image.mode not in SIXTEEN_BIT_MODES:
        return image.convert("RGB")
    values = np.clip(np.asarray(image).astype(np.int64), 0, 65535)
    return Image.fromarray(((values * 255 + 32767) // 65535).astype(np.uint8)).convert("RGB")


def _crop_suffix(bbox: tuple[float, float, float, float] | None) -> str:
    return f":crop{tuple(float(v) for v in bbox)}" if bbox else ""


def _crop(image: Image.Image, bbox: tuple[float, float, float, float] | None) -> Image.Image:
    if bbox is None:
        return image
    x, y, w, h = bbox
    return image.crop((x, y, x + w, y + h))


@dataclass(frozen=True, eq=False)
class ParquetImage(ImageRef):
    """An image stored as encoded bytes in a parquet file, read lazily: row ``row`` of column ``column``
    (a ``.arrow`` file, as ``datasets``' ``save_to_disk`` writes, is read as an Arrow IPC stream instead).

    The column holds the bytes directly or, as the Hugging Face ``Image`` feature writes it, a struct of
    ``bytes`` and ``path``. ``sha256`` is the digest of those bytes, computed by the loader while it
    streams the file; the key is the same as a :class:`FileImage` of the same bytes (and crop), so the
    engine encodes equal images once whatever holds them. ``load()`` reads only the row group that holds
    the row; a small per-process cache keeps the last row groups read, so images scored in file order
    are each read once and the column is never held in memory whole. ``item`` is the image's position in
    a cell holding a list of images (``datasets``' ``List(Image())``), None for a cell of one image.
    """

    path: Path
    row: int
    column: str
    sha256: str
    bbox: tuple[float, float, float, float] | None = None
    item: int | None = None

    @property
    def key(self) -> str:  # type: ignore[override]
        return f"file:{self.sha256}" + _crop_suffix(self.bbox)

    def load(self) -> Image.Image:
        raw = parquet_image_bytes(self.path, self.row, self.column, self.item)
        return self._decode(io.BytesIO(raw), self.bbox)

    def describe(self) -> str:
        item = "" if self.item is None else f" item {self.item}"
        crop = f" (crop {self.bbox})" if self.bbox else ""
        return f"{self.path} row {self.row} column {self.column!r}{item}{crop}"


def cell_image_bytes(value: Any, *, where: str) -> bytes:
    """The encoded image bytes of one parquet cell: raw bytes, or the ``bytes`` of an ``Image`` struct."""
    if isinstance(value, dict):
        value = value.get("bytes")
    if not isinstance(value, (bytes, bytearray)) or not value:
        raise DataError(f"{where}: no image bytes (got {type(value).__name__})")
    return bytes(value)


_PARQUET_LOCK = threading.Lock()
_PARQUET_FILES: dict[str, tuple[Any, list[int]]] = {}
_ROW_GROUPS: OrderedDict[tuple[str, int, str], Any] = OrderedDict()
_ROW_GROUP_CACHE = 4


_ARROW_TABLES: OrderedDict[str, Any] = OrderedDict()


def arrow_table(path: str | Path) -> Any:
    """The table of an Arrow IPC file (``datasets``' ``save_to_disk`` shards: the stream format; else
    the file format), memory-mapped: its columns are read from the page cache, not copied; a few kept open.

    Args:
        path: the ``.arrow`` file.
    """
    import pyarrow as pa

    key = str(path)
    with _PARQUET_LOCK:
        table = _ARROW_TABLES.get(key)
        if table is None:
            try:
                source = pa.memory_map(key)
                try:
                    table = pa.ipc.open_stream(source).read_all()
                except pa.ArrowInvalid:
                    table = pa.ipc.open_file(source).read_all()
            except (OSError, pa.ArrowException) as exc:
                raise DataError(f"cannot read Arrow file: {exc}", file=path) from exc
            _ARROW_TABLES[key] = table
            while len(_ARROW_TABLES) > _ROW_GROUP_CACHE:
                _ARROW_TABLES.popitem(last=False)
        return table


def parquet_image_bytes(path: str | Path, row: int, column: str, item: int | None = None) -> bytes:
    """The image bytes at ``row`` of ``column`` in parquet file ``path`` (its ``item`` th, in a cell holding a
    list of images), reading one row group (of a ``.arrow`` file: :func:`arrow_table`'s cell)."""
    import bisect

    import pyarrow.parquet as pq

    key_path = str(path)
    where = f"{path} row {row} column {column!r}" + ("" if item is None else f" item {item}")
    if Path(path).suffix == ".arrow":
        table = arrow_table(path)
        if not 0 <= row < table.num_rows or column not in table.column_names:
            raise DataError(f"{where}: the file has {table.num_rows} rows, columns {', '.join(table.column_names)}")
        return cell_image_bytes(_item(table.column(column)[row].as_py(), item, where), where=where)
    with _PARQUET_LOCK:
        opened = _PARQUET_FILES.get(key_path)
        if opened is None:
            try:
                pf = pq.ParquetFile(key_path, pre_buffer=False, buffer_size=1 << 20)
            except (OSError, ValueError) as exc:
                raise DataError(f"cannot read parquet file: {exc}", file=path) from exc
            starts = [0]
            for i in range(pf.metadata.num_row_groups):
                starts.append(starts[-1] + pf.metadata.row_group(i).num_rows)
            opened = _PARQUET_FILES[key_path] = (pf, starts)
        pf, starts = opened
        if not 0 <= row < starts[-1]:
            raise DataError(f"{where}: the file has {starts[-1]} rows")
        group = bisect.bisect_right(starts, row) - 1
        cache_key = (key_path, group, column)
        chunk = _ROW_GROUPS.get(cache_key)
        if chunk is None:
            try:
                chunk = pf.read_row_group(group, columns=[column]).column(0)
            except (OSError, ValueError, KeyError) as exc:
                raise DataError(f"{where}: {exc}") from exc
            _ROW_GROUPS[cache_key] = chunk
            while len(_ROW_GROUPS) > _ROW_GROUP_CACHE:
                _ROW_GROUPS.popitem(last=False)
        else:
            _ROW_GROUPS.move_to_end(cache_key)
    return cell_image_bytes(_item(chunk[row - starts[group]].as_py(), item, where), where=where)


def _item(cell: Any, item: int | None, where: str) -> Any:
    """``cell``, or its ``item`` th element when it holds a list of images."""
    if item is None:
        return cell
    if not isinstance(cell, list) or not 0 <= item < len(cell):
        raise DataError(f"{where}: the cell holds no item {item} (got {type(cell).__name__})")
    return cell[item]


@dataclass(frozen=True, eq=False)
class NpyImage(ImageRef):
    """An image stored as a ``.npy`` HxWx3 uint8 array; EqBen YouCook2 stores BGR, hence ``bgr``."""

    path: Path
    bgr: bool = True

    @cached_property
    def key(self) -> str:  # type: ignore[override]
        return f"npy:{self._file_digest(self.path)}:{'bgr' if self.bgr else 'rgb'}"

    def load(self) -> Image.Image:
        try:
            array = np.load(self.path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise self._decode_error(exc) from exc
        return array_to_image(array, bgr=self.bgr, where=self.describe())

    def describe(self) -> str:
        return str(self.path)


@dataclass(frozen=True, eq=False)
class ArrayImage(ImageRef):
    """An in-memory HxWx3 (or HxW) uint8 array."""

    in_memory: ClassVar[bool] = True
    array: np.ndarray
    bgr: bool = False
    name: str = "<array>"

    @cached_property
    def key(self) -> str:  # type: ignore[override]
        a = np.ascontiguousarray(self.array)
        return "array:" + _sha256(f"{a.dtype}:{a.shape}:{self.bgr}".encode(), memoryview(a).cast("B"))

    def load(self) -> Image.Image:
        return array_to_image(self.array, bgr=self.bgr, where=self.describe())

    def describe(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class PILImage(ImageRef):
    """An already-decoded PIL image held in memory."""

    in_memory: ClassVar[bool] = True
    image: Image.Image
    name: str = "<pil>"

    @cached_property
    def key(self) -> str:  # type: ignore[override]
        im = to_rgb(self.image)
        return "pil:" + _sha256(f"{im.size}".encode() + im.tobytes())

    def load(self) -> Image.Image:
        return to_rgb(self.image)

    def describe(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class NoiseImage(ImageRef):
    """A Gaussian-noise "null" image, deterministic for its seed (VisualGPTScore Sec. 4).

    Values are drawn as ``N(mean, std)`` per pixel and channel. Without ``normalization`` they are
    [0, 1] intensities; with ``normalization = (channel means, channel stds)`` (an image processor's
    ``image_mean`` / ``image_std``) they are values of the model's normalised input, mapped back to
    intensities as ``value * std_c + mean_c``, so that the processor's normalisation returns them.
    Either way the intensities are clipped to [0, 1] and quantised to uint8.
    """

    seed: int
    size: tuple[int, int] = (224, 224)
    mean: float = 0.5
    std: float = 0.25
    normalization: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None

    @property
    def key(self) -> str:  # type: ignore[override]
        space = "" if self.normalization is None else f":norm{self.normalization}"
        return f"noise:{self.seed}:{self.size}:{self.mean}:{self.std}{space}"

    def load(self) -> Image.Image:
        rng = np.random.default_rng(self.seed)
        w, h = self.size
        values = rng.normal(self.mean, self.std, size=(h, w, 3))
        if self.normalization is not None:
            means, stds = (np.asarray(v, dtype=np.float64) for v in self.normalization)
            values = values * stds + means
        pixels = values.clip(0.0, 1.0)
        return Image.fromarray((pixels * 255.0).round().astype(np.uint8), mode="RGB")

    def describe(self) -> str:
        space = "" if self.normalization is None else ", normalised input space"
        return f"noise(seed={self.seed}, mean={self.mean}, std={self.std}{space})"


def as_image_ref(image: ImageRef | Image.Image | np.ndarray | str | Path) -> ImageRef:
    """An image reference for what a user holds: a path, a PIL image, an HxWx3 array, or a reference.

    >>> as_image_ref(np.zeros((4, 4, 3), np.uint8)).load().size
    (4, 4)
    """
    if isinstance(image, ImageRef):
        return image
    if isinstance(image, (str, Path)):
        return FileImage(Path(image))
    if isinstance(image, Image.Image):
        return PILImage(image)
    if isinstance(image, np.ndarray):
        return ArrayImage(image)
    raise DataError(f"not an image: {type(image).__name__} (expected a path, a PIL image or an HxWx3 array)")


def array_to_image(array: Any, *, bgr: bool, where: str) -> Image.Image:
    """Convert an HxW or HxWx3 array (uint8, or float in [0, 1]) to an RGB PIL image."""
    a = np.asarray(array)
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    if a.ndim != 3 or a.shape[-1] not in (3, 4):
        raise DataError(f"image {where}: expected an HxWx3 array, got shape {a.shape}")
    a = a[..., :3]
    if bgr:
        a = a[..., ::-1]
    if a.dtype != np.uint8:
        if np.issubdtype(a.dtype, np.floating) and a.size and float(np.nanmax(a)) <= 1.0:
            a = a * 255.0
        a = np.clip(a, 0, 255).astype(np.uint8)
    return Image.fromarray(np.ascontiguousarray(a), mode="RGB")


@dataclass(frozen=True)
class Case:
    """One small matching problem.

    Attributes:
        id: unique within a benchmark load (the loader's record id).
        texts: the candidate texts.
        images: lazy image references; empty for text-only cases.
        truth: boolean ``[len(images), len(texts)]`` matrix, ``truth[i, t]`` is True when text
            ``t`` describes image ``i``. Text-only cases use one row (the implicit image), so the
            row still says which texts are positives.
        tags: grouping labels; ``tags["subset"]`` is always set. A case of questions (NaturalBench,
            MMVP) lists its candidate answers in ``tags["answers"]`` (:func:`case_answers`) and names
            how a generated answer is read in ``tags["reader"]`` (:func:`case_reader`).
        roles: optional names of the texts' roles (for example ``("p1", "p2", "n")`` in VISLA).
        prompts: optional prompt templates containing ``{c}``. When given, each text is a *label*
            (a class name) and a model represents it by CLIP's prompt ensemble: the mean of the
            L2-normalised embeddings of every template with ``{c}`` replaced by the label,
            normalised again (Radford et al. 2021, Sec. 3.1.4; zero-shot classification).
    """

    id: str
    texts: tuple[str, ...]
    truth: np.ndarray
    images: tuple[ImageRef, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    roles: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        truth = np.asarray(self.truth, dtype=bool)
        if truth.ndim != 2:
            raise DataError(f"case {self.id}: truth must be a 2-D matrix, got shape {truth.shape}")
        n_rows = max(len(self.images), 1)
        if truth.shape != (n_rows, len(self.texts)):
            raise DataError(
                f"case {self.id}: truth has shape {truth.shape} but the case has "
                f"{len(self.images)} images and {len(self.texts)} texts"
            )
        if self.roles and len(self.roles) != len(self.texts):
            raise DataError(f"case {self.id}: {len(self.roles)} roles for {len(self.texts)} texts")
        for t, text in enumerate(self.texts):
            if not isinstance(text, str) or not text.strip():
                raise DataError(f"case {self.id}: text {t} is empty or not a string: {text!r}")
        for k, template in enumerate(self.prompts):
            if not isinstance(template, str) or "{c}" not in template:
                raise DataError(f"case {self.id}: prompt template {k} has no '{{c}}': {template!r}")
        if "subset" not in self.tags:
            raise DataError(f"case {self.id}: tags must include 'subset'")
        object.__setattr__(self, "truth", truth)

    @property
    def subset(self) -> str:
        return self.tags["subset"]

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.images), len(self.texts))


#: The tags of a case in a set of images judged together (What'sUp's controlled images: the pair and set
#: accuracy of protocol ``whatsup``): the set (the two objects) and the case's slot in it (its preposition).
SET_TAG, SLOT_TAG = "set", "set_preposition"

#: The tag of a K x K case that names how a chat VLM is asked about it on the choice path (protocols
#: ``choice``, ``mllm``): in spotdiff's wording, both candidate orders (``spotdiff``, the default), or in its
#: benchmark's authors' (VisMin's, its answers read as the authors read them, ``vismin-authors``, or naming one
#: option only, ``vismin-strict``; ``colorswap``). The styles: :data:`spotdiff.readers.CHOICE_STYLES`.
PROMPTS_TAG = "prompts"
PROMPT_STYLES = ("spotdiff", "vismin-authors", "vismin-strict", "colorswap")


def case_prompts(case: Case) -> str:
    """The question style of a K x K case: ``tags["prompts"]`` (``spotdiff`` when absent), one of
    :data:`PROMPT_STYLES`.

    Args:
        case: the case.
    """
    style = case.tags.get(PROMPTS_TAG, PROMPT_STYLES[0])
    if style not in PROMPT_STYLES:
        raise DataError(f"case {case.id}: tags[{PROMPTS_TAG!r}] is {style!r}; known: {', '.join(PROMPT_STYLES)}")
    return style


#: The tag of a question case that lists its candidate answers, separated by :data:`ANSWER_SEP`.
ANSWERS_TAG = "answers"
ANSWER_SEP = "/"


def case_answers(case: Case) -> tuple[str, ...]:
    """The candidate answers of a question case (its texts are questions; ``truth[i, q]`` is True when
    the first candidate answers question ``q`` about image ``i``, False when the second does).

    Args:
        case: a case with ``tags["answers"]``, e.g. ``"Yes/No"``.

    >>> import numpy as np
    >>> case_answers(Case("c", ("Is it red?",), np.ones((1, 1)), tags={"subset": "s", "answers": "Yes/No"}))
    ('Yes', 'No')
    """
    answers = tuple(case.tags.get(ANSWERS_TAG, "").split(ANSWER_SEP))
    if len(answers) != 2 or not all(a.strip() for a in answers):
        raise DataError(
            f"case {case.id}: a question case needs tags[{ANSWERS_TAG!r}] with two candidate answers "
            f"separated by {ANSWER_SEP!r}, got {case.tags.get(ANSWERS_TAG)!r}"
        )
    return answers


#: The tag of a question case that asks question ``k`` about image ``k`` only (value ``diagonal``) rather than every
#: question about every image (Vinoground's four questions, each about its own video: :func:`case_pairs`).
PAIRS_TAG = "pairs"


def case_pairs(case: Case) -> list[tuple[int, int]]:
    """The ``(image, question)`` index pairs a question case asks: every pair, or with ``tags["pairs"] ==
    "diagonal"`` question ``k`` about image ``k`` only (the case then has as many images as questions).

    Args:
        case: a question case.

    >>> import numpy as np
    >>> tags = {"subset": "s", "answers": "A/B", PAIRS_TAG: "diagonal"}
    >>> case_pairs(Case("c", ("q0", "q1"), np.eye(2), (ArrayImage(np.zeros((2, 2))),) * 2, tags))
    [(0, 0), (1, 1)]
    """
    kind = case.tags.get(PAIRS_TAG)
    if kind is None:
        return [(i, q) for i in range(len(case.images)) for q in range(len(case.texts))]
    if kind != "diagonal" or len(case.images) != len(case.texts):
        raise DataError(
            f"case {case.id}: tags[{PAIRS_TAG!r}] is {kind!r} for {len(case.images)} images x {len(case.texts)} "
            "questions; 'diagonal' asks question k about image k, as many images as questions"
        )
    return [(k, k) for k in range(len(case.texts))]


#: The tag of a question case that names how a generated answer is read (:data:`READERS`).
READER_TAG = "reader"
#: How a generated answer is read, by name: ``words`` as NaturalBench's ``extract_answer`` (the
#: candidate word that occurs first, whole-word and case-insensitive); ``letter``, the strict
#: option-letter parse (the letter alone, optionally ``(B)``, ``B.`` or ``B:``); ``letter-lmms-eval``,
#: lmms-eval's mmvp ``_extract_answer_letter`` transcribed with its quirks (the article "a" and words' first
#: letters read as options); ``letter-lmms-corrected``, the option letter read in lmms-eval's order ("The
#: answer is B", "Option A", "(A) Left") without those quirks (MMVP); ``first-char``, the answer's first
#: character as the option letter, an empty answer stopping its pair as in Vinoground's ``get_score_all.py`` on
#: answers saved as strings, and ``first-char-lists``, the same on answers saved as lists (an empty one only
#: wrong). The readers themselves: :data:`spotdiff.readers.ANSWER_READERS`.
READERS = ("words", "letter", "letter-lmms-eval", "letter-lmms-corrected", "first-char", "first-char-lists")
#: The readers of option letters: a case read by one must have the letters A, B, ... as its candidates.
LETTER_READERS = ("letter", "letter-lmms-eval", "letter-lmms-corrected", "first-char", "first-char-lists")
#: What the ``first-char`` reader gives for an empty answer (a generated answer's column holds the candidate's
#: index, NaN when it names none): Vinoground's get_score_all.py raises on one when its script saved answers as
#: strings, which leaves the rest of its pair unscored, where an answer naming no candidate is only wrong.
EMPTY_ANSWER = -1
#: What a reader gives for an answer that names every option, where its benchmark's authors count it right
#: whichever option is gold (VisMin's ``is_match_with_label`` matches an answer against the gold label only).
ANY_OPTION = -2
#: The option letters a ``letter`` case's candidates must be, in order.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def case_reader(case: Case) -> str:
    """How a question case's generated answers are read: ``tags["reader"]`` (``words`` when absent),
    one of :data:`READERS`; the candidates of a case read by option letters (:data:`LETTER_READERS`)
    must be the letters A, B, ...

    Args:
        case: a question case (:func:`case_answers`).

    >>> import numpy as np
    >>> tags = {"subset": "s", "answers": "A/B", "reader": "letter"}
    >>> case_reader(Case("c", ("Which? A. x B. y",), np.ones((1, 1)), tags=tags))
    'letter'
    """
    reader = case.tags.get(READER_TAG, READERS[0])
    if reader not in READERS:
        raise DataError(f"case {case.id}: tags[{READER_TAG!r}] is {reader!r}; known: {', '.join(READERS)}")
    answers = case_answers(case)
    if reader in LETTER_READERS and answers != tuple(LETTERS[: len(answers)]):
        raise DataError(
            f"case {case.id}: reader {reader!r} reads option letters, but the candidates are {'/'.join(answers)!r}"
        )
    return reader
