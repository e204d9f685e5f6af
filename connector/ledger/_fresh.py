"""A new ledger file is given the schema the forward migrations end at, in one step.

Replaying every migration on an empty file cost each first run some 75-150 ms: the import of
sqlite-utils (only the migrations use it) and fifteen steps, some of them rebuilding tables, a sixth
of a sync's start-up or more. An existing file still migrates step by step (`schema._migrate`).
`SCHEMA` is what those steps leave in `sqlite_master`, in their order, written out whole: never
composed from the migrations' own statements, which a later migration may change. A new migration
changes it too (and `create`, for rows or stored pragmas); tests/ledger/test_fresh_schema.py holds a
new file equal to the steps' result, and prints the new statements when they differ.
"""

from __future__ import annotations

import sqlite3

from ._migrations_late import stored_identity

SCHEMA: tuple[str, ...] = (
    'CREATE TABLE "source_state" (\n   "source" TEXT PRIMARY KEY,\n   "state" TEXT,\n   "updated_at" REAL\n)',
    'CREATE TABLE "entries" (\n   "id" INTEGER PRIMARY KEY,\n   "key" TEXT NOT NULL,\n   "source" TEXT NOT NULL,\n   "record_id" TEXT NOT NULL,\n   "state" TEXT NOT NULL,\n   "payload" TEXT,\n   "content_hash" TEXT NOT NULL,\n   "mapping_version" TEXT NOT NULL,\n   "revision" INTEGER NOT NULL,\n   "person_id" TEXT,\n   "last_error" TEXT,\n   "batch_id" INTEGER,\n   "created_at" REAL,\n   "updated_at" REAL\n, "notes" TEXT, "run_id" INTEGER, "source_order" TEXT, "merged" INTEGER, raw_digest TEXT, person_tag INTEGER, fresh_tag INTEGER)',
    'CREATE INDEX "idx_entries_source_record_id_content_hash"\n    ON "entries" ("source", "record_id", "content_hash")',
    'CREATE TABLE "batches" (\n   "id" INTEGER PRIMARY KEY,\n   "key" TEXT NOT NULL,\n   "operation" TEXT NOT NULL,\n   "state" TEXT NOT NULL,\n   "body_hash" TEXT NOT NULL,\n   "size" INTEGER NOT NULL,\n   "last_error" TEXT,\n   "created_at" REAL,\n   "updated_at" REAL\n, run_id BIGINT, members TEXT, top_entry INTEGER)',
    'CREATE UNIQUE INDEX "idx_batches_key"\n    ON "batches" ("key")',
    'CREATE INDEX "idx_batches_state"\n    ON "batches" ("state")',
    'CREATE TABLE "attempts" (\n   "id" INTEGER PRIMARY KEY,\n   "batch_id" INTEGER,\n   "key" TEXT,\n   "operation" TEXT,\n   "started_at" REAL,\n   "latency_ms" REAL,\n   "status_code" INTEGER,\n   "error_name" TEXT,\n   "error_code" TEXT,\n   "retryable" INTEGER,\n   "outcome" TEXT\n)',
    'CREATE INDEX "idx_attempts_batch_id"\n    ON "attempts" ("batch_id")',
    'CREATE TABLE "runs" (\n   "id" INTEGER PRIMARY KEY,\n   "kind" TEXT,\n   "started_at" REAL,\n   "finished_at" REAL,\n   "duration_s" REAL,\n   "read" INTEGER,\n   "enqueued" INTEGER,\n   "unchanged" INTEGER,\n   "rejected" INTEGER,\n   "sent" INTEGER,\n   "captured" INTEGER,\n   "duplicate" INTEGER,\n   "failed" INTEGER,\n   "blocked" INTEGER,\n   "exit_code" INTEGER\n, "sources" TEXT, "note" TEXT, "older" INTEGER, "late" INTEGER, "passes" INTEGER, "reason" TEXT, "merged" INTEGER)',
    'CREATE TABLE "flows" (\n   "base_url" TEXT,\n   "client_name" TEXT,\n   "passed_at" REAL NOT NULL,\n   "summary" TEXT NOT NULL,\n   PRIMARY KEY ("base_url", "client_name")\n)',
    'CREATE TABLE "state_history" (\n   "id" INTEGER PRIMARY KEY,\n   "source" TEXT NOT NULL,\n   "old_state" TEXT,\n   "new_state" TEXT,\n   "action" TEXT NOT NULL,\n   "run_id" INTEGER,\n   "changed_at" REAL NOT NULL\n)',
    'CREATE INDEX "idx_state_history_source_id"\n    ON "state_history" ("source", "id")',
    "CREATE INDEX entries_merged ON entries(source) WHERE merged = 1",
    'CREATE TABLE "pauses" (\n   "source" TEXT PRIMARY KEY,\n   "since" REAL NOT NULL\n)',
    'CREATE TABLE "records" (source TEXT, record_id TEXT, entry_id INTEGER, source_order TEXT, raw_digest TEXT, PRIMARY KEY (source, record_id)) WITHOUT ROWID',
    "CREATE INDEX entries_live ON entries (state, id, source, record_id) WHERE (state = 'pending' OR state = 'in_flight' OR state = 'unknown' OR state = 'blocked')",
    "CREATE INDEX entries_rare ON entries (state, id, run_id) WHERE (state = 'failed' OR state = 'rejected' OR state = 'superseded' OR state = 'dismissed')",
    "CREATE INDEX batches_run ON batches (run_id)",
    "CREATE TABLE settled_counts (source TEXT NOT NULL, state TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (source, state)) WITHOUT ROWID",
    "CREATE INDEX entries_key_prefix ON entries (substr(key, 3, 8))",
    "CREATE INDEX entries_stuck ON entries (source, record_id) WHERE (state = 'in_flight' OR state = 'unknown' OR state = 'blocked')",
    "CREATE TABLE ledger_identity (id TEXT NOT NULL)",
    "CREATE INDEX entries_person ON entries (person_tag) WHERE person_tag IS NOT NULL",
    "CREATE INDEX entries_person_fresh ON entries (fresh_tag) WHERE fresh_tag IS NOT NULL",
)


def create(conn: sqlite3.Connection) -> None:
    """Today's schema on an empty file, inside the caller's transaction, and the new ledger's identity."""
    for statement in SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO ledger_identity (id) VALUES (?)", (stored_identity(None),))
