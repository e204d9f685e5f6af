"""Two processes that open a ledger nobody has created yet, at the same moment (a cron `sync` and a
daemon started together): the second waits for the first's create-and-migrate, then uses the same
ledger. It used to fail with `table "source_state" already exists`. On both engines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

OPENER = """
import sys
from connector.ledger import Ledger, Mapped
sys.stdin.readline()  # the go: every opener starts at once
with Ledger(sys.argv[1]) as ledger:
    ledger.enqueue("crm", "m", [Mapped(sys.argv[2], payload='{"name":"P"}')], None)
print("ok")
"""


def _open_together(target: str, n: int) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, target, f"r{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    for proc in procs:  # each waits on its stdin; all are running (interpreter loaded) before any opens
        assert proc.stdin is not None
    for proc in procs:
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def test_processes_creating_a_new_ledger_at_once_all_succeed(ledger_target: str | Path, tmp_path: Path) -> None:
    from connector.ledger import Ledger

    for attempt in range(3):
        target = (
            ledger_target if attempt == 0 or not isinstance(ledger_target, Path) else tmp_path / f"l{attempt}.sqlite3"
        )
        if attempt and not isinstance(ledger_target, Path):
            break  # one fresh database per test on PostgreSQL
        results = _open_together(str(target), 4)
        assert [(r.returncode, r.stdout.strip()) for r in results] == [(0, "ok")] * 4, [r.stderr for r in results]
        with Ledger(target) as ledger:
            assert ledger.status().by_state["pending"] == 4


def test_a_new_file_switched_to_wal_while_another_process_writes_it_waits(tmp_path: Path) -> None:
    """SQLite refuses the switch to WAL at once, without its busy handler, while another connection
    holds a new file's write lock: the opener waits for it (as the busy timeout says) instead of
    failing. Deterministic: the holder lets go when the first switch has been refused."""
    import sqlite3

    from connector.ledger.schema import SCHEMA_VERSION, connect

    path = tmp_path / "ledger.sqlite3"
    path.touch(mode=0o600)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    refused = []

    class LetGoAfterRefusal(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
            try:
                return super().execute(sql, *args)  # type: ignore[arg-type]
            except sqlite3.OperationalError:
                if holder.in_transaction:
                    refused.append(sql)
                    holder.execute("ROLLBACK")
                raise

    conn = connect(path, synchronous="FULL", busy_timeout_s=5.0, factory=LetGoAfterRefusal)
    assert refused == ["PRAGMA journal_mode = WAL"]  # the refusal this waits through did happen
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    holder.close()


def test_processes_migrating_an_older_ledger_at_once_all_succeed(tmp_path: Path) -> None:
    """The steps' path (a new file takes `_fresh`'s): the first migrates, the others find it done."""
    import sqlite3

    import sqlite_utils

    from connector.ledger import Ledger
    from connector.ledger.schema import MIGRATIONS

    old = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(old, isolation_level=None)
    MIGRATIONS[0](sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    results = _open_together(str(old), 4)
    assert [(r.returncode, r.stdout.strip()) for r in results] == [(0, "ok")] * 4, [r.stderr for r in results]
    with Ledger(old) as ledger:
        assert ledger.status().by_state["pending"] == 4
