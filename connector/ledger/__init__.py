"""The ledger (SQLite or PostgreSQL): records, cursors, write-ahead batches, attempts and runs (design 3)."""

from ._types import BatchWork, Claim, EnqueueCounts, EntryState, Mapped, Member, Outcome
from ._lease import Lease, LedgerFenced
from ._runs import RunEntry
from ._states import SourceState, StateChange
from .schema import SCHEMA_VERSION, LedgerError, LedgerLocked, LedgerUnreachable
from .store import Ledger, pg_name
from .views import (
    STATES, Attention, AttemptView, BatchDetail, EntryDetail, EntryView, RunView, Stalls, StatusReport, answer_reason,
)

__all__ = [
    "SCHEMA_VERSION", "LedgerError", "BatchWork", "Claim", "EnqueueCounts", "EntryState", "Ledger",
    "LedgerLocked", "LedgerUnreachable", "pg_name", "Mapped", "Member", "Outcome", "STATES", "Attention", "AttemptView",
    "BatchDetail", "EntryDetail", "EntryView", "RunView", "StatusReport", "Stalls", "answer_reason", "RunEntry",
    "SourceState", "StateChange", "Lease", "LedgerFenced",
]
