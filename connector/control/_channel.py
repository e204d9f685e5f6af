"""The local control channel: line-delimited JSON over the Unix socket of `_place`.

One request per connection: `{"command": "sync", "args": {"source": "signups"}}` and a newline; the
daemon answers one JSON line when the work is done (a pass may take minutes: the client waits) and
closes. Only the daemon's own user may steer it: the socket is 0600 (another user's connect fails
with EACCES), and the daemon reads the peer's uid (SO_PEERCRED) and refuses any other uid, root's
included, with a one-line answer and nothing done.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import logs
from ..exit_codes import ExitCode
from ._commands import Answer, Steered, dispatch
from ._place import find_socket, pointer_path, private_folder, socket_path

# asyncio is the daemon's end alone: the clients (`ask`, `forward`, `status`'s `daemon_state`) use a
# plain socket, and a command that merely asks should not pay for the event loop (~10 ms to import).
if TYPE_CHECKING:
    import asyncio

log = logs.get_logger("capture_sync.control")

MAX_LINE = 64 * 1024
READ_REQUEST_S = 10.0  # a client that connects and says nothing is dropped after this
CONNECT_S = 2.0


def _peer_uid(sock: Any) -> int:
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return int(uid)


class ControlServer:
    """The daemon's end: listens beside the ledger (or at the short path `_place` picks) until `stop`."""

    def __init__(self, ledger: Path, daemon: Steered) -> None:
        self.ledger, self.daemon = ledger, daemon
        self.path = socket_path(ledger)
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._bound = -1  # the inode of the socket this server bound

    async def start(self) -> Path:
        """Bind (replacing a socket a killed daemon left: the caller holds the ledger's daemon lock,
        so no live daemon owns it), make it 0600, listen. Raises OSError."""
        pointer = pointer_path(self.ledger)
        if self.path != pointer:
            private_folder(self.path.parent)
        for stale in {self.path, pointer}:
            with contextlib.suppress(FileNotFoundError):
                if not stat.S_ISDIR(os.lstat(stale).st_mode):
                    stale.unlink()
        import asyncio

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(self.path))
            self._bound = os.lstat(self.path).st_ino
            os.chmod(self.path, 0o600)  # before listen: nobody can connect in between
            self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_LINE)
        except BaseException:
            sock.close()
            raise
        if self.path != pointer:
            fd = os.open(pointer, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"{self.path}\n")
        log.info("control.listening", socket=str(self.path), uid=os.getuid())
        return self.path

    async def stop(self) -> None:
        """Stop listening and remove the socket (and the file naming it); answers in hand are sent."""
        if self._server is None:
            return
        self._server.close()
        if self._handlers:
            import asyncio

            await asyncio.wait(set(self._handlers), timeout=1.0)
        # Only when the socket is still ours: a daemon that took over the lease meanwhile binds its own.
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(self.path).st_ino == self._bound:
                for path in {self.path, pointer_path(self.ledger)}:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import asyncio

        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            answer = await self._answer(reader, writer)
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (Ctrl-C): the work it asked for was done all the same
        finally:
            writer.close()
            self._handlers.discard(task)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Answer:
        import asyncio

        try:  # read before judging, so that a refused client reads its answer rather than a broken pipe
            line = await asyncio.wait_for(reader.readline(), READ_REQUEST_S)
        except (TimeoutError, ValueError):
            line = b""
        uid, own = _peer_uid(writer.get_extra_info("socket")), os.getuid()
        if uid != own:  # nothing of the request is looked at
            log.warning("control.refused", peer_uid=uid, why="only the daemon's own user may steer it")
            return {
                "ok": False,
                "error": f"refused: this daemon runs as uid {own} and takes commands only from that user "
                f"(you are uid {uid})",
                "exit_code": 2,
            }
        try:
            request = json.loads(line)
            name, args = request["command"], request.get("args") or {}
        except (ValueError, KeyError, TypeError):
            return {
                "ok": False,
                "error": 'a request is one JSON line: {"command": NAME, "args": {...}}',
                "exit_code": 2,
            }
        log.info("control.request", command=name, args=args, via="socket")
        return await dispatch(self.daemon, str(name), args)


class NoDaemon(Exception):
    """No daemon answers on the ledger's control socket (none runs, or it is not listening yet)."""


class Unreachable(Exception):
    """A daemon's socket is there but this process may not use it; the message says why."""


def ask(ledger: Path, command: str, args: dict[str, Any] | None = None, *, timeout_s: float | None = None) -> Answer:
    """Ask the daemon of `ledger` to run `command` and wait for its answer (`timeout_s` None: as long
    as the work takes). Raises NoDaemon or Unreachable."""
    path = find_socket(ledger)
    if path is None:
        raise NoDaemon(f"no control socket beside {ledger}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_S)
        try:
            sock.connect(str(path))
        except PermissionError:
            raise Unreachable(
                f"the daemon's control socket {path} is not this user's: only the user that runs the daemon "
                f"(owner uid {_owner(path)}) may steer it"
            ) from None
        except (TimeoutError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(f"nothing answers on {path}: {exc}") from None
        sock.settimeout(timeout_s)
        sock.sendall(json.dumps({"command": command, "args": args or {}}).encode() + b"\n")
        with sock.makefile("rb") as fh:
            line = fh.readline(MAX_LINE * 16)
    finally:
        sock.close()
    if not line:
        raise NoDaemon(f"the daemon closed {path} without an answer (it is stopping?)")
    answer: Answer = json.loads(line)
    return answer


class Refused(Exception):
    """A command meant for the daemon was not run: none takes commands, it may not be asked, or it
    refused or failed the work. The message says why and what to do; `exit_code` is the code the
    command ends with."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def forward(
    ledger: Path,
    command: str,
    args: dict[str, Any],
    remote: Callable[[str, dict[str, Any]], Answer] | None = None,
) -> Answer:
    """The answer of the daemon holding `ledger` to `command` (arguments that are None left out), for
    a command that found the ledger's daemon lock taken: the CLI's and the Python API's `sync` and
    `replay`, so both say the same. `remote`: on a shared PostgreSQL ledger, how to ask the daemon
    leading the integration when none answers on this host (through the database; raises Refused).
    Raises Refused."""
    args = {k: v for k, v in args.items() if v is not None}
    try:
        answer = ask(ledger, command, args)
    except NoDaemon:
        if remote is not None:
            answer = remote(command, args)
            return _answered(command, answer)
        raise Refused(
            f"another capture-sync process holds ledger {ledger}, and it is no daemon that takes commands "
            "(a sync or replay running by itself): wait for it to finish, then run this again",
            ExitCode.USAGE,
        ) from None
    except Unreachable as exc:
        raise Refused(str(exc), ExitCode.USAGE) from None
    return _answered(command, answer)


def _answered(command: str, answer: Answer) -> Answer:
    if not answer.get("ok"):
        raise Refused(
            f"the daemon did not run `{command}`: {answer.get('error')}", ExitCode(answer.get("exit_code", 1))
        )
    return answer


def _owner(path: Path) -> str:
    try:
        return str(path.stat().st_uid)
    except OSError:
        return "unknown"


def daemon_state(ledger_path: Path) -> dict[str, Any] | None:
    """The running daemon's `state` (what is paused, its health), or None when no daemon holds the
    ledger or it does not answer within 2 s: for `status` and anything else that only looks."""
    try:
        answer = ask(ledger_path, "state", timeout_s=2.0)
    except (NoDaemon, Unreachable, OSError, ValueError):
        return None
    if not answer.get("ok"):
        return None
    return {k: v for k, v in answer.items() if k not in ("ok", "command", "exit_code")}
