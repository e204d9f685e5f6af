"""Issue 14 in the engine: a bad record is set aside and the pass goes on; a source that breaks
keeps what it gave and the other sources are still read and delivered; a bad setup stops before
anything is read; the run record always holds the exit code. In-process, against the sandbox."""

from __future__ import annotations

import socket
from typing import Any, Literal

import pytest

from connector.api import CaptureClient, RetryPolicy
from connector.delivery import DeliverySettings, SourceJob, sync
from connector.ledger import Ledger
from connector.mapping import Mapping
from connector.problems import ConfigProblem
from connector.source import BadRecord, Record, Source, SourceError, SourceOptions

SETTINGS = DeliverySettings(batch_size=10, concurrency=2, chunk_size=4)  # small chunks: a failure mid-chunk
QUICK = RetryPolicy(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02)


class Rows(Source):
    """Yields its rows from a position cursor. A row {"bad": reason} is a record it cannot read;
    `fail_at` raises there, as a plugin bug or a dropped connection would."""

    class Options(SourceOptions):
        rows: list[dict[str, Any]]
        fail_at: int | None = None
        failure: Literal["bug", "source"] = "bug"
        missing: bool = False  # check() says the source cannot be read now

    reads = 0

    def check(self) -> None:
        if self.options.missing:
            raise SourceError("no file matches 'gone/*.csv'")

    def read(self, state: Any) -> Any:
        self.reads += 1
        start = 0 if state is None else state["next"]
        for i, row in enumerate(self.options.rows[start:], start):
            if i == self.options.fail_at:
                if self.options.failure == "source":
                    raise SourceError("the database connection was lost")
                raise KeyError("Email")
            after = {"next": i + 1}
            if "bad" in row:
                yield BadRecord(where=f"row {i + 1}", reason=row["bad"], state=after, id=row.get("id"), raw=row)
            else:
                yield Record(id=str(row["id"]), data=row, state=after)


def people(name: str, n: int) -> list[dict[str, Any]]:
    return [{"id": f"{name}{i}", "Name": f"{name} {i}", "Email": f"{name}{i}@example.com"} for i in range(n)]


def job(name: str, rows: list[dict[str, Any]], mapping: dict[str, Any] | None = None, **options: Any) -> SourceJob:
    where = f"sources.{name}.mapping"
    return SourceJob(
        name,
        Rows(name, Rows.Options(rows=rows, **options)),
        Mapping.from_config(mapping or {"name": "Name", "email": "Email"}, where=where),
    )


@pytest.fixture
def setup(sandbox, tmp_path):
    key, secret = sandbox.create_client(rate_limit=10_000)
    with Ledger(tmp_path / "ledger.sqlite3", synchronous="NORMAL") as ledger:
        yield ledger, lambda: CaptureClient(sandbox.base_url, key, secret, retry_policy=QUICK)


