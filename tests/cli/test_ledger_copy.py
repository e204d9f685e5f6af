"""`ledger copy`: a ledger moves between engines with everything it knows, so that a sync on the copy
sends nothing already settled; it refuses a target that holds anything and a ledger a daemon holds."""

from __future__ import annotations

import json
from pathlib import Path

from connector.ledger import Ledger


def _ledger_at(config: Path, line: str) -> None:
    text = config.read_text(encoding="utf-8")
    start = text.index("[ledger]\n")
    end = text.index("\n\n", start)
    config.write_text(text[:start] + f"[ledger]\n{line}" + text[end:], encoding="utf-8")


def _view(kit, config: Path) -> tuple[dict, list, list]:
    status = kit.run("status", "-c", str(config), "--json")
    assert status.code == 0, status.stderr
    report = json.loads(status.stdout)
    runs = json.loads(kit.run("runs", "list", "-c", str(config), "--json").stdout)["runs"]
    state = kit.run("state", "show", "-c", str(config), "--json")
    assert state.code == 0, state.stderr
    entries = [
        json.loads(line)
        for line in kit.run("ledger", "list", "-c", str(config), "--state", "captured", "--json").stdout.splitlines()
    ]
    return (
        report["by_state"],
        [(r["id"], r["kind"], r["counts"]) for r in runs],
        [(e["key"], e["record_id"]) for e in entries],
    )


def test_a_round_trip_sqlite_postgresql_sqlite_keeps_everything_and_the_next_sync_sends_nothing(
    kit,
    sandbox,
    tmp_path: Path,
    postgres_ledger_url: str,
) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, 31)] + [kit.contact(31, Email="bad@@example.org")])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    assert kit.run("sync", "-c", str(config)).code == 0
    kit.contacts(contacts, [kit.contact(5, First="Changed")] + [kit.contact(n) for n in range(1, 5)], header=True)
    assert kit.run("sync", "-c", str(config)).code == 0  # a second run, a new version of R5
    sent = len(sandbox.store.captures())
    before = _view(kit, config)

    to_pg = kit.run("ledger", "copy", "-c", str(config), "--to", postgres_ledger_url)
    assert to_pg.code == 0, to_pg.stderr
    assert "copied 32 entries" in to_pg.stdout and "set [ledger] url" in to_pg.stdout

    again = kit.run("ledger", "copy", "-c", str(config), "--to", postgres_ledger_url)
    assert again.code == 2 and "is not empty" in again.stderr, again.stderr

    _ledger_at(config, f"url = {json.dumps(postgres_ledger_url)}")
    assert _view(kit, config) == before
    back = tmp_path / "back.sqlite3"
    to_file = kit.run("ledger", "copy", "-c", str(config), "--to", str(back))
    assert to_file.code == 0, to_file.stderr

    _ledger_at(config, f'path = "{back}"')
    assert _view(kit, config) == before
    synced = kit.run("sync", "-c", str(config))
    assert synced.code == 0, synced.stderr
    assert len(sandbox.store.captures()) == sent, "a sync after the copies sends nothing"
    kit.contacts(contacts, [kit.contact(40)], header=False)
    assert kit.run("sync", "-c", str(config)).code == 0
    assert len(sandbox.store.captures()) == sent + 1, "and new work goes on as before"


def test_a_ledger_a_daemon_holds_is_not_copied(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    assert kit.run("sync", "-c", str(config)).code == 0
    with Ledger(tmp_path / "ledger.sqlite3") as daemon:
        daemon.acquire_daemon_lock()
        refused = kit.run("ledger", "copy", "-c", str(config), "--to", str(tmp_path / "copy.sqlite3"))
    assert refused.code == 2, refused.stderr
    assert "another capture-sync daemon is already running" in refused.stderr
