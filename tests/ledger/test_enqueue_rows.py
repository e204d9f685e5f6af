"""An entry with no error, notes or place is written by `_BARE_ROWS`, its three NULLs in the
statement, and one with a place but no error or notes by `_PLACED_ROWS`: the same rows, entries and
`records` pointers alike, as binding each such row's Nones to the full statement, whatever the
chunks hold (rejections, notes, places, a record again)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from connector.ledger import Ledger, Mapped, _enqueue
from connector.ledger._types import EnqueueCounts


class _Bound:
    """A ledger's connection on which every bare or placed row is written as before: its Nones bound."""

    def __init__(self, db: Any) -> None:
        self.db = db

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> Any:
        if sql == _enqueue._BARE_ROWS:
            return self.db.executemany(_enqueue._ROWS, [(*row[:9], None, None, None, *row[9:]) for row in rows])
        if sql == _enqueue._PLACED_ROWS:
            return self.db.executemany(_enqueue._ROWS, [(*row[:9], None, None, *row[9:]) for row in rows])
        return self.db.executemany(sql, rows)


items = st.builds(
    Mapped,
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(['{"name":"Ada"}', '{"name":"Bo"}', None]),
    st.none(),
    st.lists(st.sampled_from(["email: dropped", "phone: bad"]), max_size=2).map(tuple),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.sampled_from(["r1", "r2"])),
)
chunks = st.lists(st.lists(items, min_size=1, max_size=5), min_size=1, max_size=3)


def _tables(chunks: list[list[Mapped]], bound: bool) -> list[list[tuple[Any, ...]]]:
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "ledger.sqlite3") as ledger:
        for n, chunk in enumerate(chunks):
            # a rejection without reasons is no item a mapping makes
            chunk = [
                item if item.payload is not None or item.reasons else Mapped(item.record_id, reasons=("x",))
                for item in chunk
            ]
            with ledger._write() as db:
                _enqueue.enqueue_chunk(_Bound(db) if bound else db, "s", "v1", chunk, 1000.0 + n, EnqueueCounts())
        with ledger._write() as db:
            return [
                db.execute("SELECT * FROM entries ORDER BY id").fetchall(),
                db.execute("SELECT * FROM records ORDER BY source, record_id").fetchall(),
            ]


@settings(max_examples=60, deadline=None)
@given(chunks)
def test_bare_rows_are_written_as_the_bound_ones(chunks: list[list[Mapped]]) -> None:
    assert _tables(chunks, bound=False) == _tables(chunks, bound=True)
