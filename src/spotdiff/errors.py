"""Errors spotdiff raises for bad input; each names what went wrong and where."""

from __future__ import annotations


class SpotdiffError(Exception):
    """Base class of every error spotdiff raises on purpose."""


class DataError(SpotdiffError, ValueError):
    """A data file or record is malformed.

    The message names the file, the record and the field when they are known, so a user can go
    straight to the offending line.
    """

    def __init__(
        self,
        message: str,
        *,
        file: object | None = None,
        record: object | None = None,
        field: str | None = None,
    ) -> None:
        self.file = None if file is None else str(file)
        self.record = None if record is None else str(record)
        self.field = field
        where = []
        if self.file is not None:
            where.append(f"file {self.file}")
        if self.record is not None:
            where.append(f"record {self.record}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class ConfigError(SpotdiffError, ValueError):
    """A command-line option, model spec or protocol choice cannot be served."""


class EndpointError(SpotdiffError):
    """A served model's endpoint refused or failed a request; the message names the endpoint and
    what to do (what it answered before is cached)."""


class ModelOutputError(SpotdiffError):
    """A model's scores cannot be used: NaN where a score is expected (a diverged model, float16
    overflow). The message names the model, how many cases and which, and what to do."""


class DistributedError(SpotdiffError):
    """Another rank of a sharded run failed (its message is included)."""


class SourceError(SpotdiffError):
    """A benchmark source cannot be fetched: offline, gated, unreachable, corrupt, or a manual step.

    The message names the source (hub repository and revision, or URL) and the manual route.
    """
