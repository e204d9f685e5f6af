"""Files capture-sync writes hold people or secrets, so each is private and none is written through a
link another user could plant: `--output`, the ledger's lock file, the sandbox's database."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from connector.ledger import Ledger, LedgerError
from connector.sandbox import SandboxServer, SandboxStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_output_refuses_a_symlink_and_makes_an_existing_file_private(kit, tmp_path: Path) -> None:
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2)])
    kit.credentials(tmp_path, "key", "a-secret-never-sent")  # a dry run reads them, sends nothing
    config = str(kit.config(tmp_path, "http://127.0.0.1:1/api/v1/capture", contacts))
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not yours\n")
    link = tmp_path / "preview.jsonl"
    link.symlink_to(elsewhere)

    refused = kit.run("sync", "-c", config, "--dry-run", "--output", str(link))
    assert refused.code == 2 and "symbolic link" in refused.stderr, refused.stderr
    assert elsewhere.read_text() == "not yours\n" and link.is_symlink()

    existing = tmp_path / "existing.jsonl"
    existing.write_text("old\n")
    existing.chmod(0o644)
    written = kit.run("sync", "-c", config, "--dry-run", "--output", str(existing))
    assert written.code == 0, written.stderr
    assert _mode(existing) == 0o600 and "old" not in existing.read_text() and "R1" in existing.read_text()


def test_the_ledger_lock_is_never_taken_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "planted"
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    try:
        (tmp_path / "ledger.sqlite3.lock").symlink_to(target)
        with pytest.raises(LedgerError, match="symbolic link"):
            ledger.acquire_daemon_lock()
        assert not target.exists()
    finally:
        ledger.close()


def test_the_sandbox_database_is_created_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        SandboxStore(tmp_path / "sandbox.sqlite3").close()
    finally:
        os.umask(old)
    assert _mode(tmp_path / "sandbox.sqlite3") == 0o600


def test_the_sandbox_warns_when_it_listens_beyond_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """127.0.0.2 stands in for a public address (tests listen on loopback only): the check is what is tested."""
    with caplog.at_level(logging.WARNING, "capture_sync.sandbox"), SandboxServer(tmp_path / "a.sqlite3"):
        pass
    assert not caplog.records
    monkeypatch.setattr("connector.sandbox.server.is_loopback", lambda host: False)
    with (
        caplog.at_level(logging.WARNING, "capture_sync.sandbox"),
        SandboxServer(tmp_path / "b.sqlite3", host="127.0.0.2"),
    ):
        pass
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["sandbox.beyond_loopback"]
