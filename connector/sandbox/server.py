"""Running the sandbox app with uvicorn in a background thread on a socket bound up front."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import uvicorn

from .app import create_app
from .faults import Faults
from .openapi import PREFIX
from .store import SandboxStore


class _Server(uvicorn.Server):
    """uvicorn that says when it serves, so `start` waits on an event rather than polling."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


class SandboxServer:
    """The sandbox on `host:port` (0 picks a free port); `start()` returns the base URL."""

    def __init__(
        self,
        db_path: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Faults | None = None,
        rate_window_s: float = 60.0,
    ) -> None:
        self.host, self.port = host, port
        self.store = SandboxStore(db_path)
        self.app = create_app(self.store, faults or Faults(), rate_window_s)
        self.base_url: str | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 30.0) -> str:
        if self._thread is not None:
            raise RuntimeError("the sandbox server is already running")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_config=None, log_level="warning", access_log=False, lifespan="off",
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
            self._server.should_exit = True
            self._thread.join()
        self._server = self._thread = None
        self.store.close()

    def __enter__(self) -> SandboxServer:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
