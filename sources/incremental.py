"""Incremental reading shared by the built-in sources: positions, cursor columns, closed starts.

A source supplies `scan(position, since)`: the rows after `position` (None: from the start), each with
the position after it. Without a cursor, the state is simply that position (new rows, new files).

With a cursor, each read is a *pass* over the rows whose cursor is >= the last committed value (a
closed start), skipping the ids already seen at exactly that value, so rows sharing the boundary
value are never lost. Inside a pass the state is the position plus the pass's filter and the
highest value so far; the pass's last record (found by looking one row ahead) gets the compact
end-of-pass state `{"cursor": value, "seen": [ids at value]}` that starts the next pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from connector.source import Record, SourceError

CursorType = Literal["string", "number", "datetime"]


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    data: dict[str, Any]
    position: Any  # JSON-serialisable: scan(position, ...) yields the rows after this one
    cursor: Any = None  # the raw cursor value, JSON-serialisable


Scan = Callable[[Any | None, Any | None], Iterator[Row]]


def cursor_key(cursor_type: CursorType) -> Callable[[Any], Any]:
    """How raw cursor values compare; raises ValueError for a value that is not of the type."""
    if cursor_type == "number":
        return _number
    if cursor_type == "datetime":
        return _datetime
    return _string


def _string(value: Any) -> str:
    if value is None or value == "":
        raise ValueError("empty")
    return value if isinstance(value, str) else str(value)


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None or value == "":
        raise ValueError("not a number")
    return float(value)


def _datetime(value: Any) -> datetime:
    parsed = datetime.fromisoformat(_string(value))
    # Naive and aware values must compare; a naive one is taken as UTC.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _Boundary:
    """The highest (or, for ordered scans, the latest) cursor value and the ids seen at it.

    Its snapshot is taken for every record, so the ids live in frozen blocks shared between
    snapshots: a snapshot copies at most one block however many ids share the value."""

    BLOCK = 64

    def __init__(self, raw: Any, key: Any, ids: list[str]) -> None:
        self.raw, self.key = raw, key
        self._blocks = tuple(tuple(ids[i : i + self.BLOCK]) for i in range(0, len(ids), self.BLOCK))
        self._tail: list[str] = []

    def add(self, record_id: str) -> None:
        self._tail.append(record_id)
        if len(self._tail) == self.BLOCK:
            self._blocks = (*self._blocks, tuple(self._tail))
            self._tail = []

    def snapshot(self) -> dict[str, Any]:
        return {"cursor": self.raw, "seen": [self._blocks, tuple(self._tail)]}

    def final(self) -> dict[str, Any]:
        return {"cursor": self.raw, "seen": [i for block in self._blocks for i in block] + self._tail}


def _unblock(seen: list[Any]) -> list[str]:
    blocks, tail = seen
    return [i for block in blocks for i in block] + list(tail)


def read_incremental(
    state: Any | None, scan: Scan, *, key: Callable[[Any], Any] | None, ordered: bool = False
) -> Iterator[Record]:
    """Records after `state`. `key` orders cursor values (None: no cursor, state = position);
    `ordered` says the scan yields rows in cursor order, so the latest value is the boundary."""
    if key is None:
        for row in scan(state, None):
            yield Record(row.id, row.data, row.position)
        return
    yield from _cursor_pass(state, scan, key, ordered)


def _cursor_pass(state: Any | None, scan: Scan, key: Callable[[Any], Any], ordered: bool) -> Iterator[Record]:
    if state is None:
        pass_filter, position, top = None, None, None
    elif "at" in state:  # an interrupted pass
        pass_filter, position = state["pass"], state["at"]
        top = (state["max"]["cursor"], _unblock(state["max"]["seen"]))
    else:
        pass_filter, position, top = state, None, (state["cursor"], state["seen"])

    since = since_key = None
    seen: set[str] = set()
    if pass_filter is not None:
        since, seen = pass_filter["cursor"], set(pass_filter["seen"])
        since_key = _key(key, since, "the saved cursor")
    boundary = None if top is None else _Boundary(top[0], _key(key, top[0], "the saved cursor"), top[1])

    pending: tuple[Row, dict[str, Any]] | None = None
    for row in scan(position, since):
        row_key = _key(key, row.cursor, f"record {row.id!r}")
        try:
            if since_key is not None and (row_key < since_key or (row_key == since_key and row.id in seen)):
                continue
            if boundary is None or row_key > boundary.key or (ordered and row_key != boundary.key):
                boundary = _Boundary(row.cursor, row_key, [])
            if row_key == boundary.key:
                boundary.add(row.id)
        except TypeError as exc:
            raise SourceError(f"record {row.id!r}: cursor values of different types cannot be compared") from exc
        if pending is not None:
            yield Record(pending[0].id, pending[0].data, pending[1])
        pending = (row, {"pass": pass_filter, "max": boundary.snapshot(), "at": row.position})
    if pending is not None and boundary is not None:
        yield Record(pending[0].id, pending[0].data, boundary.final())


def _key(key: Callable[[Any], Any], raw: Any, what: str) -> Any:
    try:
        return key(raw)
    except (ValueError, TypeError) as exc:
        raise SourceError(f"{what}: cursor value {raw!r} is not usable ({exc})") from exc
