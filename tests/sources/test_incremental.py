"""The cursor machinery the file and http sources use, proven on arbitrary data by hypothesis: a pass
cut anywhere resumes exactly, and the next pass reads everything at or above the last value (minus
the lookback), so an edit that did not move the cursor is read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.incremental import HELD_BACK, Row, check_lookback, cursor_key, lookback_amount, read_incremental
from connector.source import Passed

Table = list[tuple[str, int, str]]  # id, cursor value, content


def table_scan(table: Table):
    """A scan over an in-memory table in no cursor order; the position is the row index, as a file offset would be."""

    def scan(position: int | None, since: Any) -> Iterator[Row]:
        for i in range(0 if position is None else position, len(table)):
            rid, value, content = table[i]
            yield Row(rid, {"id": rid, "v": value, "content": content}, i + 1, value)

    return scan


def read(table: Table, state: Any, lookback: float | None = None) -> list:
    stored = json.loads(json.dumps(state))  # as the ledger stores it
    return [
        r
        for r in read_incremental(stored, table_scan(table), key=cursor_key("number"), lookback=lookback)
        if not isinstance(r, Passed)
    ]


ids = st.integers(0, 10_000).map(lambda i: f"r{i}")
tables = st.lists(st.tuples(ids, st.integers(0, 4), st.just("old")), unique_by=lambda r: r[0], min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(tables, tables, st.sampled_from([None, 1.0, 2.5]), st.data())
def test_a_cut_pass_resumes_exactly_and_the_next_pass_reads_the_boundary_edits_and_new_rows(
    first: Table, later: Table, lookback: float | None, data: st.DataObject
) -> None:
    records = read(first, None, lookback)
    assert sorted(r.id for r in records) == sorted(rid for rid, _, _ in first)
    k = data.draw(st.integers(0, len(records) - 1))
    if k < len(records) - 1:  # inside the pass: exactly the rest, no repeat
        assert [r.id for r in read(first, records[k].state, lookback)] == [r.id for r in records[k + 1 :]]

    # Edit rows in place (the cursor value unchanged, as an edit in the same second) and add rows.
    top = max(v for _, v, _ in first)
    edited = {rid for rid, _, _ in first if data.draw(st.booleans())}
    old = {rid for rid, _, _ in first}
    changed = [(rid, v, "edited" if rid in edited else c) for rid, v, c in first]
    changed += [(rid, top + v % 2 - 1, c) for rid, v, c in later if rid not in old]
    new = read(changed, records[-1].state, lookback)
    since = top - (lookback or 0)
    assert sorted(r.id for r in new) == sorted(rid for rid, v, _ in changed if v >= since)
    assert {r.id for r in new if r.data["content"] == "edited"} == {
        rid for rid, v, _ in changed if rid in edited and v >= since
    }

    # A second pass, cut anywhere, resumes exactly too; its end never moves the cursor back.
    if len(new) > 1:
        j = data.draw(st.integers(0, len(new) - 2))
        assert [r.id for r in read(changed, new[j].state, lookback)] == [r.id for r in new[j + 1 :]]
        assert new[-1].state["cursor"] >= top


def test_states_saved_with_seen_ids_re_read_their_boundary_and_resume_inside_a_pass() -> None:
    table = [("a", 7, "x"), ("b", 8, "x"), ("c", 8, "x"), ("d", 9, "x")]
    assert [r.id for r in read(table, {"cursor": 8, "seen": ["b", "c"]})] == ["b", "c", "d"]
    cut = {"pass": {"cursor": 7, "seen": ["a"]}, "max": {"cursor": 8, "seen": [[["b"]], []]}, "at": 2}
    records = read(table, cut)
    assert [r.id for r in records] == ["c", "d"]
    assert records[-1].state == {"cursor": 9}


def test_many_ids_sharing_one_value_resume_at_every_cut() -> None:
    table = [(f"r{i:04d}", 7, "x") for i in range(300)] + [("z", 8, "x")]
    records = read(table, None)
    for k in range(0, len(records) - 1, 37):
        assert [r.id for r in read(table, records[k].state)] == [r.id for r in records[k + 1 :]]
    assert records[-1].state == {"cursor": 8}
    assert [r.id for r in read([*table, ("y", 8, "x")], records[-1].state)] == ["z", "y"]


@pytest.mark.parametrize(
    ("raw", "amount"),
    [
        ("30s", timedelta(seconds=30)),
        ("10m", timedelta(minutes=10)),
        ("1.5h", timedelta(minutes=90)),
        ("2d", timedelta(days=2)),
        (5, 5.0),
    ],
)
def test_lookback_is_a_duration_or_a_number(raw: str | float, amount: timedelta | float) -> None:
    assert lookback_amount(raw) == amount


@pytest.mark.parametrize(
    ("raw", "cursor_type", "message"),
    [
        ("10 minutes", "datetime", "not a duration"),
        (-1, "number", ">= 0"),
        ("10m", None, "needs a cursor"),
        (5, "string", "a string has no distance"),
        (5, "datetime", "by a duration"),
        ("10m", "number", "by a plain number"),
    ],
)
def test_a_lookback_the_cursor_cannot_use_is_refused(raw: str | float, cursor_type: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_lookback(raw, cursor_type)


@pytest.mark.parametrize(
    "value", ["inf", "-Infinity", "1e999", "NaN", float("inf"), float("nan"), pytest.param(10**400, id="10**400")]
)
def test_a_number_cursor_refuses_a_value_that_is_not_a_finite_number(value: Any) -> None:
    with pytest.raises(ValueError, match=r"not a finite number|beyond a float's range"):
        cursor_key("number")(value)


def test_an_infinite_cursor_value_is_a_bad_record_and_does_not_stop_the_next_pass() -> None:
    table: Any = [("a", 1, "x"), ("b", "inf", "x"), ("c", "NaN", "x")]  # as a csv gives them
    first = read(table, None)
    assert [(type(r).__name__, r.id) for r in first] == [("Record", "a"), ("BadRecord", "b"), ("BadRecord", "c")]
    assert first[-1].state == {"cursor": 1}
    later = [("a", 7, "edited"), *table[1:], ("d", 5, "x")]
    assert [r.id for r in read(later, first[-1].state)] == ["a", "b", "c", "d"]


def test_a_scan_held_back_before_a_row_does_not_end_the_pass_so_that_row_is_read_whatever_its_value() -> None:
    table: Table = [("a", 8, "x"), ("b", 5, "x")]

    def held(position: int | None, since: Any) -> Iterator[Any]:
        yield from table_scan(table[:1])(position, since)
        if position is None or position < 1:
            yield HELD_BACK  # b's line is still being written

    [first] = read_incremental(None, held, key=cursor_key("number"))
    assert first.state == {"pass": None, "max": {"cursor": 8}, "at": 1}  # not {"cursor": 8}: b (5) would be dropped
    rest = read(table, first.state)
    assert [r.id for r in rest] == ["b"] and rest[-1].state == {"cursor": 8}
    assert list(read_incremental(None, held, key=None))[-1].state == 1
