"""Shared fixtures: the sandbox Capture API in-process, or as a `capture-sync sandbox serve` process.

def test_x(sandbox):                       # in-process, free loopback port, fresh db
    key, secret = sandbox.create_client(rate_limit=1000)
    httpx.get(sandbox.base_url + "/info", headers=sandbox.headers(key, secret))

def test_y(sandbox_factory):               # the same with faults, another rate window or behaviour
    box = sandbox_factory(faults=Faults(p_retryable_503=1.0), rate_window_s=1.0,
                          behaviour=Behaviour(bulk_result_shape="bare"))

def test_z(sandbox_process):               # a real process: kill it, restart on the same port/db
    proc = sandbox_process(p_commit_drop=0.2, seed=7)
    proc.kill(); again = sandbox_process(db=proc.db, port=proc.port)

def test_w(gated_sandbox):                 # in-process, capture requests failed at will, answers counted
    box, gate = gated_sandbox()
    gate.captures = False                  # every capture answered 503 retryable: false; GET /info answers
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog

from connector import logs
from connector.sandbox import Behaviour, Faults, SandboxServer, SandboxStore
from connector.sandbox.app import ApiError, error_response
from connector.sandbox.process import SandboxProcess, spawn_sandbox


@dataclass
class RunningSandbox:
    """An in-process sandbox: `base_url` to call, `store` to set up and inspect."""

    server: SandboxServer
    base_url: str
    store: SandboxStore

    def create_client(self, name: str = "test-client", **options: Any) -> tuple[str, str]:
        """(api_key, api_secret) of a new client; options as SandboxStore.create_client."""
        return self.store.create_client(name, **options)

    @staticmethod
    def headers(api_key: str, api_secret: str, idempotency_key: str | None = None) -> dict[str, str]:
        out = {"X-API-Key": api_key, "X-API-Secret": api_secret}
        if idempotency_key is not None:
            out["Idempotency-Key"] = idempotency_key
        return out


@pytest.fixture(autouse=True)
def _secrets_registered_by_this_test_only() -> Iterator[None]:
    """The log masking's secrets are process-wide (a CLI run in-process registers its config's). One
    test's secret (`secret`, say) would mask that word in every later test's messages: forget them."""
    yield
    logs._secrets.clear()


@pytest.fixture
def sandbox_factory(tmp_path: Path) -> Iterator[Callable[..., RunningSandbox]]:
    """Start in-process sandboxes: factory(db_path=None, faults=None, rate_window_s=60.0, behaviour=None)."""
    started: list[SandboxServer] = []

    def start(
        db_path: Path | None = None,
        faults: Faults | None = None,
        rate_window_s: float = 60.0,
        behaviour: Behaviour | None = None,
        wrap: Callable[[Any], Any] | None = None,
    ) -> RunningSandbox:
        db = db_path or tmp_path / f"sandbox-{len(started)}.sqlite3"
        server = SandboxServer(db, faults=faults, rate_window_s=rate_window_s, behaviour=behaviour)
        if wrap is not None:  # an ASGI middleware around the sandbox's app
            server.app = wrap(server.app)
        url = server.start()
        started.append(server)
        return RunningSandbox(server, url, server.store)

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    """A fault-free in-process sandbox on a free loopback port with a fresh database."""
    return sandbox_factory()


@dataclass
class CaptureGate:
    """ASGI middleware around the sandbox: counts its answers by (operation, status) and, while
    `captures` is True or False, answers every capture request itself with a 503 marked retryable
    or not, while GET /info is answered as usual (an API that is up but does not take captures)."""

    app: Any
    captures: bool | None = None
    answers: Counter[tuple[str, int]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, operation: str, status: int | None = None) -> int:
        with self.lock:
            return sum(n for (op, st), n in self.answers.items() if op == operation and status in (None, st))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        operation = scope["path"].rsplit("/", 1)[-1]  # info, person, bulk

        async def counted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                with self.lock:
                    self.answers[(operation, message["status"])] += 1
            await send(message)

        failing = self.captures
        if scope["method"] == "POST" and failing is not None:
            code, text = (
                ("capture_unavailable", "capture is temporarily unavailable")
                if failing
                else ("capture_failed", "capture failed")
            )
            return await error_response(ApiError(503, code, text, retryable=failing))(scope, receive, counted)
        await self.app(scope, receive, counted)


@pytest.fixture
def gated_sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> Callable[..., tuple[RunningSandbox, CaptureGate]]:
    """gated_sandbox(**as sandbox_factory) -> (sandbox, its CaptureGate)."""

    def start(**options: Any) -> tuple[RunningSandbox, CaptureGate]:
        gates: list[CaptureGate] = []
        box = sandbox_factory(wrap=lambda app: gates.append(CaptureGate(app)) or gates[0], **options)
        return box, gates[0]

    return start


@pytest.fixture
def sandbox_process(tmp_path: Path) -> Iterator[Callable[..., SandboxProcess]]:
    """Start sandbox processes: factory(db=None, port=0, **flags); all are stopped at teardown."""
    started: list[SandboxProcess] = []

    def start(db: Path | None = None, port: int = 0, **flags: Any) -> SandboxProcess:
        n = len(started)
        # Its admin token beside its log, not in the user's runtime folder (admin_token_file=None: there).
        flags.setdefault("admin_token_file", tmp_path / f"sandbox-process-{n}.token")
        handle = spawn_sandbox(
            db or tmp_path / "sandbox-process.sqlite3", tmp_path / f"sandbox-process-{n}.log", port, **flags
        )
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop()


@pytest.fixture(autouse=True)
def _structlog_as_found() -> Iterator[None]:
    """Each test leaves structlog as it found it, unconfigured included. `structlog.configure(**saved)`
    would not do: it marks structlog configured even with the defaults, and the Python API hands its
    events to `logging` only while nothing has configured structlog (`logs.hand_to_stdlib`), so a later
    API test would find the default printer writing every event on stdout."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


