"""The SQLite ledger: records, cursors, write-ahead batches, attempts and runs (design 3)."""

from .schema import SCHEMA_VERSION, LedgerError
from .store import (
    UNSETTLED,
    BatchWork,
    Claim,
    EnqueueCounts,
    Ledger,
    LedgerLocked,
    Mapped,
    Member,
    Outcome,
    build_body,
)
from .views import STATES, AttemptView, BatchDetail, EntryDetail, EntryView, RunView, StatusReport

__all__ = [
    "SCHEMA_VERSION", "LedgerError", "UNSETTLED", "BatchWork", "Claim", "EnqueueCounts", "Ledger",
    "LedgerLocked", "Mapped", "Member", "Outcome", "build_body", "STATES", "AttemptView",
    "BatchDetail", "EntryDetail", "EntryView", "RunView", "StatusReport",
]
