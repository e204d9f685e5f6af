"""Commands that find a daemon holding the ledger ask that daemon to do the work now, over its
control socket (connector.control) or, on a shared PostgreSQL ledger, through the database to the
daemon leading the integration on whatever host; they wait for the outcome and exit with the code
the work gave. The control package loads only when a daemon was found: a sync on its own never needs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._run import leader_asker
from ..config_file import LedgerLocation
from ._common import err, fail

if TYPE_CHECKING:
    from ..control import Answer


def ask_daemon(cfg: LedgerLocation, command: str, args: dict[str, Any], *, quiet: bool = False) -> Answer:
    """The running daemon's answer to `command`; a refusal or failure ends the command with its
    one line and exit code. Called once the ledger's daemon lock was found taken."""
    from ..control import Refused, forward

    if not quiet:
        err.print(
            f"a capture-sync daemon holds {cfg.ledger_name}: it runs `{command}` now; waiting for the outcome",
            markup=False,
        )
    try:
        return forward(cfg.ledger_path, command, args, leader_asker(cfg))
    except Refused as exc:
        fail(str(exc), exc.exit_code)
