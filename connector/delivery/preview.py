"""--dry-run: what a sync would read and send, with nothing sent and nothing written."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..ledger import Ledger
from ..source import Passed
from .extract import entry, read_source, readable
from .job import SourceJob
from .report import RunReport

PREVIEW_LIMIT = 20


def preview(
    ledger: Ledger, jobs: Sequence[SourceJob], sink: Callable[[dict[str, Any]], None] | None = None
) -> RunReport:
    """Map and validate what a sync would read, and count what it would send, without sending,
    committing a cursor or changing any entry. Whether the CRM would create or update a person
    cannot be known without asking it, so the preview does not guess. The setup is checked as by
    `sync`. The report keeps the first PREVIEW_LIMIT persons; `sink` gets every one as it is read
    (`"outcome": "send"`) and every rejected record with its reasons (`"outcome": "rejected"`), so
    a preview of any size streams to a file."""
    shown: list[dict[str, Any]] = []
    report = RunReport(kind="dry_run", dry_run_preview=shown)
    t0 = time.monotonic()
    for job in readable(jobs, report):
        for found in read_source(ledger, job, report):
            if isinstance(found, Passed):
                continue  # below the cursor: a real sync counts the late ones
            report.read += 1
            item = entry(job.mapping, found, report)
            if ledger.is_unchanged(job.name, item):
                report.unchanged += 1
            elif item.payload is None:
                report.rejected += 1
                if sink is not None:
                    sink(
                        {
                            "source": job.name,
                            "record_id": item.record_id,
                            "outcome": "rejected",
                            "reasons": list(item.reasons),
                            "record": item.raw,
                        }
                    )
            else:
                report.enqueued += 1
                person = {"source": job.name, "record_id": item.record_id, **json.loads(item.payload)}
                if len(shown) < PREVIEW_LIMIT:
                    shown.append(person)
                if sink is not None:
                    sink({"outcome": "send", **person})
    report.unsettled = ledger.unsettled_count()
    report.duration_s = time.monotonic() - t0
    return report
