"""`--json`: exactly one JSON object on stdout, nothing else there, whatever the run's outcome; and
`sync --dry-run --output FILE` writes the whole preview, not only the first rows stdout shows."""

from __future__ import annotations

import json
from pathlib import Path

DEAD_API = "http://127.0.0.1:1/api/v1/capture"


def _one_object(stdout: str) -> dict:
    assert stdout.count("\n") == 1 and stdout.endswith("\n"), stdout
    value = json.loads(stdout)
    assert isinstance(value, dict)
    return value


def test_sync_replay_runs_and_sources_print_one_json_object_and_nothing_else(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2, Email="bad@@example.org")])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))

    outage = kit.run("sync", "-c", config, "--json", env=kit.env(CAPTURE_BASE_URL=DEAD_API))
    report = _one_object(outage.stdout)
    assert outage.code == report["exit_code"] == 4
    assert report["halted_by"] and report["unsettled"] == 1 and report["counts"]["rejected"] == 1
    assert report["sources_read"] == ["signups"] and report["run"] == 1

    replay = kit.run("replay", "-c", config, "--json")
    report = _one_object(replay.stdout)
    assert replay.code == report["exit_code"] == 0
    assert (report["kind"], report["counts"]["captured"], report["halted_by"], report["run"]) == ("replay", 1, None, 2)

    runs = _one_object(kit.run("runs", "list", "-c", config, "--json").stdout)
    assert [r["kind"] for r in runs["runs"]] == ["replay", "sync"]
    shown = _one_object(kit.run("runs", "show", "-c", config, "1", "--json").stdout)
    assert [e["record_id"] for e in shown["entries"]] == ["R2"] and shown["run"]["id"] == 1

    sources = _one_object(kit.run("sources", "list", "--json").stdout)
    csv_type = next(s for s in sources["sources"] if s["name"] == "csv")
    assert csv_type["loads"] and csv_type["origin"] == "built-in" and "primary_key" in csv_type["options"]

    contacts.unlink()  # a source that cannot be read: exit 2, named in the object
    missing = kit.run("sync", "-c", config, "--json")
    report = _one_object(missing.stdout)
    assert missing.code == report["exit_code"] == 2 and list(report["unavailable"]) == ["signups"]


def test_a_dry_run_writes_its_whole_preview_to_a_file(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, 31)] + [kit.contact(99, Email="no@@example.org")])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))
    preview = tmp_path / "preview.jsonl"

    run = kit.run("sync", "-c", config, "--dry-run", "--output", str(preview))
    assert run.code == 0, run.stderr
    assert len([x for x in run.stdout.splitlines() if x.startswith("{")]) == 20  # stdout's short preview
    lines = [json.loads(x) for x in preview.read_text().splitlines()]
    sent = [x for x in lines if x["outcome"] == "send"]
    rejected = [x for x in lines if x["outcome"] == "rejected"]
    assert [x["record_id"] for x in sent] == [f"R{n}" for n in range(1, 31)]
    assert sent[29]["email"] == "ada30@example.org"
    [bad] = rejected
    assert bad["record_id"] == "R99" and "email" in bad["reasons"][0] and bad["record"]["Email"] == "no@@example.org"
    assert sandbox.store.persons() == []

    as_json = kit.run("sync", "-c", config, "--dry-run", "--json")
    report = _one_object(as_json.stdout)
    assert (report["kind"], report["counts"]["enqueued"], len(report["preview"])) == ("dry_run", 30, 20)

    refused = kit.run("sync", "-c", config, "--output", str(preview))
    assert refused.code == 2 and "--dry-run" in refused.stderr


def test_check_prints_one_json_object_with_the_client_the_credentials_origin_and_each_source(
    kit, sandbox, tmp_path: Path
) -> None:
    key, secret = sandbox.create_client("json-check", rate_limit=77)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, sandbox.base_url, contacts)

    result = kit.run("check", "-c", str(config), "--json")
    report = _one_object(result.stdout)
    assert result.code == report["exit_code"] == 0, result.stderr
    assert (report["client"]["client_name"], report["client"]["rate_limit"]) == ("json-check", 77)
    assert report["credentials"] == {
        "key_from": f"file {tmp_path / 'api_key'}",
        "secret_from": f"file {tmp_path / 'api_secret'}",
    }
    assert report["sources"] == [{"name": "signups", "schedule": "every 5m", "check": "ok"}]
    assert secret not in result.stdout + result.stderr

    config.write_text(config.read_text().replace('email = "Email"', 'email = "E-mail"'))
    broken = kit.run("check", "-c", str(config), "--json")
    report = _one_object(broken.stdout)
    assert broken.code == report["exit_code"] == 2
    assert report["sources"][0]["check"] == "FAILED: 1 mapping problem(s)"
    assert any("E-mail" in p for p in report["config_problems"])


def test_an_api_that_does_not_answer_halts_nothing_when_there_is_nothing_to_send(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client()
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [])
    config = str(kit.config(tmp_path, DEAD_API, contacts))
    quiet = _one_object(kit.run("sync", "-c", config, "--json").stdout)
    assert (quiet["exit_code"], quiet["halted_by"], quiet["unsettled"]) == (0, None, 0)

    kit.contacts(contacts, [kit.contact(1)])
    down = _one_object(kit.run("sync", "-c", config, "--json").stdout)
    assert down["exit_code"] == 4 and down["halted_by"] and down["unsettled"] == 1
