"""The jsonl source: the plugin kit, and JSON Lines written by a live process."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.plugins import build_source
from connector.source import BadRecord, Passed, Record
from connector.testing import SourceContract
from sources.files import Unreadable
from sources.jsonl_files import _parse, _parse_int


def lines(*objects: Any) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


def read(options: dict[str, Any], state: Any = None) -> list:
    return [r for r in build_source("events", "jsonl", options).read(state) if not isinstance(r, Passed)]


def told(items: list) -> list[tuple[str, ...]]:
    """The id of each record, (id, where, reason) of each bad one."""
    return [r.id if isinstance(r, Record) else (r.id, r.where, r.reason) for r in items]


class TestJsonlNewLinesAndFiles(SourceContract):
    source_type = "jsonl"

    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        (tmp_path / "2024-01-01.jsonl").write_text(
            lines({"id": 1, "name": "Ann", "tags": ["a"]}, {"id": 2, "name": "Bo"}) + "\n"
        )
        (tmp_path / "2024-01-02.jsonl").write_text(lines({"id": 3, "name": "Cy", "meta": {"plan": "pro"}}))
        return {"path": str(tmp_path / "*.jsonl"), "primary_key": "id"}

    def add_records(self, options: dict[str, Any]) -> None:
        folder = Path(options["path"]).parent
        with open(folder / "2024-01-02.jsonl", "a") as fh:
            fh.write(lines({"id": 4, "name": "Di"}))
        (folder / "2024-01-03.jsonl").write_text(lines({"id": 5, "name": "Ed"}))

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "path": options["path"].replace("*.jsonl", "nothing-*.jsonl")}

    def bad_options(self, options: dict[str, Any]) -> dict[str, Any]:
        bad = Path(options["path"]).with_name("bad.jsonl")
        bad.write_bytes(
            b'{"id": 1}\n{"id": 2, "name": "J\xfcrgen"}\n{"id": 3,\n[4]\n{"name": "no id"}\n{"id": ""}\n'
            b'{"id": [6]}\n{"id": 7}\n'
        )
        return {**options, "path": str(bad)}


class TestJsonlCursorField(SourceContract):
    source_type = "jsonl"
    rows = [{"id": "a", "seq": 3}, {"id": "b", "seq": 1}, {"id": "c", "seq": 3}, {"id": "d", "seq": 2}]

    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        (tmp_path / "changes.jsonl").write_text(lines(*self.rows))
        return {"path": str(tmp_path / "changes.jsonl"), "primary_key": "id", "cursor": "seq", "cursor_type": "number"}

    def add_records(self, options: dict[str, Any]) -> None:
        Path(options["path"]).write_text(lines({"id": "e", "seq": 3}, *self.rows, {"id": "f", "seq": 4}))

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "path": options["path"] + ".gone"}


def test_a_partly_written_last_line_waits_and_a_broken_line_is_a_bad_record_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_text(lines({"id": 1}) + '{"id": 2, "na')
    options = {"path": str(path), "primary_key": "id"}
    first = read(options)
    assert [r.id for r in first] == ["1"]
    with open(path, "a") as fh:
        fh.write('me": "Bo"}\n{"id": 3\n{"id": 4}\n')
    rest = read(options, first[-1].state)
    assert told(rest) == [
        "2",
        ("live.jsonl:3", "live.jsonl line 3", "not valid JSON (Expecting ',' delimiter at column 9)"),
        "4",
    ]
    assert rest[1].raw == {"line": '{"id": 3'}


def test_a_last_line_without_its_newline_waits_until_complete_or_settled(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_text(lines({"id": 1}) + '{"id": 2}')  # parses, but the writer may not be done with the line
    options = {"path": str(path), "primary_key": "id"}
    first = read(options)
    assert [r.id for r in first] == ["1"]
    then = time.time() - 61
    os.utime(path, (then, then))  # the writer is gone: an export without a final newline
    assert [r.id for r in read(options, first[-1].state)] == ["2"]
    path.write_text(lines({"id": 1}) + '{"id": 2, "na')
    os.utime(path, (then, then))
    [cut] = read(options, first[-1].state)
    assert isinstance(cut, BadRecord) and cut.where == "live.jsonl line 2" and cut.reason.startswith("not valid JSON")


def test_with_a_cursor_a_held_back_line_below_the_pass_top_is_read_once_complete(tmp_path: Path) -> None:
    path = tmp_path / "people.jsonl"
    path.write_text(lines({"id": "1", "u": "2024-01-02T00:00:00"}) + '{"id": "2", "u": "2024-01-01T00:00:00"')
    options = {"path": str(path), "primary_key": "id", "cursor": "u", "cursor_type": "datetime"}
    first = read(options)
    assert told(first) == ["1"]
    assert "at" in first[-1].state  # the pass is not over: an end at 01-02 would drop row 2 (01-01)
    with open(path, "a") as fh:
        fh.write("}\n")
    rest = read(options, first[-1].state)
    assert told(rest) == ["2"] and rest[-1].state == {"cursor": "2024-01-02T00:00:00"}


def test_in_mtime_order_a_held_back_line_stops_the_read_too(tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text(lines({"id": "a"}) + '{"id": "b"}')
    new.write_text(lines({"id": "c"}))
    os.utime(old, (time.time() - 10, time.time() - 10))
    options = {"path": str(tmp_path / "*.jsonl"), "primary_key": "id", "order": "mtime"}
    first = read(options)
    assert told(first) == ["a"]
    assert told(read({**options, "settle_s": 5}, first[-1].state)) == ["b", "c"]  # settled unchanged: not skipped


def test_a_cut_multibyte_character_waits_while_written_and_is_a_bad_record_once_settled(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_bytes(b'{"id": 1}\n{"id": 2, "name": "J\xc3')
    options = {"path": str(path), "primary_key": "id"}
    assert told(read(options)) == ["1"]
    then = time.time() - 61
    os.utime(path, (then, then))
    assert told(read(options)) == [
        "1",
        ("live.jsonl:2", "live.jsonl line 2", "line 2 is not valid utf-8 (unexpected end of data)"),
    ]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("[1, 2]", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ('{"name": "no id"}', "no value in primary key 'id'"),
        ('{"id": null}', "no value in primary key 'id'"),
        ('{"id": " "}', "no value in primary key 'id'"),
        ('{"id": {"n": 1}}', "primary key 'id' holds a dict, not a string or a number"),
        ('{"id": true}', "primary key 'id' holds a bool, not a string or a number"),
    ],
)
def test_a_line_that_gives_no_record_is_a_bad_record_between_the_good_ones(
    tmp_path: Path, line: str, reason: str
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(lines({"id": 1}) + line + "\n" + lines({"id": 3}))
    assert told(read({"path": str(path), "primary_key": "id"})) == ["1", ("a.jsonl:2", "a.jsonl line 2", reason), "3"]


def test_an_integer_beyond_the_interpreters_digit_limit_is_read_exactly(tmp_path: Path) -> None:
    digits = "9" * 5000  # valid JSON; int() refuses more than 4300 digits
    path = tmp_path / "big.jsonl"
    path.write_text('{"id": 1, "n": ' + digits + ', "small": 12}\n')
    [record] = read({"path": str(path)})
    assert format(record.data["n"], "f") == digits and record.data["small"] == 12


# Lines as exports hold them and as they break: JSON values with integers of every size (beyond
# the digit limit too), floats, text with escapes, then cut, prefixed with a byte order mark, or
# followed by garbage.
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.just("BIG")  # an integer beyond the digit limit, which json.dumps cannot write
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_json_lines = st.builds(
    lambda value, cut, prefix, suffix: prefix + json.dumps(value).replace('"BIG"', "9" * 5000)[: cut or None] + suffix,
    st.dictionaries(st.text(max_size=4), _json_values, max_size=4) | _json_values,
    st.integers(-3, 0),
    st.sampled_from(["", "\ufeff", " ", "\x00"]),
    st.sampled_from(["", "\n", "\r\n", " x", ", 1"]),
)


@settings(max_examples=400, deadline=None)
@given(_json_lines)
def test_a_line_is_read_as_json_loads_reads_it_keeping_every_integer_exactly(text: str) -> None:
    """The source's own decoder (made once, integers read in C) against `json.loads` with the
    exact integers it gave before: the same record, or the same reason it is a bad one."""
    try:
        expected: Any = json.loads(text.rstrip("\r\n"), parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        expected = Unreadable(f"not valid JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(expected, dict | Unreadable):
        expected = Unreadable("not a JSON object")
    got = _parse(text, None)
    if isinstance(expected, Unreadable):
        assert isinstance(got, Unreadable) and got.reason == expected.reason
    else:
        assert isinstance(got, dict) and got == expected
        assert repr(got) == repr(expected)  # ints stay ints, a big one a Decimal of its digits
