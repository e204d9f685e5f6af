"""What the commands print. Machine-readable output: `--json` prints exactly one JSON object on stdout
and nothing else there, so `capture-sync sync --json | jq .exit_code` works in a script; human lines
go to stderr. And all of it inert: every string a console renders, every table cell, every JSON
document passes `logs.inert`, so a value from outside (an API's client name or error, a source's
data) cannot drive the terminal; a command cannot forget, as it never calls it itself.
"""

from __future__ import annotations

import sys
from json import dumps, loads
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.highlighter import JSONHighlighter

from .. import logs

if TYPE_CHECKING:
    from rich.text import Text

    from ..delivery import RunReport


class InertConsole(Console):
    """A rich console whose text is inert: rich turns every string it prints, a table cell included,
    into Text through `render_str`, so that is where control characters are escaped."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(logs.inert(text), **options)

    def print_json(self, json: str | None = None, *, data: Any = None, indent: int | str | None = 2, **_: Any) -> None:
        """As rich's, escaped after pretty-printing (rich's re-encoding writes C1 characters raw)."""
        value = loads(json) if json is not None else data
        text = JSONHighlighter()(logs.inert(dumps(value, indent=indent, ensure_ascii=False, default=str)))
        text.no_wrap, text.overflow = True, None
        self.print(text, soft_wrap=True)


def emit_json(value: Any) -> None:
    """One JSON document and a newline on stdout, written directly (no rich console wrapping)."""
    sys.stdout.write(logs.inert(dumps(value, ensure_ascii=False, default=str)) + "\n")
    sys.stdout.flush()


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
    from ..delivery import RunReport
    from ..exit_codes import ExitCode

    report = RunReport(
        kind=data["kind"], run_id=data["run"], unsettled=data["unsettled"], blocked_total=data["blocked_total"],
        stopped=data["stopped"], halted_by=data["halted_by"], unavailable=dict(data["unavailable"]),
        source_failures=dict(data["source_failures"]), sources_read=list(data["sources_read"]),
        duration_s=data["duration_s"],
    )
    for name, value in data["counts"].items():
        setattr(report, name, value)
    report.rejection_reasons.update(data["rejection_reasons"])
    if int(report.exit_code) != data["exit_code"]:  # an error ended it (RunReport.ended_by is not in the dict)
        report.ended_by = ExitCode(data["exit_code"])
    return report
