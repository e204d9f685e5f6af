"""The version order rule (design 2, issue 27) over any sequence of source reads against a model CRM.

Setup: one source, 1-4 records, contents from a few values per record (so they revert: A, B, A),
"X" and "Y" invalid (the mapping rejects them). The source is an append-only log of rows (record,
content, cursor value) that grows between reads; cursor values mostly rise, sometimes repeat, and a
late row may carry a value below ones already in the log; a row can also be edited in place (its
content changes, its cursor value does not). Each read re-reads a suffix of the log in log order
(everything, a lookback, or just the rows appended since the last read), in chunks of random sizes,
with deliveries between reads and sometimes between chunks. A delivery claims batches and answers
them as the model CRM does, or with a fault: the response lost (kept open, re-sent with the same
key), a stall (503, left for replay), some members failed (refused), some unknown, the batch
blocked (409); the CRM applies what it was sent in every case but the stall and the refusals.
`replay --include-failed` runs now and then. At the end: one full refresh, then everything is
drained without faults, blocked batches and unknown entries asked alone resolved by an operator
(only then; resolving between reads is the explicit test at the end, which the property found).

Oracle, for every record:
1. Final state: if the record's newest row (highest cursor value, ties to the later place in the
   log; contents as last read) is valid, the CRM holds exactly its content.
2. Keys: a per-person key always comes with the same content; and a key the CRM sees for the first
   time never carries the content of the key the CRM saw just before it for that record, unless the
   CRM refused that one (failed): no key is spent on what the CRM holds or is about to hold.
3. Order: the entries the CRM sees, in the order it first sees their keys, come from rows with
   non-decreasing cursor values (`entries.source_order`, checked against the chunk that created
   the entry), and none comes from a row below one already read for the record (an older row).
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.ledger import Claim, Ledger, Mapped, Outcome
from connector.ledger._types import SettledState

SOURCE = "log"
RECORDS = ("1", "2", "3", "4")
CONTENTS = ("A", "B", "C", "X", "Y")
INVALID = frozenset({"X", "Y"})
FAULTS = ("ok", "ok", "ok", "lost", "stall", "fail_some", "fail_all", "unknown_some", "block")

Row = tuple[str, str, float]  # (record id, content, cursor value)


def mapped(row: Row) -> Mapped:
    rid, content, cursor = row
    if content in INVALID:
        return Mapped(rid, raw={"id": rid, "company": content}, reasons=("bad",), order=cursor)
    payload = {"name": f"Person {rid}", "email": f"p{rid}@example.com", "company": content}
    return Mapped(rid, payload=json.dumps(payload, separators=(",", ":")), order=cursor)


def identify(payload: str) -> tuple[str, str]:
    """(record id, content) of a payload as the ledger stored or sent it."""
    data = json.loads(payload)
    if "record" in data:  # a rejection's stored text
        return data["record"]["id"], data["record"]["company"]
    return data["email"][1:].split("@")[0], data["company"]


@dataclass
class Version:
    """An entry as the enqueue that created it left it: where it came from, and whether that row
    was at or above every row read before it for the record."""

    rid: str
    content: str
    order: float | None
    in_order: bool


@dataclass
class CRM:
    """What the CRM receives: per record, each key in the order it is first seen, and what it holds."""

    versions: dict[str, Version]
    held: dict[str, str] = field(default_factory=dict)
    content_of: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (record, content)
    applied: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)  # keys whose last offer the CRM refused
    last: dict[str, str] = field(default_factory=dict)  # record -> the last key offered for it
    first_seen: dict[str, list[str]] = field(default_factory=dict)  # record -> keys, first offers in order

    def offer(self, key: str, payload: str, accept: bool) -> SettledState:
        """One member processed by the CRM; the outcome state it answers with."""
        rid, content = identify(payload)
        if key in self.content_of:
            assert self.content_of[key] == (rid, content), f"key {key} sent with two contents"
        else:
            previous = self.last.get(rid)
            assert previous is None or previous in self.refused or self.content_of[previous][1] != content, (
                f"record {rid}: a new key {key} for {content!r}, which the CRM already holds or is about to hold"
            )
            version = self.versions[key]
            assert version.in_order, f"record {rid}: {content!r} sent from a row below one read before it"
            before = [self.versions[k].order for k in self.first_seen.get(rid, [])]
            assert all(o is not None and version.order is not None and o <= version.order for o in before), (
                f"record {rid}: {content!r} (order {version.order}) sent after versions of orders {before}"
            )
            self.content_of[key] = (rid, content)
            self.first_seen.setdefault(rid, []).append(key)
        self.last[rid] = key
        if key in self.applied:  # an idempotent replay: answered as first, never refused now
            return "duplicate"
        if not accept:
            self.refused.add(key)
            return "failed"
        self.refused.discard(key)
        self.applied.add(key)
        self.held[rid] = content
        return "captured"


class World:
    def __init__(self, ledger: Ledger, path: Path) -> None:
        self.ledger = ledger
        self.db = sqlite3.connect(path)
        self.log: list[Row] = []
        self.seen: dict[int, Row] = {}  # log position -> the row as last read there
        self.clock = 0.0
        self.read_to = 0  # the log's length at the last read
        self.max_read: dict[str, float] = {}
        self.last_entry = 0
        self.versions: dict[str, Version] = {}
        self.crm = CRM(self.versions)
        self.blocked: list[str] = []  # batch keys answered with 409, not yet resolved
        self.stuck: list[str] = []  # keys of unknown entries asked alone, not yet resolved

    # --- the source ------------------------------------------------------------------------

    def append(self, rows: list[tuple[int, str, int, int]]) -> None:
        for record, content, tick, late in rows:
            self.clock += tick
            self.log.append((RECORDS[record], content, self.clock - late))

    def edit(self, at: int, content: str) -> None:
        if self.log:
            rid, _, cursor = self.log[at % len(self.log)]
            self.log[at % len(self.log)] = (rid, content, cursor)

    def read(self, start: int, chunks: list[int], pauses: list[list[tuple[str, int, bool]]]) -> None:
        """Re-read the log from `start` to its end in chunks, delivering after some of them."""
        start = min(start, self.read_to)  # every row is read at least once
        window = list(enumerate(self.log))[start:]
        self.read_to = len(self.log)
        at, i = 0, 0
        while at < len(window):
            size = chunks[i % len(chunks)]
            chunk = window[at : at + size]
            self.enqueue([row for _, row in chunk], {"position": chunk[-1][0] + 1})
            for position, row in chunk:
                self.seen[position] = row
            at += size
            if pauses and i < len(pauses):
                self.deliver(pauses[i])
            i += 1

    def enqueue(self, rows: list[Row], state: dict) -> None:
        before = dict(self.max_read)
        self.ledger.enqueue(SOURCE, "m", [mapped(row) for row in rows], state)
        for key, payload, order in self.db.execute(
            "SELECT key, payload, source_order FROM entries WHERE id > ? ORDER BY id", (self.last_entry,)
        ):
            rid, content = identify(payload)
            order = None if order is None else json.loads(order)
            places = [i for i, row in enumerate(rows) if row == (rid, content, order)]
            assert places, f"entry {key} ({rid}, {content!r}, {order}) matches no row of its chunk {rows}"
            in_order = any(
                rows[i][2] >= max([before.get(rid, float("-inf"))] + [r[2] for r in rows[:i] if r[0] == rid])
                for i in places
            )
            self.versions[key] = Version(rid, content, order, in_order)
        self.last_entry = self.db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
        for rid, _, cursor in rows:
            self.max_read[rid] = max(self.max_read.get(rid, cursor), cursor)

    # --- delivery ----------------------------------------------------------------------------

    def deliver(self, sends: list[tuple[str, int, bool]]) -> bool:
        """Claim one batch per (fault, batch size, include stalled) and answer it so; whether
        anything was claimed."""
        claimed = False
        for fault, size, include_stalled in sends:
            batch = self.ledger.claim(Claim(size, include_stalled=include_stalled))
            if batch is None:
                break
            claimed = True
            self.answer(batch, fault)
        return claimed

    def answer(self, batch, fault: str) -> None:
        members = batch.members
        if batch.operation == "person":  # POST /person answers for its one person: never unknown
            fault = {"fail_some": "fail_all", "unknown_some": "ok"}.get(fault, fault)
        if fault == "fail_all" and any(m.key in self.crm.applied for m in members):
            fault = "ok"  # a replay of a request the CRM applied gets its first answer
        if fault == "stall":  # 503 not retryable: the CRM did nothing; left for replay
            self.ledger.stall(batch, "503 not retryable", [])
        elif fault == "fail_all":  # refused as a whole (a non-retryable error)
            for m in members:
                self.crm.offer(m.key, m.payload, accept=False)
            self.ledger.fail(batch, "422", [])
        elif fault == "lost":  # applied, but the response never came: re-sent later with the same key
            for m in members:
                self.crm.offer(m.key, m.payload, accept=True)
            self.ledger.keep_open(batch, "timeout", [])
        elif fault == "block":  # 409: the CRM has the request in hand (applied here)
            for m in members:
                self.crm.offer(m.key, m.payload, accept=True)
            self.ledger.block(batch, "409 in progress", [])
            self.blocked.append(batch.key)
        else:
            outcomes = []
            for i, m in enumerate(members):
                refuse = fault == "fail_some" and i % 2 == 0
                state = self.crm.offer(m.key, m.payload, accept=not refuse)
                if fault == "unknown_some" and i % 2 == 0:
                    outcomes.append(Outcome(m.entry_id, "unknown", error="no evidence"))
                    if len(members) == 1:  # asked alone and still unplaced: left for an operator
                        self.stuck.append(m.key)
                else:
                    outcomes.append(
                        Outcome(
                            m.entry_id,
                            state,
                            person_id=f"P{m.entry_id}",
                            error=None if state != "failed" else "refused",
                        )
                    )
            self.ledger.settle(batch, outcomes, [])

    def replay_failed(self) -> int:
        """`replay --include-failed`: the failed entries that are their record's newest go back to pending."""
        return self.ledger.requeue_failed(before=float("inf"))

    def resolve(self) -> int:
        """`ledger resolve --requeue` on blocked batches and on unknown entries asked alone. Only in
        the final drain, after the last read: see test_resolving_a_sent_version_that_is_not_the_newest_forgets_it."""
        changed = sum(self.ledger.resolve(key, "requeue") for key in self.blocked + self.stuck)
        self.blocked.clear()
        self.stuck.clear()
        return changed

    def drain(self) -> None:
        for _ in range(100):
            while self.deliver([("ok", 3, True)] * 5):
                pass
            if not self.resolve() + self.replay_failed():
                return
        raise AssertionError("the ledger never drained")


