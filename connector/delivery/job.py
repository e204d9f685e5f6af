"""What one sync pass works on: a named source and the mapping of its records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..mapping import Mapping
    from ..source import Source


@dataclass(frozen=True)
class SourceJob:
    name: str
    source: Source
    mapping: Mapping
    from_start: bool = False  # `sync --full-refresh`: this pass reads from the start, its cursor ignored
    # `mode = "snapshot"`: every pass reads everything (the source keeps no cursor between passes) and
    # the ledger sends only what is new or changed: for sources with no change tracking.
    snapshot: bool = False
