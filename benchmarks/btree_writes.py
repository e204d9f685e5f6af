"""B-tree writes per record on the ledger's hot path (enqueue, claim, settle), on both engines.

    .venv/bin/python benchmarks/btree_writes.py [--entries 10000] [--postgres-url URL]

What is counted, the same on both engines: a table row written (inserted, updated or deleted) counts
one, and so does each index entry written or removed: an inserted row adds one entry to each index
(a partial index: when its WHERE holds), a deleted row removes one, an updated row takes its entry out
of an index and puts it back (two writes, one when it leaves or enters a partial index) where the
engine rewrites that index.

- SQLite rewrites an index when the UPDATE's SET list names a column the index holds or its WHERE
  reads: temporary triggers (`AFTER UPDATE OF`) on every table of the ledger's own connection apply
  that rule to each row written, with each index's columns and WHERE read from the schema, so the
  count is exact for the statements as run.
- PostgreSQL writes a new row version on UPDATE: into the heap, and, unless the update is HOT
  (it changes no column any index holds or reads in its WHERE, and the page has room), into every
  index whose WHERE holds for it, whichever columns changed; a delete marks the heap alone. Row
  triggers apply that rule to each row written (index columns and WHERE from `pg_index`), and
  `pg_stat_user_tables.n_tup_hot_upd` says how many of the updates taken for HOT really were: an
  update that found no room is counted with every index.

The workload is ledger_bench's: chunks of 1,000 enqueued, batches of 100 claimed and settled (one
record in ten a duplicate), each settle claiming the next batch in its transaction. The writes are
also printed per pass (enqueue, claim, settle) and table, the counters read between the passes
(each claim then in its own transaction: the same writes).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pg_server
from ledger_bench import payload

from connector.ledger import Claim, Ledger, Mapped, Outcome

CHUNK = 1000
BATCH = 100


Counts = Callable[[], dict[str, int]]
Passes = dict[str, dict[str, int]]  # pass -> table -> writes


def hot_path(ledger: Ledger, entries: int, counts: Counts | None = None) -> Passes:
    """The workload; with `counts` (the counters so far), the writes of each pass by table."""
    passes: Passes = {"enqueue": {}, "claim": {}, "settle": {}}
    last = counts() if counts else {}

    def tally(name: str) -> None:
        nonlocal last
        if counts is None:
            return
        now = counts()
        for table, n in now.items():
            if n - last.get(table, 0):
                passes[name][table] = passes[name].get(table, 0) + n - last.get(table, 0)
        last = now

    for start in range(0, entries, CHUNK):
        chunk = [Mapped(str(i), payload=payload(i)) for i in range(start, min(start + CHUNK, entries))]
        ledger.enqueue("bench", "v1", chunk, {"offset": start + len(chunk)})
    tally("enqueue")
    batch = ledger.claim(Claim(BATCH))
    tally("claim")
    while batch is not None:
        outcomes = [
            Outcome(m.entry_id, "duplicate" if m.entry_id % 10 == 0 else "captured", person_id=f"p-{m.entry_id}")
            for m in batch.members
        ]
        if counts is None:
            batch = ledger.settle(batch, outcomes, [], then=Claim(BATCH))
            continue
        ledger.settle(batch, outcomes, [])
        tally("settle")
        batch = ledger.claim(Claim(BATCH))
        tally("claim")
    return passes


def _triggers(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """(event, SQL over OLD and NEW) pairs: the B-tree writes one row's insert, update or delete costs.

    SQLite rewrites an index on UPDATE when a column it holds, or one its WHERE reads, is in the
    statement's SET list (`AFTER UPDATE OF`), whether or not the value changed: out of the index if
    the old row was in it, into it if the new row is."""
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, columns)) + r")\b")
    triggers = [("INSERT", "1"), ("UPDATE", "1"), ("DELETE", "1")]
    without_rowid = conn.execute("SELECT wr FROM pragma_table_list WHERE name = ?", (table,)).fetchone()[0]
    for _, name, _, origin, partial in conn.execute(f"PRAGMA index_list({table})").fetchall():
        if without_rowid and origin == "pk":
            continue  # the table's own B-tree: its row is the one write counted above
        keys = [row[2] for row in conn.execute(f"PRAGMA index_info({name})")]
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        if None in keys:  # an index on an expression (schema v13's key prefix): the columns it reads
            keys += pattern.findall(re.split(r"\bWHERE\b", sql, flags=re.IGNORECASE)[0].split(" ON ", 1)[1])
        where = "1"
        if partial:
            where = re.split(r"\bWHERE\b", sql, maxsplit=1, flags=re.IGNORECASE)[1]
        read = sorted({*keys, *(m.group(1) for m in pattern.finditer(where))} - {None})

        def on(row: str, where: str = where) -> str:
            return "((" + pattern.sub(lambda col: f"{row}.{col.group(1)}", where) + ") IS 1)"

        triggers += [
            ("INSERT", on("NEW")),
            ("DELETE", on("OLD")),
            (f"UPDATE OF {', '.join(read)}", f"{on('OLD')} + {on('NEW')}"),
        ]
    return triggers


def count_sqlite(conn: sqlite3.Connection) -> Callable[[], dict[str, int]]:
    """Install the counting triggers on `conn`; the function returned reads the counts per table."""
    conn.execute("CREATE TEMP TABLE btree_writes (tbl TEXT PRIMARY KEY, n INTEGER NOT NULL)")
    tables = [
        row[0]
        for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    ]
    for table in tables:
        conn.execute("INSERT INTO btree_writes VALUES (?, 0)", (table,))
        for i, (event, expr) in enumerate(_triggers(conn, table)):
            conn.execute(
                f"CREATE TEMP TRIGGER btree_writes_{table}_{i} AFTER {event} ON main.{table} "
                f"BEGIN UPDATE btree_writes SET n = n + ({expr}) WHERE tbl = '{table}'; END"
            )

    def counts() -> dict[str, int]:
        return {t: n for t, n in conn.execute("SELECT tbl, n FROM btree_writes ORDER BY tbl") if n}

    return counts


def sqlite_writes(entries: int) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="capture-sync-btree-") as tmp,
        Ledger(Path(tmp) / "ledger.sqlite3", synchronous="FULL") as ledger,
    ):
        counts = count_sqlite(ledger._store._conn)  # type: ignore[attr-defined]
        passes = hot_path(ledger, entries, counts)
        by_table = counts()
    return _result(entries, by_table, passes)


_PG_INDEXES = (
    "SELECT t.relname, array(SELECT a.attname FROM unnest(i.indkey) k JOIN pg_attribute a "
    "ON a.attrelid = i.indrelid AND a.attnum = k), pg_get_expr(i.indpred, i.indrelid) "
    "FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid WHERE t.relnamespace = current_schema()::regnamespace"
)
_PG_HOT = "SELECT relname, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = current_schema()"


def _pg_trigger(table: str, columns: list[str], indexes: list[tuple[list[str], str | None]]) -> str:
    """A row trigger applying PostgreSQL's rule to each row written: an insert, or an update that
    changes a column some index holds or reads in its WHERE (not HOT), writes the heap and every
    index whose WHERE holds for the new row; an update that changes none is HOT (the heap alone)."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, columns)) + r")\b")
    entered = " + ".join(
        "1" if where is None else f"(CASE WHEN {pattern.sub(lambda c: f'NEW.{c.group(1)}', where)} THEN 1 ELSE 0 END)"
        for _, where in indexes
    )
    read = sorted({c for keys, where in indexes for c in (*keys, *pattern.findall(where or ""))})
    changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in read) or "FALSE"
    count = f"UPDATE btree_writes SET n = n + 1 + {entered or '0'} WHERE tbl = '{table}'"
    return (
        f"CREATE FUNCTION btree_writes_{table}() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
        f"IF TG_OP = 'INSERT' THEN {count}; "
        f"ELSIF TG_OP = 'DELETE' THEN UPDATE btree_writes SET n = n + 1 WHERE tbl = '{table}'; "
        f"ELSIF {changed} THEN {count}; "
        f"ELSE UPDATE btree_writes SET n = n + 1, hot = hot + 1, plain = plain + {len(indexes)} WHERE tbl = '{table}'; "
        "END IF; RETURN NULL; END $f$"
    )


