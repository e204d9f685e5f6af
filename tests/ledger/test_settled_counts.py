"""Schema v11 counts the settled states in `settled_counts`, a row per source and state that each
write adds its batch's figures to, instead of an index every settle wrote into. On both engines:
the counts `status` gives stay the entries' own through every way an entry reaches or leaves a
settled state (enqueue's rejected, older and superseded versions, settle, the batch endings, the
operator's repairs, a copy). (Migrating a v10 ledger: test_v9_migration.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from connector.ledger import BatchWork, Claim, Ledger, Mapped, Outcome
from connector.ledger._types import SETTLED


def person(i: int, company: str = "A", order: int | None = None) -> Mapped:
    payload = {"name": f"Person {i}", "email": f"p{i}@example.com", "company": company}
    return Mapped(str(i), payload=json.dumps(payload), order=order)


def rejected(i: int) -> Mapped:
    return Mapped(str(i), raw={"id": str(i)}, reasons=("no email",))


def claimed(ledger: Ledger, size: int) -> BatchWork:
    work = ledger.claim(Claim(size))
    assert work is not None and len(work.members) == size
    return work


def by_definition(ledger: Ledger) -> dict[tuple[str, str], int]:
    """The settled states' counts as the entries themselves give them."""
    marks = ",".join(f"'{s}'" for s in SETTLED)
    rows = ledger._read(f"SELECT source, state, count(*) FROM entries WHERE state IN ({marks}) GROUP BY source, state")
    return {(source, state): n for source, state, n in rows}


def shown(ledger: Ledger) -> dict[tuple[str, str], int]:
    """The settled states' counts `status` shows."""
    return {
        (source, state): n
        for source, counts in ledger.status().by_source.items()
        for state, n in counts.items()
        if state in SETTLED
    }


def test_the_counts_stay_the_entries_own_through_every_write(ledger_target: str | Path, tmp_path: Path) -> None:
    """And `runs show` lists the entries each run changed last (found through the batches a run settled
    since v11), as the entries' own stamps say."""
    with Ledger(ledger_target) as ledger:
        checks = 0
        runs = [ledger.start_run("sync")]

        def check() -> None:
            nonlocal checks
            checks += 1
            assert shown(ledger) == by_definition(ledger), f"after step {checks}"
            for run in runs:
                stamped = ledger._read("SELECT key, state FROM entries WHERE run_id = ? ORDER BY id", (run,))
                listed = [(e.key, e.state) for e in ledger.run_entries(run)]
                assert [key for key, _ in stamped] == [key for key, _ in listed], f"run {run} after step {checks}"

        ledger.enqueue("crm", "m", [person(i, order=10) for i in range(1, 9)] + [rejected(9)], None)
        ledger.enqueue("shop", "m", [person(i) for i in range(1, 4)], None)
        ledger.enqueue("crm", "m", [person(1, "B", order=11), person(2, "old", order=5)], None)  # superseded, older
        check()
        assert shown(ledger)[("crm", "superseded")] == 2 and shown(ledger)[("crm", "rejected")] == 1
        first = claimed(ledger, 4)
        outcomes = ["captured", "duplicate", "failed", "unknown"]
        ledger.settle(first, [Outcome(m.entry_id, s) for m, s in zip(first.members, outcomes, strict=True)], [])  # type: ignore[arg-type]
        check()
        ledger.fail(claimed(ledger, 1), "HTTP 422", [])
        ledger.block(blocked := claimed(ledger, 1), "HTTP 409", [])
        ledger.stall(claimed(ledger, 1), "HTTP 500", [])
        check()
        runs.append(ledger.start_run("replay"))
        assert ledger.requeue_failed(before=9e9) == 2
        check()
        ledger.resolve(blocked.key, "dismiss")
        check()
        failed_again = ledger.claim(Claim(10))
        assert failed_again is not None
        ledger.settle(failed_again, [Outcome(m.entry_id, "failed") for m in failed_again.members], [])
        check()
        key = ledger.list_entries("failed", limit=1)[0].key
        ledger.resolve(key, "requeue")
        check()
        assert shown(ledger)[("crm", "captured")] == 1 and ("crm", "dismissed") in shown(ledger)
        with Ledger(tmp_path / "copy.sqlite3") as copy:
            ledger.copy_to(copy)
            assert shown(copy) == by_definition(copy) == by_definition(ledger)
