"""`runs list` / `runs show`: every entry belongs to the run that last changed it, and a run's report
lists its records in the formats a person hands on (table, csv, jsonl, a file), contact data masked."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from pathlib import Path

DEAD_API = "http://127.0.0.1:1/api/v1/capture"  # nothing listens on port 1: connection refused at once


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_demos_rejected_rows_are_exactly_the_runs_csv_report(kit, tmp_path: Path) -> None:
    demo = kit.run("demo", "--dir", str(tmp_path))
    assert demo.code == 0, demo.stderr
    config = str(tmp_path / "capture-sync.toml")

    report = kit.run("runs", "show", "-c", config, "last", "--state", "rejected", "--format", "csv")
    assert report.code == 0, report.stderr
    rows = _csv_rows(report.stdout)
    listed = kit.run("ledger", "list", "-c", config, "--state", "rejected", "--json", "--limit", "1000")
    entries = [json.loads(line) for line in listed.stdout.splitlines()]
    [run] = json.loads(kit.run("runs", "list", "-c", config, "--json").stdout)["runs"]

    assert len(rows) == len(entries) == run["counts"]["rejected"] == 50
    assert [(r["record_id"], r["state"], r["reason"]) for r in rows] == [
        (e["record_id"], "rejected", e["last_error"]) for e in entries
    ]
    # Masked by default, recognisable all the same: first letter and domain, last two digits.
    by_id = {e["record_id"]: e for e in entries}
    for row in rows:
        raw = by_id[row["record_id"]]["payload"]["record"]
        if raw["Email"]:
            assert row["email"] != raw["Email"] and "***" in row["email"]
            assert row["email"].endswith(raw["Email"].rpartition("@")[2] if "@" in raw["Email"] else "***")
            if len(raw["Email"].partition("@")[0]) > 1:  # "@gmail.com" is all domain: its mask shows it
                assert raw["Email"] not in report.stdout
        if raw["Phone"]:
            assert row["phone"].endswith([c for c in raw["Phone"] if c.isdigit()][-1])
            assert raw["Phone"] not in report.stdout
        full_name = f"{raw['First']} {raw['Last']}".strip()
        assert row["name"] == " ".join(f"{word[0]}***" for word in full_name.split())

    shown = kit.run("runs", "show", "-c", config, "1", "--state", "rejected", "--format", "csv", "--show-contact-data")
    assert [r["email"] for r in _csv_rows(shown.stdout)] == [
        by_id[r["record_id"]]["payload"]["record"]["Email"] for r in rows
    ]
    assert [r["name"] for r in _csv_rows(shown.stdout)] == [
        f"{raw['First']} {raw['Last']}".strip() for raw in (by_id[r["record_id"]]["payload"]["record"] for r in rows)
    ]


def test_a_replay_owns_the_entries_it_settled_and_the_sync_keeps_the_rest(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(
        contacts, [kit.contact(1, Phone="+1 206 555 0104"), kit.contact(2, Email="bad@@example.org"), kit.contact(3)]
    )
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))

    outage = kit.run("sync", "-c", config, env=kit.env(CAPTURE_BASE_URL=DEAD_API))
    assert outage.code == 4, outage.stderr
    replay = kit.run("replay", "-c", config)
    assert replay.code == 0, replay.stderr

    runs = json.loads(kit.run("runs", "list", "-c", config, "--json").stdout)["runs"]
    assert [(r["id"], r["kind"], r["exit_code"], r["sources"]) for r in runs] == [
        (2, "replay", 0, []),
        (1, "sync", 4, ["signups"]),
    ]
    sync_rows = [
        json.loads(x) for x in kit.run("runs", "show", "-c", config, "1", "--format", "jsonl").stdout.splitlines()
    ]
    replay_rows = [
        json.loads(x) for x in kit.run("runs", "show", "-c", config, "last", "--format", "jsonl").stdout.splitlines()
    ]
    assert [(r["record_id"], r["state"]) for r in sync_rows] == [("R2", "rejected")]
    assert [(r["record_id"], r["state"], r["attempts"]) for r in replay_rows] == [
        ("R1", "captured", 1),
        ("R3", "captured", 1),
    ]
    assert replay_rows[0]["email"] == "a***@example.org" and replay_rows[0]["phone"] == "+1 *** *** **04"

    table = kit.run("runs", "show", "-c", config, "2")
    assert table.code == 0 and "run 2 (replay" in table.stdout and "R3" in table.stdout
    assert "ada1@example.org" not in table.stdout

    out = tmp_path / "report.csv"
    written = kit.run("runs", "show", "-c", config, "2", "--state", "captured", "--output", str(out))
    assert written.code == 0 and written.stdout == ""
    assert [r["record_id"] for r in _csv_rows(out.read_text())] == ["R1", "R3"]
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600

    unknown = kit.run("runs", "show", "-c", config, "42")
    assert unknown.code == 2 and "no run '42'" in unknown.stderr and unknown.stdout == ""
    bad_state = kit.run("runs", "show", "-c", config, "1", "--state", "gone")
    assert bad_state.code == 2


def test_ledger_resolve_is_a_run_of_its_own(kit, sandbox, tmp_path: Path) -> None:
    """An operator's repair is attributable: the entries it requeued are in its run's report."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))
    assert kit.run("sync", "-c", config).code == 0
    [entry] = [
        json.loads(x)
        for x in kit.run("ledger", "list", "-c", config, "--state", "captured", "--json").stdout.splitlines()
    ]

    refused = kit.run("ledger", "resolve", "-c", config, entry["key"], "--dismiss")
    assert refused.code == 2  # a captured entry needs no repair; the attempt is still a run, with its exit code
    runs = json.loads(kit.run("runs", "list", "-c", config, "--json").stdout)["runs"]
    assert (runs[0]["kind"], runs[0]["exit_code"], runs[0]["note"]) == (
        "resolve",
        2,
        f"ledger resolve {entry['key']} --dismiss",
    )
    assert kit.run("runs", "show", "-c", config, "last", "--format", "jsonl").stdout == ""


def test_a_record_id_that_is_an_email_is_masked_like_the_email(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client()
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2, First="")])  # the second is rejected: no name
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    config.write_text(config.read_text().replace('primary_key = "id"', 'primary_key = "Email"'))
    assert kit.run("sync", "-c", str(config)).code == 0

    masked = kit.run("runs", "show", "-c", str(config), "last", "--format", "csv")
    shown = kit.run("runs", "show", "-c", str(config), "last", "--format", "csv", "--show-contact-data")

    assert masked.code == shown.code == 0, masked.stderr + shown.stderr
    assert "ada1@example.org" not in masked.stdout and "ada2@example.org" not in masked.stdout
    assert sorted(r["record_id"] for r in _csv_rows(masked.stdout)) == ["a***@example.org"] * 2
    assert sorted(r["record_id"] for r in _csv_rows(shown.stdout)) == ["ada1@example.org", "ada2@example.org"]
