"""A bad setup stops before anything is sent, every problem at once (issue 14): a mapped column the
file does not have, a path that matches nothing. `check` says so with exit 2, and warns when the
ledger or a credential file can be read by other users."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def client_files(kit, sandbox, tmp_path: Path) -> Path:
    """Credentials for a sandbox client beside the config; returns the folder."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    return tmp_path


def test_mapped_columns_the_file_lacks_stop_check_sync_and_run_naming_each_with_a_close_match(
    kit, sandbox, client_files: Path
) -> None:
    contacts = client_files / "contacts.csv"
    contacts.write_text("id,First,Last,E-mail,Tel\nR1,Ada,Lovelace,ada@example.org,+1 415 555 0101\n", encoding="utf-8")
    config = str(kit.config(client_files, sandbox.base_url, contacts))  # maps Email and Phone

    for command in (["check"], ["sync"], ["run"], ["run", "--once"]):
        result = kit.run(*command, "-c", config)
        assert result.code == 2, (command, result.stdout, result.stderr)
        assert (
            "sources.signups.mapping.email: the source has no column 'Email'; did you mean 'E-mail'?" in result.stderr
        )
        assert "sources.signups.mapping.phone: the source has no column 'Phone' (it has: 'id', 'First'" in result.stderr
        assert "Traceback" not in result.stderr
    assert sandbox.store.persons() == []
    assert sandbox.store.captures() == []


def test_a_path_that_matches_nothing_is_exit_2_naming_the_source_and_the_path(kit, sandbox, client_files: Path) -> None:
    missing = client_files / "exports" / "signups-*.csv"
    config = str(kit.config(client_files, sandbox.base_url, missing))

    result = kit.run("check", "-c", config)
    assert result.code == 2, result.stderr
    assert f"source 'signups': no file matches '{missing}'" in result.stderr

    result = kit.run("sync", "-c", config)
    assert result.code == 2, result.stderr
    assert str(missing) in result.stderr


def test_a_good_setup_checks_ok(kit, sandbox, client_files: Path) -> None:
    contacts = client_files / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    result = kit.run("check", "-c", str(kit.config(client_files, sandbox.base_url, contacts)))
    assert result.code == 0, result.stderr
    assert "signups" in result.stdout and "ok" in result.stdout
    assert "warning" not in result.stderr and "error" not in result.stderr


def test_check_warns_when_the_ledger_or_a_credential_file_is_readable_by_others(
    kit, sandbox, client_files: Path
) -> None:
    contacts = client_files / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = str(kit.config(client_files, sandbox.base_url, contacts))
    ledger, secret, key = client_files / "ledger.sqlite3", client_files / "api_secret", client_files / "api_key"
    ledger.write_bytes(b"")
    ledger.chmod(0o600)

    private = kit.run("check", "-c", config)
    assert private.code == 0, private.stderr
    assert "warning" not in private.stderr

    ledger.chmod(0o644)
    secret.chmod(0o640)
    exposed = kit.run("check", "-c", config)
    assert exposed.code == 0, exposed.stderr  # a warning, not a failure
    assert f"warning: {ledger} is readable by other users (mode 0644): chmod 600 {ledger}" in exposed.stderr
    assert f"warning: {secret} is readable by other users (mode 0640): chmod 600 {secret}" in exposed.stderr
    assert str(key) not in exposed.stderr  # still 0600
