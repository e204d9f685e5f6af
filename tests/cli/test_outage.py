"""Exit codes of an outage and of bad credentials, and the replay that settles what an outage left."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from connector.sandbox import SandboxStore


def test_sync_during_an_outage_exits_4_and_replay_settles_it(kit, sandbox_process, tmp_path: Path) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("outage-test", rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, 8)])
    config = str(kit.config(tmp_path, box.base_url, contacts))
    box.stop()

    unreachable = kit.run("check", "-c", config)
    assert unreachable.code == 4
    assert "the Capture API did not answer" in unreachable.stderr
    down = kit.run("sync", "-c", config)
    assert down.code == 4, down.stderr
    assert "replay" in down.stderr
    status = json.loads(kit.run("status", "-c", config, "--json").stdout)
    assert status["oldest_unsettled"] is not None
    assert sum(status["by_state"][s] for s in ("pending", "in_flight", "unknown")) == 7

    again = sandbox_process(db=box.db, port=box.port)
    replayed = kit.run("replay", "-c", config)
    assert replayed.code == 0, replayed.stderr
    with SandboxStore(again.db) as store:
        assert sorted(p["data"]["email"] for p in store.persons()) == sorted(f"ada{n}@example.org" for n in range(1, 8))
    status = json.loads(kit.run("status", "-c", config, "--json").stdout)
    assert status["by_state"]["captured"] == 7 and status["oldest_unsettled"] is None


def test_check_exits_3_on_a_wrong_secret_2_on_a_missing_source_file_else_prints_the_settings(
    kit, sandbox, tmp_path: Path
) -> None:
    key, secret = sandbox.create_client("check-test", rate_limit=42, default_lead_source="webinar")
    kit.credentials(tmp_path, key, "not-the-secret")
    config = str(kit.config(tmp_path, sandbox.base_url, tmp_path / "unused.csv"))
    refused = kit.run("check", "-c", config)
    assert refused.code == 3
    assert "authentication failed" in refused.stderr
    kit.credentials(tmp_path, key, secret)
    missing = kit.run("check", "-c", config)
    assert missing.code == 2
    assert "no file matches" in missing.stdout and "1 source(s) cannot be read" in missing.stderr
    kit.contacts(tmp_path / "unused.csv", [])
    ok = kit.run("check", "-c", config)
    assert ok.code == 0, ok.stderr
    for shown in ("check-test", "42", "webinar", "custom field mapping", "signups"):
        assert shown in ok.stdout


def test_blocked_entries_exit_5_until_resolved(kit, sandbox, tmp_path: Path) -> None:
    """The 409 itself is the engine tests' business; here an entry is put in `blocked` directly in
    the ledger to walk the operator's repair path: exit 5, list, resolve --requeue, replay."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2)])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))
    assert kit.run("sync", "-c", config).code == 0
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:
        db.execute("UPDATE entries SET state = 'blocked', last_error = 'HTTP 409' WHERE record_id = 'R2'")
    db.close()

    blocked = kit.run("sync", "-c", config)
    assert blocked.code == 5
    assert "ledger list --state blocked" in blocked.stderr
    [entry] = [
        json.loads(line)
        for line in kit.run("ledger", "list", "-c", config, "--state", "blocked", "--json").stdout.splitlines()
    ]
    assert entry["record_id"] == "R2"
    resolved = kit.run("ledger", "resolve", "-c", config, entry["key"], "--requeue")
    assert resolved.code == 0 and "requeued 1 entries" in resolved.stdout
    assert kit.run("ledger", "resolve", "-c", config, "no-such-key", "--dismiss").code == 2
    assert kit.run("ledger", "resolve", "-c", config, entry["key"]).code == 2  # neither flag

    replayed = kit.run("replay", "-c", config)
    assert replayed.code == 0, replayed.stderr
    assert len(sandbox.store.persons()) == 2  # re-sent under the same per-person key: not doubled
    status = json.loads(kit.run("status", "-c", config, "--json").stdout)
    assert status["by_state"]["blocked"] == 0
