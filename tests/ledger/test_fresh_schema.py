"""A new ledger file gets the schema the forward migrations end at in one step (`_fresh`), with a
new identity of its own, and without loading sqlite-utils; an existing file still migrates step by
step (tests/ledger/test_versions.py and the test_vN_migration files)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import sqlite_utils

from connector.ledger import Ledger
from connector.ledger.schema import MIGRATIONS, SCHEMA_VERSION

MASTER = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"


def _contents(path: Path) -> tuple[list[tuple[str, str, str, str | None]], dict[str, int], int, str]:
    """A ledger file's schema objects in creation order, its tables' row counts, its version and identity."""
    with sqlite3.connect(path) as db:
        master = db.execute(MASTER).fetchall()
        tables = [name for kind, name, _, _ in master if kind == "table"]
        counts = {name: db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in tables}
        (version,) = db.execute("PRAGMA user_version").fetchone()
        (identity,) = db.execute("SELECT id FROM ledger_identity").fetchone()
    db.close()
    return master, counts, version, identity


def test_a_new_ledger_holds_what_every_migration_in_turn_makes_of_an_empty_file(tmp_path: Path) -> None:
    stepped = tmp_path / "stepped.sqlite3"
    conn = sqlite3.connect(stepped, isolation_level=None)
    for migration in MIGRATIONS:
        migration(sqlite_utils.Database(conn))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.close()
    Ledger(tmp_path / "fresh.sqlite3").close()

    want, want_counts, _, want_identity = _contents(stepped)
    got, got_counts, version, identity = _contents(tmp_path / "fresh.sqlite3")
    made = tuple(sql for _, _, _, sql in want if sql is not None)
    assert got == want, (
        "a new ledger no longer has the schema the migrations make: set connector/ledger/_fresh.py's "
        f"SCHEMA to\n{made!r}"
    )
    assert got_counts == want_counts == {name: int(name == "ledger_identity") for name in want_counts}
    assert version == SCHEMA_VERSION
    assert len(identity) == len(want_identity) == 16
    assert identity != want_identity  # each new ledger's own: the rejects feed keeps its positions by it


def test_two_new_ledgers_have_identities_of_their_own(tmp_path: Path) -> None:
    Ledger(tmp_path / "a.sqlite3").close()
    Ledger(tmp_path / "b.sqlite3").close()
    assert _contents(tmp_path / "a.sqlite3")[3] != _contents(tmp_path / "b.sqlite3")[3]


def test_creating_a_ledger_loads_no_sqlite_utils_and_migrating_one_does(tmp_path: Path) -> None:
    """sqlite-utils (some 50 ms to import) is for the migration steps of an older file only."""
    old = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(old, isolation_level=None)
    MIGRATIONS[0](sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    probe = (
        "import sys\nfrom connector.ledger import Ledger\n"
        "Ledger(sys.argv[1]).close()\nprint('sqlite_utils' in sys.modules)"
    )
    for path, loads in ((tmp_path / "new.sqlite3", "False"), (old, "True")):
        proc = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == loads
    migrated, created = _contents(old), _contents(tmp_path / "new.sqlite3")
    assert migrated[2] == created[2] == SCHEMA_VERSION
    assert migrated[0] == created[0]  # an old file ends where a new one starts
