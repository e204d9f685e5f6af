"""What a sync or replay did, and the exit code that tells it (design 5)."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..exit_codes import ExitCode, exit_code_for
from ..ledger.views import RUN_COUNTS

COUNTS = RUN_COUNTS  # a run's counts, as the ledger's runs table keeps them


@dataclass
class RunReport:
    kind: str = "sync"
    read: int = 0
    enqueued: int = 0
    unchanged: int = 0
    older: int = 0                # read below the newest version the ledger holds: never sent
    late: int = 0                 # passed over below the cursor, never seen by the ledger: not read (a warning says why)
    rejected: int = 0
    sent: int = 0
    captured: int = 0
    merged: int = 0               # of `captured`: answered with a person id the ledger holds for another record
    duplicate: int = 0
    failed: int = 0
    blocked: int = 0
    unknown: int = 0
    unsettled: int = 0            # pending, in_flight or unknown left in the ledger at the end
    blocked_total: int = 0        # blocked entries in the ledger at the end, from any run
    auth_failed: bool = False
    stopped: bool = False         # a stop signal ended the run early
    halted_by: str | None = None  # the error that ended delivery early (outage, auth)
    unavailable: dict[str, str] = field(default_factory=dict)      # source -> why it was not read (preflight)
    source_failures: dict[str, str] = field(default_factory=dict)  # source -> why its read ended early
    sources_read: list[str] = field(default_factory=list)  # the sources this run began to read
    run_id: int | None = None  # its row in the ledger's runs (`capture-sync runs show RUN`); a dry run has none
    ended_by: ExitCode | None = None  # an exception ended the run: the code the command exits with
    ended_by_error: str | None = None  # and that exception's type (its text may hold what a ledger must not)
    rejection_reasons: Counter[str] = field(default_factory=Counter)
    duration_s: float = 0.0
    dry_run_preview: list[dict[str, Any]] | None = None

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTS}

    def add_outcome(self, state: str, n: int = 1) -> None:
        setattr(self, state, getattr(self, state) + n)

    def end_with(self, exc: BaseException) -> None:
        """Note what ended the run early, so that its record holds the code the process returns.
        A cancelled task (the daemon shutting down) is a stop, not an error."""
        if isinstance(exc, asyncio.CancelledError):
            self.stopped = True
        else:
            self.ended_by = exit_code_for(exc)
            self.ended_by_error = type(exc).__name__

    @property
    def reason(self) -> str | None:
        """Why the run ended short of settling everything, in one line (the run's `reason` in the
        ledger; idle passes fold only when theirs is the same). None when it settled everything."""
        if self.ended_by is not None:
            return f"ended by {self.ended_by_error} (exit {int(self.ended_by)})"
        if self.halted_by is not None:
            return self.halted_by
        problems = {**self.unavailable, **self.source_failures}
        if problems:
            return "; ".join(f"{name}: {why}" for name, why in sorted(problems.items()))
        if self.stopped:
            return "stopped"
        if self.kind != "dry_run" and self.blocked_total:
            return "entries are blocked"
        if self.kind != "dry_run" and self.unsettled:
            return "entries remain unsettled"
        return None

    @property
    def exit_code(self) -> ExitCode:
        """Highest first: an error that ended the run; 3 authentication failed; 2 a source not
        readable; 6 a source failed mid-read; 5 entries blocked; 4 work unsettled or stopped; 0.
        Rejected records do not count: they are settled, set aside for a person to read."""
        if self.ended_by is not None:
            return self.ended_by
        if self.auth_failed:
            return ExitCode.AUTH
        if self.unavailable:
            return ExitCode.USAGE
        if self.source_failures:
            return ExitCode.SOURCE_FAILED
        if self.kind == "dry_run":  # sends nothing, so only what reading found decides
            return ExitCode.OK
        if self.blocked_total:
            return ExitCode.BLOCKED
        if self.unsettled or self.stopped:
            return ExitCode.UNSETTLED
        return ExitCode.OK
