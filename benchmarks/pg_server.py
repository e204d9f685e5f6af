"""A throwaway PostgreSQL server on a loopback port, from the Debian postgresql-15 binaries (.ci/run
installs them; PG_BIN names another folder): the tests' second ledger engine and the SQL source's
database (tests/conftest.py loads this file), and `make bench`'s PostgreSQL ledger."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def bindir() -> str | None:
    """The folder holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    candidates = [os.environ.get("PG_BIN", ""), *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(os.path.dirname(on_path))
    return next((d for d in candidates if d and os.access(os.path.join(d, "initdb"), os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


class Server(str):
    """The server's URL, which can also stop the server (as a crash does: immediate) and start it again
    on the same port and data (the failover test's database restart)."""

    start: Callable[[], None]
    stop: Callable[[], None]

    def __new__(cls, url: str, start: Callable[[], None], stop: Callable[[], None]) -> Server:
        server = super().__new__(cls, url)
        server.start, server.stop = start, stop
        return server


@contextmanager
def throwaway_server(*, durable: bool = False) -> Iterator[str]:
    """Start a server, yield `postgresql+psycopg://postgres@127.0.0.1:PORT/postgres` (trust auth), stop
    and remove it. `durable`: fsync as a production server does (a benchmark); else off (the tests)."""
    found = bindir()
    if found is None:
        raise RuntimeError("PostgreSQL binaries not found (set PG_BIN, or install postgresql-15)")
    home = tempfile.mkdtemp(prefix="capture-sync-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        user = "postgres" if _user_exists("postgres") else "nobody"
        shutil.chown(home, user)
        as_user = ["runuser", "-u", user, "--"]
    data, port = os.path.join(home, "data"), _free_port()

    def run(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True, timeout=120)

    run(f"{found}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1"
    if not durable:
        options += " -c fsync=off -c full_page_writes=off"
    start = [f"{found}/pg_ctl", "-D", data, "-o", options, "-l", os.path.join(home, "log"), "-w", "start"]
    run(*start)
    try:
        yield Server(
            f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres",
            lambda: run(*start),
            lambda: run(f"{found}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"),
        )
    finally:
        run(f"{found}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def throwaway_database(*, durable: bool = False) -> Iterator[str | None]:
    """A fresh database's URL on a throwaway server, or None when PostgreSQL is not installed."""
    if bindir() is None:
        yield None
        return
    import psycopg

    with throwaway_server(durable=durable) as server:
        plain = server.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        yield plain.rsplit("/", 1)[0] + "/bench"


@contextmanager
def required_database(*, durable: bool = False) -> Iterator[str]:
    """`throwaway_database` for a benchmark that has nothing to measure without PostgreSQL."""
    with throwaway_database(durable=durable) as url:
        if url is None:
            raise RuntimeError("PostgreSQL binaries not found (set PG_BIN, or install postgresql-15)")
        yield url
