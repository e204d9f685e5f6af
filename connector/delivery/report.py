"""What a sync or replay did, and the exit code that tells it (design 5)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

COUNTS = ("read", "enqueued", "unchanged", "rejected", "sent", "captured", "duplicate", "failed", "blocked")


@dataclass
class RunReport:
    kind: str = "sync"
    read: int = 0
    enqueued: int = 0
    unchanged: int = 0
    rejected: int = 0
    sent: int = 0
    captured: int = 0
    duplicate: int = 0
    failed: int = 0
    blocked: int = 0
    unknown: int = 0
    unsettled: int = 0            # pending, in_flight or unknown left in the ledger at the end
    blocked_total: int = 0        # blocked entries in the ledger at the end, from any run
    auth_failed: bool = False
    stopped: bool = False         # a stop signal ended the run early
    halted_by: str | None = None  # the error that ended delivery early (outage, auth)
    rejection_reasons: Counter[str] = field(default_factory=Counter)
    duration_s: float = 0.0
    dry_run_preview: list[dict[str, Any]] | None = None

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTS}

    def add_outcome(self, state: str, n: int = 1) -> None:
        setattr(self, state, getattr(self, state) + n)

    @property
    def exit_code(self) -> int:
        """3 authentication failed; 5 entries blocked; 4 work unsettled; 0 all settled."""
        if self.auth_failed:
            return 3
        if self.blocked_total:
            return 5
        if self.unsettled:
            return 4
        return 0
