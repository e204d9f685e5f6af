"""Every entry records the run that last changed its state; outside a run nothing is stamped; a ledger
from before run reports (v3) migrates and keeps working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from connector.ledger import SCHEMA_VERSION, Claim, Ledger, Mapped, Outcome
from connector.ledger.schema import MIGRATIONS


def person(n: int) -> Mapped:
    return Mapped(str(n), payload=f'{{"name":"P{n}","email":"p{n}@example.org"}}')


def test_each_ledger_verb_stamps_the_entries_it_changes_with_the_run_in_hand(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(0)], None)  # outside a run: nothing is stamped
        sync = ledger.start_run("sync")
        ledger.enqueue("crm", "m", [person(1), person(2), person(3), Mapped("4", raw={}, reasons=("bad",))], {"n": 4})
        assert [(e.record_id, e.state) for e in ledger.run_entries(sync)] == [
            ("1", "pending"),
            ("2", "pending"),
            ("3", "pending"),
            ("4", "rejected"),
        ]
        assert ledger.run_entries(sync, "rejected")[0].reason == "bad"
        ledger.finish_run(sync, {}, 0.1, 4, ["crm"])

        replay = ledger.start_run("replay")
        batch = ledger.claim(Claim(2))  # entries 0 and 1 go in flight: now the replay's
        assert batch is not None
        ledger.settle(batch, [Outcome(m.entry_id, "captured") for m in batch.members], [])
        second = ledger.claim(Claim(10))
        assert second is not None
        ledger.block(second, "409", [])
        ledger.finish_run(replay, {}, 0.1, 5)

        assert {e.record_id: e.state for e in ledger.run_entries(replay)} == {
            "0": "captured",
            "1": "captured",
            "2": "blocked",
            "3": "blocked",
        }
        assert [e.record_id for e in ledger.run_entries(sync)] == ["4"]  # the rest changed again later

        resolve = ledger.start_run("resolve", note=f"ledger resolve {second.key} --requeue")
        ledger.resolve(second.key, "requeue")
        ledger.finish_run(resolve, {}, 0.0, 0)
        assert [(e.record_id, e.state) for e in ledger.run_entries(resolve)] == [("2", "pending"), ("3", "pending")]
        assert ledger.find_run("last") == ledger.runs(1)[0] and ledger.runs(1)[0].note.startswith("ledger resolve")
        assert ledger.find_run("99") is None and ledger.find_run("nope") is None
        assert [r.sources for r in ledger.runs()] == [[], [], ["crm"]]


def test_a_version_3_ledger_migrates_and_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:3]:
        migration(sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 3")
    conn.execute(
        "INSERT INTO runs (kind, started_at, finished_at, duration_s, read, exit_code) VALUES ('sync', 1.0, 2.0, 1.0, 1, 0)"
    )
    conn.execute("INSERT INTO source_state (source, state, updated_at) VALUES ('crm', '{\"n\": 1}', 1.0)")
    conn.execute(  # an entry the v3 ledger left pending
        "INSERT INTO entries (key, source, record_id, state, payload, content_hash, mapping_version, revision, created_at, "
        "updated_at) VALUES ('p-old', 'crm', '0', 'pending', '{\"name\":\"P0\",\"email\":\"p0@example.org\"}', 'h', 'm', 0, 1.0, 1.0)"
    )
    conn.execute("INSERT INTO records (source, record_id, entry_id) VALUES ('crm', '0', 1)")
    conn.close()

    with Ledger(path) as ledger:
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 4
        [old_run] = ledger.runs()
        assert (old_run.kind, old_run.sources, old_run.note, old_run.counts["read"]) == ("sync", [], None, 1)
        assert ledger.run_entries(old_run.id) == []
        assert ledger.source_state("crm") == {"n": 1}
        assert ledger.change_source_state("crm", None, "reset") == {"n": 1}
        run = ledger.start_run("sync")
        ledger.enqueue("crm", "m", [person(1)], {"n": 2})
        ledger.finish_run(run, {"read": 1}, 0.1, 0, ["crm"])
        assert [e.record_id for e in ledger.run_entries(run)] == ["1"]
        replay = ledger.start_run("replay")
        batch = ledger.claim(Claim(10))
        assert batch is not None and batch.members[0].key == "p-old"
        ledger.settle(batch, [Outcome(m.entry_id, "captured") for m in batch.members], [])
        ledger.finish_run(replay, {}, 0.1, 0)
        assert {(e.record_id, e.state) for e in ledger.run_entries(replay)} == {("0", "captured"), ("1", "captured")}
        assert [(c.action, c.old) for c in ledger.state_history("crm")] == [("reset", {"n": 1})]
        assert ledger.status().runs[0].id == replay
