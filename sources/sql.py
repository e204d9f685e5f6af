"""The built-in `sql` source: a table or a query in any SQLAlchemy database, read in keyset pages
ordered by (cursor, primary key), so every page is an index range scan however large the table.

The database does every comparison and the ordering, by its own collation: a pass starts at
`cursor >= :since`, pages continue at `(cursor, key) > (:c, :k)`, and the end of a pass is the last
row the database returned. Comparing in Python instead would skip rows wherever its order differs
from the database's (a case-insensitive or locale collation on a text cursor or key).

No row is dropped silently; every one the database holds is a record or a `BadRecord`:
- A row with no value (NULL or blank) in its primary key comes at its place in the order (NULL sorts
  last in PostgreSQL and Oracle, first elsewhere) as "<table> row with <cursor> = <value>", id
  "<cursor>=<value>" (rows without a key that share a cursor value share that id). Such a key is no
  id and may repeat, so the rows at one (cursor, key) of that kind are read together by the database's
  equality and counted: a state inside them says how many were read ("n"), and a resume reads the rest.
- A row whose cursor is NULL has no place in the order: each pass, after its ordered rows, reads the
  rows with a NULL cursor by their key (a keyed query of their own) and yields them as bad ("<table>
  row with <key> = <value>", id the key: once it gets a cursor value, it comes as a record of that id).
  Without a cursor, the rows whose key is NULL are read likewise after the new rows, every read. Read
  again, each is the same bad record with the same id, which the ledger sees as unchanged.
- A row with neither (or, without a cursor, no key) is named by its content: id "row:<digest>".

A relative `sqlite:///file.db` URL is relative to the config file's folder, like every path.

States: `{"at": {"cursor", "key"[, "n"]}}` after a row (inside a pass; always, without a cursor, which
reads new rows by the primary key) and `{"cursor": value}` after a pass's last row, so the next pass
reads that value again (edits that did not move the cursor); after a row without a place in the order,
that state with `"null": {"cursor", "key"[, "n"]}`, its position among those rows. Older states,
`{"cursor", "seen"}`, `{"pass", "max", "at"}` and an "at" without "n", read as the same (an "at"
after a row without a key reads the rows without a key at that value again: none is lost).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from pydantic import Field, TypeAdapter, ValidationInfo, field_validator, model_validator

from connector.incremental import Lookback, Row, end_of_pass, lookback_amount, order_of
from connector.logs import register_secret
from connector.source import ConfigPath, Item, Source, SourceError, SourceOptions


class SqlOptions(SourceOptions):
    url: str | None = Field(None, description="SQLAlchemy URL, e.g. postgresql+psycopg://reader@db/crm.")
    url_env: str | None = Field(
        None, description="Environment variable holding the URL (keeps a password out of the file)."
    )
    table: str | None = Field(None, description="Table to read, or schema.table.")
    query: str | None = Field(None, description="A SELECT to read instead of a table.")
    primary_key: str = Field(description="Column with a unique, stable id.")
    cursor: str | None = Field(
        None,
        description="Column to read incrementally by (e.g. updated_at): each pass reads the rows at or above the last "
        "pass's highest value, that value included; default: the primary key (new rows).",
    )
    lookback: Lookback = None
    page_size: int = Field(1000, ge=1, le=100_000, description="Rows per query.")

    @field_validator("url")
    @classmethod
    def _sqlite_file_from_config_dir(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A relative SQLite file is relative to the config file's folder (a `ConfigPath`)."""
        try:
            url = sa.make_url(value) if value else None
        except sa.exc.ArgumentError:
            return value  # reported with its reason when the source connects
        if url is None or not url.drivername.startswith("sqlite") or url.database in (None, "", ":memory:"):
            return value
        if url.database.startswith("file:"):  # a URI filename (?uri=true) is the driver's to resolve
            return value
        database = _CONFIG_PATH.validate_python(url.database, context=info.context)
        return url.set(database=database).render_as_string(hide_password=False)

    @model_validator(mode="after")
    def _one_of_each(self) -> SqlOptions:
        if (self.url is None) == (self.url_env is None):
            raise ValueError("set exactly one of `url` and `url_env`")
        if (self.table is None) == (self.query is None):
            raise ValueError("set exactly one of `table` and `query`")
        if self.lookback is not None and self.cursor is None:
            raise ValueError("`lookback` needs `cursor`: without one only new rows are read, by the primary key")
        return self


