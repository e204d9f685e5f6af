"""What the daemon knows of its own health, kept as its passes end: the single place its readiness,
alerts, metrics and status page read from, so that they can never disagree with each other."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import ClientInfo
    from .delivery import RunReport


@dataclass(frozen=True)
class SourcePass:
    """The last pass of one source (or of the retry sweep), as its report told it."""

    at: float
    duration_s: float
    exit_code: int
    read: int
    rejected: int
    captured: int
    duplicate: int
    failed: int
    halted_by: str | None

    @property
    def reject_share(self) -> float:
        return self.rejected / self.read if self.read else 0.0


@dataclass
class DaemonHealth:
    """Updated on the daemon's event loop only; readers on that loop see a consistent state."""

    started_at: float = field(default_factory=time.time)
    client: ClientInfo | None = None
    api_answered_at: float | None = None  # the last GET /info that succeeded
    auth_failed: str | None = None        # why the API refuses the credentials in use; None when it accepts them
    outage_since: float | None = None     # delivery halted by an unavailable API since then; None when it delivers
    passes: dict[str, SourcePass] = field(default_factory=dict)   # source (or "retry-sweep") -> its last pass
    last_success: dict[str, float] = field(default_factory=dict)  # source -> end of its last pass that succeeded
    # source -> what its passes read and made of it since start (read, enqueued, unchanged, rejected):
    # the metrics' counters, kept whole here because `passes` holds only the last pass
    read_totals: dict[str, Counter[str]] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return not self.unready_reasons

    @property
    def unready_reasons(self) -> list[str]:
        """Why the API side is not ready, for /readyz: GET /info has not answered under the credentials
        in use, they are refused since, or an outage halted delivery since (a failed GET /info halts
        the pass that asked)."""
        reasons = []
        if self.api_answered_at is None:
            reasons.append("GET /info has not succeeded yet")
        if self.auth_failed is not None:
            reasons.append(f"authentication failing: {self.auth_failed}")
        if self.outage_since is not None:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.outage_since))
            reasons.append(f"delivery halted by an outage since {since}")
        return reasons

    def describe(self, now: float) -> dict[str, Any]:
        """What the daemon knows of its health, JSON-able, for the control channel's `state`.
        (A minimal form; the stall and refusal details come with the health work.)"""
        return {
            "ready": self.ready, "reasons": self.unready_reasons, "uptime_s": round(now - self.started_at, 1),
            "auth_refused": None if self.auth_failed is None else {"reason": self.auth_failed},
            "outage_since": self.outage_since,
        }

    def answered(self, info: ClientInfo) -> None:
        self.client, self.api_answered_at = info, time.time()

    def passed(self, name: str, report: RunReport) -> None:
        now = time.time()
        self.passes[name] = SourcePass(
            now, report.duration_s, int(report.exit_code), report.read, report.rejected, report.captured,
            report.duplicate, report.failed, report.halted_by,
        )
        if _succeeded(report):
            self.last_success[name] = now
        totals = self.read_totals.setdefault(name, Counter())
        totals.update(
            read=report.read, enqueued=report.enqueued, unchanged=report.unchanged, rejected=report.rejected, late=report.late,
        )
        if report.halted_by and not report.auth_failed:
            self.outage_since = self.outage_since or now
        elif not report.stopped:
            self.outage_since = None


def _succeeded(report: RunReport) -> bool:
    """The pass did its own work: read what it was given and delivered without a halt. Its exit
    code is not the test: entries blocked or unsettled from any earlier pass make it 5 or 4, and
    those have their own alert and status lines; they must not make every source look stale."""
    return not (
        report.halted_by or report.unavailable or report.source_failures or report.stopped
        or report.ended_by is not None
    )