def postgres_writes(entries: int, url: str) -> dict[str, Any]:
    """On an empty database at `url`: counting triggers on every table of the ledger, and
    `pg_stat_user_tables` to check that each update they took for HOT was HOT (one that found no
    room on its page was not: its index writes are added). The pool's connections report their
    statistics as they end, so these are read after the ledger is closed."""
    import psycopg

    plain = "postgresql://" + url.split("://", 1)[1]
    with Ledger(url):  # creates the schema: its own writes are not the hot path's
        pass
    with psycopg.connect(plain, autocommit=True) as conn:
        columns: dict[str, list[str]] = {}
        for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        ):
            columns.setdefault(table, []).append(column)
        indexes: dict[str, list[tuple[list[str], str | None]]] = {t: [] for t in columns}
        for table, keys, where in conn.execute(_PG_INDEXES):
            indexes[table].append((keys, where))
        conn.execute("CREATE TABLE btree_writes (tbl text PRIMARY KEY, n bigint, hot bigint, plain bigint)")
        for table in columns:
            conn.execute("INSERT INTO btree_writes VALUES (%s, 0, 0, 0)", (table,))
            conn.execute(_pg_trigger(table, columns[table], indexes[table]))
            conn.execute(
                f"CREATE TRIGGER btree_writes AFTER INSERT OR UPDATE OR DELETE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION btree_writes_{table}()"
            )
        conn.execute("SELECT pg_stat_clear_snapshot()")
        hot_before = dict(conn.execute(_PG_HOT).fetchall())
    with Ledger(url) as ledger, psycopg.connect(plain, autocommit=True) as counting:

        def counts() -> dict[str, int]:
            return dict(counting.execute("SELECT tbl, n FROM btree_writes WHERE n > 0").fetchall())

        passes = hot_path(ledger, entries, counts)
    with psycopg.connect(plain, autocommit=True) as conn:
        hot_after = dict(conn.execute(_PG_HOT).fetchall())
        by_table: dict[str, int] = {}
        for table, n, hot, full in conn.execute("SELECT tbl, n, hot, plain FROM btree_writes WHERE n > 0"):
            not_hot = max(0, hot - (hot_after.get(table, 0) - hot_before.get(table, 0)))
            by_table[table] = n + (full // hot * not_hot if hot else 0)
            if by_table[table] > n:  # updates taken for HOT that were not: settles', on the hot path
                passes["settle"][table] = passes["settle"].get(table, 0) + by_table[table] - n
    return _result(entries, by_table, passes)


class WalFrames:
    """WAL frames (pages written at a commit: each a pwrite64 of its header and one of the page, an
    fdatasync per commit at `synchronous = FULL`) counted by the B-tree they belong to, read from the
    WAL file's frame headers as the ledger's connection leaves them. Checkpoints are this counter's
    (automatic ones off), taken when the WAL passes 64 MB; a page is named by `dbstat` (a freed page
    is named as it was when first seen)."""

    _HEADER, _FRAME_HEADER, _LIMIT = 32, 24, 64 << 20

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn, self._wal = conn, path.with_name(path.name + "-wal")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        self._page_size: int = conn.execute("PRAGMA page_size").fetchone()[0]
        self._offset = self._HEADER
        self._owner: dict[int, str] = {}
        self._frames: dict[str, int] = {}

    def __call__(self) -> dict[str, int]:
        with self._wal.open("rb") as wal:
            wal.seek(self._offset)
            data = wal.read()
        frame = self._FRAME_HEADER + self._page_size
        whole = len(data) // frame * frame
        pages = [int.from_bytes(data[at : at + 4], "big") for at in range(0, whole, frame)]
        if any(page not in self._owner for page in pages):
            self._owner.update(self._conn.execute("SELECT pageno, name FROM dbstat").fetchall())
        for page in pages:
            name = self._owner.get(page, "(free)")
            self._frames[name] = self._frames.get(name, 0) + 1
        self._offset += whole
        if self._offset > self._LIMIT:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._offset = self._HEADER
        return dict(self._frames)


def sqlite_frames(entries: int) -> dict[str, Any]:
    """WAL frames per record by pass and B-tree (`WalFrames`), for the same workload."""
    with tempfile.TemporaryDirectory(prefix="capture-sync-wal-") as tmp:
        path = Path(tmp) / "ledger.sqlite3"
        with Ledger(path, synchronous="FULL") as ledger:
            frames = WalFrames(ledger._store._conn, path)  # type: ignore[attr-defined]
            passes = hot_path(ledger, entries, frames)
            by_tree = frames()
    return _result(entries, by_tree, passes)


def _result(entries: int, by_table: dict[str, int], passes: Passes) -> dict[str, Any]:
    return {
        "entries": entries,
        "per_record": sum(by_table.values()) / entries,
        "per_record_by_table": {t: round(n / entries, 2) for t, n in sorted(by_table.items())},
        "per_record_by_pass": {
            name: {t: round(n / entries, 2) for t, n in sorted(tables.items())} for name, tables in passes.items()
        },
    }


def run(entries: int = 10_000, postgres_url: str | None = None) -> dict[str, Any]:
    result = {"sqlite": sqlite_writes(entries), "sqlite WAL frames": sqlite_frames(entries)}
    if postgres_url:
        result["postgresql"] = postgres_writes(entries, postgres_url)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--postgres-url", help="an empty PostgreSQL database (default: a throwaway server's)")
    args = parser.parse_args()
    if args.postgres_url:
        result = run(args.entries, args.postgres_url)
    else:
        with pg_server.throwaway_database() as url:  # None without PostgreSQL: SQLite alone
            result = run(args.entries, url)
    for engine, r in result.items():
        what = "WAL frames" if "WAL" in engine else "B-tree writes"
        print(f"{engine}: {r['per_record']:.2f} {what} per record ({r['entries']:,} records)")
        for table, n in r["per_record_by_table"].items():
            if n:  # a structure written less than once in 200 records is left out
                print(f"  {table:<14} {n:>6.2f}")
        for name, tables in r["per_record_by_pass"].items():
            parts = ", ".join(f"{t} {n:.2f}" for t, n in tables.items())
            print(f"  {name + ':':<17} {sum(tables.values()):>5.2f}  ({parts})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
