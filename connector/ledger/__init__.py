"""The ledger (SQLite or PostgreSQL): records, cursors, write-ahead batches, attempts and runs (design 3).

The read-only views (`views`: status, lists, details) load when one of their names is first asked
for (PEP 562): a sync writes and counts, and never needs them."""

from typing import TYPE_CHECKING, Any

from ._lease import Lease, LedgerFenced
from ._run_view import RUN_COUNTS, RunView
from ._runs import RejectedEntry, RunEntry
from ._states import SourceState, StateChange
from ._types import BatchWork, Claim, EnqueueCounts, EntryState, Mapped, Member, Outcome
from .schema import SCHEMA_VERSION, LedgerError, LedgerLocked, LedgerUnreachable
from .store import Ledger, Settlement, pg_name

if TYPE_CHECKING:
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

_VIEWS = frozenset(
    {
        "STATES",
        "AttemptView",
        "Attention",
        "BatchDetail",
        "EntryDetail",
        "EntryView",
        "Stalls",
        "StatusReport",
        "answer_reason",
    }
)


if not TYPE_CHECKING:  # hidden from mypy, which would otherwise take any misspelt name for Any

    def __getattr__(name: str) -> Any:
        if name in _VIEWS:
            from . import views

            return getattr(views, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
