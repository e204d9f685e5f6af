"""Issue 22's snapshot figure: a `mode = "snapshot"` pass over an unchanged 1,000,000-row CSV against
the time of reading it (target: within 1.2 times), and the rows a rewritten file sends (exactly its
new and changed ones).

    .venv/bin/python benchmarks/snapshot.py [--rows 1000000]

Timings in one process, alternated over `--rounds`, wall time of each: reading the file (the csv
source's records, nothing kept), the first snapshot pass (every record mapped and enqueued), a pass
over the unchanged file (what a daemon does every tick: the source's fingerprint and the mapping are
those of the last complete pass, so nothing is read), and a pass over the same content written anew
(a new modification time: every row is read, and each is found unchanged by its raw digest without
being mapped), each through the engine's extract step into a ledger with synchronous FULL. Nothing is
sent: the passes are the read side of a sync, where a snapshot's cost lies.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
from csv_read import MAPPING, generate

from connector.delivery import SourceJob
from connector.delivery.extract import NoProgress, extract
from connector.delivery.report import RunReport
from connector.ledger import Ledger
from connector.mapping import Mapping
from connector.plugins import build_source

TARGET = 1.2


def _job(csv_path: Path) -> SourceJob:
    source = build_source("snap", "csv", {"path": str(csv_path), "primary_key": "id"})
    return SourceJob("snap", source, Mapping.from_config(MAPPING, where="sources.snap.mapping"), snapshot=True)


def _pass(ledger: Ledger, job: SourceJob) -> tuple[float, RunReport]:
    report = RunReport()
    t0 = time.perf_counter()
    extract(ledger, job, 1000, report, NoProgress())
    return time.perf_counter() - t0, report


def _read(job: SourceJob) -> float:
    t0 = time.perf_counter()
    for _ in job.source.read(None):
        pass
    return time.perf_counter() - t0


def _rewrite(csv_path: Path, every: int) -> int:
    """Change the first name of every `every`-th row and append 10 rows; the rows that must be sent."""
    rows = list(csv.DictReader(csv_path.open(newline="", encoding="utf-8")))
    for i in range(0, len(rows), every):
        rows[i]["First"] = rows[i]["First"] + "x"
    extra = [dict(rows[0], id=f"new{i}", Email=f"new{i}@example.com") for i in range(10)]
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows + extra)
    return len(range(0, len(rows), every)) + len(extra)


def run(rows: int = 1_000_000, rounds: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="capture-sync-snapshot-") as tmp:
        folder = Path(tmp)
        csv_path = folder / "export.csv"
        generate(csv_path, rows, messy=False)
        job = _job(csv_path)
        with Ledger(folder / "ledger.sqlite3", synchronous="FULL") as ledger:
            first, report = _pass(ledger, job)
            assert report.enqueued == rows, report
            reads, passes, rewrites = [], [], []
            for i in range(rounds):  # alternated, so a busy moment hits all three
                reads.append(_read(job))
                seconds, again = _pass(ledger, job)
                assert (again.enqueued, again.unchanged) == (0, 0), again  # not even read
                passes.append(seconds)
                os.utime(csv_path, ns=(time.time_ns() + i, time.time_ns() + i))  # the same rows, exported again
                seconds, again = _pass(ledger, job)
                assert (again.enqueued, again.unchanged) == (0, rows), again
                rewrites.append(seconds)
            expected = _rewrite(csv_path, every=1000)
            _, rewritten = _pass(ledger, job)
    read_s, pass_s, same_s = statistics.median(reads), statistics.median(passes), statistics.median(rewrites)
    return {
        "rows": rows,
        "read_s": read_s,
        "first_pass_s": first,
        "unchanged_pass_s": pass_s,
        "ratio": pass_s / read_s,
        "same_content_pass_s": same_s,
        "same_content_ratio": same_s / read_s,
        "target": TARGET,
        "rewritten_sent": rewritten.enqueued,
        "rewritten_expected": expected,
    }


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    r = run(args.rows, args.rounds)
    print(
        f"rows {r['rows']:,}: read {r['read_s']:.2f} s, first snapshot pass {r['first_pass_s']:.2f} s, "
        f"unchanged pass {r['unchanged_pass_s']:.2f} s (medians of {args.rounds})"
    )
    print(
        f"unchanged pass / read: {r['ratio']:.2f} (target <= {TARGET}) {'met' if r['ratio'] <= TARGET else 'NOT met'}"
    )
    print(
        f"same content written anew (every row read, none mapped): {r['same_content_pass_s']:.2f} s, "
        f"{r['same_content_ratio']:.2f} x the read"
    )
    print(
        f"rewritten file (every 1,000th row edited, 10 appended): {r['rewritten_sent']} enqueued, {r['rewritten_expected']} expected"
    )


if __name__ == "__main__":
    main()
