"""The exit codes of every command (design 5, README "Exit codes"), and the one an exception ends
a command with: one table for the CLI and the run record."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    UNEXPECTED = 1
    USAGE = 2          # usage or config error, the ledger held by another process, a source not readable
    AUTH = 3
    UNSETTLED = 4      # work remains unsettled (outage), or a stop signal ended the run early
    BLOCKED = 5
    SOURCE_FAILED = 6  # a source raised mid-read: what it yielded before was kept and delivered
    FLOW_FAILED = 7    # `check --flow`: a step of the synthetic test flow failed (the server answered)
    INTERRUPTED = 130  # KeyboardInterrupt outside the stop handler (typer's code)


def exit_code_for(exc: BaseException) -> ExitCode:
    # Imported here, when something has failed: a command that only reads the ledger (`status`)
    # never loads the HTTP client for this.
    from .api.errors import CaptureError, Unauthorized
    from .ledger import LedgerLocked, LedgerUnreachable
    from .problems import ConfigProblem

    if isinstance(exc, (ConfigProblem, LedgerLocked)):
        return ExitCode.USAGE
    if isinstance(exc, Unauthorized):
        return ExitCode.AUTH
    if isinstance(exc, (CaptureError, LedgerUnreachable)):
        return ExitCode.UNSETTLED
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.UNEXPECTED
