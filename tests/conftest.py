"""Shared fixtures: the sandbox Capture API in-process, or as a `capture-sync sandbox serve` process.

    def test_x(sandbox):                       # in-process, free loopback port, fresh db
        key, secret = sandbox.create_client(rate_limit=1000)
        httpx.get(sandbox.base_url + "/info", headers=sandbox.headers(key, secret))

    def test_y(sandbox_factory):               # the same with faults or another rate window
        box = sandbox_factory(faults=Faults(p_retryable_503=1.0), rate_window_s=1.0)

    def test_z(sandbox_process):               # a real process: kill it, restart on the same port/db
        proc = sandbox_process(p_commit_drop=0.2, seed=7)
        proc.kill(); again = sandbox_process(db=proc.db, port=proc.port)
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from connector.sandbox import Faults, SandboxServer, SandboxStore


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


@pytest.fixture
def sandbox_factory(tmp_path: Path) -> Iterator[Callable[..., RunningSandbox]]:
    """Start in-process sandboxes: factory(db_path=None, faults=None, rate_window_s=60.0)."""
    started: list[SandboxServer] = []

    def start(db_path: Path | None = None, faults: Faults | None = None, rate_window_s: float = 60.0) -> RunningSandbox:
        db = db_path or tmp_path / f"sandbox-{len(started)}.sqlite3"
        server = SandboxServer(db, faults=faults, rate_window_s=rate_window_s)
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


def _capture_sync_command() -> list[str]:
    script = Path(sys.executable).with_name("capture-sync")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from connector.cli import main; main()"]


@dataclass
class SandboxProcess:
    """A `capture-sync sandbox serve` child process."""

    proc: subprocess.Popen[str]
    base_url: str
    db: Path
    port: int
    log: Path
    exit_code: int | None = field(default=None)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int:
        """Send `sig` (SIGTERM: a clean stop) and wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.exit_code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_code = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.exit_code

    def kill(self) -> int:
        """SIGKILL: the server dies mid-whatever, as in a crash."""
        return self.stop(signal.SIGKILL)


def start_sandbox_process(
    db: Path, log: Path, port: int = 0, timeout_s: float = 30.0, **flags: Any
) -> SandboxProcess:
    """Run `capture-sync sandbox serve --db DB --port PORT --flag value...` and read its base URL.

    `flags` become options: p_commit_drop=0.2 -> `--p-commit-drop 0.2`; None values are left out.
    """
    args = [*_capture_sync_command(), "sandbox", "serve", "--db", str(db), "--port", str(port)]
    for name, value in flags.items():
        if value is not None:
            args += [f"--{name.replace('_', '-')}", str(value)]
    with log.open("a") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout_s)
    line = proc.stdout.readline().strip() if ready else ""
    if not line.startswith("http://"):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"sandbox serve did not start (first line {line!r}); see {log}:\n{log.read_text()}")
    port_used = int(line.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    return SandboxProcess(proc, line, db, port_used, log)


@pytest.fixture
def sandbox_process(tmp_path: Path) -> Iterator[Callable[..., SandboxProcess]]:
    """Start sandbox processes: factory(db=None, port=0, **flags); all are stopped at teardown."""
    started: list[SandboxProcess] = []

    def start(db: Path | None = None, port: int = 0, **flags: Any) -> SandboxProcess:
        n = len(started)
        handle = start_sandbox_process(
            db or tmp_path / "sandbox-process.sqlite3", tmp_path / f"sandbox-process-{n}.log", port, **flags
        )
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop()
