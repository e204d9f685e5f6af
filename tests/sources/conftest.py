"""Fixtures shared by the source tests: a real PostgreSQL server the tests start themselves, the
example plugin installed into the venv, and the CLI tests' `kit` for end-to-end syncs."""

from __future__ import annotations

import glob
import importlib
import importlib.metadata
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..cli.conftest import kit  # noqa: F401 - a fixture, shared with the end-to-end tests here


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


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capture-sync-example-source"
EXAMPLE_MODULE = "capture_sync_example_source/__init__.py"


def _example_is_current() -> bool:
    try:
        dist = importlib.metadata.distribution("capture-sync-example-source")
    except importlib.metadata.PackageNotFoundError:
        return False
    installed = Path(str(dist.locate_file(EXAMPLE_MODULE)))
    same_code = installed.is_file() and installed.read_bytes() == (EXAMPLE / EXAMPLE_MODULE).read_bytes()
    same_entry_points = {(e.name, e.value) for e in dist.entry_points} == {("vcard", "capture_sync_example_source:VCardSource")}
    return same_code and same_entry_points


@pytest.fixture(scope="session")
def example_plugin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The example plugin installed into this venv (a normal install, so this process sees it)."""
    if not _example_is_current():
        build = tmp_path_factory.mktemp("example") / EXAMPLE.name  # build outside the tree
        shutil.copytree(EXAMPLE, build, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(build)],
            check=True, capture_output=True, timeout=300,
        )
        importlib.invalidate_caches()
    assert _example_is_current()
    return "vcard"
