"""The ledger schema's forward migrations from v12 on (`_migrations` holds the earlier ones): SQLite's
steps, one function per version (`_vN`), and the statements PostgreSQL's `_pg_schema` runs for the
same versions."""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING

from ._merges import person_tag
from ._types import KEY_PREFIX, STUCK

if TYPE_CHECKING:  # `schema._migrate` imports it only when a file needs a migration
    import sqlite_utils


# Both engines' v12 (see `_v12`): each batch's members as an array on its row, in position order.
V12_MEMBERS_SQLITE = (
    "ALTER TABLE batches ADD COLUMN members TEXT",
    # batch_members is stored in (batch_id, position) order (v9: WITHOUT ROWID), which the subquery keeps
    "UPDATE batches SET members = (SELECT json_group_array(entry_id) FROM (SELECT m.entry_id FROM batch_members m "
    "WHERE m.batch_id = batches.id ORDER BY m.position))",
)
V12_MEMBERS_POSTGRESQL = (
    "ALTER TABLE batches ADD COLUMN members bigint[]",
    "UPDATE batches SET members = m.members FROM (SELECT batch_id, array_agg(entry_id ORDER BY position) AS members "
    "FROM batch_members GROUP BY batch_id) AS m WHERE m.batch_id = batches.id",
    "UPDATE batches SET members = '{}' WHERE members IS NULL",  # a batch without members, as SQLite's '[]'
)
V12_COMMON = (
    # A record's pointer is its newest row unless `records` says otherwise: every row it holds now says so.
    "ALTER TABLE entries ADD COLUMN raw_digest TEXT",
    # Every entry a batch ever held names its last one, as v12's resolve and requeue keep it (v11 cleared it).
    "UPDATE entries SET batch_id = m.batch_id FROM (SELECT entry_id, max(batch_id) AS batch_id FROM batch_members "
    "GROUP BY entry_id) AS m WHERE m.entry_id = entries.id AND entries.batch_id IS NULL",
    "DROP TABLE batch_members",
)


def _v12(db: sqlite_utils.Database) -> None:
    """Claim writes one row per batch (issue 24): a batch's members, the entry ids in position order,
    are an array on its row (`batches.members`: JSON text read through json_each on SQLite, bigint[]
    on PostgreSQL), where `batch_members` held a row per member and an index by entry, three B-tree
    writes per record on PostgreSQL and two on SQLite. What was asked of that index is answered
    without it: whether an entry is in flight from the open and stalled batches' arrays (few), whether
    it was ever sent from its `batch_id`, which every ending of a batch writes into its members and
    which a requeue or dismissal now keeps (this migration gives it to every entry a batch held and
    that lost it); operator commands (`ledger show`, `runs show`) read the batches' arrays.
    A new version writes no `records` row (its heap row and primary key on PostgreSQL, two more
    writes per record): a record's pointer (newest version, highest place read, raw digest) is its
    newest entry's own row (`entries.source_order`, and `entries.raw_digest`, new), and `records`
    keeps only the records whose pointer differs from that row (`_enqueue._Pointers`); the rows it
    holds at the migration stay, each saying what it said. Nothing is re-sent: every batch keeps its
    members in their order, so it rebuilds byte for byte, and every record its pointer."""
    for statement in (*V12_MEMBERS_SQLITE, *V12_COMMON):
        db.execute(statement)


# Both engines' v13 (see `_v13`), written out as they ran.
V13_INDEXES = (
    "DROP INDEX idx_entries_key",
    f"CREATE INDEX entries_key_prefix ON entries ({KEY_PREFIX.format(key='key')})",
    f"CREATE INDEX entries_stuck ON entries (source, record_id) WHERE {STUCK.format(state='state')}",
)


# Each batch's `top_entry` as v13 gives it to the batches before: the highest member id of it and of
# every batch before it, which every batch's members stay at or below and which grows with the batch
# id, as the highest entry id at claim does for the batches after.
_V13_TOP = (
    "UPDATE batches SET top_entry = t.top FROM (SELECT id, coalesce(max(m) OVER (ORDER BY id), 0) AS top "
    "FROM (SELECT b.id, (SELECT max({member}) FROM {members}) AS m FROM batches b) AS s) AS t WHERE t.id = batches.id"
)
V13_TOP_SQLITE = (
    "ALTER TABLE batches ADD COLUMN top_entry INTEGER",
    _V13_TOP.format(member="j.value", members="json_each(b.members) AS j"),
)
V13_TOP_POSTGRESQL = (
    "ALTER TABLE batches ADD COLUMN top_entry bigint",
    _V13_TOP.format(member="x", members="unnest(b.members) AS x"),
)


IDENTITY_TABLE = "CREATE TABLE ledger_identity (id TEXT NOT NULL)"


def stored_identity(first_entry: tuple[str, float] | None) -> str:
    """The id v13 stores for a ledger (`Ledger.identity`): a new one's is random (16 hex digits of a
    UUID4, as wide as the identities before: the rejects feed writes it on every line); one with
    entries keeps the identity it had before (a digest of its first entry's key and time), so the
    rejects feed's positions, kept per ledger identity, stay its own."""
    if first_entry is None:
        return uuid.uuid4().hex[:16]
    key, created_at = first_entry
    return hashlib.sha256(f"{key} {float(created_at or 0.0)!r}".encode()).hexdigest()[:16]  # None: a hand-edited row


