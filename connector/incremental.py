"""The incremental toolkit for source plugins (public; the built-in sources use it too): cursor
options with their validators, positions, cursor passes, lookback, and each record's place in the
source's order.

    from connector.incremental import CursorOptions, Row, read_incremental, cursor_key, lookback_amount

    class Options(CursorOptions):  # primary_key, cursor, cursor_type, lookback, validated together
        folder: str

    def read(self, state):
        key = cursor_key(self.options.cursor_type) if self.options.cursor else None
        return read_incremental(state, self._scan, key=key, lookback=lookback_amount(self.options.lookback))

A source supplies `scan(position, since)`: the rows after `position` (None: from the start), each with
the position after it. Without a cursor, the state is simply that position (new rows, new files).

With a cursor, each read is a *pass* over the rows whose cursor is >= the last pass's highest value
(minus the `lookback`): the boundary value is read again, so a row edited without moving its cursor
(in the same second, or the same day for a date) is not lost; the ledger drops what did not change.
Inside a pass a record's state is `{"pass": start, "max": highest so far, "at": position}`, so a pass
cut short resumes exactly after it; the pass's last record (found by looking one row ahead) gets the
end-of-pass state `{"cursor": highest value}` that starts the next pass. States saved when passes
skipped the ids seen at the boundary carry `seen` lists: they are ignored, which re-reads that value.

A scan that stops before a row it cannot read yet (a file's last line still being written) yields
`HELD_BACK` last. The pass then does not end: its last record keeps its in-pass state, so the next read
resumes before that row and takes it whatever its cursor value (an end-of-pass state could start the
next pass above it and drop it). Without a cursor the position of the last row already stays before it.

A scan that filters and orders in its own store (the sql source) does not come here: it compares
values as the database does, and only shares `end_of_pass`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from connector.durations import duration_s
from connector.source import BadRecord, Passed, Record, SourceError, SourceOptions, new_record

__all__ = [
    "HELD_BACK",
    "CursorOptions",
    "CursorType",
    "HeldBack",
    "Lookback",
    "Row",
    "Scan",
    "check_lookback",
    "cursor_key",
    "end_of_pass",
    "lookback_amount",
    "order_of",
    "read_incremental",
]

CursorType = Literal["string", "number", "datetime"]


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    data: dict[str, Any]
    position: Any  # JSON-serialisable: scan(position, ...) yields the rows after this one
    cursor: Any = None  # the raw cursor value, JSON-serialisable
    where: str = ""  # its position for a person ("a.csv line 3"); needed only with a problem
    problem: str | None = None  # why the source could not read it: it becomes a BadRecord
    order: float | str | None = None  # its place in the source's order (`order_of` its cursor); None: arrival

    def at(self, state: Any) -> Record | BadRecord:
        """This row as what the source yields, with `state` as the state after it."""
        return item_of(self.id, self.data, state, self.where, self.problem, self.order)


def item_of(
    id: str,
    data: dict[str, Any],
    state: Any,
    where: str = "",
    problem: str | None = None,
    order: float | str | None = None,
) -> Record | BadRecord:
    """A row's fields as what the source yields (`Row.at`): for a scan that knows each state as it
    reads, and so makes its items without a Row between (the file sources without a cursor). Not in
    `__all__`: the built-in sources' shortcut, not yet part of the plugin toolkit's guide."""
    if problem is None:
        return new_record(id, data, state, where or None, order)
    return BadRecord(where, problem, state, id, data)


class HeldBack:
    """What a scan yields last when it stops before a row it cannot read yet: see the module docstring."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "HELD_BACK"


HELD_BACK = HeldBack()

Scan = Callable[[Any | None, Any | None], Iterator[Row | HeldBack]]


def lookback_amount(raw: str | float | None) -> timedelta | float | None:
    """A `lookback` option as an amount: `"10m"`-style durations (s, m, h, d) or a plain number."""
    if raw is None:
        return None
    if isinstance(raw, str):
        seconds = duration_s(raw)
        if seconds is None:
            raise ValueError(f'{raw!r} is not a duration such as "30s", "10m", "2h" or "1d"')
        return timedelta(seconds=seconds)
    if isinstance(raw, bool) or raw < 0:
        raise ValueError("must be a duration or a number >= 0")
    return float(raw)


def _valid_lookback(raw: str | float | None) -> str | float | None:
    lookback_amount(raw)
    return raw


Lookback = Annotated[
    str | float | None,
    AfterValidator(_valid_lookback),
    Field(
        description="Start each pass this far before the last cursor value, for rows committed late: a duration "
        '("30s", "10m", "2h", "1d") for a datetime cursor, a number for a number cursor; not for string cursors.'
    ),
]


def check_lookback(raw: str | float | None, cursor_type: CursorType | None) -> None:
    """Refuse a lookback the cursor cannot subtract: none without a cursor, none for strings, a
    duration only for datetimes and a number only for numbers. ValueError says which."""
    amount = lookback_amount(raw)
    if amount is None:
        return
    if cursor_type is None:
        raise ValueError("`lookback` needs a cursor: without one only new rows are read")
    if cursor_type == "string":
        raise ValueError("`lookback` needs cursor_type datetime or number: a string has no distance to look back by")
    if cursor_type == "datetime" and not isinstance(amount, timedelta):
        raise ValueError('a datetime cursor looks back by a duration such as "10m"')
    if cursor_type == "number" and isinstance(amount, timedelta):
        raise ValueError("a number cursor looks back by a plain number")


