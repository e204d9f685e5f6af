"""Whatever a plugin yields as a record id, through a whole sync against the sandbox, on both ledger
engines: NUL, lone surrogates, very long ids, empty and blank ids, ids equal only after Unicode
normalisation, ids that are no string at all, beside nested and unencodable field values. Each
record ends captured, or rejected in the ledger with a reason naming the record id rule; the
records around it go on, no two records become one entry, the cursor moves past them (a second
pass reads and sends nothing), and both engines end the same."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from connector.api import CaptureClient
from connector.delivery import DeliverySettings, SourceJob, sync
from connector.delivery._boundary import ID_RULE, MAX_ID_BYTES
from connector.delivery.report import RunReport
from connector.ledger import Ledger
from connector.mapping import Mapping
from connector.source import BadRecord, Record, Source


@dataclass(frozen=True)
class Case:
    """One record to yield: its id (any Python value), an extra field value, and whether
    capture-sync is to take the id (captured) or reject the record."""

    kind: str
    id_of: Any  # n -> the id
    takes: bool
    once: bool = False  # the same id whatever n: at most one row of an example has it


CASES = [
    Case("plain", lambda n: f"r{n}", True),
    Case("nul", lambda n: f"r{n}\x00tail", False),
    Case("nul-only-differs", lambda n: f"r{n}\x00", False),
    Case("surrogate", lambda n: f"r{n}\ud800", False),
    Case("long-ok", lambda n: (f"r{n}-" + "x" * MAX_ID_BYTES)[:MAX_ID_BYTES], True),
    Case("long-ok-cjk", lambda n: f"{n:03}" + "".join(chr(0x4E00 + (i * 7919 + n) % 20000) for i in range(332)), True),
    Case("too-long", lambda n: f"r{n}-" + "".join(chr(0x4E00 + (i * 7919 + n) % 20000) for i in range(3000)), False),
    # equal after Unicode normalisation, or but for a space or a case: each a record of its own
    Case("nfc", lambda n: "caf\u00e9", True, once=True),
    Case("nfd", lambda n: "cafe\u0301", True, once=True),
    Case("nfc-space", lambda n: "caf\u00e9 ", True, once=True),
    Case("nfc-upper", lambda n: "CAF\u00c9", True, once=True),
    Case("emoji", lambda n: f"\U0001f600{n}", True),
    Case("zero-width", lambda n: f"r{n}\u200b", True),
    Case("empty", lambda n: "", False),
    Case("blank", lambda n: " \u00a0\t", False),
    Case("int", lambda n: n, False),
    Case("float", lambda n: n + 0.5, False),
    Case("none", lambda n: None, False),
    Case("bytes", lambda n: f"r{n}".encode(), False),
    Case("tuple", lambda n: ("r", n), False),
]
VALUES = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["a\x00b", "\ud800", "x" * 5000, "\ufeff", " ", {"k\x00": ["a\x00", "\ud800"]}]),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.lists(st.text(max_size=2), max_size=2)), max_size=2),
)
WHERES = [None, "row {n}", "row {n}\x00", "row {n}\ud800\n"]  # a plugin may leave it out, or spell it badly


@dataclass(frozen=True)
class Row:
    case: Case
    value: Any  # in the field `field`
    field: str
    where: str | None  # a format of n
    bad: bool  # yielded as a BadRecord (with its id when it is a string or None)

    def id(self, n: int) -> Any:
        return self.case.id_of(n)


ROWS = st.lists(
    st.builds(
        Row,
        st.sampled_from(CASES),
        VALUES,
        st.sampled_from(["Note", "First", "Email"]),
        st.sampled_from(WHERES),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
    unique_by=lambda row: row.case.kind if row.case.once else (row.case.kind, id(row)),
)
_integrations = itertools.count(1)


class Awkward(Source[Any]):
    """A plugin source yielding `rows`: item n has the id its case makes, a unique email, and an
    awkward value in one of its mapped fields; a Record, or a BadRecord the plugin could not read."""

    def __init__(self, rows: list[Row], tag: str) -> None:
        super().__init__("awkward", None)
        self.rows, self.tag = rows, tag

    def read(self, state: Any | None) -> Iterator[Record | BadRecord]:
        for n in range(0 if state is None else state + 1, len(self.rows)):
            row = self.rows[n]
            data = {"First": f"P{n}", "Email": f"p{n}@example.com", "Row": f"{self.tag}-{n}", "Note": None}
            data[row.field] = row.value
            where = None if row.where is None else row.where.format(n=n)
            if row.bad:
                reason = f"cannot read {row.value!s}\x00 \ud800"[:200]
                yield BadRecord(where or f"bad row {n}", reason, n, row.id(n), {"k\ud800": row.value, "n": n})
            else:
                yield Record(row.id(n), data, n, where)


MAPPING = {"first_name": "First", "email": "Email", "custom_fields": {"note": "Note", "row": "Row"}}


def _sync(target: str | Path, integration: str, base_url: str, key: str, secret: str, source: Awkward) -> RunReport:
    job = SourceJob("awkward", source, Mapping.from_config(MAPPING, where="sources.awkward.mapping"))

    async def go() -> RunReport:
        async with CaptureClient(base_url, key, secret) as client:
            with Ledger(target, integration=integration) as ledger:
                return await sync(ledger, client, [job], DeliverySettings())

    return asyncio.run(go())


def _entries(target: str | Path, integration: str) -> list[tuple[str, str, str | None]]:
    """(record id, state, last error) of every entry, in the order they were made."""
    with Ledger(target, integration=integration) as ledger:
        return [(e.record_id, e.state, e.last_error) for e in ledger.list_entries(limit=1000)]


def _row_of(person: dict[str, Any], tag: str) -> str | None:
    """The row marker (`TAG-n`, custom field `row`) a captured person of this example carries."""
    found = re.search(rf'"({tag}-[0-9]+)"', json.dumps(person))
    return found.group(1) if found else None


def _one_engine(target: str | Path, integration: str, sandbox: Any, rows: list[Row]) -> list[Any]:
    """One sync and a second pass over one ledger; its entries, the record ids made comparable."""
    tag = uuid.uuid4().hex[:8]
    key, secret = sandbox.create_client(f"edges-{tag}", rate_limit=100_000)
    source = Awkward(rows, tag)

    report = _sync(target, integration, sandbox.base_url, key, secret, source)

    assert not report.source_failures, report.source_failures
    assert report.read == len(rows)
    rows_captured = {_row_of(p["data"], tag) for p in sandbox.store.persons()} - {None}
    entries = _entries(target, integration)
    assert len(entries) == len(rows), entries  # one entry per record: none merged, none lost
    assert {state for _, state, _ in entries} <= {"captured", "rejected"}, entries
    assert sum(state == "captured" for _, state, _ in entries) == len(rows_captured)
    for n, row in enumerate(rows):
        if row.bad or not row.case.takes:
            assert f"{tag}-{n}" not in rows_captured, (n, row)
    for record_id, state, error in entries:
        assert state != "rejected" or error, record_id
    # each id capture-sync cannot keep is rejected with the rule it broke and what to do
    rejected_ids = sum(
        1 for _, _, error in entries if error and ID_RULE in error and "make the source yield one" in error
    )
    assert rejected_ids == sum(not row.case.takes and not (row.bad and row.id(0) is None) for row in rows), entries

    again = _sync(target, integration, sandbox.base_url, key, secret, source)
    assert again.read == 0 and again.sent == 0 and not again.source_failures  # the cursor moved past all
    assert _entries(target, integration) == entries
    return [(record_id.replace(tag, "TAG"), state, error) for record_id, state, error in entries]


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=ROWS)
@example(
    rows=[
        Row(
            case,
            ("ok", "\ud800", "a\x00b", {"k": [None]})[n % 4],
            ("Note", "First", "Email")[n % 3],
            WHERES[n % 4],
            n % 5 == 0,
        )
        for n, case in enumerate(CASES + [case for case in CASES if not case.once])
    ]
)
def test_every_record_is_captured_or_rejected_with_its_id_rule_the_same_on_both_engines(
    tmp_path: Path, postgres_ledger_url: str, sandbox: Any, rows: list[Row]
) -> None:
    n = next(_integrations)
    on_sqlite = _one_engine(tmp_path / f"ledger-{n}.sqlite3", None, sandbox, rows)
    on_postgres = _one_engine(postgres_ledger_url, f"edges_{n}", sandbox, rows)
    assert on_sqlite == on_postgres


def test_a_bad_record_with_a_long_position_is_rejected_under_a_bounded_key_on_both_engines(
    tmp_path: Path, postgres_ledger_url: str, sandbox: Any
) -> None:
    """A bad record without an id is kept under its position (`@where`); a position of thousands of
    bytes made an index entry PostgreSQL refuses (2,704 bytes at most), failing the chunk on every
    pass. Two long positions alike but for their end stay two entries."""
    none = next(case for case in CASES if case.kind == "none")
    long_wheres = ["\u4e00" * 1500 + " row {n}", "w" * 4000 + " row {n}"]
    rows = [Row(none, "ok", "Note", where, True) for where in long_wheres * 2] + [
        Row(CASES[0], "ok", "Note", None, False)
    ]
    n = next(_integrations)
    on_sqlite = _one_engine(tmp_path / f"ledger-{n}.sqlite3", None, sandbox, rows)
    on_postgres = _one_engine(postgres_ledger_url, f"edges_{n}", sandbox, rows)
    assert on_sqlite == on_postgres
    kept = [record_id for record_id, state, _ in on_sqlite if state == "rejected"]
    assert len(set(kept)) == 4 and all(len(k.encode()) <= MAX_ID_BYTES for k in kept), kept
