"""Minimal-change data engines that write published benchmark formats (docs/synthesis.md).

Four families, one output and resume path (:mod:`.run`, :mod:`.output`): procedural canvases
(:mod:`.canvas`: ``spec``, ``eqben``, ``zeroshot``, ``corpus``), diffusion (:mod:`.diffusion`: the
generative backend and ``eqsd``), video mining (:mod:`.video`: ``eqben-video``) and text
(:mod:`.text`: ``visla``, ``visla-vsr``); people review what they make (:mod:`.review`). An engine's
options are one declaration (its config dataclass, each field an :func:`option`), from which the
command line is built and ``synth.json`` recorded. Every engine is seeded and deterministic.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from spotdiff.processes import cap_workers
from spotdiff.registry import Registry, name_class
from spotdiff.review.sheet import RULES
from spotdiff.synth.canvas.pipeline import BACKENDS, Pipeline, make_pipeline
from spotdiff.synth.diffusion import models
from spotdiff.synth.output import default_workers

#: the kinds of value an option takes (``spotdiff synth`` maps each to its argparse type)
KINDS = ("int", "count", "positive", "seed", "float", "fraction", "str", "path", "paths", "names", "flag")


def option(
    default: Any,
    help: str,
    *,
    kind: str | None = None,
    choices: tuple[str, ...] | None = None,
    group: str | None = None,
    identity: bool = True,
    metavar: str | None = None,
    aliases: tuple[str, ...] = (),
) -> Any:
    """One engine option: a dataclass field whose metadata the command line and ``synth.json`` read.

    Args:
        default: the default value.
        help: the ``--help`` text (quote the paper's sentence where the option names a reading of it).
        kind: one of :data:`KINDS`; None: from the default's type.
        choices: the allowed values.
        group: the ``--help`` section the option is listed under; None: the engine's own options.
        identity: False for options that do not change the output's bytes (workers, batch sizes): a run
            may be resumed with another value.
        metavar: the value's name in ``--help``.
        aliases: other spellings of the option on the command line.
    """
    if kind is None:
        kind = {bool: "flag", int: "int", float: "float"}.get(type(default), "str")
    if kind not in KINDS:
        raise ValueError(f"unknown option kind {kind!r}")
    meta = {
        "help": help,
        "kind": kind,
        "choices": choices,
        "group": group,
        "identity": identity,
        "metavar": metavar,
        "aliases": aliases,
    }
    return field(default=default, metadata=meta)


def count_option(default: int, help: str) -> Any:
    """An engine's ``--n``, also spelled ``--count`` (under ``torchrun``, whose own parser takes ``--n`` for an
    ambiguous abbreviation of ``--nnodes`` / ``--nproc-per-node``)."""
    return option(default, help, kind="count", aliases=("--count",))


def subsets_option(known: tuple[str, ...]) -> Any:
    """The ``--subsets`` option of an engine whose subsets are ``known``."""
    return option(None, f"comma-separated subsets (default: all of {', '.join(known)})", kind="names")


@dataclass(frozen=True)
class SynthConfig:
    """The option every engine takes; an engine's config adds the options it reads, and only those."""

    #: how many: cases per subset (spec), pairs (eqben, eqsd, eqben-video), scenes or triplets (visla),
    #: image-caption pairs (corpus) or images (zeroshot)
    n: int = count_option(10, "how many (see `spotdiff synth -h`)")

    def validate(self) -> None:
        """Refuse bad options and unusable models before anything heavy runs (one clear line each)."""

    def options(self) -> dict[str, Any]:
        """The declared options that change the output's bytes, as ``synth.json`` records them (paths as
        text): a run resumes only under the same options; workers and batch sizes may differ."""
        return {
            f.name: _plain(getattr(self, f.name))
            for f in fields(self)
            if "help" in f.metadata and f.metadata["identity"]
        }


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


GENERATIVE = "generative backend (--backend generative)"