_CONFIG_PATH: TypeAdapter[str] = TypeAdapter(ConfigPath)
_SECRET_KEYS = ("pass", "pwd", "secret", "token", "key")  # query parameters whose values are masked in logs


def encode(value: Any) -> Any:
    """A column value as JSON for the state, keeping its type so that it binds back the same."""
    if isinstance(value, datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, date):
        return {"date": value.isoformat()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    return str(value) if isinstance(value, UUID) else value


_DECODERS: dict[str, Callable[[str], Any]] = {
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "decimal": Decimal,
}


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        ((kind, text),) = value.items()
        return _DECODERS[kind](text)
    return value


def _plain(value: Any) -> Any:
    """Column values as JSON-friendly fields for the mapper."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    return value


class SqlSource(Source[SqlOptions]):
    """A SQL table or query (any SQLAlchemy database), read by (cursor, primary key) keyset pages."""

    Options = SqlOptions
    options: SqlOptions

    def __init__(self, name: str, options: SqlOptions) -> None:
        super().__init__(name, options)
        self._engine: sa.Engine | None = None

    def _connect(self) -> sa.Connection:
        if self._engine is None:
            opts = self.options
            url = opts.url if opts.url is not None else os.environ.get(opts.url_env or "")
            if not url:
                raise SourceError(f"environment variable {opts.url_env} is not set")
            try:
                parsed = sa.make_url(url)
            except sa.exc.ArgumentError:
                register_secret(url)  # no password to pick out: the whole string is one
                raise SourceError(
                    "cannot use the database URL: it is not a SQLAlchemy URL (dialect+driver://user:password@host/database)"
                ) from None
            register_secret(parsed.password)
            for key, value in parsed.query.items():  # ?password=... goes to the driver as it is
                if any(word in key.lower() for word in _SECRET_KEYS):
                    for item in (value,) if isinstance(value, str) else value:
                        register_secret(item)
            try:
                self._engine = sa.create_engine(parsed)
            except (sa.exc.ArgumentError, ImportError) as exc:
                raise SourceError(f"cannot use the database URL: {exc}") from None
        try:
            return self._engine.connect()
        except sa.exc.SQLAlchemyError as exc:
            raise SourceError(f"cannot connect to the database: {_reason(exc)}") from None

    def _relation(self) -> tuple[sa.FromClause, sa.ColumnElement[Any], sa.ColumnElement[Any]]:
        opts = self.options
        names = dict.fromkeys([opts.primary_key, opts.cursor or opts.primary_key])
        if opts.table is not None:
            schema, _, table = opts.table.rpartition(".")
            rel: sa.FromClause = sa.table(table, *(sa.column(n) for n in names), schema=schema or None)
        else:
            rel = sa.text(opts.query or "").columns(*(sa.column(n) for n in names)).subquery("q")
        return rel, rel.c[opts.cursor or opts.primary_key], rel.c[opts.primary_key]

    def check(self) -> None:
        self._probe(1)

    def columns(self) -> list[str]:
        """The table's or the query's columns, as the database names them (no row is read)."""
        return self._probe(0)

    def _probe(self, limit: int) -> list[str]:
        """The columns of a query for `limit` rows of the relation (0: only its description)."""
        rel, _, _ = self._relation()
        with self._connect() as conn:
            try:
                result: sa.CursorResult[Any] = conn.execute(
                    sa.select(sa.literal_column("*")).select_from(rel).limit(limit)
                )
                result.all()
            except sa.exc.SQLAlchemyError as exc:
                raise SourceError(f"cannot read {self.options.table or 'the query'}: {_reason(exc)}") from None
        names = result.keys()  # the Result's column names: iterating the Result itself yields rows
        return [str(name) for name in names]

    def read(self, state: Any | None) -> Iterator[Item]:
        state = state or {}
        since = None
        if self.options.cursor is not None and "cursor" in state and "at" not in state and "null" not in state:
            since = self._pass_start(decode(state["cursor"]))
        done: list[Any] = [None]  # the state after the read's last row, known once the scan has ended
        return end_of_pass(self._scan(state, since, done), lambda _: done[0])

    def _pass_start(self, last: Any) -> Any:
        """Where a new pass starts: the last pass's value, moved back by `lookback` in the column's own
        type (SQLite hands datetimes back as ISO text, which moves back as text of the same shape)."""
        amount = lookback_amount(self.options.lookback)
        if not amount or last is None:
            return last
        if isinstance(amount, timedelta):
            if isinstance(last, date):
                return last - amount
            if isinstance(last, str) and (moved := _iso_minus(last, amount)) is not None:
                return moved
        elif isinstance(last, int | float):
            return last - amount
        elif isinstance(last, Decimal):
            return last - Decimal(str(amount))
        kind = "a duration" if isinstance(amount, timedelta) else "a number"
        raise SourceError(f"`lookback` is {kind}, which cannot move back {self.options.cursor!r} value {last!r}")

    def _scan(self, state: dict[str, Any], since: Any, done: list[Any]) -> Iterator[tuple[Row, Any]]:
        """Each row with the state after it: first the rows that have a place in the order (after
        the state's position), then every row that has none (a NULL cursor, or without a cursor a NULL
        key), read again by each pass; their states carry where the first part ended (`done`)."""
        opts = self.options
        rel, cursor, key = self._relation()
        with self._connect() as conn:
            if opts.cursor is None:
                at = state.get("at")
                if "null" not in state:
                    for position, row in self._keyset(conn, rel, None, key, key.is_not(None), at):
                        at = position
                        yield self._row(row), {"at": at}
                done[0] = {"at": at}
                for position, row in self._keyset(conn, rel, None, key, key.is_(None), state.get("null")):
                    yield self._row(row), {"at": at, "null": position}
                return
            end = state["at"]["cursor"] if "at" in state else state.get("cursor")
            if "null" not in state:
                placed = cursor.is_not(None) if since is None else cursor >= since
                for position, row in self._keyset(conn, rel, cursor, key, placed, state.get("at")):
                    end = position["cursor"]
                    yield self._row(row), {"at": position}
            done[0] = {"cursor": end}
            for position, row in self._keyset(conn, rel, None, key, cursor.is_(None), state.get("null")):
                yield self._row(row), {"cursor": end, "null": position}

    def _keyset(
        self,
        conn: sa.Connection,
        rel: sa.FromClause,
        group: sa.ColumnElement[Any] | None,
        key: sa.ColumnElement[Any],
        where: sa.ColumnElement[bool],
        position: dict[str, Any] | None,
    ) -> Iterator[tuple[dict[str, Any], sa.RowMapping]]:
        """The rows of `where` in (group, key) order (`group` None: key order) after `position` (None:
        from the first), each with its position {"cursor": group value, "key": key value}. The rows of
        one group value without a key have no order among them: when the scan meets one, the database
        gives all of them by that value, and each one's position counts them ("n"), so a resume inside
        them reads the rest. Every comparison is the database's, NULL-safe: its NULLs sort last
        (PostgreSQL, Oracle) or first (the others)."""
        opts = self.options
        nulls_last = conn.dialect.name in ("postgresql", "oracle")
        order = (key,) if group is None else (group, key)
        select: sa.Select[Any] = sa.select(sa.literal_column("*")).select_from(rel).order_by(*order)

        def gt(c: Any) -> sa.ColumnElement[bool]:
            return sa.false() if group is None else group > c

        def eq(c: Any) -> sa.ColumnElement[bool]:
            return sa.true() if group is None else group == c

        def after_key(c: Any, k: Any) -> sa.ColumnElement[bool]:
            return sa.or_(gt(c), sa.and_(eq(c), sa.or_(key > k, key.is_(None)) if nulls_last else key > k))

        def keyless(c: Any, k: Any, n: int) -> Iterator[tuple[dict[str, Any], sa.RowMapping]]:
            """The rows at `c` whose key is `k` (None or blank: not an id, so it may repeat), from the n-th."""
            query = select.where(where, eq(c), key.is_(None) if k is None else key == k).offset(n or None)
            try:
                for row in conn.execute(query.execution_options(yield_per=opts.page_size)).mappings():
                    n += 1
                    yield {"cursor": encode(k if group is None else c), "key": encode(k), "n": n}, row
            except sa.exc.SQLAlchemyError as exc:
                raise self._unreadable(exc) from None

        def after_keyless(c: Any, k: Any) -> sa.ColumnElement[bool]:
            if k is not None:
                return after_key(c, k)
            return gt(c) if nulls_last else sa.or_(gt(c), sa.and_(eq(c), key.is_not(None)))

        if position is None:
            after: sa.ColumnElement[bool] = sa.true()
        else:
            c, k = None if group is None else decode(position["cursor"]), decode(position["key"])
            if _no_id(k):  # "n" is absent from states saved before it: those rows are read again
                yield from keyless(c, k, position.get("n", 0))
                after = after_keyless(c, k)
            else:
                after = after_key(c, k)
        while True:
            try:
                page = conn.execute(select.where(where, after).limit(opts.page_size)).mappings().all()
            except sa.exc.SQLAlchemyError as exc:
                raise self._unreadable(exc) from None
            for row in page:
                c = None if group is None else row[opts.cursor or opts.primary_key]
                k = row[opts.primary_key]
                if _no_id(k):
                    yield from keyless(c, k, 0)
                    after = after_keyless(c, k)
                    break
                yield {"cursor": encode(k if group is None else c), "key": encode(k)}, row
                after = after_key(c, k)
            else:
                if len(page) < opts.page_size:
                    return

    def _unreadable(self, exc: sa.exc.SQLAlchemyError) -> SourceError:
        return SourceError(f"cannot read {self.options.table or 'the query'}: {_reason(exc)}")

    def _row(self, row: sa.RowMapping) -> Row:
        """A row as a record; as a bad one, named as closely as it can be, when it lacks its key or its cursor."""
        opts = self.options
        data = {str(n): _plain(v) for n, v in row.items()}
        k = row[opts.primary_key]
        c = None if opts.cursor is None else row[opts.cursor]
        rel = opts.table or "the query"
        if not _no_id(k):
            if opts.cursor is None or c is not None:
                # Text compares as the database collates it, which Python may not: its place is its arrival.
                return Row(str(k), data, None, order=None if isinstance(c, str) else order_of(c))
            where = f"{rel} row with {opts.primary_key} = {k}"
            return Row(str(k), data, None, where=where, problem=f"no value in cursor {opts.cursor!r}")
        problem = f"no value in primary key {opts.primary_key!r}"
        if c is not None:  # rows without a key that share a cursor value share this id
            value = _plain(c)
            return Row(
                f"{opts.cursor}={value}", data, None, where=f"{rel} row with {opts.cursor} = {value}", problem=problem
            )
        if opts.cursor is not None:
            problem += f" nor in cursor {opts.cursor!r}"
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return Row(
            f"row:{digest}",
            data,
            None,
            where=f"{rel} row without {opts.primary_key}, content {digest}",
            problem=problem,
        )

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


def _no_id(key: Any) -> bool:
    """A key value that is no id: NULL or blank."""
    return key is None or not str(key).strip()


def _iso_minus(text: str, amount: timedelta) -> str | None:
    try:
        moved = datetime.fromisoformat(text) - amount
    except ValueError:
        return None
    return moved.isoformat(sep=text[10] if len(text) > 10 else "T")


def _reason(exc: sa.exc.SQLAlchemyError) -> str:
    """The driver's own message, without SQLAlchemy's SQL echo and background link."""
    orig = getattr(exc, "orig", None)
    return str(orig or exc).strip().splitlines()[0]