# --- the plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """The log grows (rows of (record, content, clock tick, late by), an edit in place), is read
    (`read`: full, lookback or new; from `back` rows before the last read's end; in `chunks`, with
    `pauses[i]` delivered after chunk i), then `sends` are delivered and maybe failed entries replayed.
    A send is (fault, batch size, include stalled)."""

    rows: list[tuple[int, str, int, int]]
    edit: tuple[int, str] | None
    read: str
    back: int
    chunks: list[int]
    pauses: list[list[tuple[str, int, bool]]]
    sends: list[tuple[str, int, bool]]
    replay_failed: bool


sends = st.lists(st.tuples(st.sampled_from(FAULTS), st.integers(1, 3), st.booleans()), max_size=4)
rounds = st.builds(
    Round,
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.sampled_from(CONTENTS),
            st.sampled_from([0, 1, 1, 1]),
            st.sampled_from([0, 0, 0, 0, 1]),
        ),
        max_size=4,
    ),
    edit=st.none() | st.none() | st.none() | st.tuples(st.integers(0, 50), st.sampled_from(CONTENTS)),
    read=st.sampled_from(["full", "lookback", "lookback", "new", "new"]),
    back=st.integers(1, 6),
    chunks=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    pauses=st.lists(sends, max_size=3),
    sends=sends,
    replay_failed=st.sampled_from([False, False, False, True]),
)


@given(n_records=st.sampled_from([1, 1, 2, 2, 3, 4]), plan=st.lists(rounds, min_size=1, max_size=8))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_crm_ends_with_each_records_newest_row_sent_once_in_the_sources_order(n_records, plan):
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "ledger.sqlite3", synchronous="NORMAL") as ledger:
        world = World(ledger, Path(tmp) / "ledger.sqlite3")
        try:
            for step in plan:
                world.append([(r % n_records, c, t, late) for r, c, t, late in step.rows])
                if step.edit:
                    world.edit(*step.edit)
                start = {"full": 0, "lookback": max(0, world.read_to - step.back), "new": world.read_to}[step.read]
                world.read(start, step.chunks, step.pauses)
                world.deliver(step.sends)
                if step.replay_failed:
                    world.replay_failed()
            world.read(0, [3], [])  # a full refresh
            world.drain()
            assert ledger.unsettled_count() == 0 and ledger.blocked_count() == 0

            for rid in {rid for rid, _, _ in world.seen.values()}:
                last = max((cursor, position) for position, (r, _, cursor) in world.seen.items() if r == rid)
                newest = world.seen[last[1]][1]
                if newest not in INVALID:
                    assert world.crm.held.get(rid) == newest, (
                        f"record {rid}: the CRM holds {world.crm.held.get(rid)!r}, the newest row says {newest!r}"
                    )
        finally:
            world.db.close()


# --- examples ----------------------------------------------------------------------------------


def row_version(content: str, cursor: float) -> Mapped:
    return mapped(("1", content, cursor))


def deliver_all(ledger: Ledger) -> list[str]:
    """Claim and capture everything claimable; the contents sent."""
    sent = []
    while (batch := ledger.claim(Claim(10))) is not None:
        ledger.settle(batch, [Outcome(m.entry_id, "captured") for m in batch.members], [])
        sent += [identify(m.payload)[1] for m in batch.members]
    return sent


def test_a_lookback_that_reads_an_older_row_again_sends_nothing(ledger_target):
    with Ledger(ledger_target) as ledger:
        ledger.enqueue(SOURCE, "m", [row_version("A", 1.0), row_version("B", 2.0)], None)
        assert deliver_all(ledger) == ["B"]
        counts = ledger.enqueue(SOURCE, "m", [row_version("A", 1.0), row_version("B", 2.0)], None)
        assert (counts.older, counts.unchanged, counts.enqueued) == (1, 1, 0)
        assert deliver_all(ledger) == []


def test_a_revert_past_a_version_never_sent_spends_no_key(ledger_target):
    with Ledger(ledger_target) as ledger:
        ledger.enqueue(SOURCE, "m", [row_version("A", 1.0)], None)
        assert deliver_all(ledger) == ["A"]
        ledger.enqueue(SOURCE, "m", [row_version("B", 2.0)], None)  # superseded before it is sent
        ledger.enqueue(SOURCE, "m", [row_version("X", 3.0)], None)  # rejected
        counts = ledger.enqueue(SOURCE, "m", [row_version("A", 4.0)], None)
        assert (counts.unchanged, counts.enqueued) == (1, 0)
        assert deliver_all(ledger) == []


def test_rows_with_equal_cursor_values_take_the_order_of_arrival(ledger_target):
    with Ledger(ledger_target) as ledger:
        ledger.enqueue(SOURCE, "m", [row_version("A", 1.0), row_version("B", 1.0)], None)
        assert deliver_all(ledger) == ["B"]
        ledger.enqueue(SOURCE, "m", [row_version("B", 1.0)], None)
        assert deliver_all(ledger) == []


@pytest.mark.parametrize("park", ["block", "unknown"])
def test_a_sent_version_resolved_while_a_newer_one_waits_still_counts_as_what_the_crm_may_hold(park, ledger_target):
    """B reached the CRM (a 409: the request is in hand; or an unplaceable result), C waits for it;
    `ledger resolve --requeue` supersedes B since C is newer; A comes back before C is sent. Found by
    the property: the ledger took A for what the CRM holds (the captured first version) and never
    sent it, so the CRM kept B although the source says A. A version sent and then set aside is now
    content the CRM may or may not hold, so A goes again."""
    with Ledger(ledger_target) as ledger:
        ledger.enqueue(SOURCE, "m", [row_version("A", 1.0)], None)
        assert deliver_all(ledger) == ["A"]
        ledger.enqueue(SOURCE, "m", [row_version("B", 2.0)], None)
        batch = ledger.claim(Claim(10))
        if park == "block":
            ledger.block(batch, "409 in progress", [])
            stuck = batch.key
        else:  # a one-person bulk batch: already asked alone, so left for an operator
            ledger.settle(batch, [Outcome(batch.members[0].entry_id, "unknown", error="no evidence")], [])
            stuck = batch.members[0].key
        ledger.enqueue(SOURCE, "m", [row_version("C", 3.0)], None)
        ledger.resolve(stuck, "requeue")
        ledger.enqueue(SOURCE, "m", [row_version("A", 4.0)], None)
        assert deliver_all(ledger) == ["A"]
