"""When a pass commits its cursor: after the chunk that changed something, or at the read's end
when it moved; an idle poll (the rows at the cursor's value read again, nothing new) writes nothing,
so a daemon polling a quiet source costs no fsync per tick."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from connector.delivery import SourceJob
from connector.delivery.extract import NoProgress, extract
from connector.delivery.report import RunReport
from connector.ledger import Ledger
from connector.mapping import Mapping
from connector.plugins import build_source


def _write(path: Path, rows: range) -> None:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["id", "Name", "Email", "updated"])
        out.writerows([i, f"P{i}", f"p{i}@example.com", i] for i in rows)


@pytest.mark.parametrize("chunk_size", [2, 100])
def test_an_idle_poll_commits_nothing_and_new_rows_move_the_cursor(tmp_path: Path, chunk_size: int) -> None:
    path = tmp_path / "contacts.csv"
    _write(path, range(5))
    options = {"path": str(path), "primary_key": "id", "cursor": "updated", "cursor_type": "number"}
    job = SourceJob(
        "s", build_source("s", "csv", options), Mapping.from_config({"name": "Name", "email": "Email"}, where="m")
    )
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        writes: list[Any] = []
        enqueue = ledger.enqueue
        ledger.enqueue = lambda *args: writes.append(args[3]) or enqueue(*args)  # type: ignore[method-assign]

        def poll() -> RunReport:
            writes.clear()
            report = RunReport(kind="sync")
            extract(ledger, job, chunk_size, report, NoProgress())
            return report

        first = poll()
        assert first.enqueued == 5 and writes and ledger.source_state("s") == writes[-1]
        cursor = ledger.source_state("s")
        idle = poll()
        assert idle.read >= 1 and idle.unchanged == idle.read and idle.enqueued == 0
        assert writes == [] and ledger.source_state("s") == cursor
        _write(path, range(7))
        grown = poll()
        assert grown.enqueued == 2 and ledger.source_state("s") != cursor and writes
