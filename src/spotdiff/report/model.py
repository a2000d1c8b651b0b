"""The data of a report: sections per benchmark, their tables, figures and galleries, and the runs.

:func:`spotdiff.report.build.build_report` makes a :class:`Report`; the renderers
(:mod:`.html`, :mod:`.markdown`) and :func:`~spotdiff.report.build.write_report` read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spotdiff.naming import slugify
from spotdiff.report.collect import ALPHA, N_PERM, ResultTable, RunData
from spotdiff.report.gallery import Gallery
from spotdiff.report.plots import Plot
from spotdiff.report.runkey import KeyEntry
from spotdiff.report.summary import Summary
from spotdiff.version import __version__


@dataclass
class TableSection:
    table: ResultTable
    plots: list[Plot] = field(default_factory=list)
    gallery: Gallery | None = None
    gallery_note: str = ""


@dataclass
class BenchmarkSection:
    benchmark: str
    tables: list[TableSection] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return slugify(self.benchmark)


@dataclass
class Report:
    title: str
    created: str
    store_path: str
    sections: list[BenchmarkSection]
    runs: list[RunData]
    alpha: float = ALPHA
    n_perm: int = N_PERM
    version: str = __version__
    timings: dict[str, float] = field(default_factory=dict)  # wall-clock seconds per stage
    cpu_timings: dict[str, float] = field(default_factory=dict)  # CPU seconds of this process per stage
    summary: Summary | None = None  # the block the report opens with
    key: list[KeyEntry] = field(default_factory=list)  # label -> model spec -> run ids

    @property
    def tables(self) -> list[ResultTable]:
        return [ts.table for s in self.sections for ts in s.tables]
