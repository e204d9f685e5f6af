"""A batch's settle is one statement over its members' rows on both engines (`_db.rows_of`: a JSON
array on SQLite, typed arrays on PostgreSQL): whatever an answer's text holds comes back as it was
written, and each member gets its own outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connector.ledger import Claim, Ledger, Mapped, Outcome

AWKWARD = ('say "hi" \\ it\'s 100% ?', "ünïcødé ✓ 名前", "", "line\nbreak\ttab", "[1, 2]", "null", "a\x00b")


@pytest.fixture
def ledger(ledger_target: str | Path):
    with Ledger(ledger_target) as led:
        yield led


def test_each_member_gets_its_own_outcome_with_any_text(ledger: Ledger) -> None:
    people = [Mapped(str(i), payload=json.dumps({"name": f"P{i}", "email": f"p{i}@example.com"})) for i in range(8)]
    ledger.enqueue("crm", "m", people, None)
    batch = ledger.claim(Claim(8))
    assert batch is not None and len(batch.members) == 8
    outcomes = [
        Outcome(m.entry_id, "failed", error=AWKWARD[i]) if i < len(AWKWARD) else Outcome(m.entry_id, "captured", "p/1")
        for i, m in enumerate(batch.members)
    ]
    ledger.settle(batch, [*outcomes, outcomes[-1]], [])  # an outcome given twice counts once
    shown = [ledger.show(m.key).entry for m in batch.members]  # type: ignore[union-attr]
    kept = [(o.state, o.error and o.error.replace("\x00", "\ufffd"), o.person_id) for o in outcomes]
    assert [(e.state, e.last_error, e.person_id) for e in shown] == kept  # a NUL shown as U+FFFD, the rest whole
    assert ledger.status().by_state["failed"] == len(AWKWARD) and ledger.status().by_state["captured"] == 8 - len(
        AWKWARD
    )
    assert [e.key for e in ledger.list_entries("failed")] == [m.key for m in batch.members[: len(AWKWARD)]]
