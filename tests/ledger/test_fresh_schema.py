"""A new ledger file gets the schema the forward migrations end at in one step (`_fresh`), with a
new identity of its own, and without loading sqlite-utils; an existing file still migrates step by
step (tests/ledger/test_versions.py and the test_vN_migration files); a file killed while being
created is created again; another program's database is refused, not given the ledger's tables."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from connector.ledger import Ledger, LedgerError
from connector.ledger.schema import MIGRATIONS, SCHEMA_VERSION

# What a file keeps of its own beyond its tables (`PRAGMA user_version` is compared apart).
STORED_PRAGMAS = ("application_id", "auto_vacuum", "encoding", "journal_mode", "page_size")


def _contents(path: Path) -> dict[str, Any]:
    """A ledger file as a later open sees it: schema objects in creation order, every table's rows
    (the identity's apart: each ledger's own), its stored pragmas, version and identity."""
    db = sqlite3.connect(path)
    try:
        master = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid").fetchall()
        tables = [name for kind, name, _, _ in master if kind == "table" and name != "ledger_identity"]
        return {
            "master": master,
            "rows": {name: db.execute(f'SELECT * FROM "{name}" ORDER BY 1').fetchall() for name in tables},
            "pragmas": {name: db.execute(f"PRAGMA {name}").fetchone()[0] for name in STORED_PRAGMAS},
            "version": db.execute("PRAGMA user_version").fetchone()[0],
            "identity": db.execute("SELECT id FROM ledger_identity").fetchall(),
        }
    finally:
        db.close()


def _stepped(path: Path, versions: int = len(MIGRATIONS)) -> Path:
    """A file made by the first `versions` migration steps, as an older release left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA page_size = 8192")  # as `schema.connect` sets on every new file
    conn.execute("PRAGMA journal_mode = WAL")
    for migration in MIGRATIONS[:versions]:
        migration(sqlite_utils.Database(conn))
    conn.execute(f"PRAGMA user_version = {versions}")
    conn.close()
    return path


def test_a_new_ledger_holds_what_every_migration_in_turn_makes_of_an_empty_file(tmp_path: Path) -> None:
    want = _contents(_stepped(tmp_path / "stepped.sqlite3"))
    Ledger(tmp_path / "fresh.sqlite3").close()
    got = _contents(tmp_path / "fresh.sqlite3")
    made = tuple(sql for _, _, _, sql in want["master"] if sql is not None)
    assert got["master"] == want["master"], (
        f"a new ledger no longer has the schema the migrations make: set connector/ledger/_fresh.py's SCHEMA to\n{made!r}"
    )
    assert got["rows"] == want["rows"], "the migrations write rows that `_fresh.create` does not: write them there"
    assert got["pragmas"] == want["pragmas"], "the migrations set a stored pragma that `_fresh.create` does not"
    assert got["version"] == want["version"] == SCHEMA_VERSION
    [(identity,)], [(theirs,)] = got["identity"], want["identity"]
    assert len(identity) == len(theirs) == 16
    assert identity != theirs  # each new ledger's own: the rejects feed keeps its positions by it


def test_creating_a_ledger_loads_no_sqlite_utils_and_migrating_one_does(tmp_path: Path) -> None:
    """sqlite-utils (some 50 ms to import) is for the migration steps of an older file only."""
    old = _stepped(tmp_path / "v1.sqlite3", versions=1)
    probe = (
        "import sys\nfrom connector.ledger import Ledger\n"
        "Ledger(sys.argv[1]).close()\nprint('sqlite_utils' in sys.modules)"
    )
    for path, loads in ((tmp_path / "new.sqlite3", "False"), (old, "True")):
        proc = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == loads
    migrated, created = _contents(old), _contents(tmp_path / "new.sqlite3")
    assert migrated["version"] == created["version"] == SCHEMA_VERSION
    assert migrated["master"] == created["master"]  # an old file ends where a new one starts


KILLED_HALFWAY = """
import os, signal, sys
from connector.ledger import _fresh, Ledger
whole = _fresh.SCHEMA
class Half(tuple):
    def __iter__(self):
        for i, statement in enumerate(whole):
            if i == len(whole) // 2:
                os.kill(os.getpid(), signal.SIGKILL)
            yield statement
_fresh.SCHEMA = Half(whole)
Ledger(sys.argv[1])
"""


def test_a_creation_killed_halfway_leaves_a_blank_file_the_next_open_creates(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    assert subprocess.run([sys.executable, "-c", KILLED_HALFWAY, str(path)]).returncode == -9
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)  # nothing half-made
    db.close()
    Ledger(path).close()
    Ledger(tmp_path / "whole.sqlite3").close()
    again, whole = _contents(path), _contents(tmp_path / "whole.sqlite3")
    assert again["master"] == whole["master"]
    assert again["version"] == SCHEMA_VERSION and len(again["identity"]) == 1


def test_another_programs_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """A ledger is stamped with its version in the transaction that creates it, so a file at version
    0 with tables is some other database: it used to be given the ledger's tables beside its own."""
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
    db.execute("INSERT INTO users (email) VALUES ('a@example.com')")
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match=r"app\.db is not a capture-sync ledger: .*tables users.*ledger\.path"):
        Ledger(path)
    db = sqlite3.connect(path)
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]
    assert db.execute("SELECT email FROM users").fetchall() == [("a@example.com",)]
    assert db.execute("PRAGMA user_version").fetchone() == (0,)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # not switched to WAL either
    db.close()
