"""The plugin author's kit at the command line (issue 22): `sources preview` of a configured source and
of a bare type, `sources list --json` with each type's options as JSON Schema, `sources new` refusing
a bad name or a used folder, `sandbox persons`, and `-v` before the command."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest
from typer.testing import CliRunner

from connector.api.models import PersonInput
from connector.cli import app
from connector.sandbox import SandboxStore

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def contacts(kit, tmp_path: Path) -> Path:
    path = tmp_path / "contacts.csv"
    kit.contacts(path, [kit.contact(1), kit.contact(2, Email="not-an-email"), kit.contact(3), kit.contact(4)])
    return path


def test_preview_of_a_configured_source_shows_records_persons_and_rejections_without_credentials(
    kit, tmp_path, contacts
):
    # The config names credential files that do not exist and an API nobody serves: preview needs neither.
    config = kit.config(tmp_path, "http://127.0.0.1:9/api/v1/capture", contacts)
    code, out, err = run("sources", "preview", "--source", "signups", "-c", str(config), "--mapped", "--limit", "3")
    assert code == 0, err
    assert "  1. R1  (contacts.csv line 2)" in out
    assert '"Email": "ada1@example.org"' in out and '"email": "ada1@example.org"' in out
    assert (
        "     rejected: `email` is not a valid email address: An email address must have an @-sign. (from `Email`)"
        in out
    )
    assert "R4" not in out
    assert (
        out.strip().splitlines()[-1]
        == "3 record(s), 0 bad record(s), 2 mapped, 1 rejected; the first 3 shown (--limit for more)"
    )
    assert not (tmp_path / "ledger.sqlite3").exists()


def test_preview_of_a_type_needs_no_config_and_prints_json_lines(contacts):
    code, out, err = run(
        "sources",
        "preview",
        "--type",
        "csv",
        "--option",
        f"path={contacts}",
        "--option",
        "primary_key=id",
        "--map",
        "first_name=First",
        "--map",
        "email=Email",
        "--map",
        "custom_fields.row=id",
        "--json",
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["id"] for line in lines] == ["R1", "R2", "R3", "R4"]
    assert lines[0]["person"] == {"first_name": "Ada1", "email": "ada1@example.org", "custom_fields": {"row": "R1"}}
    assert lines[0]["data"]["Last"] == "Lovelace" and lines[0]["kind"] == "record" and lines[0]["state"]
    assert "person" not in lines[1] and lines[1]["rejected"][0].startswith("`email` is not a valid email address")


def test_preview_shows_a_bad_record_with_its_reason(tmp_path):
    path = tmp_path / "people.jsonl"
    path.write_text('{"id": "a", "email": "a@example.org"}\nnot json\n{"id": "b"}\n')
    code, out, err = run("sources", "preview", "--type", "jsonl", "--option", f"path={path}", "--option", "settle_s=0")
    assert code == 0, err
    assert "  2. bad record people.jsonl:2  (people.jsonl line 2)" in out
    assert "     reason: not valid JSON" in out
    assert out.strip().splitlines()[-1] == "2 record(s), 1 bad record(s)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--type", "csv", "--option", "nope=1", "--option", "path=x"], "--option nope: unknown option"),
        (["--type", "csv", "--option", "path"], "--option 'path': write KEY=VALUE"),
        (["--type", "nonesuch"], "--type: unknown source type 'nonesuch'"),
        (["--type", "csv", "--option", "path=x.csv", "--mapped"], "--mapped with --type needs --map"),
        (
            ["--type", "csv", "--option", "path=x.csv", "--map", "email=Email"],
            "--map: maps neither `name` nor `first_name`",
        ),
        (["--type", "csv", "--option", "path=/nonexistent/*.csv"], "source csv: no file matches"),
        ([], "give --source NAME"),
    ],
    ids=["unknown-option", "no-equals", "unknown-type", "mapped-without-map", "bad-map", "check-fails", "no-source"],
)
def test_preview_refuses_what_it_cannot_read_with_exit_2(args: list[str], message: str) -> None:
    code, out, err = run("sources", "preview", *args)
    assert code == 2 and message in err, (code, out, err)


PLUGIN = '''
from connector.source import Record, Source, SourceOptions

class Options(SourceOptions):
    pass

class Breaks(Source[Options]):
    """Two records, then a slip."""
    Options = Options

    def read(self, state):
        yield Record("a", {"n": 1}, 1)
        yield Record("b", {"n": 2}, 2)
        yield "not a record"

class Raises(Breaks):
    def check(self):
        raise KeyError("boom")

class BadIds(Breaks):
    def read(self, state):
        yield Record("a", {"n": 1}, 1)
        yield Record("b\\x00", {"n": 2}, 2)
        yield Record(3, {"n": 3}, 3, "row 3")
        yield Record("d", {"n": 4}, 4)
'''


def test_preview_of_a_read_that_slips_prints_what_came_before_then_one_line_and_exit_6(tmp_path, monkeypatch):
    (tmp_path / "slippy.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run("sources", "preview", "--type", "slippy:Breaks")
    assert code == 6
    assert "  1. a" in out and "  2. b" in out
    assert err.strip() == (
        "error: source slippy:Breaks: after 2 item(s): item 3 of the read: read() yielded a str, not a Record, "
        "a BadRecord or a Passed row"
    )


def test_preview_shows_a_record_whose_id_capture_sync_cannot_keep_as_a_bad_record_and_goes_on(tmp_path, monkeypatch):
    """As a sync takes it: rejected with the rule it broke, and the records after it read."""
    (tmp_path / "slippy.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run("sources", "preview", "--type", "slippy:BadIds")
    assert code == 0, err
    assert "  1. a" in out and "  4. d" in out
    assert "(id 'b\\x00', state after it 2)" in out and "a Record's id holds a control character" in out
    assert "a Record's id must be a non-empty string, not a int" in out and "(row 3 (id 3))" in out
    assert out.strip().splitlines()[-1] == "2 record(s), 2 bad record(s)"


def test_verbose_works_before_the_command_too(tmp_path, monkeypatch):
    (tmp_path / "slippy.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, _, err = run("sources", "preview", "--type", "slippy:Raises")
    assert code == 1 and "KeyError: 'boom' (run with -v for details)" in err and "Traceback" not in err
    for args in (
        ["-v", "sources", "preview", "--type", "slippy:Raises"],
        ["sources", "preview", "--type", "slippy:Raises", "-v"],
    ):
        code, _, err = run(*args)
        assert code == 1 and "Traceback (most recent call last)" in err and "KeyError: 'boom'" in err, args


def test_sources_list_json_gives_each_type_its_options_as_json_schema():
    code, out, err = run("sources", "list", "--json")
    assert code == 0, err
    listed = {found["name"]: found for found in json.loads(out)["sources"]}
    assert {"csv", "jsonl", "sql", "http"} <= set(listed)
    for found in listed.values():
        if not found["loads"]:
            continue
        schema = found["options_schema"]
        assert jsonschema_rs.meta.is_valid(schema), found["name"]
        assert set(schema["properties"]) == set(found["options"])
        assert found["description"] and found["description"].splitlines()[0] == found["summary"]
        assert found["builtin"] == (found["origin"] == "built-in")
    csv = listed["csv"]
    assert csv["builtin"] and csv["origin"] == "built-in" and "path" in csv["options_schema"]["required"]
    assert csv["options_schema"]["additionalProperties"] is False  # unknown options are refused
    validator = jsonschema_rs.validator_for(csv["options_schema"])
    assert validator.is_valid({"path": "a.csv", "cursor": "updated", "primary_key": "id"})
    assert not validator.is_valid({"path": "a.csv", "no_such_option": 1})


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("My-Plugin", "'My-Plugin' is not a usable source type name"),
        ("9lives", "'9lives' is not a usable source type name"),
        ("two__underscores", "'two__underscores' is not a usable source type name"),
        ("class", "'class' is taken"),
        ("jsonl", "'jsonl' is taken"),
    ],
)
def test_sources_new_refuses_a_bad_name_in_one_line(tmp_path, name: str, message: str) -> None:
    code, _out, err = run("sources", "new", name, "--dir", str(tmp_path / "plugin"))
    assert code == 2 and err.startswith(f"error: {message}") and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "plugin").exists()


def test_sources_new_refuses_a_folder_in_use_and_takes_an_empty_one(tmp_path):
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    code, _, err = run("sources", "new", "spreadsheet", "--dir", str(used))
    assert code == 2 and err.strip() == f"error: {used} already exists and is not an empty folder: pick another --dir"
    assert sorted(p.name for p in used.iterdir()) == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    code, _out, err = run("sources", "new", "spreadsheet", "--dir", str(tmp_path / "empty"))
    assert code == 0, err
    written = {str(p.relative_to(tmp_path / "empty")) for p in (tmp_path / "empty").rglob("*") if p.is_file()}
    assert written == {
        "pyproject.toml",
        "README.md",
        "sample/contacts.json",
        "tests/test_source.py",
        "capture_sync_spreadsheet/__init__.py",
        "capture_sync_spreadsheet/source.py",
    }
    pyproject = (tmp_path / "empty" / "pyproject.toml").read_text()
    assert 'name = "capture-sync-spreadsheet"' in pyproject
    assert 'spreadsheet = "capture_sync_spreadsheet:SpreadsheetSource"' in pyproject


def test_sandbox_persons_lists_each_person_with_its_captures(tmp_path):
    db = tmp_path / "sandbox.sqlite3"
    with SandboxStore(db) as store:
        key, secret = store.create_client("shop")
        client = store.authenticate(key, secret)
        assert client is not None
        with store.capture_session(client, "bulk", "req-1") as session:
            session.capture(PersonInput(name="Ada", email="ada@example.org"), "k1")
            session.capture(PersonInput(name="Alan", phone="+44 161 496 0003"), "k2")
        with store.capture_session(client, "bulk", "req-2") as session:
            session.capture(PersonInput(name="Ada Lovelace", email="ADA@example.org"), "k3")
    code, out, err = run("sandbox", "persons", "--db", str(db), "--json")
    assert code == 0, err
    persons = json.loads(out)["persons"]
    assert [(p["identity"], p["captures"]) for p in persons] == [
        ("email:ada@example.org", 2),
        ("phone:441614960003", 1),
    ]
    ada = persons[0]
    assert ada["data"]["name"] == "Ada Lovelace"
    assert ada["last_capture"]["action"] == "updated" and ada["last_capture"]["data"]["name"] == "Ada Lovelace"
    assert ada["last_capture"]["client"] == key and ada["last_capture"]["person_key"] == "k3"
    code, out, err = run("sandbox", "persons", "--db", str(db))
    assert code == 0, err
    assert f"2 person(s) in {db}" in out and "email:ada@example.org" in out and "updated" in out
    assert '"name": "Ada Lovelace"' in out


def test_sandbox_persons_of_a_missing_database_is_one_line_and_exit_2(tmp_path):
    code, _, err = run("sandbox", "persons", "--db", str(tmp_path / "none.sqlite3"))
    assert code == 2 and "no sandbox database at" in err
    assert not (tmp_path / "none.sqlite3").exists()
