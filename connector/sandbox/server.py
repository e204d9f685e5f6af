"""Running the sandbox app with uvicorn in a background thread on a socket bound up front."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import sqlite3
import threading
from pathlib import Path
from typing import Any

import uvicorn

from ..loopback import is_loopback
from .app import create_app
from .behaviour import Behaviour
from .faults import Faults
from .openapi import PREFIX
from .store import SandboxStore

# stdlib logging: `sandbox serve` configures no structlog, and its stdout carries the URL line
log = logging.getLogger("capture_sync.sandbox")


class ServeError(Exception):
    """The sandbox cannot serve: its database cannot be opened for writing, or its address is taken.
    The message is one line for the user."""


class _Server(uvicorn.Server):
    """uvicorn that says when it serves and stops when told, rather than being polled for either."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        await super().startup(sockets=sockets)
        self.ready.set()

    async def main_loop(self) -> None:
        # uvicorn's loop sleeps 0.1 s between ticks; waking on request makes stop() immediate.
        assert self._wake is not None
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    def request_stop(self) -> None:
        self.should_exit = True
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                self._loop.call_soon_threadsafe(self._wake.set)


class SandboxServer:
    """The sandbox on `host:port` (0 picks a free port); `start()` returns the base URL. With
    `admin_token` it also serves the admin endpoint that changes its faults (admin.py)."""

    def __init__(
        self,
        db_path: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Faults | None = None,
        rate_window_s: float = 60.0,
        behaviour: Behaviour | None = None,
        admin_token: str | None = None,
    ) -> None:
        self.host, self.port = host, port
        store: SandboxStore | None = None
        try:  # the store and the app's start-up both write to the database
            store = SandboxStore(db_path)
            self.app = create_app(store, faults or Faults(), rate_window_s, behaviour, admin_token)
        except (sqlite3.Error, OSError) as exc:
            if store is not None:
                store.close()
            raise ServeError(
                f"sandbox database {db_path} cannot be opened for writing ({exc}): check that its folder exists "
                "and that the file and folder are writable, or pick another file with --db"
            ) from None
        self.store = store
        self.base_url: str | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 30.0) -> str:
        if self._thread is not None:
            raise RuntimeError("the sandbox server is already running")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit it; asyncio skips it for sockets made with proto 0, and without it
        # every keep-alive request waits ~40 ms for a delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            self.store.close()
            hint = "another process listens there: stop it, or pick another port (--port 0 picks a free one)"
            raise ServeError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}"
                + (f"; {hint}" if exc.errno == errno.EADDRINUSE else "")
            ) from None
        port = self.port = sock.getsockname()[1]  # the one in use, when 0 was asked for
        if not is_loopback(self.host):
            log.warning(
                "sandbox.beyond_loopback: listening on %s port %d, reachable from other machines; the sandbox "
                "accepts any client its database knows and keeps what it is sent: prefer 127.0.0.1",
                self.host,
                port,
            )
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
        )
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"sandbox-{port}", daemon=True
        )
        self._thread.start()
        if not self._server.ready.wait(timeout_s) or not self._thread.is_alive():
            self.stop()
            raise RuntimeError("the sandbox server did not start")
        host = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        self.base_url = f"http://{host}:{port}{PREFIX}"
        return self.base_url

    def stop(self) -> None:
        """Finish requests in hand, close the socket and the store."""
        if self._server is not None and self._thread is not None:
            self._server.request_stop()
            self._thread.join()
        self._server = self._thread = None
        self.store.close()

    def __enter__(self) -> SandboxServer:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
