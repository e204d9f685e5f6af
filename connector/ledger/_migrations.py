"""The ledger schema's forward migrations up to v11 (`_migrations_late` holds v12 on): SQLite's steps,
one function per version (`_vN`, run in order by `schema.MIGRATIONS` as an older file is opened; a new
one is given their result at once, `_fresh`), and the
statements PostgreSQL's `_pg_schema` runs for the same versions. Kept apart from `schema.py`, which opens the file, checks its version and
words the errors, because the history of the schema grows with every release and nothing but a
migration reads it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _counts
from ._types import IS_LIVE, RARE, any_state

if TYPE_CHECKING:  # `schema._migrate` imports it only when a file needs a migration
    import sqlite_utils


def _v1(db: sqlite_utils.Database) -> None:
    db.table("source_state").create({"source": str, "state": str, "updated_at": float}, pk="source")
    db.table("entries").create(
        {
            "id": int,
            "key": str,
            "source": str,
            "record_id": str,
            "state": str,
            "payload": str,
            "content_hash": str,
            "mapping_version": str,
            "revision": int,
            "person_id": str,
            "last_error": str,
            "batch_id": int,
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
        not_null={"key", "source", "record_id", "state", "content_hash", "mapping_version", "revision"},
    )
    db.table("entries").create_index(["key"], unique=True)
    db.table("entries").create_index(["state", "id"])
    db.table("entries").create_index(["source", "record_id", "content_hash"])
    db.table("records").create({"source": str, "record_id": str, "entry_id": int}, pk=("source", "record_id"))
    db.table("batches").create(
        {
            "id": int,
            "key": str,
            "operation": str,
            "state": str,
            "body_hash": str,
            "size": int,
            "last_error": str,
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
        not_null={"key", "operation", "state", "body_hash", "size"},
    )
    db.table("batches").create_index(["key"], unique=True)
    db.table("batches").create_index(["state"])
    db.table("batch_members").create({"batch_id": int, "position": int, "entry_id": int}, pk=("batch_id", "position"))
    db.table("batch_members").create_index(["entry_id"])
    db.table("attempts").create(
        {
            "id": int,
            "batch_id": int,
            "key": str,
            "operation": str,
            "started_at": float,
            "latency_ms": float,
            "status_code": int,
            "error_name": str,
            "error_code": str,
            "retryable": int,
            "outcome": str,
        },
        pk="id",
    )
    db.table("attempts").create_index(["batch_id"])
    db.table("runs").create(
        {
            "id": int,
            "kind": str,
            "started_at": float,
            "finished_at": float,
            "duration_s": float,
            "read": int,
            "enqueued": int,
            "unchanged": int,
            "rejected": int,
            "sent": int,
            "captured": int,
            "duplicate": int,
            "failed": int,
            "blocked": int,
            "exit_code": int,
        },
        pk="id",
    )


def _v2(db: sqlite_utils.Database) -> None:
    """Entries became immutable versions: a newer version is a new row, an older one never sent is
    `superseded`, and a pending version waits while an older one of its record is live. Keys and change
    detection no longer include the mapping version; v1 keys stay as they are (nothing is re-sent).
    The index answers "has this record an older live version?" from the index alone; `notes` keeps
    what the mapping noted beside a valid payload (a field dropped by `on_error = "drop"`), apart from
    `last_error`, which delivery rewrites."""
    entries = db.table("entries")
    entries.create_index(["source", "record_id", "state"], index_name="entries_record_state")
    entries.add_column("notes", str)


def _v3(db: sqlite_utils.Database) -> None:
    """`flows`: when `check --flow` last passed against a base URL for a client name, and what it saw
    (JSON), so that sync and run can tell a server that has passed the spec's synthetic test flow."""
    db.table("flows").create(
        {"base_url": str, "client_name": str, "passed_at": float, "summary": str},
        pk=("base_url", "client_name"),
        not_null={"passed_at", "summary"},
    )


def _v4(db: sqlite_utils.Database) -> None:
    """Run reports and cursor control. `entries.run_id`: the run that last changed the entry (older
    entries keep NULL: no run is known for them); `runs.sources` (JSON list) and `runs.note` say what
    a run read or what an operator did; `state_history` keeps every cursor a person or a full refresh
    replaced, so that it can be put back. Only adds columns and tables: safe on any v3 ledger."""
    entries = db.table("entries")
    entries.add_column("run_id", int)
    entries.create_index(["run_id", "state"], index_name="entries_run_state")
    runs = db.table("runs")
    runs.add_column("sources", str)
    runs.add_column("note", str)
    db.table("state_history").create(
        {
            "id": int,
            "source": str,
            "old_state": str,
            "new_state": str,
            "action": str,
            "run_id": int,
            "changed_at": float,
        },
        pk="id",
        not_null={"source", "action", "changed_at"},
    )
    db.table("state_history").create_index(["source", "id"])


