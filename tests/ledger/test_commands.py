"""`status` and `ledger list/show/resolve` as a user runs them: a missing ledger is an error (never a
new empty one), cut output says so, and a record is found by its source and id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from connector.cli import app
from connector.ledger import Ledger, Mapped

runner = CliRunner()


def person(record_id: str, email: str) -> Mapped:
    return Mapped(record_id, payload=json.dumps({"name": f"Person {record_id}", "email": email}))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "capture-sync.toml"
    path.write_text(
        """[capture]
base_url = "http://127.0.0.1:9/api/v1/capture"

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "signups"
type = "csv"
path = "contacts.csv"
primary_key = "id"

[sources.mapping]
name = "Name"
email = "Email"
""",
        encoding="utf-8",
    )
    return path


def run(config: Path, *args: str) -> Result:
    command, rest = (args[:2], args[2:]) if args[0] == "ledger" else (args[:1], args[1:])
    return runner.invoke(app, [*command, "-c", str(config), *rest])


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("ledger", "list", "--state", "failed"),
        ("ledger", "show", "p-abc"),
        ("ledger", "show", "--source", "signups", "--record", "1"),
        ("ledger", "resolve", "b-abc", "--dismiss"),
    ],
)
def test_a_missing_ledger_is_an_error_and_is_not_created(config, args):
    result = run(config, *args)
    assert result.exit_code == 2, result.output
    assert f"no ledger at {config.parent / 'ledger.sqlite3'}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (config.parent / "ledger.sqlite3").exists()


@pytest.fixture
def ledger(config: Path) -> Ledger:
    with Ledger(config.parent / "ledger.sqlite3") as led:
        led.enqueue("signups", "m1", [person(str(n), f"p{n}@example.org") for n in range(105)], None)
        led.enqueue("other", "m1", [person("x", "x@example.org")], None)
        yield led


@pytest.mark.parametrize("as_json", [False, True])
def test_ledger_list_says_when_it_shows_only_part(config, ledger, as_json):
    result = run(config, "ledger", "list", "--state", "pending", *(["--json"] if as_json else []))
    assert result.exit_code == 0, result.output
    assert "showing 100 of 106; use --limit 106 to see them all" in result.stderr
    if as_json:  # the note stays out of the JSON lines
        assert len([json.loads(line) for line in result.stdout.splitlines()]) == 100


@pytest.mark.parametrize("args", [("--limit", "106"), ("--source", "other"), ("--source", "signups", "--limit", "105")])
def test_ledger_list_says_nothing_more_when_it_shows_everything(config, ledger, args):
    result = run(config, "ledger", "list", "--state", "pending", *args)
    assert result.exit_code == 0 and "showing" not in result.stderr, result.output


def test_ledger_list_counts_within_the_source_asked_for(config, ledger):
    result = run(config, "ledger", "list", "--state", "pending", "--source", "signups", "--limit", "10")
    assert "showing 10 of 105;" in result.stderr


def test_ledger_show_finds_every_version_of_a_record_by_source_and_id(config, ledger):
    ledger.enqueue("signups", "m1", [person("7", "new7@example.org")], None)  # a second version of record 7
    ledger.enqueue("other", "m1", [person("7", "other7@example.org")], None)  # the same id in another source

    as_json = run(config, "ledger", "show", "--source", "signups", "--record", "7", "--json")
    assert as_json.exit_code == 0, as_json.output
    versions = json.loads(as_json.stdout)
    assert [v["entry"]["payload"]["email"] for v in versions] == ["p7@example.org", "new7@example.org"]
    assert {(v["entry"]["source"], v["entry"]["record_id"]) for v in versions} == {("signups", "7")}

    text = run(config, "ledger", "show", "--source", "signups", "--record", "7")
    assert "version 1 of 2" in text.stdout and "version 2 of 2" in text.stdout
    assert all(v["entry"]["key"] in text.stdout for v in versions)
    by_key = json.loads(run(config, "ledger", "show", versions[1]["entry"]["key"], "--json").stdout)
    assert by_key == versions[1]


def test_ledger_show_of_an_unknown_record_is_an_error(config, ledger):
    result = run(config, "ledger", "show", "--source", "signups", "--record", "nope")
    assert result.exit_code == 2 and "source 'signups' has no record with the id 'nope'" in result.stderr


@pytest.mark.parametrize(
    "args", [(), ("--source", "signups"), ("--record", "7"), ("p-abc", "--source", "signups", "--record", "7")]
)
def test_ledger_show_takes_a_key_or_a_source_and_record(config, ledger, args):
    result = run(config, "ledger", "show", *args)
    assert result.exit_code == 2 and "give a KEY, or both --source and --record" in result.stderr