@pytest.fixture
def debug_logs() -> Iterator[io.StringIO]:
    """connector.logs as `-v` sets it (DEBUG, every library included), as JSON into a StringIO; the
    root logger is put back afterwards (and structlog, by `_structlog_as_found`)."""
    root, httpx_log = logging.getLogger(), logging.getLogger("httpx")
    saved_level, saved_handlers = root.level, list(root.handlers)
    saved_httpx = httpx_log.level  # a CLI run in-process quiets httpx (without -v): -v leaves it at DEBUG
    stream = io.StringIO()
    logs.configure(level="DEBUG", json=True, stream=stream)
    httpx_log.setLevel(logging.NOTSET)
    yield stream
    for handler in root.handlers[:]:
        if handler not in saved_handlers:
            root.removeHandler(handler)
    root.setLevel(saved_level)
    httpx_log.setLevel(saved_httpx)


# --- a real PostgreSQL server the tests start themselves (the SQL source's tests, the ledger's second engine) ---


def _load_pg_server() -> Any:
    """benchmarks/pg_server.py: one throwaway-server starter for the tests and `make bench`."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "pg_server.py"
    spec = importlib.util.spec_from_file_location("capture_sync_pg_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway server on a loopback port; in CI its absence is a failure, never a skip."""
    pg_server = _load_pg_server()
    if pg_server.bindir() is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("PostgreSQL binaries not found (.ci/run installs postgresql-15)")
        pytest.skip("PostgreSQL binaries not found (set PG_BIN, or install postgresql-15)")
    with pg_server.throwaway_server() as url:
        yield url


_databases = itertools.count(1)


@pytest.fixture
def postgres_ledger_url(postgres_url: str) -> Iterator[str]:
    """A fresh, empty database on the session's server for one test: a ledger's URL (no password)."""
    import psycopg

    server = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    name = f"ledger_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")
    yield server.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_target(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Where a ledger test keeps its ledger: a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "ledger.sqlite3"
    url: str = request.getfixturevalue("postgres_ledger_url")
    return url