class CursorOptions(SourceOptions):
    """The cursor options of an incremental source, checked together: a cursor needs a primary key
    (rows sharing a cursor value are told apart by their id), and a lookback needs a cursor that can
    subtract it. Subclass it with the source's own options."""

    primary_key: str | None = Field(
        None, description="Field holding a stable record id; default: the source's own position (a file and line)."
    )
    cursor: str | None = Field(
        None,
        description="Field to read incrementally by (needs primary_key): each pass reads the rows at or above the "
        "last pass's highest value, that value included; default: new rows only.",
    )
    cursor_type: CursorType = Field("string", description="How cursor values compare: string, number or datetime.")
    lookback: Lookback = None

    @model_validator(mode="after")
    def _cursor_needs_key(self) -> CursorOptions:
        if self.cursor is not None and self.primary_key is None:
            raise ValueError("`cursor` needs `primary_key`: rows sharing a cursor value are told apart by their id")
        check_lookback(self.lookback, self.cursor_type if self.cursor else None)
        return self


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
    try:
        number = float(value)
    except OverflowError:  # an int or Decimal beyond a float's range
        raise ValueError("beyond a float's range") from None
    if not math.isfinite(number):  # inf would stop every later pass below it, NaN compare with nothing
        raise ValueError("not a finite number")
    return number


def _datetime(value: Any) -> datetime:
    parsed = datetime.fromisoformat(_string(value))
    # Naive and aware values must compare; a naive one is taken as UTC.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def order_of(value: Any) -> float | str | None:
    """A cursor value as `Record.order`: a number as a float, a date or time as ISO text in UTC (a
    naive one taken as UTC, as `cursor_key` does), so that both sort as the source sorts them; text
    as it is. None for anything else: that record takes its place by arrival."""
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, int | float | Decimal):
        number = float(value)
        return number if math.isfinite(number) else None
    return value if isinstance(value, str) else None


def end_of_pass(
    rows: Iterable[tuple[Row | Passed, Any]], end: Callable[[Row], Any]
) -> Iterator[Record | BadRecord | Passed]:
    """Each row as a record with its state, except the last, which gets `end(row)`: the state that
    starts the next pass. Found by looking one row ahead, so every earlier state stays exact. A
    `Passed` row goes through as it is: it has no state."""
    pending: tuple[Row, Any] | None = None
    for row, state in rows:
        if isinstance(row, Passed):
            yield row
            continue
        if pending is not None:
            yield pending[0].at(pending[1])
        pending = (row, state)
    if pending is not None:
        yield pending[0].at(end(pending[0]))


def read_incremental(
    state: Any | None, scan: Scan, *, key: Callable[[Any], Any] | None, lookback: timedelta | float | None = None
) -> Iterator[Record | BadRecord | Passed]:
    """Records after `state`. `key` orders cursor values (None: no cursor, state = position);
    `lookback` (an amount `key`'s values can subtract) starts each new pass that much earlier. A row
    below where a pass starts comes as `Passed`, so the engine can tell a late row from an old one."""
    if key is None:
        return (row.at(row.position) for row in scan(state, None) if isinstance(row, Row))
    return _cursor_pass(state, scan, key, lookback)


def _cursor_pass(
    state: Any | None, scan: Scan, key: Callable[[Any], Any], lookback: timedelta | float | None
) -> Iterator[Record | BadRecord | Passed]:
    if state is None:
        start, top, position = None, None, None
    elif "at" in state:  # a pass cut short
        start, top, position = state["pass"], state["max"]["cursor"], state["at"]
    else:  # the end of the last pass
        start, top, position = {"cursor": state["cursor"]}, state["cursor"], None
    since = None if start is None else _key(key, start["cursor"], "the saved cursor")
    if since is not None and lookback:
        since -= lookback
    best = [top, None if top is None else _key(key, top, "the saved cursor")]  # raw and key of the highest value
    held_back = False

    def rows() -> Iterator[tuple[Row | Passed, Any]]:
        nonlocal held_back
        for row in scan(position, None if start is None else start["cursor"]):
            if isinstance(row, HeldBack):
                held_back = True
                return
            if row.problem is None:
                try:
                    row_key = key(row.cursor)
                except (ValueError, TypeError) as exc:
                    row = replace(row, problem=f"cursor value {_shown(row.cursor)} is not usable ({exc})")
            if row.problem is not None:  # no cursor value to filter by or to move the pass on
                yield row, {"pass": start, "max": {"cursor": best[0]}, "at": row.position}
                continue
            try:
                if since is not None and row_key < since:
                    yield Passed(row.id, row.where or None), None  # said, never dropped in silence
                    continue
                if best[1] is None or row_key > best[1]:
                    best[:] = [row.cursor, row_key]
            except TypeError as exc:
                raise SourceError(f"record {row.id!r}: cursor values of different types cannot be compared") from exc
            yield replace(row, order=order_of(row_key)), {"pass": start, "max": {"cursor": best[0]}, "at": row.position}

    def end(row: Row) -> Any:
        if held_back:  # not the end of the pass: resume after this row
            return {"pass": start, "max": {"cursor": best[0]}, "at": row.position}
        # A pass of bad rows only has no value to start the next pass at: it starts where this one did.
        return start if best[0] is None else {"cursor": best[0]}

    return end_of_pass(rows(), end)


def _shown(value: Any) -> str:
    try:
        return repr(value)
    except ValueError:  # an int beyond the interpreter's digit limit
        return "<a number too large to show>"


def _key(key: Callable[[Any], Any], raw: Any, what: str) -> Any:
    try:
        return key(raw)
    except (ValueError, TypeError) as exc:
        raise SourceError(f"{what}: cursor value {raw!r} is not usable ({exc})") from exc
