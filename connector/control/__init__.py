"""Steering a running daemon (`capture-sync sync|replay|pause|resume` beside it, and the HTTP
control): one command table (`_commands`), a local Unix socket beside the ledger (`_channel`,
`_place`). On a PostgreSQL ledger the same table is also served from a requests table that the
leading daemon reads (`ledger._requests`); `steer` sends a request there when this process stands by
for the integration."""

from ._channel import ControlServer, NoDaemon, Refused, Unreachable, ask, daemon_state, forward
from ._commands import COMMANDS, Answer, BadRequest, Command, DaemonStopping, Steered, check_request, dispatch, steer
from ._place import find_socket, socket_path

__all__ = [
    "COMMANDS",
    "Answer",
    "BadRequest",
    "Command",
    "ControlServer",
    "DaemonStopping",
    "NoDaemon",
    "Refused",
    "Steered",
    "Unreachable",
    "ask",
    "check_request",
    "daemon_state",
    "dispatch",
    "find_socket",
    "forward",
    "socket_path",
    "steer",
]