def _v5(db: sqlite_utils.Database) -> None:
    """Indexes for `status` (connector/ledger/views.py), so that it reads a ledger of a million entries
    in well under a second: entries(source, state) gives the counts by source and state from the index
    alone, and entries_live_record, partial, holds only the live entries (a small share of a ledger
    that has been delivered) by record, so that counting the versions that wait behind an older live
    one is one pass over it instead of a subquery per pending entry. Each costs an index write per
    entry written or changing state; building them on an existing ledger of 1,000,000 entries takes a
    few seconds, once. The live states are written out, as a migration must stay as it ran: a change
    to `LIVE` needs a migration that rebuilds the partial index (a test compares the two)."""
    db.table("entries").create_index(["source", "state"], index_name="entries_source_state")
    db.execute(
        "CREATE INDEX entries_live_record ON entries(source, record_id, state) "
        "WHERE state IN ('pending','in_flight','unknown','blocked')"
    )


def _v6(db: sqlite_utils.Database) -> None:
    """One version order per record, from the source (issue 27). `records.source_order` is the
    highest place in the source's order (a cursor value, JSON) read for the record, so a version read
    again below it is never sent; `entries.source_order` keeps each version's own place for audit;
    `runs.older` counts the versions a run read below it. Existing records keep NULL, which compares
    with nothing: their next version is taken in order of arrival, as before. `records.raw_digest`
    is a digest of the source record the newest version was mapped from (with the mapping's version
    and its place in the order), so a record read again unchanged is known without mapping it;
    `runs.late` counts the rows an incremental read passed over below its cursor that the ledger
    never saw."""
    db.table("records").add_column("source_order", str)
    db.table("records").add_column("raw_digest", str)
    db.table("entries").add_column("source_order", str)
    db.table("runs").add_column("older", int)
    db.table("runs").add_column("late", int)


def _v7(db: sqlite_utils.Database) -> None:
    """Truthful history (issue 26). `runs.passes` counts the idle passes a run entry stands for:
    consecutive passes that read and sent nothing and ended for the same `runs.reason` fold into
    one entry (`_runs.finish`), spanning `started_at` to `finished_at`; NULL is one pass. `runs.merged`
    and `entries.merged` count captures answered with a person id the ledger already holds for
    another record (the CRM merged them by identity). `entries_person` answers "who else is this
    person?" at settle time; `entries_merged`, partial, counts the merges for `status` from the index
    alone. Only adds columns and indexes: nothing is re-sent, existing entries count no merge."""
    runs = db.table("runs")
    runs.add_column("passes", int)
    runs.add_column("reason", str)
    runs.add_column("merged", int)
    db.table("entries").add_column("merged", int)
    db.execute("CREATE INDEX entries_person ON entries(person_id) WHERE person_id IS NOT NULL")
    db.execute("CREATE INDEX entries_merged ON entries(source) WHERE merged = 1")


def _v8(db: sqlite_utils.Database) -> None:
    """`pauses`: what an operator paused (`capture-sync pause`), a source's name or "*" for all, and
    since when, so that a daemon started again on the ledger stays paused until `resume`."""
    db.table("pauses").create({"source": str, "since": float}, pk="source", not_null={"since"})


# Schema v9's indexes, written out as they ran (a migration stays as it ran); _pg_schema creates the same.
_V9_SETTLED = (
    "state = 'captured' OR state = 'duplicate' OR state = 'failed' OR state = 'rejected' "
    "OR state = 'superseded' OR state = 'dismissed'"
)
V9_INDEXES = (
    "DROP INDEX idx_entries_state_id",
    "DROP INDEX entries_record_state",
    "DROP INDEX entries_run_state",
    "DROP INDEX entries_source_state",
    "CREATE INDEX entries_to_send ON entries (state, id) WHERE state = 'pending' OR state = 'unknown'",
    f"CREATE INDEX entries_settled ON entries (state, source) WHERE {_V9_SETTLED}",
    f"CREATE INDEX entries_run ON entries (run_id) WHERE {_V9_SETTLED}",
)


