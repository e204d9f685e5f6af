"""When a pass commits its cursor: after the chunk that changed something, or at the read's end
when it moved; an idle poll (the rows at the cursor's value read again, nothing new) writes nothing,
so a daemon polling a quiet source costs no fsync per tick."""

from __future__ import annotations

import csv
import sys
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


def test_chunks_grow_from_a_small_first_one_and_a_stop_between_them_resumes_after_the_last_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first enqueue transaction is small (the first request goes early), each next one twice
    the last up to `chunk_size`; a stop after any of them keeps exactly what was committed, and the
    next pass reads on from there: every row once, none lost."""
    monkeypatch.setattr(sys.modules["connector.delivery.extract"], "FIRST_CHUNK", 3)
    path = tmp_path / "contacts.csv"
    _write(path, range(40))
    options = {"path": str(path), "primary_key": "id", "cursor": "updated", "cursor_type": "number"}
    job = SourceJob(
        "s", build_source("s", "csv", options), Mapping.from_config({"name": "Name", "email": "Email"}, where="m")
    )
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        sizes: list[int] = []
        enqueue = ledger.enqueue
        ledger.enqueue = lambda *args: sizes.append(len(args[2])) or enqueue(*args)  # type: ignore[method-assign]
        asked = 0

        def between_chunks() -> bool:
            nonlocal asked
            asked += 1
            return asked < 3  # a stop after the third chunk

        stopped = RunReport(kind="sync")
        assert not extract(ledger, job, 10, stopped, NoProgress(), between_chunks)
        assert sizes == [3, 6, 10] and stopped.enqueued == 19
        assert sum(ledger.status().by_state.values()) == 19, "what the three chunks committed, no more"
        sizes.clear()
        rest = RunReport(kind="sync")
        assert extract(ledger, job, 10, rest, NoProgress())
        assert (rest.read, rest.enqueued) == (21, 21), "read on exactly after the last committed row"
        assert sizes == [3, 6, 10, 2], "a new pass starts small again"
        assert sum(ledger.status().by_state.values()) == 40
