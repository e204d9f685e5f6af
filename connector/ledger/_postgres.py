"""The PostgreSQL engine: a pool of psycopg 3 connections to one database.

Writes keep SQLite's model, one writer at a time: every write transaction first takes a
transaction-scoped advisory lock (`lock_key(WRITE, schema)`), which PostgreSQL releases at COMMIT or ROLLBACK,
even when the client dies. Under READ COMMITTED each statement after it sees every write committed
before, so claim, enqueue and settle read and write as they do under SQLite's `BEGIN IMMEDIATE`:
one live version per record, a claim nobody else makes, a settle wholly in or not at all. (SERIALIZABLE
would let writers overlap but fail some at COMMIT, and a claim that returned a batch cannot simply be
run again.) Readers never wait for it. The daemon lock is a session advisory lock on a connection of
its own, which PostgreSQL drops with the session when the process dies.

The password never travels in the URL: libpq reads PGPASSWORD or its passfile, or `password_file`
gives it as a separate parameter; `PgTarget.name` is what messages print.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _lease
from ._db import Cursor, Dialect
from ._pg_plans import CLAIM_PLAN, Statistics
from ._pg_schema import DAEMON, WRITE, lock_key, migrate
from ._types import IS_LIVE
from .schema import LedgerError, LedgerLocked, LedgerUnreachable

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

CONNECT_TIMEOUT_S = 5
# Delivery's workers (capture.concurrency, 4 by default) each hold one while they wait for the write
# lock; reads (the sweep's counts, the daemon's views) take their own meanwhile.
POOL_MAX = 8
IDLE_IN_TRANSACTION_MS = 5000

# The oldest live version of each record is the first in id order; every other pending one waits.
_WAITING = (
    "SELECT coalesce(sum(pending - CASE WHEN first_state = 'pending' THEN 1 ELSE 0 END), 0)::bigint FROM ("
    "SELECT (array_agg(state ORDER BY id))[1] AS first_state, count(*) AS live, "
    "count(*) FILTER (WHERE state = 'pending') AS pending "
    f"FROM entries WHERE {IS_LIVE} GROUP BY source, record_id) w WHERE live > 1"
)


def _row_source(columns: Sequence[tuple[str, str]]) -> str:
    arrays = ", ".join(f"?::{kind}[]" for _, kind in columns)
    return f"(SELECT * FROM unnest({arrays}) AS u({', '.join(name for name, _ in columns)}))"


def _row_params(rows: Sequence[Sequence[Any]], width: int) -> tuple[Any, ...]:
    return tuple(list(column) for column in zip(*rows, strict=True)) if rows else ([],) * width


DIALECT = Dialect(
    engine="postgresql",
    any_of="= ANY(?)",
    waiting=_WAITING,
    merged="SELECT count(*) FROM entries WHERE merged = 1",
    next_id_after_copy="SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce(max(id), 0) + 1, false) FROM {table}",
    many=list,
    claim_plan=CLAIM_PLAN,
    row_source=_row_source,
    row_params=_row_params,
    members="unnest({batch}.members) WITH ORDINALITY AS {alias}(value, key)",
    fresh_persons=False,  # an UPDATE writes a new row version into every index: a move would cost more
)


@dataclass(frozen=True)
class PgTarget:
    """A PostgreSQL ledger: the URL as given (no password in it), where the password comes from, and
    the schema holding this integration's tables (every connection's search_path)."""

    url: str
    password_file: Path | None = None
    params: dict[str, str] = field(default_factory=dict, compare=False)
    schema: str = "public"

    @classmethod
    def parse(cls, url: str, password_file: Path | None = None, schema: str | None = None) -> PgTarget:
        """Refuses a URL that carries a password: it would be printed wherever the URL is."""
        from psycopg.conninfo import conninfo_to_dict

        plain = "postgresql://" + url.split("://", 1)[1]
        try:
            params = {k: str(v) for k, v in conninfo_to_dict(plain).items() if v is not None}
        except Exception as exc:  # psycopg.ProgrammingError: the URL does not parse
            raise LedgerError(
                f"ledger url does not parse as postgresql://USER@HOST:PORT/DB: {_first_line(exc)}"
            ) from None
        if "password" in params:
            raise LedgerError(
                "ledger url carries a password: remove it from the URL and give it in the PGPASSWORD "
                "environment variable, a `[ledger] password_file`, or libpq's ~/.pgpass"
            )
        return cls(plain, password_file, params, schema or "public")

    @property
    def name(self) -> str:
        """postgresql://USER@HOST:PORT/DB, for messages."""
        p = self.params
        user = f"{p['user']}@" if "user" in p else ""
        port = f":{p['port']}" if "port" in p else ""
        return f"postgresql://{user}{p.get('host', '')}{port}/{p.get('dbname', '')}"

    def connect_kwargs(self) -> dict[str, Any]:
        # The schema's name is checked (`config_file.INTEGRATION_NAME`: no space, no quote), and quoted.
        kwargs: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": "capture-sync",
            # A process paused (SIGSTOP) or cut off inside a transaction would hold its locks, and so a
            # standby's takeover, for as long as it stays away: the server ends such a session.
            "options": (
                f'{self.params.get("options", "")} -c search_path="{self.schema}" '
                f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
            ).strip(),
        }
        if self.password_file is not None:
            try:
                kwargs["password"] = self.password_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise LedgerError(f"ledger password_file {self.password_file} cannot be read: {exc.strerror}") from None
        return kwargs


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@functools.lru_cache(maxsize=512)
def _translate(sql: str) -> str:
    """The ledger's `?` placeholders as psycopg's `%s` (a literal `%` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgDb:
    """A psycopg connection that takes the ledger's SQL as written for both engines."""

    dialect = DIALECT

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        return self._conn.execute(_translate(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(_translate(sql), list(parameters))


class PgStore:
    """A ledger in a PostgreSQL database, through a small connection pool."""

    def __init__(self, target: PgTarget) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise LedgerError(
                f"ledger {target.name} is a PostgreSQL database: install capture-sync's PostgreSQL support "
                "(pip install 'capture-sync[postgres]')"
            ) from None
        self._psycopg = psycopg
        self.target = target
        self.name = target.name
        self._kwargs = target.connect_kwargs()
        with self._errors(), psycopg.connect(target.url, autocommit=True, **self._kwargs) as conn:
            migrate(conn, self.name, target.schema)
        self._pool: psycopg_pool.ConnectionPool[Any] = ConnectionPool(
            target.url,
            kwargs={"autocommit": True, **self._kwargs},
            min_size=1,
            max_size=POOL_MAX,
            name="capture-sync-ledger",
            open=True,
            timeout=CONNECT_TIMEOUT_S,
        )
        self._daemon: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        # A daemon's lease (`lease()`): every write checks it (`_lease.check`); None for one-shot commands.
        self.fence: _lease.Fence | None = None
        self._statistics = Statistics(self._pool.connection)

    def changed(self, *, live: int = 0, settled: int = 0) -> None:
        """ANALYZE entries when this write may have left the planner's statistics behind (`_pg_plans`)."""
        self._statistics.changed(live, settled)

    def close(self) -> None:
        self._statistics.close()  # before the pool: its ANALYZE holds a pooled connection
        if self._daemon is not None:
            self._daemon.close()
            self._daemon = None
        self._pool.close()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """A server that does not answer becomes one line naming the database (never its password)."""
        from psycopg_pool import PoolTimeout

        try:
            yield
        except (self._psycopg.OperationalError, PoolTimeout) as exc:
            if getattr(exc, "sqlstate", None) == "53100":  # disk_full: the server answers, and cannot write
                raise LedgerError(
                    f"the disk of PostgreSQL {self.name} is full: the last write was not recorded (nothing it "
                    f"covered counts as done); free space on the database server ({_first_line(exc)})"
                ) from None
            raise LedgerUnreachable(f"PostgreSQL {self.name} cannot be reached: {_first_line(exc)}") from None

    @contextmanager
    def write(self, run_in_hand: int | None) -> Iterator[PgDb]:
        with self._errors(), self._pool.connection() as conn, conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, %s), set_config('capture_sync.run', %s, true)",
                (*lock_key(WRITE, self.target.schema), "" if run_in_hand is None else str(run_in_hand)),
            )
            if self.fence is not None:  # a leading daemon's lease, checked in the write's own transaction
                _lease.check(conn, self.fence)
            yield PgDb(conn)

    @contextmanager
    def read(self) -> Iterator[PgDb]:
        """One transaction, so a view of several queries reads one moment (REPEATABLE READ)."""
        with self._errors(), self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PgDb(conn)

    def acquire_daemon_lock(self) -> None:
        """One daemon per ledger: a session advisory lock on a connection held until `close`."""
        with self._errors():
            conn = self._psycopg.connect(self.target.url, autocommit=True, **self._kwargs)
            held = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", lock_key(DAEMON, self.target.schema)).fetchone()
            if not held[0]:  # type: ignore[index]
                conn.close()
                raise LedgerLocked(f"another capture-sync daemon is already running on ledger {self.name}")
            leader = _lease.live_holder(conn, self.target.schema)
            if leader is not None:
                conn.close()
                raise LedgerLocked(
                    f"another capture-sync daemon is already running on ledger {self.name}: {leader} leads "
                    f"integration {self.target.schema}"
                )
        self._daemon = conn

    def lease(self, holder: str, lease_s: float) -> _lease.Lease:
        """This integration's lease, for a daemon that leads it while it holds it (`run`)."""
        return _lease.Lease(self, holder, lease_s)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit) for the lease's own statements."""
        with self._errors(), self._pool.connection() as conn:
            yield conn


@contextmanager
def side_read(target: PgTarget) -> Iterator[PgDb]:
    """A read-only connection of its own for one snapshot (REPEATABLE READ: one moment)."""
    import psycopg

    try:
        conn = psycopg.connect(target.url, autocommit=True, **target.connect_kwargs())
    except psycopg.OperationalError as exc:
        raise LedgerUnreachable(f"PostgreSQL {target.name} cannot be reached: {_first_line(exc)}") from None
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PgDb(conn)
    finally:
        conn.close()


def writable(target: PgTarget) -> str | None:
    """None when the database takes writes (reachable, not a read-only standby); else why not."""
    try:
        with side_read(target) as db:
            if db.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                return f"ledger database {target.name} is a read-only standby"
    except LedgerError as exc:
        return str(exc)
    return None
