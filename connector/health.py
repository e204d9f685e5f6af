"""What the daemon knows of its own health, kept as its passes end: the single place its readiness,
alerts, metrics and status page read from, so that they can never disagree with each other."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    last_success: dict[str, float] = field(default_factory=dict)  # source -> end of its last pass that exited 0
    # source -> what its passes read and made of it since start (read, enqueued, unchanged, rejected):
    # the metrics' counters, kept whole here because `passes` holds only the last pass
    read_totals: dict[str, Counter[str]] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """The API answered GET /info under the credentials in use, and they are not refused since."""
        return self.api_answered_at is not None and self.auth_failed is None

    def answered(self, info: ClientInfo) -> None:
        self.client, self.api_answered_at = info, time.time()

    def passed(self, name: str, report: RunReport) -> None:
        now = time.time()
        self.passes[name] = SourcePass(
            now, report.duration_s, int(report.exit_code), report.read, report.rejected, report.captured,
            report.duplicate, report.failed, report.halted_by,
        )
        if int(report.exit_code) == 0:
            self.last_success[name] = now
        totals = self.read_totals.setdefault(name, Counter())
        totals.update(read=report.read, enqueued=report.enqueued, unchanged=report.unchanged, rejected=report.rejected)
        if report.halted_by and not report.auth_failed:
            self.outage_since = self.outage_since or now
        elif not report.stopped:
            self.outage_since = None
