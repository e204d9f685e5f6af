"""`ledger list --state S --source X` and `status`'s counts read the ledger by the cheaper of two routes
(a walk in id order that keeps the source's entries, or the source's index; one walk of the live
entries with a count per source, or a grouping by source and state). On both engines, whichever route
is taken, they give what the entries themselves give: every entry listed, filtered and counted by hand."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from connector.ledger import STATES, Claim, EntryView, Ledger, Mapped, Outcome, _state_counts, views


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


def rejected(i: int) -> Mapped:
    return Mapped(str(i), raw={"id": str(i)}, reasons=("no email",))


def settle_next(ledger: Ledger, size: int, outcome: str) -> None:
    work = ledger.claim(Claim(size))
    assert work is not None
    ledger.settle(work, [Outcome(m.entry_id, outcome) for m in work.members], [])  # type: ignore[arg-type]


def a_mixed_ledger(ledger: Ledger) -> None:
    """A big source and a rare one, their entries interleaved, in every state a sync leaves."""
    ledger.enqueue("big", "m", [person(i) for i in range(1, 31)] + [rejected(99)], None)
    ledger.enqueue("rare", "m", [person(i) for i in range(1, 4)] + [rejected(98)], None)
    ledger.enqueue("big", "m", [person(i) for i in range(31, 61)], None)
    for outcome in ("captured", "duplicate", "captured", "failed", "unknown", "captured"):
        settle_next(ledger, 5, outcome)
    ledger.block(ledger.claim(Claim(2)), "HTTP 409", [])  # type: ignore[arg-type]
    ledger.stall(ledger.claim(Claim(2)), "HTTP 500", [])  # type: ignore[arg-type]
    assert ledger.claim(Claim(3)) is not None  # left open: in flight


def every_entry(ledger: Ledger) -> list[EntryView]:
    return ledger.list_entries(None, limit=10**6)


def test_list_by_state_and_source_is_the_entries_filtered_by_hand(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        a_mixed_ledger(ledger)
        entries = every_entry(ledger)
        assert {e.source for e in entries} == {"big", "rare"} and len({e.state for e in entries}) >= 8
        routes = set()
        for state in STATES:
            for source in ("big", "rare", "none such"):
                with ledger._reading() as db:
                    routes.add(views._by_source_index(db, state, source, 3))
                for limit in (1, 3, 100):
                    expected = [e for e in entries if e.state == state and e.source == source][:limit]
                    listed = ledger.list_entries(state, source=source, limit=limit)
                    assert [e.key for e in listed] == [e.key for e in expected], (state, source, limit)
                    assert listed == expected
        # Both routes were taken: the walk in id order for the big source, the index for the rare one.
        assert routes == {True, False}


def test_counts_are_the_entries_counted_by_hand(ledger_target: str | Path) -> None:
    """`status`'s counts, and the one `ledger list` gives beside a page of entries."""
    with Ledger(ledger_target) as ledger:
        a_mixed_ledger(ledger)
        entries = every_entry(ledger)
        report = ledger.status()
        assert {s: n for s, n in report.by_state.items() if n} == dict(Counter(e.state for e in entries))
        assert {(src, s, n) for src, c in report.by_source.items() for s, n in c.items()} == {
            (src, s, n) for (src, s), n in Counter((e.source, e.state) for e in entries).items()
        }
        for state in STATES:
            for source in (None, "big", "rare", "none such"):
                by_hand = sum(1 for e in entries if e.state == state and source in (None, e.source))
                assert ledger.count_entries(state, source=source) == by_hand, (state, source)


@pytest.mark.parametrize("sources", [1, _state_counts._SOURCES_IN_ONE_WALK, _state_counts._SOURCES_IN_ONE_WALK + 1])
def test_live_counts_by_source_are_right_in_one_walk_and_grouped(tmp_path: Path, sources: int) -> None:
    """Up to a few sources the live entries are counted in one walk, a sum per source; beyond, grouped."""
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        for n in range(sources):
            ledger.enqueue(f"s{n:02}", "m", [person(i) for i in range(n + 2)], None)
        settle_next(ledger, 3, "unknown")
        assert ledger.claim(Claim(2)) is not None
        entries = every_entry(ledger)
        by_source = ledger.status().by_source
    assert {(src, s, n) for src, c in by_source.items() for s, n in c.items()} == {
        (src, s, n) for (src, s), n in Counter((e.source, e.state) for e in entries).items()
    }
