"""The source plugin interface (design 7): an options model, `read(state)` and two optional hooks.

A source yields `Record`s; each carries the state to resume *after* it. The engine commits a
record's state in the same transaction as the record, so a source never needs its own bookkeeping.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo


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
    def read(self, state: Any | None) -> Iterator[Record]:
        """Yield the records after `state` (None: from the beginning), in a stable order."""

    def check(self) -> None:  # noqa: B027 - optional hook
        """Test the connection or the files; raise SourceError with a clear message."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; may be called more than once."""