def _v9(db: sqlite_utils.Database) -> None:
    """A cheaper hot path (issue 24): an entry is written three times (pending, in flight, settled),
    and each index that holds its state was rewritten each time, some 34 B-tree writes per record.
    Each index now holds an entry only in the phase its queries need: `entries_to_send` the versions
    claim takes next (pending and unknown ones, in id order), `entries_live_record` (v5) the live ones (the one-live-version
    rule, `waiting`, the counts of live states), `entries_settled` and `entries_run` the settled
    ones (`status` counts, `runs show`, `replay --include-failed`). The full (state, id), (source,
    state), (run_id, state) and (source, record_id, state) indexes go: every query they served reads
    one of these. `records` and `batch_members`, written once per version and per member, become
    WITHOUT ROWID tables, each row stored once in its primary key's B-tree instead of in a table and
    again in the key's index (PostgreSQL keeps a heap and its primary key either way). Only the
    storage changes: nothing is re-sent, every entry keeps its state."""
    for statement in V9_INDEXES:
        db.execute(statement)
    for table, columns, key in _V9_WITHOUT_ROWID:
        names = ", ".join(c.split()[0] for c in columns)
        db.execute(f"CREATE TABLE {table}_v9 ({', '.join(columns)}, PRIMARY KEY ({key})) WITHOUT ROWID")
        db.execute(f"INSERT INTO {table}_v9 ({names}) SELECT {names} FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {table}_v9 RENAME TO {table}")
    db.execute("CREATE INDEX idx_batch_members_entry_id ON batch_members (entry_id)")


_V9_WITHOUT_ROWID = (
    (
        "records",
        ("source TEXT", "record_id TEXT", "entry_id INTEGER", "source_order TEXT", "raw_digest TEXT"),
        "source, record_id",
    ),
    ("batch_members", ("batch_id INTEGER", "position INTEGER", "entry_id INTEGER"), "batch_id, position"),
)


# Both engines' v10 (see `_v10`), written out as it ran (in flight from batch_members, which v12 folds into batches).
V10_IN_FLIGHT = (
    "UPDATE entries SET state = 'pending' WHERE state = 'in_flight' AND EXISTS (SELECT 1 FROM batch_members m "
    "JOIN batches b ON b.id = m.batch_id WHERE m.entry_id = entries.id AND b.state IN ('open','stalled'))"
)


def _v10(db: sqlite_utils.Database) -> None:
    """Claim at batch granularity (issue 24): claiming writes the batch and its members, and no entry.
    An entry is in flight while it is pending and a member of an open or stalled batch (`in_open_batch`),
    so the in-flight entries of an open or stalled batch become pending: the same batch is re-sent
    under its key and bytes, as before, and `status` counts them in flight from their batch. An entry
    stored in flight outside any such batch (none should be) keeps its state, as v9 left it: nothing
    is re-sent, nothing lost."""
    db.execute(V10_IN_FLIGHT)


# Both engines' v11 (see `_v11`), written out as they ran.
V11_INDEXES = (
    "DROP INDEX entries_to_send",
    "DROP INDEX entries_live_record",
    "DROP INDEX entries_settled",
    "DROP INDEX entries_run",
    f"CREATE INDEX entries_live ON entries (state, id, source, record_id) WHERE {IS_LIVE}",
    f"CREATE INDEX entries_rare ON entries (state, id, run_id) WHERE {any_state(RARE)}",
    "ALTER TABLE batches ADD COLUMN run_id BIGINT",
    "CREATE INDEX batches_run ON batches (run_id)",
    # The run that settled each batch, for the batches settled before: its captured and duplicate
    # members carry it (one transaction stamped them all).
    "UPDATE batches SET run_id = (SELECT max(e.run_id) FROM batch_members m JOIN entries e ON e.id = m.entry_id "
    "AND e.batch_id = m.batch_id WHERE m.batch_id = batches.id AND (e.state = 'captured' OR e.state = 'duplicate')) "
    "WHERE state = 'settled'",
)


def _v11(db: sqlite_utils.Database) -> None:
    """Fewer B-tree writes per record (issue 24): an entry is written at enqueue and at settle, and
    each index holding it then was written too. Three indexes become one or none:
    - `entries_to_send` (the pending and unknown versions) and `entries_live_record` (the live ones,
      by record) become `entries_live`, the live versions in (state, id) order with their source and
      record: claim walks its pending part in id order, `status` counts the live states and the
      waiting versions from it alone; the one-live-version rule looks a record's older versions up by
      the (source, record_id, content_hash) index every version is in anyway. One index entry in at
      enqueue and one out at settle, where there were two of each.
    - `entries_settled` goes: `status` reads the settled states' counts from `settled_counts`, a row
      per source and state that each write adds its figures to (`_counts`), a constant number of rows
      per batch.
    - `entries_run` goes: a batch keeps the run that settled it (`batches.run_id`, a write per batch),
      and `runs show` finds a run's captured and duplicate entries through its batches.
    - `entries_rare` holds the settled states a normal settle does not reach (`_types.RARE`): failed
      (`replay --include-failed`), rejected, superseded and dismissed, by state (`ledger list`) and
      with their run (`runs show`).
    Only storage changes: nothing is re-sent, every entry keeps its state, the counts are the entries'."""
    for statement in V11_INDEXES:
        db.execute(statement)
    db.execute(_counts.CREATE + " WITHOUT ROWID")
    _counts.recount(db)
