"""The run history as an operator reads it (issue 26, "Truthful history"), over real processes.

- A daemon against a stopped API: its empty passes are one entry of `runs list` and `status` with a
  count and a span, not a row each; when the API is back, a pass that sends starts a new entry.
- Two records with one identity: the CRM (the sandbox) captures them as one person, and the second
  is a merge in the run's counts, `status` and /metrics.
- A ledger of schema v6 migrates when opened: its history is kept and nothing is sent again.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from connector.ledger import SCHEMA_VERSION
from connector.sandbox import SandboxStore

from ...ledger.test_v9_migration import undo_v9, undo_v11, undo_v12, undo_v13, undo_v14, undo_v15


def _runs(kit, config: Path) -> list[dict]:
    listed = kit.run("runs", "list", "-c", str(config), "--json")
    assert listed.code == 0, listed.stderr
    return [r for r in json.loads(listed.stdout)["runs"] if r["finished_at"] is not None]


def test_a_daemons_empty_passes_through_an_outage_are_one_run_with_a_count(
    kit, sandbox_process, start_daemon, tmp_path: Path
) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("fold-test", rate_limit=10_000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, 4)])
    config = kit.config(tmp_path, box.base_url, contacts, schedule="every 1s")
    box.stop()

    daemon = start_daemon(config)
    folded = daemon.poll(
        lambda: next((r for r in _runs(kit, config) if r["passes"] >= 4), None), "four empty passes folded"
    )
    runs = _runs(kit, config)
    first = runs[-1]
    assert (first["counts"]["read"], first["exit_code"], first["passes"]) == (3, 4, 1)  # it read: a run of its own
    assert [r["id"] for r in runs] == [folded["id"], first["id"]]  # every later pass is in one entry
    assert (folded["kind"], folded["exit_code"], folded["counts"]["read"], folded["counts"]["sent"]) == (
        "sync",
        4,
        0,
        0,
    )
    assert "connection failed" in folded["reason"] and folded["span_s"] >= 2

    status = kit.run("status", "-c", str(config))
    assert re.search(r"×\d+ over \d+s", status.stdout), status.stdout
    assert re.search(r"×\d+ over \d+s", daemon.get("/").text)  # the status page's last runs too

    sandbox_process(db=box.db, port=box.port)  # the API is back: the next pass sends
    sent = daemon.poll(lambda: next((r for r in _runs(kit, config) if r["counts"]["sent"]), None), "a pass that sends")
    assert sent["id"] > folded["id"] and sent["exit_code"] == 0 and sent["passes"] == 1
    outage = next(r for r in _runs(kit, config) if r["id"] == folded["id"])
    assert outage["passes"] >= folded["passes"] and outage["reason"] == folded["reason"]
    assert daemon.stop() == 0


def _same_identity(kit, tmp_path: Path, base_url: str, key: str, secret: str, schedule: str = "every 5m") -> Path:
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2, Email="ada1@example.org"), kit.contact(3)])
    return kit.config(tmp_path, base_url, contacts, schedule=schedule)


def test_a_record_captured_into_a_person_another_record_holds_is_counted_as_a_merge(
    kit, sandbox, tmp_path: Path
) -> None:
    config = str(_same_identity(kit, tmp_path, sandbox.base_url, *sandbox.create_client(rate_limit=10_000)))
    synced = kit.run("sync", "-c", config, "--json")
    assert synced.code == 0, synced.stderr
    assert json.loads(synced.stdout)["counts"]["merged"] == 1
    assert len(sandbox.store.persons()) == 2  # the CRM made one person of R1 and R2

    [run] = _runs(kit, Path(config))
    assert (run["counts"]["captured"], run["counts"]["merged"]) == (3, 1)
    status = kit.run("status", "-c", config)
    assert json.loads(kit.run("status", "-c", config, "--json").stdout)["merged"] == 1
    assert "merged: 1 captured record(s)" in status.stdout
    assert kit.run("sync", "-c", config, "--full-refresh", "--source", "signups").code == 0  # read again: no new merge
    assert json.loads(kit.run("status", "-c", config, "--json").stdout)["merged"] == 1


def test_the_daemon_counts_merges_in_its_metrics(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    config = _same_identity(
        kit, tmp_path, sandbox.base_url, *sandbox.create_client(rate_limit=10_000), schedule="every 1s"
    )
    daemon = start_daemon(config)
    daemon.poll(
        lambda: daemon.metrics()("capture_sync_records_merged_total", source="signups") == 1, "one merge counted"
    )
    assert daemon.metrics()("capture_sync_persons_captured_total", source="signups") == 3
    assert daemon.stop() == 0


V7_COLUMNS = {"runs": ("passes", "reason", "merged"), "entries": ("merged",)}


def _as_v6(ledger: Path) -> None:
    """Take the ledger back to what schema v6 wrote (the v7 indexes and columns, v8's table and v9's
    indexes gone, and v15's, v14's, v13's, v12's and v11's before them)."""
    with sqlite3.connect(ledger) as db:
        undo_v15(db.execute)
        undo_v14(db.execute)
        undo_v13(db.execute)
        undo_v12(db.execute, "sqlite")
        undo_v11(db.execute)
        undo_v9(db.execute)
        db.execute("DROP TABLE pauses")
        db.execute("DROP INDEX entries_person")
        db.execute("DROP INDEX entries_merged")
        for table, columns in V7_COLUMNS.items():
            for column in columns:
                db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        db.execute("PRAGMA user_version = 6")
    db.close()


def test_a_v6_ledger_migrates_keeps_its_history_and_sends_nothing_again(kit, sandbox, tmp_path: Path) -> None:
    config = str(_same_identity(kit, tmp_path, sandbox.base_url, *sandbox.create_client(rate_limit=10_000)))
    assert kit.run("sync", "-c", config).code == 0
    ledger = tmp_path / "ledger.sqlite3"
    _as_v6(ledger)
    with sqlite3.connect(ledger) as db:
        before = db.execute("SELECT id, key, state, person_id FROM entries ORDER BY id").fetchall()
        requests = len(sandbox.store.captures())
    db.close()

    status = json.loads(kit.run("status", "-c", config, "--json").stdout)  # opening it migrates
    assert status["merged"] == 0 and status["by_state"]["captured"] == 3  # merges before v7 are not known
    assert kit.run("sync", "-c", config).code == 0
    assert len(sandbox.store.captures()) == requests  # nothing re-sent
    with sqlite3.connect(ledger) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT id, key, state, person_id FROM entries ORDER BY id").fetchall() == before
    db.close()
    runs = _runs(kit, Path(config))
    assert [(r["id"], r["counts"]["read"], r["passes"]) for r in runs] == [(2, 0, 1), (1, 3, 1)]  # the v6 run kept
