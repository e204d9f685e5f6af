"""A streaming sync whose source outruns delivery: the read pauses again and again while the backlog
stands at its mark (`BACKLOG_BATCHES` batches per worker), woken as the workers take batches in hand
(`Delivery._notify`), and every record is delivered once. In-process, against the sandbox.

Each pause must end by a wake, not by the read's own poll: with the poll made a minute long, a lost
wake-up fails the test. How far the read runs ahead is not asserted: while no worker holds a batch (the run's first chunks) it
is not held back, and how many chunks that is depends on thread scheduling."""

from __future__ import annotations

import threading
import types
from typing import Any

import pytest

from connector.api import CaptureClient
from connector.delivery import DeliverySettings, SourceJob, sync
from connector.ledger import Ledger
from connector.mapping import Mapping
from connector.source import Record, Source, SourceOptions

RECORDS = 600
SETTINGS = DeliverySettings(batch_size=2, concurrency=2, chunk_size=20)  # a mark of 16 pending, chunks of 20


class People(Source):
    class Options(SourceOptions):
        count: int

    def check(self) -> None:
        pass

    def read(self, state: Any) -> Any:
        for i in range(0 if state is None else state["next"], self.options.count):
            yield Record(id=str(i), data={"Name": f"p {i}", "Email": f"p{i}@example.com"}, state={"next": i + 1})


async def test_a_read_that_outruns_delivery_waits_at_the_mark_and_every_record_is_delivered_once(
    sandbox, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    from connector.delivery import deliver

    pauses: list[bool] = []  # how each wait of the read ended: True when woken

    class Watched(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            woken = super().wait(timeout)
            pauses.append(woken)
            return woken

    monkeypatch.setattr(deliver, "ROOM_POLL_S", 60.0)
    monkeypatch.setattr(deliver, "threading", types.SimpleNamespace(**{**vars(threading), "Event": Watched}))
    key, secret = sandbox.create_client(rate_limit=100_000)
    mapping = Mapping.from_config({"name": "Name", "email": "Email"}, where="sources.people.mapping")
    with Ledger(tmp_path / "ledger.sqlite3", synchronous="NORMAL") as ledger:
        async with CaptureClient(sandbox.base_url, key, secret) as client:
            report = await sync(
                ledger,
                client,
                [SourceJob("people", People("people", People.Options(count=RECORDS)), mapping)],
                SETTINGS,
            )
        assert (report.read, report.captured, report.exit_code) == (RECORDS, RECORDS, 0)
        assert ledger.status().by_state["captured"] == RECORDS
    assert len(sandbox.store.persons()) == RECORDS, "each person once"
    assert pauses and all(pauses), f"{len(pauses)} pauses, {pauses.count(False)} ended by the poll, not a wake"
