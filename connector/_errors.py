"""The Python API's exceptions: one per non-zero exit code of the CLI (design 5), so that a pipeline
step fails for the reasons a shell script sees a non-zero exit, and can tell them apart.

    CaptureSyncError          .exit_code, .report (the RunReport, or None when the run made none)
    ├── ConfigError           2  the config (every problem in .problems), the ledger held by a process
    │                            that takes no commands, a source that could not be read
    ├── AuthenticationFailed  3  the Capture API refused the credentials
    ├── Unsettled             4  work remains unsettled (an outage: replay later), or the run was stopped
    ├── NeedsAttention        5  entries are blocked (a 409) or could not be placed: a person decides
    └── SourceFailed          6  a source failed mid-read; what it gave before was kept and delivered

Any other failure (the CLI's exit 1) is raised as it came: a bug is not dressed as an outcome.
Every message passes the secret masking of the CLI's output.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .exit_codes import EXIT_MEANING, ExitCode, exit_code_for
from .logs import mask_secrets
from .problems import ConfigProblem

if TYPE_CHECKING:
    from .delivery import RunReport


class CaptureSyncError(Exception):
    """A run that did not settle everything, or could not start; `exit_code` is the CLI's for it."""

    exit_code: ExitCode = ExitCode.UNEXPECTED

    def __init__(self, message: str, report: RunReport | None = None) -> None:
        super().__init__(mask_secrets(message))
        self.report = report


class ConfigError(CaptureSyncError):
    """Exit 2: fix the config (`problems`, each naming its key), wait for the process holding the
    ledger, or make the source named in the message readable."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, report: RunReport | None = None, problems: list[str] | None = None) -> None:
        super().__init__(message, report)
        self.problems = [mask_secrets(p) for p in problems or [message]]


class AuthenticationFailed(CaptureSyncError):
    """Exit 3: compare the key and secret (where they were read from is in the message) with the CRM's
    API client, and check that the client is active. Nothing was marked failed."""

    exit_code = ExitCode.AUTH


class Unsettled(CaptureSyncError):
    """Exit 4: the API did not take everything (an outage) or the run was stopped; run `replay` later:
    the ledger re-sends the same requests with the same keys."""

    exit_code = ExitCode.UNSETTLED


class NeedsAttention(CaptureSyncError):
    """Exit 5: entries are blocked (`capture-sync ledger list --state blocked`) and wait for a person's
    `ledger resolve`; everything else was delivered."""

    exit_code = ExitCode.BLOCKED


class SourceFailed(CaptureSyncError):
    """Exit 6: a source failed mid-read (`report.source_failures` says why); what it gave before was
    kept and delivered, and the next sync continues where it stopped."""

    exit_code = ExitCode.SOURCE_FAILED


_BY_CODE: dict[ExitCode, type[CaptureSyncError]] = {
    cls.exit_code: cls for cls in (ConfigError, AuthenticationFailed, Unsettled, NeedsAttention, SourceFailed)
}


def error_for(code: ExitCode, message: str, report: RunReport | None = None) -> CaptureSyncError:
    """The exception for `code`; a code without a class of its own (1, from a daemon's report) gets the base one."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls(message, report)
    error = CaptureSyncError(message, report)
    error.exit_code = code
    return error


def raise_for(report: RunReport) -> None:
    """Raise the exception for the report's exit code, carrying the report; nothing for 0."""
    from .delivery import exit_meaning

    meaning = exit_meaning(report)
    if meaning is None:
        return
    details = [f"delivery stopped early: {report.halted_by}"] if report.halted_by else []
    details += [f"not read: {why}" for why in report.unavailable.values()]
    details += [f"source failed: {why}" for why in report.source_failures.values()]
    # what happened first, then what to do (the meaning may refer to what the details named "above")
    message = f"{report.kind} ended with exit {int(report.exit_code)}: " + "; ".join([*details, meaning])
    raise error_for(report.exit_code, message, report)


@contextmanager
def translated() -> Iterator[None]:
    """Failures that end a run before it has a report, as the CLI's exit codes name them: a config
    problem or a held ledger (2), refused credentials (3), an API that did not answer (4), a daemon
    that refused or failed the work (its code). Anything else passes unchanged."""
    from .control import Refused

    try:
        yield
    except CaptureSyncError:
        raise
    except ConfigProblem as exc:
        raise ConfigError(
            f"the configuration has {len(exc.problems)} problem(s): {exc}", problems=exc.problems
        ) from exc
    except Refused as exc:
        raise error_for(exc.exit_code, str(exc)) from exc
    except Exception as exc:
        code = exit_code_for(exc)
        if code in _BY_CODE:  # as the CLI's one line: what failed, then what to do
            raise error_for(code, f"{exc}: {EXIT_MEANING[code]}" if code in EXIT_MEANING else str(exc)) from exc
        raise
