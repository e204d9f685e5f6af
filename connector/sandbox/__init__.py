"""A faithful local Capture API: the embedded default for trying capture-sync, and the test double.

The app and the server (FastAPI, uvicorn: most of the CLI's start-up time) load on first use, so
commands that only manage clients, or do not touch the sandbox at all, start without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .behaviour import Behaviour
from .faults import Faults
from .process import SandboxProcess, spawn_sandbox
from .store import Client, SandboxStore, UnknownClient, identity_of

if TYPE_CHECKING:
    from .app import create_app
    from .server import SandboxServer


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "SandboxServer":
        from .server import SandboxServer

        return SandboxServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Behaviour",
    "Client",
    "Faults",
    "SandboxProcess",
    "SandboxServer",
    "SandboxStore",
    "UnknownClient",
    "create_app",
    "identity_of",
    "spawn_sandbox",
]
