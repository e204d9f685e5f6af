"""A new SQLite ledger is made with bigger pages (`schema.PAGE_SIZE`: fewer WAL frames, so fewer
writes, per settle); a ledger made with SQLite's default 4096-byte pages keeps them and carries on
where it was, nothing sent again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from connector.ledger import Claim, Ledger, Mapped, Outcome, schema


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


def page_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        size: int = conn.execute("PRAGMA page_size").fetchone()[0]
    return size


def states(ledger: Ledger) -> dict[str, int]:
    return {state: n for state, n in ledger.status().by_state.items() if n}


def test_a_new_ledger_is_made_with_the_bigger_pages(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        ledger.enqueue("crm", "m1", [person(i) for i in range(3)], None)
    assert page_size(path) == schema.PAGE_SIZE > 4096


def test_a_ledger_made_with_4096_byte_pages_keeps_them_and_resends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.sqlite3"
    with monkeypatch.context() as old_release:
        old_release.setattr(schema, "PAGE_SIZE", 4096)
        with Ledger(path) as ledger:
            ledger.enqueue("crm", "m1", [person(i) for i in range(300)], None)
            sent = ledger.claim(Claim(100))
            assert sent is not None
            ledger.settle(
                sent, [Outcome(m.entry_id, "captured", person_id=f"p-{m.entry_id}") for m in sent.members], []
            )
            in_flight = ledger.claim(Claim(100))  # written, never answered: resent as it was
            assert in_flight is not None
    assert page_size(path) == 4096

    with Ledger(path) as ledger:
        assert page_size(path) == 4096
        assert states(ledger) == {"captured": 100, "in_flight": 100, "pending": 100}
        again = ledger.claim(Claim(100))
        assert again is not None and (again.key, again.body) == (in_flight.key, in_flight.body)
        after = ledger.claim(Claim(100, skip={again.id}))
        assert after is not None and not {m.entry_id for m in after.members} & {m.entry_id for m in sent.members}
        ledger.settle(after, [Outcome(m.entry_id, "captured", person_id=f"p-{m.entry_id}") for m in after.members], [])
        assert states(ledger) == {"captured": 200, "in_flight": 100}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
