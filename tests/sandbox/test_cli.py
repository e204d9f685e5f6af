"""`capture-sync sandbox ...`: the commands as a user runs them."""

from __future__ import annotations

import json
import signal
import socket

import httpx
import pytest
from typer.testing import CliRunner

from connector.cli import app
from connector.sandbox import SandboxStore

runner = CliRunner()


def cli(*args: str) -> str:
    result = runner.invoke(app, ["sandbox", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def info(url: str, key: str, secret: str) -> httpx.Response:
    return httpx.get(url + "/info", headers={"X-API-Key": key, "X-API-Secret": secret})


def test_create_client_prints_the_credentials_once_as_json(tmp_path):
    db = tmp_path / "box.sqlite3"
    out = cli(
        "create-client", "--db", str(db), "--name", "shop", "--rate-limit", "30", "--default-lead-source", "webshop"
    )
    creds = json.loads(out)
    assert set(creds) == {"api_key", "api_secret"}
    with SandboxStore(db) as store:
        client = store.authenticate(creds["api_key"], creds["api_secret"])
    assert client is not None and (client.name, client.rate_limit, client.default_lead_source) == (
        "shop",
        30,
        "webshop",
    )


def test_serve_prints_its_url_first_and_stops_cleanly_on_sigterm(tmp_path, sandbox_process):
    db = tmp_path / "box.sqlite3"
    creds = json.loads(cli("create-client", "--db", str(db), "--name", "shop"))
    server = sandbox_process(db=db)
    assert server.base_url == f"http://127.0.0.1:{server.port}/api/v1/capture"
    assert info(server.base_url, creds["api_key"], creds["api_secret"]).json()["data"]["client_name"] == "shop"
    assert server.stop(signal.SIGTERM) == 0


def test_sigint_also_stops_it_cleanly(sandbox_process):
    assert sandbox_process().stop(signal.SIGINT) == 0


def test_clients_managed_by_the_cli_while_the_server_runs(tmp_path, sandbox_process):
    db = tmp_path / "box.sqlite3"
    server = sandbox_process(db=db)
    key, old = json.loads(cli("create-client", "--db", str(db), "--name", "live", "--inactive")).values()
    assert info(server.base_url, key, old).status_code == 401
    cli("set-active", key, "--active", "--db", str(db))
    assert info(server.base_url, key, old).status_code == 200
    new = json.loads(cli("regenerate-secret", key, "--db", str(db)))["api_secret"]
    assert info(server.base_url, key, old).status_code == 401
    assert info(server.base_url, key, new).status_code == 200


def test_a_killed_server_restarts_on_the_same_port_with_its_data(tmp_path, sandbox_process):
    db = tmp_path / "box.sqlite3"
    key, secret = json.loads(cli("create-client", "--db", str(db), "--name", "crash")).values()
    first = sandbox_process(db=db)
    headers = {"X-API-Key": key, "X-API-Secret": secret, "Idempotency-Key": "k1"}
    person = {"name": "Ada", "email": "ada@example.org"}
    created = httpx.post(first.base_url + "/person", json=person, headers=headers).json()["data"]
    first.kill()
    second = sandbox_process(db=db, port=first.port)
    assert second.base_url == first.base_url
    replay = httpx.post(second.base_url + "/person", json=person, headers=headers).json()["data"]
    assert replay["idempotent_replay"] is True and replay["person_id"] == created["person_id"]


def test_serve_takes_the_behaviour_options_and_the_person_refusal_fault(tmp_path, sandbox_process):
    db = tmp_path / "box.sqlite3"
    key, secret = json.loads(cli("create-client", "--db", str(db), "--name", "open")).values()
    server = sandbox_process(
        db=db,
        bulk_result_shape="bare",
        invalid_person="reject-request",
        idempotency_scope="shared",
        p_person_fail=1,
    )
    with httpx.Client(base_url=server.base_url, headers={"X-API-Key": key, "X-API-Secret": secret}) as http:

        def post(path: str, body: dict, idempotency_key: str) -> httpx.Response:
            return http.post(path, json=body, headers={"Idempotency-Key": idempotency_key})

        ada = {"name": "Ada", "email": "ada@example.org"}
        rejected = post("/persons/bulk", {"persons": [ada, {"name": "No contact"}]}, "b-1")
        captured = post("/persons/bulk", {"persons": [{**ada, "idempotency_key": "k-ada"}]}, "b-2")
        replayed = post("/person", ada, "k-ada")
        refused = post("/person", {"name": "Bob", "email": "bob@example.org"}, "k-bob")
    assert rejected.status_code == 400  # reject-request
    [bare] = captured.json()["data"]["successful"]  # no refusals with reject-request
    assert list(bare) == ["person_id"]  # bare
    assert replayed.json()["data"]["idempotent_replay"] is True  # shared
    assert replayed.json()["data"]["person_id"] == bare["person_id"]
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "person_refused"


def test_serve_help_documents_every_behaviour_option():
    result = runner.invoke(app, ["sandbox", "serve", "--help"])
    for option in ("--bulk-result-shape", "--invalid-person", "--idempotency-scope", "--p-person-fail"):
        assert option in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["--p-retryable-503", "2"],
        ["--p-retryable-503", "0.7", "--p-fatal-503", "0.7"],
        ["--p-latency-spike", "1.5"],
        ["--p-person-fail", "1.5"],
        ["--bulk-result-shape", "flat"],
        ["--invalid-person", "ignore"],
        ["--idempotency-scope", "global"],
    ],
)
def test_impossible_fault_flags_are_usage_errors(tmp_path, args):
    result = runner.invoke(app, ["sandbox", "serve", "--db", str(tmp_path / "x.sqlite3"), *args])
    assert result.exit_code == 2


def test_unknown_api_key_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["sandbox", "regenerate-secret", "ck_nobody", "--db", str(tmp_path / "x.sqlite3")])
    assert result.exit_code == 2 and "no client has this API key" in result.output


def assert_one_line_usage_error(result, *phrases: str) -> None:
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: "), result.stderr
    for phrase in phrases:
        assert phrase in result.stderr


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["sandbox", "serve", "--port", str(port), "--db", str(tmp_path / "box.sqlite3")])
    assert_one_line_usage_error(result, f"cannot listen on 127.0.0.1:{port}", "--port 0")
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGINT, signal.SIGTERM}


@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_serve_on_a_db_it_cannot_write_is_one_line_and_exit_2(tmp_path, where):
    db = tmp_path / "missing" / "box.sqlite3" if where == "missing folder" else tmp_path
    result = runner.invoke(app, ["sandbox", "serve", "--db", str(db)])
    assert_one_line_usage_error(result, f"sandbox database {db} cannot be opened for writing", "--db")
