"""The cursor machinery every incremental built-in uses, proven on arbitrary data by hypothesis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sources.incremental import Row, cursor_key, read_incremental


def table_scan(rows: list[tuple[str, int]], ordered: bool):
    """A scan over an in-memory table; the position is the row index, as a file offset would be."""
    table = sorted(rows, key=lambda r: (r[1], r[0])) if ordered else rows

    def scan(position: int | None, since: Any) -> Iterator[Row]:
        start = 0 if position is None else position
        for i in range(start, len(table)):
            rid, value = table[i]
            yield Row(rid, {"id": rid, "v": value}, i + 1, value)

    return scan


def read(rows: list[tuple[str, int]], state: Any, ordered: bool) -> list:
    stored = json.loads(json.dumps(state))
    return list(read_incremental(stored, table_scan(rows, ordered), key=cursor_key("number"), ordered=ordered))


ids = st.integers(0, 10_000).map(lambda i: f"r{i}")
tables = st.lists(st.tuples(ids, st.integers(0, 4)), unique_by=lambda r: r[0], min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(tables, tables, st.booleans(), st.data())
def test_cuts_resume_exactly_and_the_next_pass_finds_every_new_row(
    first: list[tuple[str, int]], later: list[tuple[str, int]], ordered: bool, data: st.DataObject
) -> None:
    records = read(first, None, ordered)
    assert sorted(r.id for r in records) == sorted(rid for rid, _ in first)
    k = data.draw(st.integers(0, len(records) - 1))
    assert [r.id for r in read(first, records[k].state, ordered)] == [r.id for r in records[k + 1 :]]

    # The next pass sees the old rows plus new ones at or above the last value (the boundary included).
    top = max(v for _, v in first)
    old = {rid for rid, _ in first}
    added = [(rid, top + v % 2) for rid, v in later if rid not in old]
    new = read(first + added, records[-1].state, ordered)
    assert sorted(r.id for r in new) == sorted(rid for rid, _ in added)


def test_many_ids_sharing_one_value_resume_at_every_cut() -> None:
    rows = [(f"r{i:04d}", 7) for i in range(300)] + [("z", 8)]
    records = read(rows, None, ordered=True)
    for k in range(0, len(records), 37):
        assert [r.id for r in read(rows, records[k].state, True)] == [r.id for r in records[k + 1 :]]
    end = records[-1].state
    assert end == {"cursor": 8, "seen": ["z"]}
    assert read(rows + [("y", 8)], end, ordered=True)[0].id == "y"
