"""Fixtures shared by the source tests: a real PostgreSQL server started by the tests themselves."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest


def _pg_bindir() -> str | None:
    candidates = [os.environ.get("PG_BIN", "")] + sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(os.path.dirname(on_path))
    return next((d for d in candidates if d and os.access(os.path.join(d, "initdb"), os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway server on a loopback port; in CI its absence is a failure, never a skip."""
    bindir = _pg_bindir()
    if bindir is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("PostgreSQL binaries not found (.ci/run installs postgresql-15)")
        pytest.skip("PostgreSQL binaries not found (set PG_BIN, or install postgresql-15)")
    home = tempfile.mkdtemp(prefix="capture-sync-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        user = "postgres" if _user_exists("postgres") else "nobody"
        shutil.chown(home, user)
        as_user = ["runuser", "-u", user, "--"]
    data, port = os.path.join(home, "data"), _free_port()

    def run(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True, timeout=120)

    run(f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    run(f"{bindir}/pg_ctl", "-D", data, "-o", options, "-l", os.path.join(home, "log"), "-w", "start")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(home, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
