"""What the plugin boundary says about a slip deep inside a state, or about an id it cannot keep: the
path it names is spelled only when there is a problem, so it must still be exact (a plugin author
follows it); a record whose id it cannot keep is a rejection saying why."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from connector.delivery import Checker, Slip
from connector.delivery._boundary import ID_RULE, MAX_ID_BYTES, shown_text
from connector.source import BadRecord, Passed, Record


def slip_of(state: Any, rid: str = "r1") -> str | None:
    try:
        Checker().check(Record(rid, {"Name": "Ada"}, state))
    except Slip as slip:
        return str(slip)
    return None


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (
            {"files": [{"at": 1.5}, {"at": float("nan")}]},
            "the state holds nan at state['files'][1]['at'], which JSON cannot hold",
        ),
        ({"a": {1: "x"}}, "the state has a int key 1 at state['a']: JSON keys are strings"),
        ({"a": ("ok", {"b": {1, 2}})}, "the state holds a set at state['a'][1]['b'], which JSON cannot hold"),
        (b"raw", "the state holds a bytes at state, which JSON cannot hold"),
    ],
)
def test_a_bad_value_deep_in_a_state_is_named_by_its_whole_path(state: Any, said: str) -> None:
    assert slip_of(state) is not None and said in slip_of(state)  # type: ignore[operator]


def test_a_state_nested_too_deep_names_the_level_where_it_stops() -> None:
    state: Any = "end"
    for _ in range(70):
        state = [state]
    assert slip_of(state) == f"the state nests deeper than 64 levels at state{'[0]' * 64}"


def test_a_state_of_json_values_passes_and_a_shared_large_list_is_walked_once() -> None:
    done = [f"file-{i}" for i in range(100)]
    checker = Checker()
    for line in range(3):
        checker.check(Record(f"r{line}", {}, {"file": "a.csv", "line": line, "tail": (10, 99), "done": done}))
    done.append(object())  # walked already: the same list is not walked again (the memo's documented trade)
    checker.check(Record("r9", {}, {"done": done}))
    assert slip_of({"done": done}) is not None  # a new read walks it


@pytest.mark.parametrize(
    ("rid", "said"),
    [
        ("Zoë-7", None),
        ("ok id", None),
        ("x" * MAX_ID_BYTES, None),
        ("a\x85b", "a Record's id holds a control character"),
        ("a\tb", "a Record's id holds a control character"),
        ("a\x00b", "a Record's id holds a control character"),
        ("a\ud800", "a Record's id holds a lone surrogate, which UTF-8 cannot encode"),
        ("é" * (MAX_ID_BYTES // 2 + 1), f"a Record's id is longer than {MAX_ID_BYTES} bytes in UTF-8"),
        (" \u00a0", "a Record's id must be a non-empty string, not ' \\xa0'"),
        (b"r1", "a Record's id must be a non-empty string, not a bytes"),
    ],
)
def test_an_id_the_ledger_cannot_keep_makes_the_record_a_rejection_saying_why(rid: Any, said: str | None) -> None:
    record = Record(rid, {"Name": "Ada"}, 7, "row 3")
    taken = Checker().check(record)
    if said is None:
        assert taken is record
    else:
        assert isinstance(taken, BadRecord) and taken.state == 7 and taken.id is None
        assert taken.where.startswith("row 3 (id ") and taken.where.isascii()  # its position, and its id shown
        assert said in taken.reason and ID_RULE in taken.reason and taken.raw == {"Name": "Ada"}


def test_a_rejected_id_without_a_position_is_kept_under_the_id_shown_so_that_no_two_are_one() -> None:
    """5 and '5', ids differing only in a NUL or in a long tail: each its own entry, read again the same."""
    ids = [5, "5\x00", "5\x00\x00", None, b"5", "\x01" + "x" * 5000, "\x01" + "x" * 5000 + "y"]
    shown = [Checker().check(Record(rid, {}, 1)) for rid in ids]
    wheres = [item.where for item in shown if isinstance(item, BadRecord)]
    assert len(set(wheres)) == len(ids) and all(w.isascii() and w.isprintable() and len(w) < 300 for w in wheres)
    assert wheres == [item.where for item in (Checker().check(Record(rid, {}, 1)) for rid in ids)]


def test_a_passed_row_whose_id_the_ledger_cannot_keep_is_looked_up_by_its_id_shown() -> None:
    """Ended at it, the read would stop there on every pass; looked up as it is, a NUL would cut the id."""
    kept = Passed("r1", "row 1")
    assert Checker().check(kept) is kept
    shown = Checker().check(Passed("r\x002", "row 2"))
    assert shown == Passed("'r\\x002'", "row 2")


@pytest.mark.parametrize(
    ("where", "kept"),
    [
        ("contacts.csv line 12", "contacts.csv line 12"),  # an existing ledger's key `@where` stays the same
        ("line\t12\n", "line\t12\n"),  # storable on both engines: unchanged too
        ("line 12\x00", "line 12\\x00"),  # PostgreSQL refuses a NUL; SQLite's json_each ends the text there
        ("line \ud800 12", "line \\ud800 12"),  # UTF-8 cannot encode a lone surrogate
    ],
)
def test_a_bad_records_where_is_kept_as_is_unless_no_ledger_can_store_it(where: str, kept: str) -> None:
    assert shown_text(where) == kept


def test_an_id_of_a_str_subclass_is_kept_as_its_characters() -> None:
    """A `(str, Enum)` member as an id: its `str()` is `Kind.A`, and its f-string spelling may be too. The
    ledger looked its entry up by `str(id)` and never found it (the record was enqueued again on every
    read, review R13); the boundary hands it on as plain text of the same characters."""

    class Kind(str, enum.Enum):  # noqa: UP042 (not StrEnum: its str() is its value, this one's is Kind.A)
        A = "rec-1"

    for item in (Record(Kind.A, {"Name": "Ada"}, None), BadRecord("f line 1", "unreadable", None, id=Kind.A)):
        checked = Checker().check(item)
        assert type(checked.id) is str and checked.id == "rec-1"  # type: ignore[union-attr]
