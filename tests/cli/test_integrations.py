"""Two integrations (two config files, two API clients) on one PostgreSQL database: each sync sends
its own records only, and `status`, `state` and `runs` of one never show the other's. The name is
`[integration] name`, or the config file's stem."""

from __future__ import annotations

import json
from pathlib import Path


def integration(kit, sandbox, folder: Path, url: str, first: int, count: int, *, name: str, stem: str) -> Path:
    """An integration in `folder`: its own client, contacts R<first>.., config `<stem>.toml` on `url`."""
    folder.mkdir()
    key, secret = sandbox.create_client(name, rate_limit=1000)
    kit.credentials(folder, key, secret)
    contacts = folder / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(first, first + count)])
    text = kit.config(folder, sandbox.base_url, contacts).read_text(encoding="utf-8")
    named = f"[integration]\nname = {json.dumps(name)}\n\n" if name != stem else ""
    config = folder / f"{stem}.toml"
    config.write_text(
        named + text.replace('[ledger]\npath = "ledger.sqlite3"\n', f"[ledger]\nurl = {json.dumps(url)}\n")
    )
    return config


def test_two_integrations_in_one_database_keep_apart(kit, sandbox, tmp_path: Path, postgres_ledger_url: str) -> None:
    eu = integration(kit, sandbox, tmp_path / "eu", postgres_ledger_url, 1, 5, name="crm-eu", stem="crm-eu")
    us = integration(kit, sandbox, tmp_path / "us", postgres_ledger_url, 100, 3, name="crm.us", stem="capture-sync")

    for config in (eu, us):
        done = kit.run("sync", "-c", str(config))
        assert done.code == 0, done.stderr
    assert len(sandbox.store.persons()) == 8

    def status(config: Path) -> dict:
        result = kit.run("status", "-c", str(config), "--json")
        assert result.code == 0, result.stderr
        return json.loads(result.stdout)

    assert status(eu)["by_state"]["captured"] == 5 and status(us)["by_state"]["captured"] == 3
    eu_ids = kit.run("ledger", "list", "-c", str(eu), "--state", "captured", "--json")
    assert {json.loads(line)["record_id"] for line in eu_ids.stdout.splitlines()} == {f"R{n}" for n in range(1, 6)}
    runs = kit.run("runs", "list", "-c", str(us), "--json")
    assert [r["kind"] for r in json.loads(runs.stdout)["runs"]] == ["sync"]

    again = kit.run("sync", "-c", str(us))  # its own cursor and keys: nothing new to send
    assert again.code == 0 and len(sandbox.store.persons()) == 8


def test_a_file_name_that_cannot_name_a_schema_asks_for_integration_name(
    kit,
    sandbox,
    tmp_path: Path,
    postgres_ledger_url: str,
) -> None:
    folder = tmp_path / "odd"
    config = integration(kit, sandbox, folder, postgres_ledger_url, 1, 1, name="crm eu", stem="crm eu")
    result = kit.run("status", "-c", str(config))
    assert result.code == 2
    assert "cannot name the integration" in result.stderr and "[integration] name" in result.stderr
