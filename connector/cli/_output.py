"""Machine-readable output: `--json` prints exactly one JSON object on stdout and nothing else there,
so `capture-sync sync --json | jq .exit_code` works in a script; human lines go to stderr."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from .. import logs

if TYPE_CHECKING:
    from ..delivery import RunReport


def emit_json(value: Any) -> None:
    """One JSON document and a newline on stdout, written directly (no rich console wrapping)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
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
