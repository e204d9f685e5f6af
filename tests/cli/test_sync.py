"""`sync`: --dry-run shows what would be sent and sends nothing; --source picks one source."""

from __future__ import annotations

import json
from pathlib import Path


def test_dry_run_previews_then_sync_sends_and_an_unknown_source_is_a_usage_error(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2, Email="bad@@example.org")])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))

    preview = kit.run("sync", "-c", config, "--dry-run")
    assert preview.code == 0, preview.stderr
    shown = [json.loads(line) for line in preview.stdout.splitlines() if line.startswith("{")]
    assert [(p["record_id"], p["email"]) for p in shown] == [("R1", "ada1@example.org")]
    assert "Dry run: nothing was sent" in preview.stdout
    assert sandbox.store.persons() == []

    unknown = kit.run("sync", "-c", config, "--source", "nope")
    assert unknown.code == 2
    assert "no source named 'nope'" in unknown.stderr

    done = kit.run("sync", "-c", config, "--source", "signups")
    assert done.code == 0, done.stderr
    assert [p["data"]["email"] for p in sandbox.store.persons()] == ["ada1@example.org"]
    rejected = kit.run("ledger", "list", "-c", config, "--state", "rejected", "--json")
    [entry] = [json.loads(line) for line in rejected.stdout.splitlines()]
    assert entry["record_id"] == "R2" and "email" in entry["last_error"]
