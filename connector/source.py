"""The source plugin interface (design 7): an options model, `read(state)` and two optional hooks.

A source yields `Record`s; each carries the state to resume *after* it. The engine commits a
record's state in the same transaction as the record, so a source never needs its own bookkeeping.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict


@dataclass(frozen=True, slots=True)
class Record:
    id: str  # stable record id, unique within the source
    data: dict[str, Any]  # the raw fields
    state: Any  # JSON-serialisable; read(state) yields exactly the records after this one


class SourceError(Exception):
    """The source cannot be read (missing file, refused connection, bad data); the message says why."""


class SourceOptions(BaseModel):
    """Base for option models: unknown options are errors, so a typo never silently does nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)


OptionsT = TypeVar("OptionsT", bound=BaseModel)


class Source(ABC, Generic[OptionsT]):
    """Subclass with `Options` (a pydantic model, extra="forbid") and `read`; the docstring's first
    line is what `capture-sync sources list` shows."""

    Options: ClassVar[type[BaseModel]]

    def __init__(self, name: str, options: OptionsT) -> None:
        self.name = name
        self.options = options

    @abstractmethod
    def read(self, state: Any | None) -> Iterator[Record]:
        """Yield the records after `state` (None: from the beginning), in a stable order."""

    def check(self) -> None:  # noqa: B027 - optional hook
        """Test the connection or the files; raise SourceError with a clear message."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; may be called more than once."""