@dataclass(frozen=True)
class ReviewOptions:
    """The options of an engine whose output people review (``spotdiff review``): with ``--from-review`` the
    engine writes what the sheets accept (its :attr:`SynthEngine.reviewed` writer) instead of making new items."""

    from_review: tuple[Path, ...] | None = option(
        None,
        "write the items (pairs, sets or triplets) accepted in a reviewed sheet: review.csv, or several reviewers' "
        "review.NAME.csv files (see --review-rule)",
        kind="paths",
        metavar="FILE",
    )
    #: how several reviewers' decisions make one (recorded in synth.json)
    review_rule: str = option(
        "all",
        "with several --from-review files: keep an item every reviewer accepted (all) or more than half did "
        "(majority; a tie rejects)",
        choices=RULES,
    )


@dataclass(frozen=True)
class CanvasConfig(SynthConfig):
    """The options of the engines that draw on SPEC's canvas pipeline (procedural or generative)."""

    seed: int = option(0, "random seed (the same options give the same bytes)", kind="seed")
    image_size: int = option(224, "square image side in pixels", kind="positive")
    workers: int | None = option(
        None,
        "worker processes (default: the usable cores, at most 4); the output does not depend on them",
        kind="positive",
        identity=False,
    )
    objects: Path | None = option(  # noqa: RUF009 - a field with metadata, see option()
        None, "a folder of your own RGBA cut-outs (DIR/<class>/*.png)", kind="path", metavar="DIR"
    )
    backend: str = option(
        "procedural", "procedural (offline, CPU) or generative (needs the 'generate' extra)", choices=BACKENDS
    )
    scenes: tuple[str, ...] | None = option(None, "comma-separated background scenes (default: all)", kind="names")
    t2i: str = option(models.DEFAULT_T2I, "text-to-image model (hub name or folder)", group=GENERATIVE)
    inpaint: str = option(models.DEFAULT_INPAINT, "inpainting model that expands the background", group=GENERATIVE)
    detector: str = option(models.DEFAULT_DETECTOR, "Grounding DINO model", group=GENERATIVE)
    segmenter: str = option(models.DEFAULT_SEGMENTER, "SAM model", group=GENERATIVE)
    steps: int = option(30, "diffusion steps per image", kind="positive", group=GENERATIVE)
    object_size: int = option(512, "side of a generated object photo", kind="positive", group=GENERATIVE)
    instance_cache: Path | None = option(  # noqa: RUF009 - a field with metadata
        None,
        "cache generated object photos here (keyed by the weights' content); a second set reuses them",
        kind="path",
        group=GENERATIVE,
        identity=False,
        metavar="DIR",
    )
    library_size: int = option(
        models.LIBRARY_SIZE,
        "object photos generated per class, from which cases pick their instances",
        kind="positive",
        group=GENERATIVE,
    )
    batch_size: int | None = option(
        None,
        "object prompts per text-to-image call (default 8 on CUDA, 1 on the CPU); the photos do not depend on it",
        kind="positive",
        group=GENERATIVE,
        identity=False,
    )
    device: str = option("auto", "auto (CUDA when available), cpu or cuda[:N]", group=GENERATIVE)
    dtype: str = option(
        "auto", "the diffusion pipelines' precision: auto (fp16 on CUDA, fp32 on the CPU), fp32, fp16 or bf16",
        choices=models.DTYPES, group=GENERATIVE,
    )  # fmt: skip

    def options(self) -> dict[str, Any]:
        """The declared options; the generative backend's only when it is the backend used."""
        shown = super().options()
        if self.backend != "generative":
            shown = {k: v for k, v in shown.items() if _group(self, k) != GENERATIVE}
        return shown

    def validate(self) -> None:
        """With the generative backend: every model folder is of the kind its option asks for (nothing loaded)."""
        if self.backend == "generative":
            models.check_stage_models(self.t2i, self.inpaint, self.detector, self.segmenter)
            models.resolve_dtype(self.dtype, models.resolve_device(self.device))

    def pipeline(self) -> Pipeline:
        """The canvas pipeline these options describe (the generative stages load their models lazily)."""
        scenes = list(self.scenes) if self.scenes else None
        if self.backend != "generative":
            return make_pipeline(self.image_size, backend=self.backend, objects=self.objects, scenes=scenes)
        from spotdiff.synth.diffusion.stages import make_generative_stages

        source, isolator, background = make_generative_stages(
            t2i_model=self.t2i,
            inpaint_model=self.inpaint,
            detector=self.detector,
            segmenter=self.segmenter,
            steps=self.steps,
            object_size=self.object_size,
            cache_dir=self.instance_cache,
            library_size=self.library_size,
            batch_size=self.batch_size,
            device=self.device,
            dtype=self.dtype,
        )
        return Pipeline(source, isolator, background, self.image_size)

    def common(self) -> dict[str, Any]:
        """The keyword arguments every canvas ``write_<engine>`` function takes."""
        return {
            "n": self.n,
            "seed": self.seed,
            "size": self.image_size,
            "pipeline": self.pipeline(),
            "workers": self.workers,
        }

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of the engine's ``write_<engine>`` function: :meth:`common`'s and, by their names,
        the options the engine's config declares itself (the review options aside)."""
        shared = {f.name for f in fields(CanvasConfig)} | {f.name for f in fields(ReviewOptions)}
        return {**{f.name: getattr(self, f.name) for f in fields(self) if f.name not in shared}, **self.common()}


