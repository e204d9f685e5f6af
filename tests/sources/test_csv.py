"""The csv source: the plugin kit in both incremental modes, then what CSV files do in the wild."""

from __future__ import annotations

import codecs
import csv
import os
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from connector.delivery._boundary import id_problem
from connector.plugins import build_source
from connector.source import BadRecord, Passed, Record
from connector.testing import SourceContract


def read(options: dict[str, Any], state: Any = None) -> list:
    return [r for r in build_source("signups", "csv", options).read(state) if not isinstance(r, Passed)]


def told(items: list) -> list[tuple[str, ...]]:
    """(id, name) of each record, (id, where, reason) of each bad one."""
    return [(r.id, r.data["name"]) if isinstance(r, Record) else (r.id, r.where, r.reason) for r in items]


def age(path: Path, seconds: float) -> None:
    """Make the file look last modified `seconds` ago (its writer long gone)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


class TestCsvNewRowsAndFiles(SourceContract):
    source_type = "csv"

    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        (tmp_path / "signups-1.csv").write_bytes(codecs.BOM_UTF8 + b'id,name\n1,Ann\n2,"Bo\nBo"\n')
        (tmp_path / "signups-2.csv").write_text("id,name\n3,Cy\n4,Di\n")
        return {"path": str(tmp_path / "signups-*.csv")}

    def add_records(self, options: dict[str, Any]) -> None:
        folder = Path(options["path"]).parent
        with open(folder / "signups-2.csv", "a") as fh:
            fh.write("5,Ed\n")
        (folder / "signups-3.csv").write_text("id,name\n6,Flo\n")

    def invalid_options(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {**options, "delimiter": ";;"},
            {**options, "encoding": "utf-16"},
            {**options, "encoding": "no-such-codec"},
            {**options, "cursor": "name"},  # a cursor needs a primary key
            {"delimiter": ","},  # path is required
            {**options, "lookback": "10m"},  # nothing to look back by without a cursor
            {**options, "order": "size"},
            {**options, "settle_s": -1},
        ]

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "path": options["path"] + ".missing"}

    def bad_options(self, options: dict[str, Any]) -> dict[str, Any]:
        folder = Path(options["path"]).parent
        (folder / "bad-1.csv").write_bytes(b'id,name\n1,Ann\n2,J\xfcrgen\n3,"a\rb"\n4,x\ry,"open\n5,Bo"\n6,Cy\n')
        (folder / "bad-2.csv").write_bytes(b'id,name\n7,Di\n8,"\xff\nstill\n",Ed\n9,Flo\n')
        return {**options, "path": str(folder / "bad-*.csv"), "primary_key": "id"}


class TestCsvCursorColumn(SourceContract):
    """An export regenerated in full each time, rows in no particular order, cursor values shared."""

    source_type = "csv"
    header = "id,updated,name\n"
    rows = "1,2024-01-02T10:00:00,Ann\n2,2024-01-01T09:00:00,Bo\n3,2024-01-02T10:00:00,Cy\n4,2024-01-03T08:00:00,Di\n5,2024-01-03T08:00:00,Ed\n"

    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        (tmp_path / "export.csv").write_text(self.header + self.rows)
        return {
            "path": str(tmp_path / "export.csv"),
            "primary_key": "id",
            "cursor": "updated",
            "cursor_type": "datetime",
        }

    def add_records(self, options: dict[str, Any]) -> None:
        # Regenerated: a new row sharing the last cursor value (must not be lost), a later one first.
        Path(options["path"]).write_text(
            self.header + "7,2024-01-04T00:00:00,Gus\n" + self.rows + "6,2024-01-03T08:00:00,Flo\n"
        )

    def invalid_options(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {**options, "lookback": 5},  # a datetime cursor looks back by a duration
            {**options, "lookback": "ten minutes"},
            {**options, "cursor_type": "string", "lookback": "10m"},
        ]

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "path": options["path"] + ".gone"}

    def bad_options(self, options: dict[str, Any]) -> dict[str, Any]:
        bad = Path(options["path"]).with_name("bad.csv")
        bad.write_text(
            self.header + self.rows + ",2024-01-04T00:00:00,No key\n6,yesterday,Bad date\n7,2024-01-05T00:00:00,Gus\n"
        )
        return {**options, "path": str(bad)}


def test_the_next_pass_reads_the_last_value_again_so_an_edit_that_kept_it_is_read(tmp_path: Path) -> None:
    export = tmp_path / "export.csv"
    export.write_text("id,n,name\n1,5,Ann\n2,10,Bo\n")
    options = {"path": str(export), "primary_key": "id", "cursor": "n", "cursor_type": "number"}
    first = read(options)
    assert [r.id for r in first] == ["1", "2"]
    # Bo edited without moving n; as numbers 9 < 10 (as strings it would sort after).
    export.write_text("id,n,name\n1,5,Ann\n2,10,Bob\n3,10,Cy\n4,9,Di\n5,11,Ed\n")
    assert [(r.id, r.data["name"]) for r in read(options, first[-1].state)] == [("2", "Bob"), ("3", "Cy"), ("5", "Ed")]
    # A lookback of 1 also reads what was committed late just below the last value.
    assert [r.id for r in read({**options, "lookback": 1}, first[-1].state)] == ["2", "3", "4", "5"]


def test_a_datetime_cursor_looks_back_by_a_duration(tmp_path: Path) -> None:
    export = tmp_path / "export.csv"
    export.write_text("id,at\n1,2024-01-02T10:00:00\n")
    options = {"path": str(export), "primary_key": "id", "cursor": "at", "cursor_type": "datetime", "lookback": "10m"}
    state = read(options)[-1].state
    export.write_text("id,at\n1,2024-01-02T10:00:00\n2,2024-01-02T09:51:00\n3,2024-01-02T09:49:00\n")
    assert [r.id for r in read(options, state)] == ["1", "2"]


def test_encoding_and_delimiter_are_configurable(tmp_path: Path) -> None:
    path = tmp_path / "kunden.csv"
    path.write_bytes("Nr;Name;Ort\n1;Jürgen Groß;Köln\n".encode("latin-1"))
    [record] = read({"path": str(path), "encoding": "latin-1", "delimiter": ";", "primary_key": "Nr"})
    assert record.id == "1"
    assert record.data == {"Nr": "1", "Name": "Jürgen Groß", "Ort": "Köln"}


def test_ids_default_to_file_and_line_and_short_rows_keep_what_they_have(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text('id,name,email\n1,Ann\n\n2,"Bo\nBo",bo@example.com,extra\n')
    records = read({"path": str(path)})
    assert [r.id for r in records] == ["a.csv:2", "a.csv:4"]
    assert records[0].data == {"id": "1", "name": "Ann"}
    assert records[1].data["_extra"] == ["extra"]


def test_a_last_line_still_being_written_is_read_once_complete(tmp_path: Path) -> None:
    path = tmp_path / "live.csv"
    path.write_text("id,name,email\n1,Ann,ann@example.com\n2,Bo")
    options = {"path": str(path), "primary_key": "id"}
    first = read(options)
    assert [r.id for r in first] == ["1"]
    with open(path, "a") as fh:
        fh.write(",bo@example.com\n")
    rest = read(options, first[-1].state)
    assert [(r.id, r.data["email"]) for r in rest] == [("2", "bo@example.com")]


@pytest.mark.parametrize("cut", ['3,"two\nlines', '3,"no end yet'])
def test_a_last_row_cut_inside_a_quoted_field_waits_for_the_rest(tmp_path: Path, cut: str) -> None:
    path = tmp_path / "live.csv"
    path.write_text('id,notes\n1,"a\nb"\n2,plain\n' + cut)
    options = {"path": str(path), "primary_key": "id"}
    first = read(options)
    assert [(r.id, r.data["notes"]) for r in first] == [("1", "a\nb"), ("2", "plain")]
    with open(path, "a") as fh:
        fh.write(' and more"\n')
    rest = read(options, first[-1].state)
    assert [(r.id, r.data["notes"]) for r in rest] == [("3", cut.split('"', 1)[1] + " and more")]


def test_a_last_line_with_every_column_but_no_newline_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "live.csv"
    path.write_text("id,name,email\n1,Ann,ann@example.com\n2,Bo,bob@example.co")
    options = {"path": str(path), "primary_key": "id"}
    with capture_logs() as logs:
        first = read(options)
    assert [r.id for r in first] == ["1"]
    assert [(e["event"], e["file"], e["line"]) for e in logs] == [("source.line_held_back", "live.csv", 3)]
    with open(path, "a") as fh:
        fh.write("m\n")
    assert [(r.id, r.data["email"]) for r in read(options, first[-1].state)] == [("2", "bob@example.com")]


def test_a_held_back_last_row_stops_the_read_so_the_files_after_it_wait_for_it(tmp_path: Path) -> None:
    (tmp_path / "a-1.csv").write_text("id,email\n1,a@x.io\n2,bob@example.co")
    (tmp_path / "a-2.csv").write_text("id,email\n3,c@x.io\n")
    options = {"path": str(tmp_path / "a-*.csv"), "primary_key": "id"}
    first = read(options)
    assert [r.id for r in first] == ["1"]  # not 3: the state would pass row 2 for good
    assert read(options, first[-1].state) == []  # still being written
    with open(tmp_path / "a-1.csv", "a") as fh:
        fh.write("m\n")
    rest = read(options, first[-1].state)
    assert [(r.id, r.data["email"]) for r in rest] == [("2", "bob@example.com"), ("3", "c@x.io")]


def test_a_held_back_last_row_that_settles_unchanged_is_read_before_the_files_after_it(tmp_path: Path) -> None:
    (tmp_path / "a-1.csv").write_text("id,email\n1,a@x.io\n2,b@x.io")
    (tmp_path / "a-2.csv").write_text("id,email\n3,c@x.io\n")
    options = {"path": str(tmp_path / "a-*.csv"), "primary_key": "id"}
    first = read(options)
    assert [r.id for r in first] == ["1"]
    assert [r.id for r in read({**options, "settle_s": 0}, first[-1].state)] == ["2", "3"]


def test_a_cursor_value_that_is_not_a_finite_number_is_a_bad_record_and_later_rows_are_read(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("id,name,version\n1,Ann,1\n2,Bo,inf\n3,Cy,NaN\n")
    options = {"path": str(path), "primary_key": "id", "cursor": "version", "cursor_type": "number"}
    first = read(options)
    assert told(first) == [
        ("1", "Ann"),
        ("2", "c.csv line 3", "cursor value 'inf' is not usable (not a finite number)"),
        ("3", "c.csv line 4", "cursor value 'NaN' is not usable (not a finite number)"),
    ]
    assert first[-1].state == {"cursor": "1"}
    path.write_text("id,name,version\n1,Ann,7\n2,Bo,inf\n3,Cy,NaN\n4,Di,5\n")
    assert [r.id for r in read(options, first[-1].state) if isinstance(r, Record)] == ["1", "4"]


def test_an_export_without_a_final_newline_gives_its_last_row_once_the_file_has_settled(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_text("id,name\r\n1,Ann\r\n2,Bo")
    age(path, 61)
    assert [r.data["name"] for r in read({"path": str(path)})] == ["Ann", "Bo"]
    path.write_text("id,name\r\n1,Ann\r\n2,Bo")
    age(path, 5)
    assert [r.data["name"] for r in read({"path": str(path), "settle_s": 5})] == ["Ann", "Bo"]
    assert [r.data["name"] for r in read({"path": str(path), "settle_s": 30})] == ["Ann"]


def test_a_settled_file_that_ends_inside_a_quoted_field_gives_that_row_as_a_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "broken.csv"
    path.write_text('id,name\n1,ok\n2,"never closed\n3,swallowed\n')
    age(path, 3600)
    items = read({"path": str(path), "primary_key": "id"})
    assert told(items) == [
        ("1", "ok"),
        ("broken.csv:3", "broken.csv line 3", "the file ends inside a quoted field opened here"),
    ]
    assert items[-1].raw == {"line": '2,"never closed\n3,swallowed'}
    with open(path, "a") as fh:
        fh.write("4,after\n")  # appended after it: read, and the bad row is not given again
    assert told(read({"path": str(path), "primary_key": "id"}, items[-1].state)) == [("4", "after")]


def test_files_are_taken_in_natural_name_order_and_resume_in_it(tmp_path: Path) -> None:
    for n in (10, 9, 1):
        (tmp_path / f"export-{n}.csv").write_text(f"id\n{n}\n")
    options = {"path": str(tmp_path / "export-*.csv")}
    records = read(options)
    assert [r.data["id"] for r in records] == ["1", "9", "10"]
    (tmp_path / "export-11.csv").write_text("id\n11\n")
    assert [r.data["id"] for r in read(options, records[1].state)] == ["10", "11"]


def test_a_position_saved_in_plain_string_order_skips_no_file(tmp_path: Path) -> None:
    for n in (1, 10, 2):
        (tmp_path / f"export-{n}.csv").write_text(f"id\n{n}\n")
    options = {"path": str(tmp_path / "export-*.csv")}
    # Saved by an older version after export-10, which plain string order read before export-2.
    old = {"file": "export-10.csv", "offset": 6, "line": 2}
    assert [r.data["id"] for r in read(options, old)] == ["2"]


def test_a_position_saved_in_plain_string_order_takes_files_after_it_in_natural_order_too(tmp_path: Path) -> None:
    for n in (8, 9):
        (tmp_path / f"export-{n}.csv").write_text(f"id\n{n}\n")
    options = {"path": str(tmp_path / "export-*.csv")}
    old = {"file": "export-9.csv", "offset": 5, "line": 2}  # saved by an older version, before `order`
    for n in (10, 11, 90):
        (tmp_path / f"export-{n}.csv").write_text(f"id\n{n}\n")
    records = read(options, old)
    assert [r.data["id"] for r in records] == ["10", "11", "90"]  # "export-10" < "export-9" as plain strings
    assert read(options, records[-1].state) == []


def test_files_can_be_taken_oldest_first_and_a_changed_one_is_read_again(tmp_path: Path) -> None:
    for name, seconds in (("b.csv", 300), ("a.csv", 200), ("c.csv", 100)):
        (tmp_path / name).write_text(f"id\n{name}\n")
        age(tmp_path / name, seconds)
    options = {"path": str(tmp_path / "*.csv"), "order": "mtime", "primary_key": "id"}
    records = read(options)
    assert [r.id for r in records] == ["b.csv", "a.csv", "c.csv"]
    with open(tmp_path / "b.csv", "a") as fh:
        fh.write("b2\n")  # now the newest: read again from its start (the ledger finds b.csv unchanged)
    (tmp_path / "d.csv").write_text("id\nd.csv\n")
    age(tmp_path / "d.csv", 50)
    assert [r.id for r in read(options, records[-1].state)] == ["d.csv", "b.csv", "b2"]


@pytest.mark.parametrize("replacement", ["id,name\n9,Zed\n", "id,name\n7,Gus Longname\n8,Hal\n9,Ida\n"])
def test_a_replaced_file_is_read_from_its_start_not_from_the_old_offset(tmp_path: Path, replacement: str) -> None:
    path = tmp_path / "daily.csv"
    path.write_text("id,name\n1,Ann\n2,Bo\n3,Cy\n")
    options = {"path": str(path), "primary_key": "id"}
    state = read(options)[-1].state
    path.write_text(replacement)  # shorter, or longer with the old offset in the middle of a row
    assert [r.id for r in read(options, state)] == [line.split(",")[0] for line in replacement.splitlines()[1:]]


@pytest.mark.parametrize("key", ["", "   "])
def test_a_row_without_its_primary_key_is_a_bad_record_and_the_rows_after_it_are_read(tmp_path: Path, key: str) -> None:
    path = tmp_path / "a.csv"
    path.write_text(f"id,name\n1,Ann\n{key},Bo\n3,Cy\n")
    items = read({"path": str(path), "primary_key": "id"})
    assert told(items) == [("1", "Ann"), ("a.csv:3", "a.csv line 3", "no value in primary key 'id'"), ("3", "Cy")]
    assert items[1].raw == {"id": key, "name": "Bo"}


def test_a_line_that_is_not_the_encoding_is_a_bad_record_even_inside_a_quoted_field(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b'id,name\n1,Ann\n2,J\xfcrgen\n3,"two\nlines \xff, with a comma"\n4,Di\n')
    items = read({"path": str(path), "primary_key": "id"})
    assert told(items) == [
        ("1", "Ann"),
        ("a.csv:3", "a.csv line 3", "line 3 is not valid utf-8 (invalid start byte)"),
        ("a.csv:4", "a.csv line 4", "line 5 is not valid utf-8 (invalid start byte)"),
        ("4", "Di"),
    ]
    assert items[1].raw == {"line": "2,J\ufffdrgen"}  # what could be read, storable as text
    assert told(read({"path": str(path), "primary_key": "id"}, items[1].state)) == told(items[2:])


def test_a_line_the_csv_module_refuses_is_a_bad_record_and_a_quote_it_opened_is_not_misread(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text('id,name\n1,a\rb,"opens\n2,still inside"\n3,Cy\n', newline="")
    items = read({"path": str(path), "primary_key": "id"})
    assert told(items) == [
        (
            "a.csv:2",
            "a.csv line 2",
            "the csv module refused it (new-line character seen in unquoted field - "
            "do you need to open the file in universal-newline mode?)",
        ),
        ("3", "Cy"),
    ]


def test_a_bad_cursor_value_is_a_bad_record_that_every_pass_gives_again_the_same(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text("id,n,name\n1,5,Ann\n2,five,Bo\n3,7,Cy\n")
    options = {"path": str(path), "primary_key": "id", "cursor": "n", "cursor_type": "number"}
    first = read(options)
    bad = ("2", "export.csv line 3", "cursor value 'five' is not usable (could not convert string to float: 'five')")
    assert told(first) == [("1", "Ann"), bad, ("3", "Cy")]
    assert told(read(options, first[-1].state)) == [bad, ("3", "Cy")]  # its value cannot be left behind


def test_a_file_of_bad_cursor_values_only_starts_its_next_pass_where_it_started(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text("id,n,name\n1,,Ann\n")
    options = {"path": str(path), "primary_key": "id", "cursor": "n", "cursor_type": "number"}
    [bad] = read(options)
    assert isinstance(bad, BadRecord) and bad.state is None
    path.write_text("id,n,name\n1,,Ann\n2,3,Bo\n")
    assert [r.id for r in read(options, bad.state)] == ["1", "2"]


def test_columns_are_the_header_of_the_first_file(tmp_path: Path) -> None:
    options = {"path": str(tmp_path / "export-*.csv")}
    assert build_source("signups", "csv", options).columns() is None  # nothing to read yet
    (tmp_path / "export-2.csv").write_text("id,Other\n")
    (tmp_path / "export-1.csv").write_bytes(codecs.BOM_UTF8 + b'id,E-mail,"Full name"\n1,a@b.c,Ann\n')
    assert build_source("signups", "csv", options).columns() == ["id", "E-mail", "Full name"]
    (tmp_path / "export-0.csv").write_text("")
    assert build_source("signups", "csv", options).columns() is None  # an empty first file has no header


def test_files_in_subfolders_are_named_relative_to_the_glob(tmp_path: Path) -> None:
    for day in ("2024-01-01", "2024-01-02"):
        (tmp_path / day).mkdir()
        (tmp_path / day / "s.csv").write_text("id\n1\n")
    records = read({"path": str(tmp_path / "**" / "*.csv")})
    assert [r.id for r in records] == ["2024-01-01/s.csv:2", "2024-01-02/s.csv:2"]


def test_a_state_saved_before_tails_were_recorded_still_resumes_after_its_offset(tmp_path: Path) -> None:
    path = tmp_path / "signups.csv"
    path.write_text("id,name\n1,Ann\n2,Bo\n")
    options = {"path": str(path), "primary_key": "id"}
    state = {k: v for k, v in read(options)[-1].state.items() if k != "tail"}
    with open(path, "a") as fh:
        fh.write("3,Cy\n")
    assert [r.id for r in read(options, state)] == ["3"]


def test_a_one_megabyte_field_and_nul_characters_are_read(tmp_path: Path) -> None:
    notes = "n" * 1_000_000  # the csv module refuses fields over 128 KiB unless told otherwise
    (tmp_path / "big.csv").write_text(f"id,notes,name\n1,{notes},a\x00b\n", encoding="utf-8")
    [record] = read({"path": str(tmp_path / "big.csv"), "primary_key": "id"})
    assert record.data == {"id": "1", "notes": notes, "name": "a\x00b"}


def test_rows_of_a_file_named_in_bytes_no_id_may_hold_get_ids_that_name_it_escaped(tmp_path: Path) -> None:
    """Without a primary key a row's id is its file and line; a name the filesystem gives as bytes
    UTF-8 cannot decode, or with a control character, is spelled escaped there, so its rows are
    delivered, not each rejected for its id (a name that can be an id is spelled as it is)."""
    for raw in (b"\xff\xfe", b"ok-\x1b[31m", "café".encode()):
        (tmp_path / os.fsdecode(raw + b".csv")).write_text("name\nAnn\n")
    source = build_source("s", "csv", {"path": str(tmp_path / "*.csv"), "settle_s": 0})
    ids = sorted(item.id for item in source.read(None) if isinstance(item, Record))
    assert ids == sorted(["\\udcff\\udcfe.csv:2", "ok-\\x1b[31m.csv:2", "café.csv:2"])
    assert [id_problem(i, "id") for i in ids] == [None, None, None]


def test_any_header_spells_its_rows_fields_as_written_however_odd_its_names(tmp_path: Path) -> None:
    """Each row's fields as `dict(zip(header, row))` gives them, whatever the header's names: quotes,
    braces, a backslash, `%`, names of Python's own (`row`, `_k0`), one repeated (its first place,
    its last value); a short row lacks the missing fields and a long one keeps the rest under `_extra`."""
    header = ["id", "row", "_k0", "{x}", "it's", '"q"', "a\\b", "%r", "Zoë", "id", ""]
    rows = [
        ["1", "r", "k", "x", "i", "q", "b", "p", "z", "1", "e"],
        ["2", "short"],
        ["3", "r", "k", "x", "i", "q", "b", "p", "z", "3", "e", "more", "most"],
    ]
    path = tmp_path / "odd.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([header, *rows])
    got = [r.data for r in read({"path": str(path)})]
    expected = [dict(zip(header, row)) for row in rows]  # noqa: B905 - a short row is short
    expected[2]["_extra"] = rows[2][len(header) :]
    assert got == expected
    assert [list(d) for d in got] == [list(d) for d in expected]  # in the header's order
