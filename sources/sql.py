"""The built-in `sql` source: a table or a query in any SQLAlchemy database, read in keyset pages
ordered by (cursor, primary key), so every page is an index range scan however large the table.

The database does every comparison and the ordering, by its own collation: a pass starts at
`cursor >= :since`, pages continue at `(cursor, key) > (:c, :k)`, and the end of a pass is the last
row the database returned. Comparing in Python instead would skip rows wherever its order differs
from the database's (a case-insensitive or locale collation on a text cursor or key).

A row with no value (NULL or blank) in its primary key is yielded as a `BadRecord` ("<table> row
with <cursor> = <value>", id "<cursor>=<value>", the closest to an id it has) at its place in the
order (NULL sorts last in PostgreSQL and Oracle, first elsewhere; rows without a key that share a
cursor value share that id). Without a cursor, rows are read by the primary key, and a row whose
key is NULL has no place in that order: it is not read.

A relative `sqlite:///file.db` URL is relative to the config file's folder, like every path.

States: `{"at": {"cursor", "key"}}` after a row (inside a pass; always, without a cursor, which reads
new rows by the primary key) and `{"cursor": value}` after a pass's last row, so the next pass reads
that value again (edits that did not move the cursor). Older states, `{"cursor", "seen"}` and
`{"pass", "max", "at"}`, read as the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from pydantic import Field, TypeAdapter, ValidationInfo, field_validator, model_validator

from connector.logs import register_secret
from connector.source import BadRecord, ConfigPath, Record, Source, SourceError, SourceOptions

from .incremental import Lookback, Row, end_of_pass, lookback_amount


class SqlOptions(SourceOptions):
    url: str | None = Field(None, description="SQLAlchemy URL, e.g. postgresql+psycopg://reader@db/crm.")
    url_env: str | None = Field(None, description="Environment variable holding the URL (keeps a password out of the file).")
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


def encode(value: Any) -> Any:
    """A column value as JSON for the state, keeping its type so that it binds back the same."""
    if isinstance(value, datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, date):
        return {"date": value.isoformat()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    return str(value) if isinstance(value, UUID) else value


_DECODERS: dict[str, Callable[[str], Any]] = {"datetime": datetime.fromisoformat, "date": date.fromisoformat, "decimal": Decimal}


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
                register_secret(parsed.password)
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
                result: sa.CursorResult[Any] = conn.execute(sa.select(sa.literal_column("*")).select_from(rel).limit(limit))
                result.all()
            except sa.exc.SQLAlchemyError as exc:
                raise SourceError(f"cannot read {self.options.table or 'the query'}: {_reason(exc)}") from None
        return [str(name) for name in result.keys()]

    def read(self, state: Any | None) -> Iterator[Record | BadRecord]:
        since, after = None, None
        if state is not None and "at" in state:
            after = state["at"]
        elif state is not None:
            since = self._pass_start(decode(state["cursor"]))
        rows = ((row, {"at": row.position}) for row in self._scan(since, after))
        if self.options.cursor is None:
            return (row.at(at) for row, at in rows)
        return end_of_pass(rows, lambda row: {"cursor": row.position["cursor"]})

    def _pass_start(self, last: Any) -> Any:
        """Where a new pass starts: the last pass's value, moved back by `lookback` in the column's own
        type (SQLite hands datetimes back as ISO text, which moves back as text of the same shape)."""
        amount = lookback_amount(self.options.lookback)
        if not amount:
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

    def _scan(self, since: Any, after: dict[str, Any] | None) -> Iterator[Row]:
        rel, cursor, key = self._relation()
        same = cursor is key
        order = (key,) if same else (cursor, key)
        base: sa.Select[Any] = sa.select(sa.literal_column("*")).select_from(rel).order_by(*order).limit(self.options.page_size)
        with self._connect() as conn:
            nulls_last = conn.dialect.name in ("postgresql", "oracle")  # in ascending order
            if after is not None:
                where = self._after(cursor, key, after, same, nulls_last)
            elif since is not None:
                where = cursor >= since
            else:
                where = cursor.is_not(None)
            while True:
                try:
                    page = conn.execute(base.where(where)).mappings().all()
                except sa.exc.SQLAlchemyError as exc:
                    raise SourceError(f"cannot read {self.options.table or 'the query'}: {_reason(exc)}") from None
                for row in page:
                    c, k = row[self.options.cursor or self.options.primary_key], row[self.options.primary_key]
                    after = {"cursor": encode(c), "key": encode(k)}
                    yield self._row(c, k, {str(n): _plain(v) for n, v in row.items()}, after)
                if len(page) < self.options.page_size or after is None:
                    return
                where = self._after(cursor, key, after, same, nulls_last)

    def _row(self, c: Any, k: Any, data: dict[str, Any], after: dict[str, Any]) -> Row:
        if k is not None and str(k).strip():
            return Row(str(k), data, after)
        opts, value = self.options, _plain(c)
        where = f"{opts.table or 'the query'} row with {opts.cursor} = {value}"
        return Row(f"{opts.cursor}={value}", data, after, where=where, problem=f"no value in primary key {opts.primary_key!r}")

    @staticmethod
    def _after(cursor: Any, key: Any, position: dict[str, Any], same: bool, nulls_last: bool) -> Any:
        c, k = decode(position["cursor"]), decode(position["key"])
        if k is None:  # after a row without a key, the keyed rows of its cursor value come after it or not at all
            return cursor > c if nulls_last else sa.or_(cursor > c, sa.and_(cursor == c, key.is_not(None)))
        return key > k if same else sa.or_(cursor > c, sa.and_(cursor == c, key > k))

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


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
