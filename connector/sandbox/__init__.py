"""A faithful local Capture API: the embedded default for trying capture-sync, and the test double."""

from .app import create_app
from .faults import Faults
from .process import SandboxProcess, spawn_sandbox
from .server import SandboxServer
from .store import Client, SandboxStore, UnknownClient, identity_of

__all__ = [
    "Client", "Faults", "SandboxProcess", "SandboxServer", "SandboxStore", "UnknownClient",
    "create_app", "identity_of", "spawn_sandbox",
]
