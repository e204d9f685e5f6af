"""The exit codes of every command (design 5, docs/reliability.md "Exit codes"), and the one an exception ends
a command with: one table for the CLI and the run record."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    UNEXPECTED = 1
    USAGE = 2  # usage or config error, the ledger held by another process, a source not readable
    AUTH = 3
    UNSETTLED = 4  # work remains unsettled (outage), or a stop signal ended the run early
    BLOCKED = 5
    SOURCE_FAILED = 6  # a source raised mid-read: what it yielded before was kept and delivered
    FLOW_FAILED = 7  # `check --flow`: a step of the synthetic test flow failed (the server answered)
    INTERRUPTED = 130  # KeyboardInterrupt outside the stop handler (typer's code)


EXIT_MEANING = {  # what a report's non-zero exit code asks the user to do (the CLI prints it, the Python API raises it)
    ExitCode.AUTH: (
        "authentication failed: a 401 does not say whether the key, the secret or the client's active "
        "state is refused; compare the key and secret where they were read from (named above) with the "
        "CRM's API client (a rotated secret goes into its file), and check that the client is active"
    ),
    ExitCode.UNSETTLED: "work remains unsettled (the API is unavailable?): run `capture-sync replay` later",
    ExitCode.BLOCKED: (
        "entries need a person's decision: see `capture-sync ledger list --state blocked` (a 409) and "
        "`--state unknown` (results that could not be placed); `capture-sync status` says more"
    ),
    ExitCode.SOURCE_FAILED: (
        "a source failed while being read: the records it gave before were kept and delivered, and the "
        "other sources were read and delivered; fix it and run sync again to continue where it stopped"
    ),
}


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
