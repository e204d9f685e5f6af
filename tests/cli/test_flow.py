"""`capture-sync check --flow`, the spec's synthetic test flow, over real sockets against the sandbox.

Every legal server (each answer the sandbox gives where the spec is silent) passes every step; a
server that breaks what effectively-once delivery relies on fails the step that shows it, says what
it saw, exits non-zero and records nothing. And the gate sync and run pass before sending.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest
import sqlite_utils
import structlog

from connector.flow import flow_gate
from connector.ledger import SCHEMA_VERSION, Ledger
from connector.ledger.schema import MIGRATIONS
from connector.problems import ConfigProblem
from connector.sandbox import Behaviour, Faults

STEPS = ["info", "person", "person-replay", "bulk", "invalid-person", "evidence", "person-key-scope", "envelopes"]


def _setup(tmp_path, kit, box, secret=None):
    """A config with credentials in files for a new client of `box`; returns (config, secret)."""
    key, real = box.create_client()
    kit.contacts(tmp_path / "contacts.csv", [kit.contact(1)])
    config = kit.config(tmp_path, box.base_url, tmp_path / "contacts.csv")
    kit.credentials(tmp_path, key, secret or real)
    return config, real


def _flow(kit, config, *more):
    result = kit.run("check", "-c", str(config), "--flow", "--yes", *more)
    return result, (json.loads(result.stdout) if "--json" in more else None)


def _flow_passed(tmp_path, box):
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        return ledger.flow_passed(box.base_url, "test-client")


def _captures_of(box, tag):
    return [
        c
        for c in box.store.captures()
        if c["identity"].startswith("email:flow-") and c["identity"].endswith(f"-{tag}@example.com")
    ]


LEGAL_SERVERS = [
    Behaviour(),
    Behaviour(bulk_result_shape="nested"),
    Behaviour(bulk_result_shape="index1"),
    Behaviour(bulk_result_shape="array_index"),
    Behaviour(bulk_result_shape="bare"),
    Behaviour(invalid_person="reject-request"),
    Behaviour(invalid_person="reject-request", bulk_result_shape="bare"),
    Behaviour(idempotency_scope="shared"),
]


@pytest.mark.parametrize(
    "behaviour", LEGAL_SERVERS, ids=lambda b: f"{b.bulk_result_shape}-{b.invalid_person}-{b.idempotency_scope}"
)
def test_every_step_passes_against_every_legal_server_and_the_pass_is_recorded(
    tmp_path, kit, sandbox_factory, behaviour
):
    box = sandbox_factory(behaviour=behaviour)
    config, secret = _setup(tmp_path, kit, box)
    result, report = _flow(kit, config, "--json")
    assert result.code == 0, result.stdout + result.stderr
    assert [s["name"] for s in report["steps"]] == STEPS
    assert all(s["passed"] and s["ran"] and s["seen"] for s in report["steps"]), report["steps"]
    assert report["passed"] and report["recorded"] and report["client_name"] == "test-client"
    assert report["credentials"] == {
        "key_from": f"file {tmp_path / 'api_key'}",
        "secret_from": f"file {tmp_path / 'api_secret'}",
    }
    assert _flow_passed(tmp_path, box) is not None
    steps = {s["name"]: s for s in report["steps"]}
    # how this server reports the invalid person, said in words
    if behaviour.invalid_person == "reject-request":
        assert steps["invalid-person"]["seen"].startswith("whole request refused: HTTP 400")
    else:
        assert steps["invalid-person"]["seen"].startswith("per person:")
    # the evidence report is per object and per person, and says when a person is not placed
    evidence = steps["evidence"]
    if behaviour.bulk_result_shape == "bare" and behaviour.invalid_person == "failed":
        assert "0 of 3 persons placed" in evidence["seen"] and "could not be placed" in evidence["seen"]
        assert sum("not placed by its own evidence" in line for line in evidence["details"]) == 3
    elif behaviour.bulk_result_shape == "index1":
        assert "request positions from 1" in evidence["seen"]
    elif behaviour.bulk_result_shape == "echo" and behaviour.invalid_person == "failed":
        assert "3 of 3 persons placed" in evidence["seen"] and "per-person key" in evidence["seen"]
    # each synthetic person was captured once: the repeats replayed, the re-offer was a duplicate
    assert {tag: len(_captures_of(box, tag)) for tag in ("person", "bulk1", "bulk3")} == {
        "person": 1,
        "bulk1": 1,
        "bulk3": 1,
    }
    assert secret not in result.stdout + result.stderr


def test_the_report_names_each_step_and_where_the_credentials_came_from(tmp_path, kit, sandbox):
    config, secret = _setup(tmp_path, kit, sandbox)
    result, _ = _flow(kit, config)
    assert result.code == 0, result.stderr
    assert (
        f"credentials: key from file {tmp_path / 'api_key'}, secret from file {tmp_path / 'api_secret'}"
        in result.stdout
    )
    for n, name in enumerate(STEPS, 1):
        assert f"PASS  {n}. {name}: " in result.stdout
    assert "every step passed; recorded in" in result.stdout
    assert secret not in result.stdout + result.stderr


def test_a_server_that_captures_a_repeated_key_again_fails_the_replay_step(tmp_path, kit, sandbox_factory):
    box = sandbox_factory(faults=Faults(no_person_replay=True))
    config, secret = _setup(tmp_path, kit, box)
    result, report = _flow(kit, config, "--json")
    assert result.code == 7
    failed = [s for s in report["steps"] if not s["passed"]]
    assert [s["name"] for s in failed] == ["person-replay"]
    assert "idempotent_replay False" in failed[0]["seen"] and "captured the person again" in failed[0]["seen"]
    assert not report["recorded"] and _flow_passed(tmp_path, box) is None
    assert [c["action"] for c in _captures_of(box, "person")] == [
        "created",
        "updated",
    ]  # what the step saw, in the store
    assert secret not in result.stdout + result.stderr


def test_per_person_keys_remembered_within_one_request_only_fail_the_scope_step(tmp_path, kit, sandbox_factory):
    box = sandbox_factory(behaviour=Behaviour(person_key_scope="request"))
    config, _ = _setup(tmp_path, kit, box)
    result, _ = _flow(kit, config)
    assert result.code == 7
    assert "FAIL  7. person-key-scope" in result.stdout
    assert "captured again" in result.stdout and "would be captured twice" in result.stdout
    assert "exit 7: the flow failed at person-key-scope; nothing was recorded" in result.stderr
    assert len(_captures_of(box, "bulk1")) == 2 and _flow_passed(tmp_path, box) is None


def test_a_wrong_secret_fails_the_first_step_sends_nothing_else_and_exits_3(tmp_path, kit, sandbox):
    config, real = _setup(tmp_path, kit, sandbox, secret="cs_not-the-secret-of-this-client")
    result, report = _flow(kit, config, "--json")
    assert result.code == 3
    first, *rest = report["steps"]
    assert first["name"] == "info" and not first["passed"] and "HTTP 401" in first["seen"]
    assert f"secret from file {tmp_path / 'api_secret'}" in first["seen"]
    assert all(not s["ran"] for s in rest[:-1]) and rest[-1]["name"] == "envelopes"
    assert sandbox.store.captures() == [] and _flow_passed(tmp_path, sandbox) is None
    output = result.stdout + result.stderr
    assert "cs_not-the-secret-of-this-client" not in output and real not in output


def test_without_yes_and_without_a_terminal_nothing_is_sent(tmp_path, kit, sandbox):
    config, _ = _setup(tmp_path, kit, sandbox)
    proc = subprocess.run(
        [str(kit.script), "check", "-c", str(config), "--flow"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=kit.env(),
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--yes" in proc.stderr and "nothing was sent" in proc.stderr
    assert sandbox.store.captures() == [] and not (tmp_path / "ledger.sqlite3").exists()
    assert "--yes" in kit.run("check", "--help").stdout


def test_on_a_terminal_it_asks_first_and_a_no_sends_nothing(tmp_path, kit, sandbox):
    config, _ = _setup(tmp_path, kit, sandbox)
    controller, terminal = os.openpty()
    try:
        proc = subprocess.Popen(
            [str(kit.script), "check", "-c", str(config), "--flow"],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=kit.env(),
        )
        os.write(controller, b"n\n")
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 2
    assert "Send a few synthetic test persons to" in stderr and "not confirmed; nothing was sent" in stderr
    assert sandbox.store.captures() == [] and stdout.strip() == ""  # (click puts the prompt's last space on stdout)


def test_a_flow_runs_while_the_daemon_holds_the_ledger(tmp_path, kit, sandbox):
    config, _ = _setup(tmp_path, kit, sandbox)
    with Ledger(tmp_path / "ledger.sqlite3") as daemon:
        daemon.acquire_daemon_lock()
        result, _ = _flow(kit, config)
        assert result.code == 0, result.stderr
        assert daemon.flow_passed(sandbox.base_url, "test-client") is not None


def test_plain_check_says_where_the_key_and_secret_came_from(tmp_path, kit, sandbox):
    config, secret = _setup(tmp_path, kit, sandbox)
    result = kit.run("check", "-c", str(config), env=kit.env(CAPTURE_API_SECRET=secret))
    assert result.code == 0, result.stderr
    assert f"credentials: key from file {tmp_path / 'api_key'}, secret from env CAPTURE_API_SECRET" in result.stdout
    assert secret not in result.stdout + result.stderr


def test_a_version_2_ledger_migrates_and_keeps_its_entries(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:2]:
        migration(sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 2")
    conn.execute("INSERT INTO runs (kind, started_at) VALUES ('sync', 1.0)")
    conn.close()
    with Ledger(path) as ledger:
        assert ledger.flow_passed("http://x/api/v1/capture", "c") is None
        ledger.record_flow_pass("http://x/api/v1/capture/", "c", {"steps": {}})
        assert ledger.flow_passed("http://x/api/v1/capture", "c") is not None  # a trailing slash is the same URL
        assert ledger.status().runs  # the v2 data is still there
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 3


# --- the gate sync and run pass -------------------------------------------------------------------


def test_the_gate_warns_once_per_server_with_the_command_to_run(tmp_path):
    url = f"http://127.0.0.1:1/{tmp_path.name}/api/v1/capture"  # unique: the gate remembers per process
    with Ledger(tmp_path / "ledger.sqlite3") as ledger, structlog.testing.capture_logs() as logs:
        flow_gate(ledger, url, required=False, config="prod.toml")
        flow_gate(ledger, url, required=False, config="prod.toml")
        flow_gate(ledger, url + "/other", required=False)
        flow_gate(ledger, url, required=False)
    warnings = [e for e in logs if e["event"] == "flow.not_passed"]
    assert [w["base_url"] for w in warnings] == [url, url + "/other"]
    assert warnings[0]["command"] == "capture-sync check -c prod.toml --flow"
    assert warnings[1]["command"] == "capture-sync check -c CONFIG --flow"
    assert all(w["log_level"] == "warning" for w in warnings)


def test_the_gate_refuses_when_a_flow_is_required_and_passes_after_one(tmp_path):
    url = f"http://127.0.0.1:1/{tmp_path.name}/api/v1/capture"
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        with pytest.raises(ConfigProblem) as refused:
            flow_gate(ledger, url, required=True, config="prod.toml")
        assert "capture.require_flow" in refused.value.problems[0]
        assert "capture-sync check -c prod.toml --flow" in refused.value.problems[0]
        ledger.record_flow_pass(url, "crm", {"steps": {}})
        with structlog.testing.capture_logs() as logs:
            flow_gate(ledger, url, required=True)
            flow_gate(ledger, url, required=False)
            # the flow probes the server: a pass with a disposable test client counts for the
            # production client too; a pass against another base URL does not
            flow_gate(ledger, url + "/", required=True)
            with pytest.raises(ConfigProblem):
                flow_gate(ledger, url + "/elsewhere", required=True)
        assert logs == []
        assert ledger.flow_passed(url, "crm") is not None and ledger.flow_passed(url, "production-client") is None
