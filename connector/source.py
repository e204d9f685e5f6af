"""The source plugin interface (design 7): an options model, `read(state)` and three optional hooks.

A source yields `Record`s; each carries the state to resume *after* it. The engine commits a
record's state in the same transaction as the record, so a source never needs its own bookkeeping.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo

from ._frozen import maker


@dataclass(frozen=True, slots=True)
class Record:
    id: str  # stable record id, unique within the source
    data: dict[str, Any]  # the raw fields
    state: Any  # JSON-serialisable; read(state) yields exactly the records after this one
    where: str | None = None  # its position ("signups.csv line 12"), named when the mapping rejects it
    # Where this version stands in the source's order (its cursor value: a number, or text that sorts
    # as the source sorts); None: the order of arrival. A version read again below the newest one the
    # ledger holds for its id is never sent, so a re-read older row cannot overwrite newer data.
    order: float | str | None = None


new_record: Callable[[str, dict[str, Any], Any, str | None, float | str | None], Record] = maker(Record)
"""`Record(id, data, state, where, order)` at a third of the cost (`_frozen`), for a source that makes
one per row (the built-in sources, through `incremental.item_of`)."""


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record the source could not make sense of (an undecodable line, malformed JSON, no id, a
    value its own conversion refused). Yield it instead of raising: the ledger keeps it as
    `rejected` with `reason` and `where`, the records around it go on, and the cursor moves past it."""

    where: str  # its position, for a person to find it: "signups.csv line 12", "row id=42"
    reason: str
    state: Any  # the state after it, as for a Record
    id: str | None = None  # its record id, when the source knows it
    raw: dict[str, Any] | None = None  # what could be read of it, for diagnosis


@dataclass(frozen=True, slots=True)
class Passed:
    """A row an incremental read passed over because its cursor value is below where the pass
    starts. Yield it (`read_incremental` does) instead of dropping it in silence: the engine counts
    the ones whose id the ledger never saw as late rows, with a warning naming the remedy (a
    `lookback`, or the snapshot mode). It is never sent and moves no cursor."""

    id: str
    where: str | None = None


Item = Record | BadRecord | Passed  # what a source's read yields


class SourceError(Exception):
    """The source cannot be read (missing file, refused connection, bad data); the message says why."""


class SourceOptions(BaseModel):
    """Base for option models: unknown options are errors, so a typo never silently does nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _from_config_dir(value: str, info: ValidationInfo) -> str:
    value = os.path.expanduser(value)
    config_dir = (info.context or {}).get("config_dir")
    return value if config_dir is None or os.path.isabs(value) else os.path.join(config_dir, value)


ConfigPath = Annotated[str, AfterValidator(_from_config_dir)]
"""A file or folder option: relative to the config file's folder (like the ledger's path), so a
daemon started from another working directory reads the same files; `~` is the user's home."""


OptionsT = TypeVar("OptionsT", bound=BaseModel)


class Source(ABC, Generic[OptionsT]):
    """Subclass with `Options` (a pydantic model, extra="forbid") and `read`; the docstring's first
    line is what `capture-sync sources list` shows."""

    Options: ClassVar[type[BaseModel]]

    def __init__(self, name: str, options: OptionsT) -> None:
        self.name = name
        self.options = options

    @abstractmethod
    def read(self, state: Any | None) -> Iterator[Item]:
        """Yield the records after `state` (None: from the beginning), in a stable order; a record
        that cannot be read is yielded as a BadRecord, never raised (raise SourceError only when the
        source itself cannot be read: the records yielded before it are kept)."""

    def columns(self) -> Sequence[str] | None:
        """The fields every record has, when the source can know them before reading (a csv header,
        a query's columns, a plugin's declared fields); None when it cannot. The mapping's columns
        are checked against them before anything is sent."""
        return None

    def fingerprint(self) -> str | None:
        """A cheap token that changes whenever what `read(None)` would yield may have changed (the
        files' names, sizes and modification times); None when the source cannot tell. In snapshot
        mode a pass whose token, and mapping, are those of the last complete pass reads nothing."""
        return None

    def check(self) -> None:
        """Test the connection or the files; raise SourceError with a clear message."""

    def _spells_its_states(self) -> bool:
        """Whether every state `read` yields is plain JSON by construction, spelled by the source's own
        code from text and numbers (a built-in file source's positions): the plugin boundary then skips
        walking each one for types JSON cannot hold, a third of what it costs per record. False, the
        default, for any source whose states carry values it did not make (a cursor read from data, a
        plugin's own state): those are walked. Private: for the built-in sources only, not part of the
        plugin surface (a plugin that overrides it gives up the boundary's check of its states)."""
        return False

    def close(self) -> None:
        """Release connections; may be called more than once."""
