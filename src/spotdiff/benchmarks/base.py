"""The loader interface: a benchmark reads its published format from a local directory.

Each benchmark module defines one :class:`Benchmark` subclass with its declaration
(:class:`~spotdiff.benchmarks.metadata.BenchmarkMetadata`) and registers it by name with
``@BENCHMARKS.register("name")``. ``cases()`` validates every record and yields :class:`Case`
objects with the subset as a tag; records dropped by a documented rule are counted in ``report``.
"""

from __future__ import annotations

import difflib
import hashlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from spotdiff.benchmarks._io import IMAGE_ROOT, ImageRoots, first_true, frozen_truth, images_dir, read_json_unique
from spotdiff.benchmarks.metadata import BenchmarkMetadata
from spotdiff.cases import Case, FileImage, ImageRef, NpyImage, check_ties, file_digest
from spotdiff.errors import ConfigError, DataError
from spotdiff.registry import Registry
from spotdiff.video.clips import VideoRef


@dataclass(kw_only=True)
class CaseSelection:
    """Which cases of which benchmark a command reads: what ``spotdiff eval``, ``spotdiff bias`` and a training
    run's ``--eval`` targets share (keyword fields, before each one's own)."""

    benchmark: str
    data: Path
    subset: str | None = None
    protocol: str | None = None
    limit: int | None = None


@dataclass
class LoadReport:
    """What a load read and what it skipped, by rule; printed by the CLI and saved with a run."""

    records: int = 0
    cases: int = 0
    skipped: Counter = field(default_factory=Counter)

    def skip(self, rule: str, n: int = 1) -> None:
        self.skipped[rule] += n

    def as_dict(self) -> dict:
        return {"records": self.records, "cases": self.cases, "skipped": dict(self.skipped)}

    def summary(self) -> str:
        text = f"{self.cases} cases from {self.records} records"
        for rule, n in sorted(self.skipped.items()):
            text += f"; skipped {n} ({rule})"
        return text


_PAIR_TRUTH = frozen_truth([[True, False], [False, True]])


def pair_case(case_id: str, captions: tuple[str, str], images: tuple[ImageRef, ImageRef], tags: dict[str, str]) -> Case:
    """A Winoground-style case: 2 images x 2 captions, caption k describes image k (diagonal truth).

    Args:
        case_id: the case id.
        captions: caption 0 and caption 1.
        images: image 0 and image 1.
        tags: the case's tags, its subset among them.
    """
    return Case(id=case_id, texts=captions, truth=_PAIR_TRUTH, images=images, tags=tags)


