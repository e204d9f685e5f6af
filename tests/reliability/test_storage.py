"""Storage faults: a ledger that cannot be written, one locked by another writer, one corrupted.
Each is a one-line error (exit 1 or 2, no traceback) and the run changes nothing: the ledger
keeps its entries and source cursor, and nothing reaches the API that the ledger did not record.

Each test starts from a ledger holding one finished sync of 5 records, and 3 new rows in the
source that a failed run must not take. A run that must meet a read-only file runs bound by file
modes: as the test's own user, or as root without the capabilities that let root ignore them (so a
checkout in a private folder, such as `mktemp -d` makes, works as well as any other).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

NEW_ROWS = "5,New,N5,new5@example.com,\n6,New,N6,new6@example.com,\n7,New,N7,new7@example.com,\n"


@dataclass
class Synced:
    folder: Path
    config: str
    ledger: Path
    env: dict[str, str]


def snapshot(ledger: Path) -> tuple[list[tuple], ...]:
    """What a run could change: entries, the source cursors, batches, runs."""
    db = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        return tuple(
            db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("entries", "source_state", "batches", "runs")
        )
    finally:
        db.close()


def beside(ledger: Path) -> dict[str, int]:
    """The files in the ledger's folder, with their modes."""
    return {p.name: p.stat().st_mode for p in ledger.parent.iterdir()}


@pytest.fixture
def synced(rel, sandbox) -> Synced:
    folder = rel.tmp
    (folder / "ledger").mkdir()
    contacts = folder / "contacts.csv"
    contacts.write_text(
        "id,First,Last,Email,Phone\n" + "".join(f"{n},Old,O{n},old{n}@example.com,\n" for n in range(5))
    )
    config = rel.config(folder, sandbox.base_url, contacts, ledger="ledger/ledger.sqlite3")
    env = rel.client(sandbox.store, rate_limit=1000)
    first = rel.run("sync", "-c", str(config), env=env, cwd=folder)
    assert first.code == 0, first.stderr
    with contacts.open("a") as fh:
        fh.write(NEW_ROWS)
    return Synced(folder, str(config), folder / "ledger" / "ledger.sqlite3", env)


def assert_clear_failure(result, *phrases: str) -> None:
    assert result.code in (1, 2), (result.code, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.startswith("error: ledger: "), result.stderr
    for phrase in phrases:
        assert phrase in result.stderr


@pytest.mark.parametrize(
    ("read_only", "command", "named"),
    [
        ("folder", "sync", "its folder"),
        ("file", "replay", "the file"),
        ("stale -shm", "status", "ledger.sqlite3-shm"),
    ],
)
def test_a_ledger_that_cannot_be_written_is_a_clear_error_and_nothing_moves(
    rel, sandbox, synced, read_only, command, named
):
    """One line naming what is read-only; the stale -shm is one that a read-only ledger's run left
    behind (SQLite gives it the ledger's mode) after the ledger itself was made writable again."""
    before = snapshot(synced.ledger)
    folder, shm = synced.ledger.parent, synced.ledger.with_name("ledger.sqlite3-shm")
    if read_only == "stale -shm":
        shm.touch()
        shm.chmod(0o400)
    folder.chmod(0o500 if read_only == "folder" else 0o700)
    synced.ledger.chmod(0o400 if read_only == "file" else 0o600)
    files = beside(synced.ledger)
    result = rel.run(command, "-c", synced.config, env=synced.env, bound_by_permissions=True, cwd=synced.folder)
    folder.chmod(0o700)
    assert_clear_failure(result, "cannot be written", named, "read-only for this user", "chmod u+w")
    assert beside(synced.ledger) == files, "the failed run left files behind"
    assert snapshot(synced.ledger) == before
    assert len(sandbox.store.persons()) == 5


def test_a_new_ledger_in_a_read_only_folder_is_a_clear_error(rel, sandbox, synced):
    config = Path(synced.config)
    config.write_text(config.read_text().replace("ledger/ledger.sqlite3", "ledger/another.sqlite3"))
    synced.ledger.parent.chmod(0o500)
    result = rel.run("sync", "-c", synced.config, env=synced.env, bound_by_permissions=True, cwd=synced.folder)
    synced.ledger.parent.chmod(0o700)
    assert_clear_failure(result, "cannot be written", "its folder")
    assert not (synced.ledger.parent / "another.sqlite3").exists()
    assert len(sandbox.store.persons()) == 5


def test_a_ledger_locked_by_another_writer_is_a_clear_error_and_nothing_moves(rel, sandbox, synced):
    before = snapshot(synced.ledger)
    holder = sqlite3.connect(synced.ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # held past the ledger's busy timeout
    try:
        assert_clear_failure(rel.run("sync", "-c", synced.config, env=synced.env), "locked by another process")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert snapshot(synced.ledger) == before
    assert len(sandbox.store.persons()) == 5
    # The cursor did not move: the rows the failed run saw are read and sent now.
    again = rel.run("sync", "-c", synced.config, env=synced.env)
    assert again.code == 0, again.stderr
    assert sorted(p["data"]["email"] for p in sandbox.store.persons())[:3] == [f"new{n}@example.com" for n in (5, 6, 7)]


@pytest.mark.parametrize(
    ("damage", "command"), [("garbage", "sync"), ("truncated", "replay"), ("header only", "status")]
)
def test_a_corrupted_ledger_is_a_clear_error_and_is_left_as_it_is(rel, sandbox, synced, damage, command):
    data = synced.ledger.read_bytes()
    damaged = {
        "garbage": os.urandom(len(data)),
        "truncated": data[: len(data) // 2],
        "header only": data[:100],
    }[damage]
    synced.ledger.write_bytes(damaged)
    for suffix in ("-wal", "-shm"):
        synced.ledger.with_name(synced.ledger.name + suffix).unlink(missing_ok=True)
    result = rel.run(command, "-c", synced.config, env=synced.env)
    assert_clear_failure(result, "not a valid capture-sync ledger")
    assert synced.ledger.read_bytes() == damaged
    assert len(sandbox.store.persons()) == 5
