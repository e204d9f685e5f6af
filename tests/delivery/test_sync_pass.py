"""A sync pass with a real CSV source and mapper, in-process against the sandbox over loopback."""

from __future__ import annotations

import asyncio
import csv
import gc
from pathlib import Path

import pytest

from connector.api import CaptureClient, RetryPolicy
from connector.delivery import DeliverySettings, SourceJob, replay, sync
from connector.ledger import Ledger
from connector.ledger._counts import recount
from connector.mapping import Mapping
from connector.plugins import build_source
from connector.source import Record, Source, SourceOptions

SETTINGS = DeliverySettings(batch_size=10, concurrency=2)
QUICK = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)


def write_rows(path: Path, rows: list[tuple[int, str, str]], *, append: bool = False) -> None:
    new = not append or not path.exists()
    with path.open("a" if append else "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        if new:
            out.writerow(["id", "Name", "Email"])
        out.writerows(rows)


def job(path: Path) -> SourceJob:
    source = build_source("signups", "csv", {"path": str(path), "primary_key": "id"})
    mapping = Mapping.from_config({"name": "Name", "email": "Email"}, where="sources.signups.mapping")
    return SourceJob("signups", source, mapping)


@pytest.fixture
def setup(sandbox, tmp_path):
    key, secret = sandbox.create_client(rate_limit=10_000)
    with Ledger(tmp_path / "ledger.sqlite3", synchronous="NORMAL") as ledger:
        yield ledger, lambda: CaptureClient(sandbox.base_url, key, secret, retry_policy=QUICK), tmp_path / "signups.csv"


async def test_a_second_pass_reads_only_new_rows(setup, sandbox):
    ledger, connect, path = setup
    write_rows(path, [(i, f"Person {i}", f"p{i}@example.com") for i in range(25)] + [(99, "No Contact", "")])
    async with connect() as client:
        first = await sync(ledger, client, [job(path)], SETTINGS)
        assert (first.read, first.enqueued, first.rejected, first.captured) == (26, 25, 1, 25)
        assert first.rejection_reasons == {"needs `email` or `phone`": 1}

        write_rows(path, [(i, f"Person {i}", f"p{i}@example.com") for i in range(25, 30)], append=True)
        second = await sync(ledger, client, [job(path)], SETTINGS)
    assert (second.read, second.enqueued, second.captured, second.exit_code) == (5, 5, 5, 0)
    assert len(sandbox.store.persons()) == 30


class FullExport(Source):
    """A source that re-reads everything each time, like a nightly full export."""

    class Options(SourceOptions):
        rows: list[dict]

    def read(self, state):
        for row in self.options.rows:
            yield Record(id=str(row["id"]), data=row, state={"exported": True})


async def test_rereading_the_same_content_is_unchanged_and_sends_nothing(setup, sandbox):
    ledger, connect, _ = setup
    mapping = Mapping.from_config({"name": "Name", "email": "Email"}, where="sources.crm.mapping")
    rows = [{"id": i, "Name": f"Person {i}", "Email": f"p{i}@example.com"} for i in range(12)]
    async with connect() as client:
        await sync(
            ledger, client, [SourceJob("crm", FullExport("crm", FullExport.Options(rows=rows)), mapping)], SETTINGS
        )
        rows[3] = {"id": 3, "Name": "Person 3", "Email": "new3@example.com"}
        export = FullExport("crm", FullExport.Options(rows=rows))
        report = await sync(ledger, client, [SourceJob("crm", export, mapping)], SETTINGS)
    assert (report.read, report.unchanged, report.enqueued, report.sent) == (12, 11, 1, 1)


async def test_dry_run_sends_nothing_and_changes_nothing(setup, sandbox):
    ledger, connect, path = setup
    write_rows(path, [(i, f"Person {i}", f"p{i}@example.com") for i in range(8)] + [(50, "Bad", "nope")])
    async with connect() as client:
        report = await sync(ledger, client, [job(path)], SETTINGS, dry_run=True)
        assert (report.read, report.enqueued, report.rejected, report.sent) == (9, 8, 1, 0)
        assert [p["email"] for p in report.dry_run_preview] == [f"p{i}@example.com" for i in range(8)]
        assert ledger.status().by_state["pending"] == 0 and ledger.source_state("signups") is None
        assert sandbox.store.persons() == []
        real = await sync(ledger, client, [job(path)], SETTINGS)
    assert (real.read, real.captured, real.rejected) == (9, 8, 1)


async def test_include_failed_resends_failed_entries_under_their_own_keys(setup, sandbox):
    ledger, connect, path = setup
    write_rows(path, [(i, f"Person {i}", f"p{i}@example.com") for i in range(5)])
    async with connect() as client:
        await sync(ledger, client, [job(path)], SETTINGS)
    # Pretend the CRM had refused two of them (e.g. a CRM-side rule fixed since).
    failed = ledger.list_entries("captured")[:2]
    with ledger._write() as db:  # a test reaching into the ledger
        db.execute("UPDATE entries SET state = 'failed' WHERE key IN (?, ?)", (failed[0].key, failed[1].key))
        recount(db)  # the settled states' counters (schema v11), which the ledger's own writes keep
    async with connect() as again:
        plain = await replay(ledger, again, SETTINGS)
        assert plain.sent == 0, "failed entries wait for --include-failed"
        report = await replay(ledger, again, SETTINGS, include_failed=True)
    assert report.sent == 2 and report.exit_code == 0
    for entry in failed:
        detail = ledger.show(entry.key)
        assert detail.entry.state == "duplicate", "their per-person keys were kept, so the CRM knew them"
        assert len(detail.batches) == 2 and detail.batches[0] != detail.batches[1]


async def test_a_stop_signal_before_delivery_sends_nothing_and_keeps_the_work(setup, sandbox):
    ledger, connect, path = setup
    write_rows(path, [(i, f"Person {i}", f"p{i}@example.com") for i in range(5)])
    stop = asyncio.Event()
    stop.set()
    async with connect() as client:
        report = await sync(ledger, client, [job(path)], SETTINGS, stop=stop)
    assert report.stopped and report.sent == 0
    assert report.exit_code == 4 == ledger.status().runs[0].exit_code, "run sync again to continue"
    assert sandbox.store.persons() == []


def test_a_rejected_record_keeps_even_an_unprintable_value_for_the_ledger() -> None:
    from connector.delivery.engine import to_mapped

    mapping = Mapping.from_config({"name": "Name", "email": "Email"}, where="sources.s.mapping")
    huge = 10**5000  # str() of it raises ValueError (the interpreter's 4,300-digit limit)
    mapped = to_mapped(mapping, Record(id="7", data={"Name": huge, "Email": "nope"}, state=None))
    assert mapped.payload is None
    assert mapped.raw == {"Name": "<int too large to show>", "Email": "nope"}
    assert any("Name" in reason for reason in mapped.reasons)


class ThresholdWatcher(Source):
    """Notes the cyclic collector's thresholds while the run reads it."""

    seen: list[tuple[int, int, int]] = []

    class Options(SourceOptions):
        rows: list[dict]

    def read(self, state):
        ThresholdWatcher.seen.append(gc.get_threshold())
        for row in self.options.rows:
            yield Record(id=str(row["id"]), data=row, state={"exported": True})


@pytest.mark.parametrize(
    ("host", "during", "after"),
    [
        ((500, 7, 9), (10_000, 7, 9), (500, 7, 9)),  # raised for the run, the host's own back after
        ((0, 7, 9), (0, 7, 9), (0, 7, 9)),  # automatic collection switched off: left off
        ((50_000, 7, 9), (50_000, 7, 9), (50_000, 7, 9)),  # already higher: left as it is
    ],
)
async def test_a_run_collects_cycles_less_often_and_gives_the_process_its_thresholds_back(setup, host, during, after):
    ledger, connect, _ = setup
    mapping = Mapping.from_config({"name": "Name", "email": "Email"}, where="sources.crm.mapping")
    rows = [{"id": i, "Name": f"Person {i}", "Email": f"p{i}@example.com"} for i in range(3)]
    before = gc.get_threshold()
    gc.set_threshold(*host)
    ThresholdWatcher.seen.clear()
    try:
        async with connect() as client:
            source = ThresholdWatcher("crm", ThresholdWatcher.Options(rows=rows))
            report = await sync(ledger, client, [SourceJob("crm", source, mapping)], SETTINGS)
        left = gc.get_threshold()
    finally:
        gc.set_threshold(*before)
    assert report.captured == 3
    assert ThresholdWatcher.seen == [during]
    assert left == after
