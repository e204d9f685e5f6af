"""Merges: captures the CRM answered with a person it already holds for another of our records.

The CRM captures one canonical person per identity (spec 1: "creates or updates one canonical
person"), so two records with the same email may come back as one person. Only the answer's
`person_id` can tell (`Outcome.named_person`): where it carries none (a bulk result object is
undocumented, spec 2.6: a bare `id` may be anything, and a count-settled member has none), nothing
is counted as a merge. Nothing here commits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from ._db import Db, Dialect, storable
from ._types import Outcome

# A record is known to be a person once the CRM listed it, as new (captured) or existing (duplicate).
_HOLDS = "('captured','duplicate')"


def person_tag(person_id: str) -> int:
    """The key of entries_person (schema v14): 32 bits of a digest of the person id as stored, a
    signed integer as both engines keep it. Entries sharing a tag by chance are told apart by the id."""
    digest = hashlib.blake2b(person_id.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


# Captured entries whose tags wait in `fresh_tag` (schema v15) are moved into entries_person once there
# are this many: a move of thousands dirties each leaf of entries_person once, a settle of a hundred
# dirtied a leaf per member; entries_person_fresh, a few leaves of this many tags, stays in the cache.
FRESH_MOVE = 4096


def holders_sql(dialect: Dialect) -> str:
    """SQL: the records holding any of the person ids given (the second parameter) as a person, found
    by their tags (the first): a seek of entries_person, and of entries_person_fresh (schema v15),
    per tag, the whole id compared on each row. The parameters twice, one pair per index."""
    return " UNION ALL ".join(
        f"SELECT person_id, source, record_id FROM entries WHERE {column} {dialect.any_of} "
        f"AND person_id {dialect.any_of} AND state IN {_HOLDS}"
        for column in ("person_tag", "fresh_tag")
    )


def fresh_count(db: Db) -> int:
    """How many entries' tags wait in `fresh_tag` (from entries_person_fresh alone)."""
    count: int = db.execute("SELECT count(*) FROM entries WHERE fresh_tag IS NOT NULL").fetchone()[0]
    return count


def keep_fresh_small(db: Db, waiting: int | None, settled: Iterable[Outcome]) -> int:
    """After a settle of `settled`, in its transaction: the tags waiting in `fresh_tag`, moved into
    `person_tag` (entries_person) once `FRESH_MOVE` wait. `waiting` is this process's count before
    the settle (None: not counted yet), a guess once other processes settle too: the index is counted
    before a move is decided."""
    if waiting is not None:
        waiting += sum(1 for o in settled if o.person_id is not None)
    if waiting is None or waiting >= FRESH_MOVE:
        waiting = fresh_count(db)
    if waiting < FRESH_MOVE:
        return waiting
    db.execute("UPDATE entries SET person_tag = fresh_tag, fresh_tag = NULL WHERE fresh_tag IS NOT NULL")
    return 0


def tags_of(outcomes: Sequence[Outcome]) -> dict[str, int]:
    """Each person id among `outcomes`, as stored, with its tag: made once per settle, for the merge
    check and for the write."""
    return {person: person_tag(person) for o in outcomes if (person := storable(o.person_id)) is not None}


def merged(
    db: Db, outcomes: Sequence[Outcome], records: Mapping[int, tuple[str, str]], tags: Mapping[str, int]
) -> set[int]:
    """The entry ids among `outcomes` captured into a person id that the ledger (or an earlier
    outcome of the same batch) holds for another record and not for this one: a record's new version
    that comes back as the person it already was is no new merge. Read before the outcomes are
    written, in their transaction (indexes entries_person and entries_person_fresh, by tag).
    `records` gives each outcome's entry its (source, record id), as the settle read them; `tags` the
    outcomes' person tags (`tags_of`)."""
    captured = [o for o in outcomes if o.state == "captured" and o.person_id and o.named_person]
    if not captured:
        return set()
    held: dict[str, set[tuple[str, str]]] = {}
    persons = sorted({_stored(o) for o in captured})
    pair = (db.dialect.many(sorted({tags[p] for p in persons})), db.dialect.many(persons))
    for person, source, rid in db.execute(holders_sql(db.dialect), pair + pair):
        held.setdefault(person, set()).add((source, rid))
    found = set()
    for o in captured:
        me = records[o.entry_id]
        holders = held.setdefault(_stored(o), set())
        if holders and me not in holders:
            found.add(o.entry_id)
        holders.add(me)
    return found


def _stored(outcome: Outcome) -> str:
    """The person id as the settle stores it (`storable`: a NUL the database refuses becomes U+FFFD),
    so that a held id is found again."""
    return storable(str(outcome.person_id)) or ""
