"""A runs row as `runs`, `status` and the run report read it, and the time format every view shares:
a leaf, so that the runs' own SQL (`_runs`) and the views (`views`) both read it without importing
each other."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def iso(value: float | None) -> str | None:
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds") if value else None


@dataclass
class RunView:
    id: int
    kind: str
    started_at: str | None
    duration_s: float | None  # the time its passes took, added up (a folded entry: not its span)
    exit_code: int | None
    counts: dict[str, int]
    sources: list[str] = field(default_factory=list)  # the sources it read (v4; older runs: none known)
    note: str | None = None  # what an operator's run did, e.g. `ledger resolve KEY --requeue`
    passes: int = 1  # idle passes folded into this entry (v7): the same reason, nothing read or sent
    finished_at: str | None = None  # the end of its last pass
    reason: str | None = None  # why it ended short of settling everything (v7; None: it did, or not known)
    span_s: float | None = None  # from the first pass's start to the last one's end

    def took(self) -> str:
        """How long, as a person reads it: `0.4` (seconds) for one pass, `×12 over 5m 30s` for folded ones."""
        if self.duration_s is None:
            return "running"
        if self.passes > 1 and self.span_s is not None:
            return f"×{self.passes} over {span_text(self.span_s)}"
        return f"{self.duration_s:.1f}"


def span_text(seconds: float) -> str:
    """`45s`, `4m 30s`, `3h 5m`, `2d 4h`: the two largest units, enough to read a span by."""
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


RUN_COUNTS = (
    "read",
    "enqueued",
    "unchanged",
    "older",
    "late",
    "rejected",
    "sent",
    "captured",
    "merged",
    "duplicate",
    "failed",
    "blocked",
)
# `merged` (v7): of `captured`, those answered with a person id the ledger already held for another record
RUN_COLS = (
    "id, kind, started_at, duration_s, exit_code, sources, note, coalesce(passes, 1), finished_at, reason, "
    f"{', '.join(RUN_COUNTS)}"
)
# The row of a pass folded into an earlier entry while it was the newest run (`_runs._fold`): kept, so
# that SQLite never hands its id out again (a deleted newest rowid is reused), until the next run starts.
FOLDED = "folded"
LISTED = f"kind IS DISTINCT FROM '{FOLDED}'"  # as SQL: a runs row that is a run entry of its own


def run_view(row: tuple[Any, ...]) -> RunView:
    """A runs row, selected as RUN_COLS."""
    run_id, kind, started, duration, exit_code, sources, note, passes, finished, reason, *counts = row
    return RunView(
        run_id,
        kind,
        iso(started),
        duration,
        exit_code,
        dict(zip(RUN_COUNTS, (v or 0 for v in counts), strict=True)),
        sources=json.loads(sources) if sources else [],
        note=note,
        passes=passes,
        finished_at=iso(finished),
        reason=reason,
        span_s=None if finished is None or started is None else finished - started,
    )