FIRST_ENTRY = "SELECT key, created_at FROM entries ORDER BY id LIMIT 1"


def _v13(db: sqlite_utils.Database) -> None:
    """Fewer pages written per record (issue 24). A key is a digest, so each new entry went into the
    unique index on the full key (44 bytes a cell) at a random place: a chunk of 1,000 entries dirtied
    nearly as many leaf pages of that index, each written to the WAL (two pwrite64 calls) and again at
    the checkpoint, the most pages any structure wrote at enqueue. The index now holds 8 characters of
    the key's digest (`_types.KEY_PREFIX`, 32 bits), a third of the cell, so a third of the leaves to
    dirty; a lookup by key seeks the prefix and compares the full key on the row (`_types.by_key`),
    where a prefix shared by chance (one in some 4 billion pairs) costs one more row read. Keys stay
    unique by construction (a digest of source, record, content and the content's revision, counted under the write
    lock), no longer by the index.
    `entries_stuck` holds the versions sent and not settled (unknown, blocked, in flight as stored
    before v10) by record: claim's one-live-version rule probes it per candidate (`_batches._NOT_STUCK`),
    where it read every such version per claim, hashed on PostgreSQL while they fit in its work_mem
    and rescanned per candidate past it. An entry enters it only when it becomes unknown or blocked.
    A batch keeps the highest entry id when it was written (`batches.top_entry`), so `ledger show`
    and `runs show` find the batches that may hold an entry by its id (`_batches.carriers`), where
    they searched by time with a 10-minute margin and missed batches after a clock stepped back
    further. The ledger stores its identity (`ledger_identity`, `stored_identity`), which told
    it from another one as a digest of its first entry, "" while it had none.
    Nothing is re-sent: every entry keeps its state, every batch its members."""
    for statement in (*V13_INDEXES, *V13_TOP_SQLITE, IDENTITY_TABLE):
        db.execute(statement)
    db.execute("INSERT INTO ledger_identity (id) VALUES (?)", (stored_identity(db.execute(FIRST_ENTRY).fetchone()),))


# Both engines' v14 (see `_v14`), written out as they ran; `person_tag` is filled between.
V14_INDEX = (
    "DROP INDEX entries_person",
    "CREATE INDEX entries_person ON entries (person_tag) WHERE person_tag IS NOT NULL",
)
# The tags of the entries that hold a person id, from `{rows}` (id, tag) pairs.
PERSON_TAG_SET = "UPDATE entries SET person_tag = t.tag FROM {rows} AS t(id, tag) WHERE entries.id = t.id"


def _v14(db: sqlite_utils.Database) -> None:
    """Fewer pages written per record (issue 24). Settle wrote each captured entry's person id into
    entries_person, an index on the whole id: the CRM's ids are random UUIDs (36 characters a cell),
    so a settle of a few hundred captures dirtied as many leaves of it, over half of the WAL frames of
    a sync. The index now holds a 32-bit digest of the person id (`entries.person_tag`, written by
    settle from `_merges.person_tag`), under a third of the cell, so under a third of the leaves;
    whatever the id's shape (a digest, where a fixed slice of a time-ordered UUID would be shared by
    every person created within a minute). "Who else is this person" (`_merges.merged`) seeks the tags
    and compares the whole id on each row found, so a tag shared by chance costs one more row read and
    the answer stays exact. Nothing is re-sent: only a column and an index change."""
    db.execute("ALTER TABLE entries ADD COLUMN person_tag INTEGER")
    db.conn.create_function("capture_person_tag", 1, person_tag, deterministic=True)
    db.execute("UPDATE entries SET person_tag = capture_person_tag(person_id) WHERE person_id IS NOT NULL")
    for statement in V14_INDEX:
        db.execute(statement)


# Both engines' v15 (see `_v15`).
V15_FRESH = (
    "ALTER TABLE entries ADD COLUMN fresh_tag {integer}",
    "CREATE INDEX entries_person_fresh ON entries (fresh_tag) WHERE fresh_tag IS NOT NULL",
)


def _v15(db: sqlite_utils.Database) -> None:
    """Fewer pages written per record (issue 24). With settles of about one batch per transaction,
    entries_person still took a leaf per captured member once it had more leaves than a batch has
    members: 0.5 of a 100,000-record sync's 1.3 WAL frames per record. On SQLite a settle now writes
    the tag into `fresh_tag` (indexed by entries_person_fresh, which stays small: its leaves are in
    the cache and shared between settles), and the tags move into entries_person thousands at a time
    (`_merges.keep_fresh_small`, in a settle's transaction), so those leaves are shared too. "Who else is
    this person" seeks both indexes. PostgreSQL keeps writing `person_tag` (`Dialect.fresh_persons`):
    its update writes a new row version into every index, a move would cost it more than it saves.
    Nothing is re-sent: a column and an index are added, every tag stays where it is."""
    for statement in V15_FRESH:
        db.execute(statement.format(integer="INTEGER"))
