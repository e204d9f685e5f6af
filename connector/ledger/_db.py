"""The storage interface between the ledger and its engines (SQLite, PostgreSQL).

Like SQLAlchemy's dialects or dlt's destination clients, small: an engine (`Store`) opens
connections, runs one write transaction at a time (`write()`), hands out read connections
(`read()`) and holds the one-daemon-per-ledger lock. A connection (`Db`) runs the SQL the ledger's
private modules (`_enqueue`, `_batches`, ...) write once for both engines, with `?` placeholders;
what differs per engine is in its `Dialect`, a handful of fragments kept in `_sqlite.py` and
`_postgres.py`. Nothing above `ledger/` sees any of this: it calls `Ledger` methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def is_url(target: str | Path) -> bool:
    """A PostgreSQL ledger's URL, not a SQLite file's path: told apart without loading that engine."""
    return isinstance(target, str) and target.startswith(SCHEMES)


@dataclass(frozen=True)
class Dialect:
    """The SQL that is not the same on both engines."""

    engine: str  # "sqlite" or "postgresql"
    # `column {any_of}` with one parameter, `db.dialect.many(values)`: the column is one of the values
    any_of: str
    # pending versions waiting behind an older live version of their record (`views.attention`)
    waiting: str
    # captures counted as merges (`views.status`), from the partial index entries_merged
    merged: str
    # after rows were copied in with their ids (`ledger copy`): the next id of `{table}` comes after them
    next_id_after_copy: str
    # the one parameter of `any_of`: a JSON array for SQLite's json_each, a list (an array) for PostgreSQL
    many: Callable[[Iterable[Any]], Any]
    # run first in a claim's transaction, before its scans of entries in id order ("" for none):
    # PostgreSQL's planner picks those scans by statistics that lag a grown table (`_postgres.CLAIM_PLAN`)
    claim_plan: str
    # A batch's rows as the row source of one statement (`rows_of`), where a statement per row would
    # cost PostgreSQL a round of parse, plan and execute each: SQLite reads them from one JSON array
    # (json_each), PostgreSQL from one typed array per column (unnest). Given the columns' (name, type).
    row_source: Callable[[Sequence[tuple[str, str]]], str]
    # the parameters of `row_source` for these rows (tuples in the columns' order)
    row_params: Callable[[Sequence[Sequence[Any]], int], tuple[Any, ...]]
    # A batch's members (schema v12: `batches.members`, entry ids in position order) as a FROM item
    # `{alias}` beside `{batch}`, a row per member: `{alias}.value` the entry id, `{alias}.key` its place
    # (from 0 on SQLite's json_each, from 1 on PostgreSQL's unnest: only their order is read).
    members: str
    # settle writes person tags into `fresh_tag`, moved into entries_person in bulk (`_merges.keep_fresh_small`,
    # schema v15): SQLite, where that shares the index's leaves; PostgreSQL writes `person_tag` at once
    fresh_persons: bool


def storable(text: str | None) -> str | None:
    """Text an answer brought, as both engines keep it whole: PostgreSQL refuses a NUL in text (the
    settle would fail, and the batch with it, on every replay) and SQLite's JSON functions end the
    text there. A NUL becomes U+FFFD, as a decoder shows a byte it cannot read."""
    return text.replace("\x00", "\ufffd") if text is not None and "\x00" in text else text


def rows_of(db: Db, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> tuple[str, tuple[Any, ...]]:
    """`rows` as a subquery with `columns` (name, SQL type), and its parameters: `FROM {sql} AS o`
    makes a batch's per-member writes one statement on both engines."""
    return db.dialect.row_source(columns), db.dialect.row_params(rows, len(columns))


def members_of(dialect: Dialect, batch: str = "b", alias: str = "m") -> str:
    """SQL: the FROM item of batch `batch`'s members (see `Dialect.members`), as `{batch}, {members_of(...)}`."""
    return dialect.members.format(batch=batch, alias=alias)


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...
    @property
    def description(self) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchmany(self, size: int = ..., /) -> list[Any]: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Db(Protocol):
    """A connection as the ledger's SQL modules use it: `?` placeholders on both engines."""

    @property
    def dialect(self) -> Dialect: ...
    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


class Store(Protocol):
    """One engine holding one ledger.

    `write()` is the one place every write goes through: one transaction, and on both engines one
    writer at a time (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's transaction-scoped advisory lock), so
    every read-then-write of the ledger's modules (claim's "which batch is next", enqueue's "what is
    new work", settle) sees no other writer between its read and its write. A lease's fencing token
    is to be checked there, in the same transaction as the write it guards."""

    name: str  # for messages: a path, or postgresql://USER@HOST:PORT/DB (never a password)

    def write(self, run_in_hand: int | None) -> AbstractContextManager[Db]: ...
    def read(self) -> AbstractContextManager[Db]: ...
    def acquire_daemon_lock(self) -> None: ...
    def close(self) -> None: ...
    # After a committed write that made `live` entries live (enqueue) or `settled` ones settled: an
    # engine whose planner reads statistics refreshes them when they may have fallen behind (ANALYZE).
    def changed(self, *, live: int = 0, settled: int = 0) -> None: ...