def _group(config: SynthConfig, name: str) -> str | None:
    return next(f.metadata.get("group") for f in fields(config) if f.name == name)


def default_of(config_class: type[SynthConfig], name: str) -> Any:
    """The default value of option ``name`` of ``config_class``."""
    f = next(f for f in fields(config_class) if f.name == name)
    return f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]


class SynthEngine(ABC):
    """Base class of synthesis engines: built from a :class:`SynthConfig`, ``write(out)`` a dataset.

    An engine is declared in its class statement: its options (``config``), the loader that reads its output
    (``benchmark``) and, for an engine whose output people review, the writer of what reviewed sheets accept
    (``reviewed``) as class keywords; its one-line description (``spotdiff synth -h``) as its docstring::

        @ENGINES.register("eqben")
        class EqbenEngine(SynthEngine, config=EqbenConfig, benchmark="eqben", reviewed=write_from_review):
            '''EqBen-Kubric-style location / counting / attribute+size pairs (EqBen App. B.4, Fig. 14)'''
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: the loader (``spotdiff eval --benchmark NAME``) that reads what this engine writes
    benchmark: ClassVar[str | None] = None
    #: the engine's options, with their defaults
    config_class: ClassVar[type[SynthConfig]] = SynthConfig
    #: an engine whose output people review (``spotdiff review``; its config is a :class:`ReviewOptions`): the
    #: function writing the items that reviewed sheets accept, ``reviewed(out, sheets, rule)``, run instead of
    #: :meth:`make` when the config's ``from_review`` names sheets
    reviewed: ClassVar[Callable[[Path, Sequence[Path], str], dict[str, Any]] | None] = None

    def __init_subclass__(
        cls,
        *,
        config: type[SynthConfig],
        benchmark: str | None = None,
        reviewed: Callable[[Path, Sequence[Path], str], dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if reviewed is None and issubclass(config, ReviewOptions):
            raise TypeError(f"{cls.__name__}: its config has --from-review but the engine names no reviewed writer")
        cls.config_class, cls.benchmark, cls.reviewed = config, benchmark, reviewed
        cls.description = " ".join((cls.__doc__ or "").split())

    def __init__(self, config: SynthConfig) -> None:
        if any(f.name == "workers" for f in fields(config)):
            workers = config.workers or default_workers()  # type: ignore[attr-defined]
            config = replace(config, workers=cap_workers(workers))  # type: ignore[call-arg]
        self.config = config

    def check(self) -> None:
        """Refuse bad options and unusable models before anything heavy runs (the config's ``validate``)."""
        self.config.validate()

    def write(self, out: Path) -> dict[str, Any]:
        """Write the dataset under ``out``, from reviewed sheets with ``--from-review``; return a short summary
        (also saved as ``synth.json``)."""
        c = self.config
        if not isinstance(c, ReviewOptions) or c.from_review is None:
            return self.make(out)
        return {"engine": self.name, **type(self).reviewed(out, c.from_review, c.review_rule)}  # type: ignore[misc]

    @abstractmethod
    def make(self, out: Path) -> dict[str, Any]:
        """Make the dataset under ``out``; return a short summary."""


ENGINES: Registry[type[SynthEngine]] = Registry("synthesis engine", "spotdiff.synth", on_register=name_class)

__all__ = [
    "ENGINES",
    "CanvasConfig",
    "ReviewOptions",
    "SynthConfig",
    "SynthEngine",
    "count_option",
    "default_of",
    "option",
    "subsets_option",
]
