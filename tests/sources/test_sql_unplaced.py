"""The sql source never drops a row silently: a row whose cursor is NULL, or whose key is NULL or blank
(sharing a cursor value with other keyless rows, or with none), comes as a BadRecord on SQLite and on
PostgreSQL (NULLs sort first in one, last in the other), whatever the page size, and a read resumed
from any state it gave reads exactly the rest."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from connector.plugins import build_source
from connector.source import BadRecord, Record

# id, u (the cursor), email: every email is one row.
MESSY = [
    ("a", 1, "a@x.io"),
    (None, 1, "null-key-1@x.io"),  # two keyless rows at a cursor value that has keyed rows
    (None, 1, "null-key-2@x.io"),
    ("b", 1, "b@x.io"),
    ("c", 2, "c@x.io"),
    (" ", 2, "blank-key@x.io"),  # a blank key, twice (one with no cursor): not an id, so it may repeat
    (None, 3, "alone-at-3@x.io"),  # keyless rows at values without keyed rows, one after the other
    (None, 4, "null-key-4a@x.io"),
    (None, 4, "null-key-4b@x.io"),
    ("d", 5, "d@x.io"),
    ("e", None, "null-cursor-e@x.io"),  # NULL cursors (a nullable updated_at)
    ("f", None, "null-cursor-f@x.io"),
    (None, None, "nothing-1@x.io"),
    (None, None, "nothing-2@x.io"),
    (" ", None, "blank-nothing@x.io"),
    ("g", 6, "g@x.io"),
]


def create_messy(url: str, rows: list[tuple[str | None, int | None, str]] = MESSY) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS messy"))
        conn.execute(sa.text("CREATE TABLE messy (id VARCHAR(10), u INTEGER, email VARCHAR(40))"))
        conn.execute(sa.text("INSERT INTO messy VALUES (:i, :u, :e)"), [{"i": i, "u": u, "e": e} for i, u, e in rows])
    engine.dispose()


def read(options: dict[str, Any], state: Any = None) -> list[Record | BadRecord]:
    source = build_source("crm", "sql", options)
    try:
        return list(source.read(json.loads(json.dumps(state))))  # as the ledger stores it
    finally:
        source.close()


def told(items: list[Record | BadRecord]) -> list[tuple[Any, ...]]:
    return [
        (
            type(r).__name__,
            r.id,
            getattr(r, "reason", None),
            (r.data if isinstance(r, Record) else r.raw or {})["email"],
        )
        for r in items
    ]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'crm.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    create_messy(url)
    return url


@pytest.mark.parametrize("cursor", ["u", None])
@pytest.mark.parametrize("page_size", [1, 2, 3, 1000])
def test_every_row_comes_once_and_a_read_resumes_exactly_from_every_state(
    url: str, cursor: str | None, page_size: int
) -> None:
    options = {"url": url, "table": "messy", "primary_key": "id", "cursor": cursor, "page_size": page_size}
    items = read(options)
    assert Counter(e for *_, e in told(items)) == Counter(e for *_, e in MESSY), "every row once, none dropped"
    good = {"a", "b", "c", "d", "g"} | ({"e", "f"} if cursor is None else set())
    assert {r.id for r in items if isinstance(r, Record)} == good
    for k, item in enumerate(items[:-1]):
        assert told(read(options, item.state)) == told(items)[k + 1 :], f"after {told([item])}"
    # The last state reads again at most the boundary and the rows that have no place in the order.
    again = read(options, items[-1].state)
    unplaced = {"null-cursor-e@x.io", "null-cursor-f@x.io", "nothing-1@x.io", "nothing-2@x.io", "blank-nothing@x.io"}
    if cursor is None:
        unplaced = {
            "null-key-1@x.io",
            "null-key-2@x.io",
            "alone-at-3@x.io",
            "null-key-4a@x.io",
            "null-key-4b@x.io",
            "nothing-1@x.io",
            "nothing-2@x.io",
        }
    assert unplaced <= {e for *_, e in told(again)} <= unplaced | {"g@x.io"}


def test_bad_rows_say_what_they_lack(url: str) -> None:
    items = {
        r.raw["email"]: r
        for r in read({"url": url, "table": "messy", "primary_key": "id", "cursor": "u"})
        if isinstance(r, BadRecord) and r.raw
    }
    assert (items["null-key-1@x.io"].id, items["null-key-1@x.io"].where) == ("u=1", "messy row with u = 1")
    assert items["null-key-1@x.io"].reason == "no value in primary key 'id'"
    assert (items["null-cursor-e@x.io"].id, items["null-cursor-e@x.io"].where) == ("e", "messy row with id = e")
    assert items["null-cursor-e@x.io"].reason == "no value in cursor 'u'"
    nothing = [items["nothing-1@x.io"], items["nothing-2@x.io"]]
    assert all(r.reason == "no value in primary key 'id' nor in cursor 'u'" for r in nothing)
    assert len({r.id for r in nothing}) == 2 and all(
        r.id and r.id.startswith("row:") and r.id[4:] in r.where for r in nothing
    )
    # Read again, a row without a key is the same bad record (the ledger sees it unchanged).
    again = {
        r.raw["email"]: r
        for r in read({"url": url, "table": "messy", "primary_key": "id", "cursor": "u"})
        if isinstance(r, BadRecord) and r.raw
    }
    assert again["nothing-1@x.io"] == items["nothing-1@x.io"]


def test_a_pass_reads_the_rows_without_a_cursor_again_and_sees_them_gain_one(url: str) -> None:
    options = {"url": url, "table": "messy", "primary_key": "id", "cursor": "u", "page_size": 2}
    end = read(options)[-1].state
    assert [r.id for r in read(options, end) if isinstance(r, Record)] == ["g"]
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE messy SET u = 7 WHERE id = 'e'"))
    engine.dispose()
    items = read(options, end)
    assert [r.id for r in items if isinstance(r, Record)] == ["g", "e"]
    assert "null-cursor-e@x.io" not in {r.raw["email"] for r in items if isinstance(r, BadRecord) and r.raw}


def test_a_state_after_a_keyless_row_saved_before_counting_them_reads_that_value_again(url: str) -> None:
    """The previous code's state after a keyless row at (1, NULL) skipped the rest of them: read again."""
    options = {"url": url, "table": "messy", "primary_key": "id", "cursor": "u", "page_size": 1}
    emails = [e for *_, e in told(read(options, {"at": {"cursor": 1, "key": None}}))]
    assert {"null-key-1@x.io", "null-key-2@x.io", "c@x.io", "g@x.io", "null-cursor-e@x.io"} <= set(emails)
    assert ("a@x.io" in emails) == url.startswith("sqlite")  # keyed rows of that value come after its NULLs there
