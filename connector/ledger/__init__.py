"""The ledger (SQLite or PostgreSQL): records, cursors, write-ahead batches, attempts and runs (design 3)."""

from ._lease import Lease, LedgerFenced
from ._run_view import RUN_COUNTS, RunView
from ._runs import RejectedEntry, RunEntry
from ._states import SourceState, StateChange
from ._types import BatchWork, Claim, EnqueueCounts, EntryState, Mapped, Member, Outcome
from .schema import SCHEMA_VERSION, LedgerError, LedgerLocked, LedgerUnreachable
from .store import Ledger, Settlement, pg_name
from .views import (
    STATES,
    AttemptView,
    Attention,
    BatchDetail,
    EntryDetail,
    EntryView,
    Stalls,
    StatusReport,
    answer_reason,
)

__all__ = [
    "RUN_COUNTS",
    "SCHEMA_VERSION",
    "STATES",
    "AttemptView",
    "Attention",
    "BatchDetail",
    "BatchWork",
    "Claim",
    "EnqueueCounts",
    "EntryDetail",
    "EntryState",
    "EntryView",
    "Lease",
    "Ledger",
    "LedgerError",
    "LedgerFenced",
    "LedgerLocked",
    "LedgerUnreachable",
    "Mapped",
    "Member",
    "Outcome",
    "RejectedEntry",
    "RunEntry",
    "RunView",
    "Settlement",
    "SourceState",
    "Stalls",
    "StateChange",
    "StatusReport",
    "answer_reason",
    "pg_name",
]
