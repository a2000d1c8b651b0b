"""A benchmark's one declaration (as MTEB's ``TaskMetadata``): what it is, where its data comes from.

``spotdiff benchmarks``, ``spotdiff data list``, ``spotdiff data fetch`` and the generated docs all
read it; the registry sets its name. A declaration that contradicts itself fails at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from spotdiff.benchmarks.shared import COLLECTIONS
from spotdiff.benchmarks.sources import HubSource, ImagesSource, Part, UrlSource
from spotdiff.errors import ConfigError

_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Reading:
    """One way a benchmark's generated answers are read, as ``spotdiff benchmarks NAME`` lists them.

    Attributes:
        choice: how a run picks it (a loader option, ``-o reader=strict``; ``always`` for a benchmark's one
            reading); empty for a peer's reading spotdiff does not offer, listed where it differs from those offered.
        whose: whose rule it is (``the authors'``, ``spotdiff's``, a peer's: ``lmms-eval's``).
        rule: what it reads, and where it comes from (file, function, commit).
        default: a run reads so unless told otherwise (exactly one of a benchmark's readings).
    """

    choice: str
    whose: str
    rule: str
    default: bool = False

    def line(self) -> str:
        """The reading in one line: ``default: -o reader=lmms-eval (lmms-eval's): ...``, ``-o reader=strict
        (spotdiff's): ...``, a peer's ``not offered (lmms-eval's): ...``."""
        return f"{'default: ' if self.default else ''}{self.choice or 'not offered'} ({self.whose}): {self.rule}"


#: The one reading of the generated answers of the choice protocols (``choice``, ``choice-text``: EqBen Sec. 5.5's
#: questions in spotdiff's wording), for the benchmarks asked so.
CHOICE_READING = Reading(
    "always", "spotdiff's",
    "the choice protocols' generated answer read strictly: the option letter alone, optionally (B), B. or B: "
    "(parse_choice); anything else is no answer (unparsed); the likelihood reading (text, image, group) reads the "
    "letters' log-probabilities instead",
    default=True,
)  # fmt: skip


@dataclass(frozen=True)
class BenchmarkMetadata:
    """What a benchmark is, where it comes from and how the papers report it.

    Attributes:
        title: short name with its paper, as ``spotdiff data list`` shows it.
        description: one line on what it is, with its paper.
        paper: authors, title and venue of the paper that introduced it.
        reference: the official repository or page.
        citation: BibTeX of ``paper``.
        license: the data's licence or terms, as the official source states them.
        protocols: protocol names that apply, the default first.
        main_score: ``(protocol, metric)`` the paper headlines; the protocol is one of ``protocols``.
        layout: the expected data layout, shown by ``spotdiff benchmarks``.
        parts: the data to fetch, official source first (:class:`~spotdiff.benchmarks.sources.Part`;
            none for a benchmark read only from local files); every hub source and every GitHub source
            is pinned to a commit.
        subsets: the known subset names (``()`` when open-ended).
        reproduces: the tables of the source papers its numbers correspond to.
        groups: the paper groupings of subsets, name -> known subsets; each is reported as the
            unweighted mean of its subsets' values (``metrics.json`` scopes beside ``"all"`` and
            ``"subset_mean"``).
        groups_source: where those groupings come from (paper, table, section).
        ties: which tie rule each peer's published code uses on this benchmark (``--ties``).
        metric_sources: ``(protocol, metrics, source)``: the paper table or the authors' function each
            reported metric reproduces (or that it is spotdiff's own reading or diagnostic), shown by
            ``spotdiff benchmarks NAME``.
        readings: how its generated answers may be read (:class:`Reading`): the default, each alternative (a
            loader option) and a peer's where it differs; shown by ``spotdiff benchmarks NAME``.
        data_notes: what ``spotdiff data list`` adds about fetching it.
        name: the registry name, set by ``@BENCHMARKS.register(name)``.
    """

    title: str
    description: str
    paper: str
    reference: str
    citation: str
    license: str
    protocols: tuple[str, ...]
    main_score: tuple[str, str]
    layout: str
    parts: tuple[Part, ...]
    subsets: tuple[str, ...] = ()
    reproduces: str = ""
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    groups_source: str = ""
    ties: str = ""
    metric_sources: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    readings: tuple[Reading, ...] = ()
    data_notes: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        for key in ("title", "description", "paper", "reference", "citation", "license", "layout"):
            if not getattr(self, key).strip():
                self._fail(f"{key} is empty")
        if not self.protocols or len(set(self.protocols)) != len(self.protocols):
            self._fail(f"protocols must be non-empty and distinct, got {self.protocols!r}")
        if self.main_score[0] not in self.protocols:
            self._fail(f"main score's protocol {self.main_score[0]!r} is not one of {', '.join(self.protocols)}")
        if len(set(self.subsets)) != len(self.subsets):
            self._fail(f"repeated subset in {self.subsets!r}")
        for group, members in self.groups:
            unknown = [m for m in members if m not in self.subsets]
            if unknown or not members:
                self._fail(f"group {group!r} names unknown subsets {unknown!r}; known: {', '.join(self.subsets)}")
        for protocol, metrics, source in self.metric_sources:
            if protocol not in self.protocols or not metrics or not source.strip():
                self._fail(f"metric source {protocol!r} {metrics!r}: a protocol of {', '.join(self.protocols)}, its "
                           "metrics and what they reproduce")  # fmt: skip
        defaults = [r for r in self.readings if r.default]
        if self.readings and (len(defaults) != 1 or not defaults[0].choice):
            self._fail(f"readings: exactly one offered reading is the default, got {len(defaults)}")
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            self._fail(f"repeated data part in {names!r}")
        for part in self.parts:
            self._check_pinned(part)

    def _check_pinned(self, part: Part) -> None:
        source = part.source
        if isinstance(source, HubSource) and source.revision is not None and not _COMMIT.fullmatch(source.revision):
            self._fail(f"part {part.name!r}: hub revision {source.revision!r} is not a commit")
        if isinstance(source, UrlSource) and source.origin.startswith("github.com/"):
            if not (source.revision and _COMMIT.fullmatch(source.revision)):
                self._fail(f"part {part.name!r}: {source.origin} is not pinned to a commit")
            stray = [f.url for f in source.files if f"/{source.revision}/" not in f.url]
            if stray:
                self._fail(f"part {part.name!r}: {stray[0]} is not at revision {source.revision}")
        if isinstance(source, ImagesSource):
            unknown = [c for c, _ in source.folders if c not in COLLECTIONS]
            if unknown:
                self._fail(f"part {part.name!r}: unknown image collections {unknown!r}")

    def _fail(self, problem: str) -> None:
        raise ConfigError(f"benchmark declaration {self.name or self.title!r}: {problem}")

    def named(self, name: str) -> BenchmarkMetadata:
        """This declaration under its registry name."""
        return replace(self, name=name)

    def metric_source(self, protocol: str, metric: str) -> str | None:
        """What ``metric`` of ``protocol`` reproduces (:attr:`metric_sources`), or None when not declared.

        Args:
            protocol: one of the benchmark's protocols.
            metric: one of its metrics.
        """
        return next((s for p, ms, s in self.metric_sources if p == protocol and metric in ms), None)

    @property
    def subset_groups(self) -> dict[str, tuple[str, ...]]:
        """:attr:`groups` as a dict."""
        return dict(self.groups)

    def part(self, name: str) -> Part:
        """The data part called ``name``."""
        for part in self.parts:
            if part.name == name:
                return part
        raise ConfigError(
            f"benchmark {self.name!r} has no data part {name!r}; parts: {', '.join(p.name for p in self.parts)}"
        )

    @property
    def required(self) -> tuple[Part, ...]:
        """The parts fetched by default (not optional)."""
        return tuple(p for p in self.parts if not p.optional)