@pytest.fixture
def outage():
    """A client whose API refuses connections (a loopback port nobody listens on): work stays pending."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return lambda: CaptureClient(f"http://127.0.0.1:{port}/api/v1/capture", "k", "s", retry_policy=QUICK)


def last_run_exit_code(ledger: Ledger) -> int | None:
    return ledger.status().runs[0].exit_code


@pytest.mark.parametrize(
    ("failure", "says"),
    [("bug", "KeyError: 'Email'"), ("source", "the database connection was lost")],
)
async def test_a_source_that_fails_mid_read_keeps_what_it_gave_and_the_next_source_is_still_delivered(
    setup, sandbox, failure, says
):
    ledger, connect = setup
    flaky_rows = people("flaky", 10)
    async with connect() as client:
        report = await sync(
            ledger,
            client,
            [job("flaky", flaky_rows, fail_at=6, failure=failure), job("steady", people("steady", 3))],
            SETTINGS,
        )
    assert report.exit_code == 6 and last_run_exit_code(ledger) == 6
    assert (report.read, report.captured) == (9, 9)
    assert len(sandbox.store.persons()) == 9, "the 6 the failing source gave and the other source's 3"
    message = report.source_failures["flaky"]
    assert message.startswith("sources.flaky: ") and "after 6 record(s)" in message and says in message
    assert list(report.source_failures) == ["flaky"]
    assert ledger.source_state("flaky") == {"next": 6}, "the cursor stays at the last good record"

    async with connect() as client:  # fixed: it goes on from there, nothing read twice
        again = await sync(ledger, client, [job("flaky", flaky_rows)], SETTINGS)
    assert (again.read, again.captured, again.exit_code) == (4, 4, 0)
    assert len(sandbox.store.persons()) == 13


async def test_a_source_failing_on_its_first_record_moves_no_cursor(setup, sandbox):
    ledger, connect = setup
    async with connect() as client:
        report = await sync(ledger, client, [job("flaky", people("flaky", 3), fail_at=0)], SETTINGS)
    assert report.exit_code == 6 and report.read == 0
    assert ledger.source_state("flaky") is None


async def test_a_bad_record_is_rejected_with_its_position_and_its_neighbours_are_delivered(setup, sandbox):
    ledger, connect = setup
    rows = [*people("p", 2), {"bad": "not valid JSON", "Name": "x"}, *people("q", 2), {"bad": "no id", "id": "K9"}]
    async with connect() as client:
        report = await sync(ledger, client, [job("src", rows)], SETTINGS)
    assert (report.read, report.captured, report.rejected, report.exit_code) == (6, 4, 2, 0)
    assert last_run_exit_code(ledger) == 0
    assert len(sandbox.store.persons()) == 4
    rejected = {e.record_id: e.last_error for e in ledger.list_entries("rejected")}
    assert rejected == {"@row 3": "row 3: not valid JSON", "K9": "row 6: no id"}
    assert report.rejection_reasons == {"not valid JSON": 1, "no id": 1}, (
        "counted without positions, so alike ones add up"
    )
    assert ledger.source_state("src") == {"next": 6}, "the cursor moved past them"


async def test_a_bad_record_read_again_is_the_same_entry(setup):
    ledger, connect = setup
    rows = [{"bad": "undecodable bytes"}]
    async with connect() as client:
        await sync(ledger, client, [job("src", rows)], SETTINGS)
        ledger.enqueue("src", "v", [], None)  # back to the start, as `state reset` would do
        again = await sync(ledger, client, [job("src", rows)], SETTINGS)
    assert (again.read, again.unchanged, again.rejected) == (1, 1, 0)
    assert len(ledger.list_entries("rejected")) == 1


async def test_a_field_dropped_by_the_mapping_is_noted_beside_the_person(setup):
    ledger, connect = setup
    mapping = {"name": "Name", "email": "Email", "phone": {"field": "Phone", "transform": "e164", "on_error": "drop"}}
    rows = [{"id": 1, "Name": "Ada", "Email": "ada@example.com", "Phone": "not a number"}]
    async with connect() as client:
        report = await sync(ledger, client, [job("src", rows, mapping)], SETTINGS)
    assert (report.enqueued, report.rejected, report.captured) == (1, 0, 1)
    [entry] = ledger.list_entries("captured")  # the note outlives the delivery
    assert entry.payload == {"name": "Ada", "email": "ada@example.com"}
    assert entry.notes is not None and "phone" in entry.notes


async def test_an_unreadable_source_is_skipped_named_and_the_rest_is_delivered(setup, outage, sandbox):
    ledger, connect = setup
    async with outage() as client:  # pending work from an earlier run, during an outage
        await sync(ledger, client, [job("steady", people("steady", 3))], SETTINGS)
    assert ledger.status().by_state["pending"] == 3
    assert last_run_exit_code(ledger) == 4

    gone = job("gone", people("gone", 2), missing=True)
    async with connect() as client:
        report = await sync(ledger, client, [gone, job("steady", people("steady", 5))], SETTINGS)
    assert report.exit_code == 2 and last_run_exit_code(ledger) == 2
    assert "gone" in report.unavailable["gone"] and "gone/*.csv" in report.unavailable["gone"]
    assert gone.source.reads == 0
    assert len(sandbox.store.persons()) == 5, "the pending 3 and the 2 new ones"


async def test_a_mapped_column_the_source_lacks_stops_before_anything_is_read(setup, sandbox):
    ledger, connect = setup

    class Declared(Rows):
        def columns(self):
            return ["id", "Name", "E-mail"]

    steady = job("steady", people("steady", 3))
    declared = SourceJob("declared", Declared("declared", Rows.Options(rows=people("d", 3))), steady.mapping)
    async with connect() as client:
        with pytest.raises(ConfigProblem) as caught:
            await sync(ledger, client, [steady, declared], SETTINGS)
        with pytest.raises(ConfigProblem):
            await sync(ledger, client, [steady, declared], SETTINGS, dry_run=True)
    assert any("sources.declared.mapping.email" in p and "E-mail" in p for p in caught.value.problems)
    assert steady.source.reads == 0 and declared.source.reads == 0
    assert sandbox.store.persons() == [] and ledger.status().by_state["pending"] == 0
    assert last_run_exit_code(ledger) == 2


async def test_an_error_that_ends_a_sync_is_in_its_run_record(setup, monkeypatch):
    ledger, connect = setup

    def broken(*args, **kwargs):
        raise RuntimeError("the ledger's disk went away")

    monkeypatch.setattr(ledger, "enqueue", broken)
    async with connect() as client:
        with pytest.raises(RuntimeError):
            await sync(ledger, client, [job("u", people("u", 1))], SETTINGS)
    assert last_run_exit_code(ledger) == 1


async def test_a_state_json_cannot_hold_is_a_plugin_error_in_the_run_record(setup):
    """Issue 22: it used to end the sync with a TypeError (exit 1) and keep nothing of the chunk."""
    ledger, connect = setup

    class Unsavable(Rows):
        def read(self, state):
            yield Record(id="1", data=people("u", 1)[0], state=1)
            yield Record(id="2", data=people("u", 2)[1], state=object())  # a cursor that is not JSON

    unsavable = SourceJob("u", Unsavable("u", Rows.Options(rows=[])), job("u", []).mapping)
    async with connect() as client:
        report = await sync(ledger, client, [unsavable], SETTINGS)
    assert report.exit_code == 6 and "which JSON cannot hold" in report.source_failures["u"]
    assert (report.captured, ledger.source_state("u")) == (1, 1)
    assert last_run_exit_code(ledger) == 6


async def test_a_dry_run_reports_a_failing_source_and_sends_nothing(setup, sandbox):
    ledger, connect = setup
    async with connect() as client:
        report = await sync(ledger, client, [job("flaky", people("f", 5), fail_at=2)], SETTINGS, dry_run=True)
    assert (report.read, report.enqueued, report.exit_code) == (2, 2, 6)
    assert ledger.source_state("flaky") is None and sandbox.store.persons() == []