class Benchmark(ABC):
    """Base class of every loader.

    A subclass sets ``metadata``, its declaration (:class:`BenchmarkMetadata`); ``protocols``,
    ``subsets``, ``layout`` and ``description`` are read from it, and ``name`` is set by
    ``@BENCHMARKS.register(name)``.

    ``option_names`` lists the options a class reads (``-o key=value``); a loader accepts those of
    its class and of every base class, and refuses any other with a suggestion. Every loader reads
    ``image_root`` (:class:`~spotdiff.benchmarks._io.ImageRoots`): :meth:`confined_cases` refuses a
    record naming an image file outside the data and the folders it declares.

    ``ties`` is the run's tie rule (:data:`spotdiff.cases.TIES`); a loader whose published
    peer relies on argmax tie-breaking reads it (ARO-Order keeps perturbations identical to the
    caption under ``"argmax"``).

    Args:
        root: the data location (a folder, or a file for the loaders that read one).
        ties: the run's tie rule.
        **options: the loader's options (``-o key=value``; each loader says which it reads).

    Raises:
        ConfigError: an option the loader does not read.
    """

    name: ClassVar[str] = ""
    protocols: ClassVar[tuple[str, ...]] = ()
    subsets: ClassVar[tuple[str, ...]] = ()
    layout: ClassVar[str] = ""
    description: ClassVar[str] = ""
    metadata: ClassVar[BenchmarkMetadata]
    option_names: ClassVar[tuple[str, ...]] = (IMAGE_ROOT,)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        meta = cls.__dict__.get("metadata")
        if meta is not None:
            cls.protocols, cls.subsets, cls.layout, cls.description = (
                meta.protocols,
                meta.subsets,
                meta.layout,
                meta.description,
            )

    def __init__(self, root: str | Path, *, ties: str = "strict", **options: object) -> None:
        self.root = Path(root)
        if not self.root.exists():
            raise DataError(f"data location does not exist: {self.root}")
        self.ties = check_ties(ties)
        self.check_options(options)
        self.options = options
        self.report = LoadReport()

    @classmethod
    def known_options(cls) -> tuple[str, ...]:
        """The options this loader reads: its class's ``option_names`` and its base classes'."""
        return tuple(sorted({name for klass in cls.__mro__ for name in vars(klass).get("option_names", ())}))

    @classmethod
    def check_options(cls, options: dict[str, object]) -> None:
        """Refuse an option the loader does not read, naming its options and the closest one.

        Args:
            options: the options given (``-o key=value``).
        """
        known = cls.known_options()
        for name in options:
            if name not in known:
                # image_root declares folders besides the data, never the image folder 'images' names
                close = difflib.get_close_matches(name, [k for k in known if k != IMAGE_ROOT], n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                offered = ", ".join(known)
                raise ConfigError(f"benchmark {cls.name!r} has no option {name!r}{hint} (its options: {offered})")

    @classmethod
    def default_data(cls) -> Path | None:
        """Where the benchmark's data is when no folder is given, if not in the data home: a declared benchmark's
        folder of local files (:mod:`spotdiff.benchmarks.declared`); None for the others."""
        return None

    @classmethod
    def declaration_record(cls) -> dict[str, str] | None:
        """What identifies a declared benchmark in a run (its declaration's name, file and content digest); None
        for a built-in one, whose code and version identify it."""
        return None

    @abstractmethod
    def cases(self, subset: str | None = None) -> Iterator[Case]:
        """Yield the validated cases, all subsets or only ``subset``."""

    @abstractmethod
    def data_files(self) -> list[Path]:
        """The annotation files this benchmark reads (their digest identifies the data)."""

    def confined_cases(self, subset: str | None = None) -> Iterator[Case]:
        """:meth:`cases`, each image file a case names checked to lie inside the data or a folder the
        ``image_root`` option declares (:class:`~spotdiff.benchmarks._io.ImageRoots`); a record naming
        another file is a DataError. Every reader of cases (:meth:`load`, runs, reports) goes through here.

        Args:
            subset: one subset, or None for all.
        """
        roots = ImageRoots(self.root, self.options)
        for case in self.cases(subset):
            for ref in case.images:
                if isinstance(ref, (FileImage, NpyImage, VideoRef)):
                    roots.check(ref.path, record=case.id, what=ref.what)
            yield case

    def load(self, subset: str | None = None, limit: int | None = None) -> list[Case]:
        """Read the cases into a list (:meth:`confined_cases`), checking that ids are unique."""
        self.report = LoadReport()
        out: list[Case] = []
        seen: set[str] = set()
        for case in self.confined_cases(subset):
            if case.id in seen:
                raise DataError(f"duplicate case id {case.id!r}", file=self.root, record=case.id)
            seen.add(case.id)
            out.append(case)
            if limit is not None and len(out) >= limit:
                break
        self.report.cases = len(out)
        return out

    def check_subset(self, subset: str | None) -> None:
        if subset is not None and self.subsets and subset not in self.subsets:
            raise ConfigError(f"benchmark {self.name!r} has no subset {subset!r}; known: {', '.join(self.subsets)}")

    def data_digest(self) -> str:
        """SHA-256 over the annotation files' names and contents, in a stable order."""
        h = hashlib.sha256()
        for path in sorted(self.data_files()):
            h.update(str(path.relative_to(self.root) if path.is_relative_to(self.root) else path).encode())
            h.update(file_digest(path).encode())
        return h.hexdigest()


class SubsetFilesBenchmark(Benchmark):
    """A benchmark published as one ``<subset>.json`` per subset in one folder (SugarCrepe, VALSE): a JSON
    object keyed by ``record_key``, each record one image and a true and a false text.

    The folder is ``root`` or one of ``search_dirs`` below it; a folder may hold only some subsets.
    """

    search_dirs: ClassVar[tuple[str, ...]] = ("", "data")
    option_names: ClassVar[tuple[str, ...]] = ("images",)
    record_key: ClassVar[str] = "record id"
    case_roles: ClassVar[tuple[str, str]] = ("positive", "negative")

    def _records(self, subset: str | None) -> Iterator[tuple[str, Path, str, object]]:
        """``(subset, file, record id, record)`` of the subset files in order, counted in a fresh report."""
        self.check_subset(subset)
        self.report = LoadReport()
        self._image_root = images_dir(self.root, self.options)
        self._image_refs: dict[str, FileImage] = {}
        for name in (subset,) if subset else self.subsets:
            path = self._file(name)
            data = read_json_unique(path)
            if not isinstance(data, dict):
                raise DataError(
                    f"expected a JSON object keyed by {self.record_key}, got {type(data).__name__}", file=path
                )
            for key, record in data.items():
                self.report.records += 1
                yield name, path, key, record

    def _case(self, subset: str, key: str, image_file: str, texts: tuple[str, str], tags: dict[str, str]) -> Case:
        """Record ``key`` of ``subset``: 1 image x 2 texts, the first true (truth [[1, 0]]); images are shared
        between the records that name the same file."""
        image = self._image_refs.get(image_file)
        if image is None:
            image = self._image_refs[image_file] = FileImage(self._image_root / image_file)
        return Case(
            id=f"{subset}/{key}", texts=texts, truth=first_true(2), images=(image,), tags=tags, roles=self.case_roles
        )

    def _data_dir(self) -> Path:
        for candidate in (self.root / d if d else self.root for d in self.search_dirs):
            if any((candidate / f"{s}.json").is_file() for s in self.subsets):
                return candidate
        title = self.description.split(":")[0] or self.name
        raise DataError(f"no {title} subset files (<subset>.json; subsets {', '.join(self.subsets)}) in {self.root}")

    def _file(self, subset: str) -> Path:
        path = self._data_dir() / f"{subset}.json"
        if not path.is_file():
            raise DataError(f"subset file missing: {path.name}", file=path)
        return path

    def data_files(self) -> list[Path]:
        """The subset files present (a folder may hold only the subsets a user evaluates)."""
        return [p for p in (self._data_dir() / f"{s}.json" for s in self.subsets) if p.is_file()]


def _named(name: str, cls: type[Benchmark]) -> None:
    """Give a registered benchmark its registry name, in the class and in its declaration."""
    if not isinstance(getattr(cls, "metadata", None), BenchmarkMetadata):
        raise ConfigError(
            f"benchmark {name!r} ({cls.__module__}.{cls.__qualname__}) declares no metadata = BenchmarkMetadata(...)"
        )
    cls.name = name
    cls.metadata = cls.metadata.named(name)


BENCHMARKS: Registry[type[Benchmark]] = Registry(
    "benchmark", "spotdiff.benchmarks", entry_points="spotdiff.benchmarks", on_register=_named
)


#: Names peers use for the same benchmarks: MTEB's task names and CLIP_benchmark's dataset names.
ALIASES: dict[str, str] = {
    "AROCocoOrder": "aro-coco-order",
    "AROFlickrOrder": "aro-flickr-order",
    "AROVisualRelation": "aro-vg-relation",
    "AROVisualAttribution": "aro-vg-attribution",
    "SugarCrepe": "sugarcrepe",
    "Winoground": "winoground",
    "sugar_crepe": "sugarcrepe",
}


def canonical_benchmark(name: str) -> tuple[str, str | None]:
    """``(spotdiff name, subset or None)`` for a spotdiff name or a peer's alias.

    CLIP_benchmark names a SugarCrepe subset as ``sugar_crepe/<subset>``, so an alias may carry one.

    >>> canonical_benchmark("AROCocoOrder")
    ('aro-coco-order', None)
    >>> canonical_benchmark("sugar_crepe/swap_att")
    ('sugarcrepe', 'swap_att')
    """
    base, sep, subset = name.partition("/")
    if sep and base in ALIASES:
        return ALIASES[base], subset or None
    return ALIASES.get(name, name), None


def get_benchmark(name: str) -> type[Benchmark]:
    """The loader class registered under ``name`` or one of its :data:`ALIASES`."""
    return BENCHMARKS.get(canonical_benchmark(name)[0])
