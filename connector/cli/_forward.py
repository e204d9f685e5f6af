"""Commands that find a daemon holding the ledger ask that daemon to do the work now, over its
control socket (connector.control), wait for the outcome, and exit with the code the work gave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..control import Answer, NoDaemon, Unreachable, ask
from ._common import ExitCode, err, fail


def ask_daemon(ledger: Path, command: str, args: dict[str, Any], *, quiet: bool = False) -> Answer:
    """The running daemon's answer to `command`; a refusal or failure ends the command with its
    one line and exit code. Called once the ledger's daemon lock was found taken."""
    if not quiet:
        err.print(f"a capture-sync daemon holds {ledger}: it runs `{command}` now; waiting for the outcome", markup=False)
    try:
        answer = ask(ledger, command, {k: v for k, v in args.items() if v is not None})
    except NoDaemon:
        fail(
            f"another capture-sync process holds ledger {ledger}, and it is no daemon that takes commands "
            "(a sync or replay running by itself): wait for it to finish, then run this again", ExitCode.USAGE,
        )
    except Unreachable as exc:
        fail(str(exc), ExitCode.USAGE)
    if not answer.get("ok"):
        fail(f"the daemon did not run `{command}`: {answer.get('error')}", ExitCode(answer.get("exit_code", 1)))
    return answer
