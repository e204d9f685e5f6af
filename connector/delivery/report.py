"""What a sync or replay did, and the exit code that tells it (design 5)."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .. import logs
from ..exit_codes import EXIT_MEANING, ExitCode, exit_code_for
from ..ledger import RUN_COUNTS

COUNTS = RUN_COUNTS  # a run's counts, as the ledger's runs table keeps them


@dataclass
class RunReport:
    kind: str = "sync"
    read: int = 0
    enqueued: int = 0
    unchanged: int = 0
    older: int = 0  # read below the newest version the ledger holds: never sent
    late: int = 0  # passed over below the cursor, never seen by the ledger: not read (a warning says why)
    rejected: int = 0
    sent: int = 0
    captured: int = 0
    merged: int = 0  # of `captured`: answered with a person id the ledger holds for another record
    duplicate: int = 0
    failed: int = 0
    blocked: int = 0
    unknown: int = 0
    unsettled: int = 0  # pending, in_flight or unknown left in the ledger at the end
    blocked_total: int = 0  # blocked entries in the ledger at the end, from any run
    auth_failed: bool = False
    stopped: bool = False  # a stop signal ended the run early
    halted_by: str | None = None  # the error that ended delivery early (outage, auth)
    unavailable: dict[str, str] = field(default_factory=dict)  # source -> why it was not read (preflight)
    source_failures: dict[str, str] = field(default_factory=dict)  # source -> why its read ended early
    sources_read: list[str] = field(default_factory=list)  # the sources this run began to read
    run_id: int | None = None  # its row in the ledger's runs (`capture-sync runs show RUN`); a dry run has none
    ended_by: ExitCode | None = None  # an exception ended the run: the code the command exits with
    ended_by_error: str | None = None  # and that exception's type (its text may hold what a ledger must not)
    rejection_reasons: Counter[str] = field(default_factory=Counter)
    duration_s: float = 0.0
    dry_run_preview: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `sync --json` prints (`report_dict`): for an orchestrator's metadata or XCom."""
        return report_dict(self)

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTS}

    def add_outcome(self, state: str, n: int = 1) -> None:
        setattr(self, state, getattr(self, state) + n)

    def end_with(self, exc: BaseException) -> None:
        """Note what ended the run early, so that its record holds the code the process returns.
        A cancelled task (the daemon shutting down) is a stop, not an error."""
        if isinstance(exc, asyncio.CancelledError):
            self.stopped = True
        else:
            self.ended_by = exit_code_for(exc)
            self.ended_by_error = type(exc).__name__

    @property
    def reason(self) -> str | None:
        """Why the run ended short of settling everything, in one line (the run's `reason` in the
        ledger; idle passes fold only when theirs is the same). None when it settled everything."""
        if self.ended_by is not None:
            return f"ended by {self.ended_by_error} (exit {int(self.ended_by)})"
        if self.halted_by is not None:
            return self.halted_by
        problems = {**self.unavailable, **self.source_failures}
        if problems:
            return "; ".join(f"{name}: {why}" for name, why in sorted(problems.items()))
        if self.stopped:
            return "stopped"
        if self.kind != "dry_run" and self.blocked_total:
            return "entries are blocked"
        if self.kind != "dry_run" and self.unsettled:
            return "entries remain unsettled"
        return None

    @property
    def exit_code(self) -> ExitCode:
        """Highest first: an error that ended the run; 3 authentication failed; 2 a source not
        readable; 6 a source failed mid-read; 5 entries blocked; 4 work unsettled or stopped; 0.
        Rejected records do not count: they are settled, set aside for a person to read."""
        if self.ended_by is not None:
            return self.ended_by
        if self.auth_failed:
            return ExitCode.AUTH
        if self.unavailable:
            return ExitCode.USAGE
        if self.source_failures:
            return ExitCode.SOURCE_FAILED
        if self.kind == "dry_run":  # sends nothing, so only what reading found decides
            return ExitCode.OK
        if self.blocked_total:
            return ExitCode.BLOCKED
        if self.unsettled or self.stopped:
            return ExitCode.UNSETTLED
        return ExitCode.OK


def exit_meaning(report: RunReport) -> str | None:
    """What the report's exit code asks of a person, in one line (None for 0): the CLI prints it after
    `exit N:`, the Python API's exceptions carry it."""
    code = report.exit_code
    if code is ExitCode.OK:
        return None
    if code is ExitCode.USAGE:
        return f"not read: {', '.join(report.unavailable)}; the other sources were read and delivered"
    if code is ExitCode.UNSETTLED and report.stopped:
        return f"stopped; run {report.kind} again to continue"
    return EXIT_MEANING.get(code, f"the run ended with exit {int(code)}")


def report_dict(report: RunReport) -> dict[str, Any]:
    """What a sync, replay or dry run did: its counts, what was left, why it stopped, and its exit code.
    Reasons pass through the same secret masking as the human output."""
    data: dict[str, Any] = {
        "kind": report.kind,
        "run": report.run_id,
        "exit_code": int(report.exit_code),
        "counts": {**report.counts(), "unknown": report.unknown},
        "unsettled": report.unsettled,
        "blocked_total": report.blocked_total,
        "stopped": report.stopped,
        "halted_by": None if report.halted_by is None else logs.mask_secrets(report.halted_by),
        "unavailable": {k: logs.mask_secrets(v) for k, v in report.unavailable.items()},
        "source_failures": {k: logs.mask_secrets(v) for k, v in report.source_failures.items()},
        "sources_read": report.sources_read,
        "rejection_reasons": dict(report.rejection_reasons.most_common()),
        "duration_s": round(report.duration_s, 3),
    }
    if report.dry_run_preview is not None:
        data["preview"] = report.dry_run_preview
    return data


def report_from_dict(data: dict[str, Any]) -> RunReport:
    """The RunReport `report_dict` describes (as a daemon sends it back over the control channel), so
    a command the daemon ran prints the very summary it would have printed running itself."""
    report = RunReport(
        kind=data["kind"],
        run_id=data["run"],
        unsettled=data["unsettled"],
        blocked_total=data["blocked_total"],
        stopped=data["stopped"],
        halted_by=data["halted_by"],
        unavailable=dict(data["unavailable"]),
        source_failures=dict(data["source_failures"]),
        sources_read=list(data["sources_read"]),
        duration_s=data["duration_s"],
    )
    for name, value in data["counts"].items():
        setattr(report, name, value)
    report.rejection_reasons.update(data["rejection_reasons"])
    if int(report.exit_code) != data["exit_code"]:  # an error ended it (RunReport.ended_by is not in the dict)
        report.ended_by = ExitCode(data["exit_code"])
    return report
