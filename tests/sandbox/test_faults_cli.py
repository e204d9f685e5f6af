"""`capture-sync sandbox faults show|set|clear` against a real `sandbox serve` process, as an operator
rehearsing an outage runs them; and `serve`'s fault options, which are the same options."""

from __future__ import annotations

import json
import shutil
import signal

import httpx
import pytest
from typer.testing import CliRunner

from connector.cli import app
from connector.sandbox import SandboxStore

runner = CliRunner()


def faults(*args: str):
    return runner.invoke(app, ["sandbox", "faults", *args])


@pytest.fixture
def served(tmp_path, sandbox_process):
    """A sandbox process and a GET /info with its client's credentials."""
    db = tmp_path / "box.sqlite3"
    with SandboxStore(db) as store:
        key, secret = store.create_client("rehearsal")
    box = sandbox_process(db=db)

    def info() -> httpx.Response:
        return httpx.get(box.base_url + "/info", headers={"X-API-Key": key, "X-API-Secret": secret})

    return box, info


def test_set_show_clear_end_to_end(served):
    box, info = served
    where = ["--url", box.base_url, "--admin-token-file", str(box.admin_token_file)]
    assert info().status_code == 200

    changed = faults("set", *where, "--p-fatal-503", "1", "--latency-ms", "5")
    assert changed.exit_code == 0, changed.output
    assert changed.stdout.strip().endswith(": --p-fatal-503 1.0 --latency-ms 5")
    outage = info()
    assert outage.status_code == 503 and outage.json()["error"]["retryable"] is False

    assert faults("set", *where, "--p-fatal-503", "0", "--refuse-credentials").exit_code == 0
    shown = faults("show", *where, "--json")
    assert shown.exit_code == 0
    in_force = json.loads(shown.stdout)
    assert (in_force["p_fatal_503"], in_force["latency_ms"], in_force["refuse_credentials"]) == (0.0, 5, True)
    assert info().status_code == 401

    cleared = faults("clear", *where)
    assert cleared.exit_code == 0 and "injects no faults" in cleared.stdout
    assert info().status_code == 200
    assert "injects no faults" in faults("show", *where).stdout


def test_the_token_is_found_from_the_urls_port(tmp_path, monkeypatch, sandbox_process):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    box = sandbox_process(admin_token_file=None)
    assert faults("set", "--url", box.base_url, "--p-429", "0.5").exit_code == 0
    shown = faults("show", "--url", f"http://127.0.0.1:{box.port}", "--json")
    assert json.loads(shown.stdout)["p_429"] == 0.5


def assert_refused(result, code: int, *phrases: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    for phrase in phrases:
        assert phrase in result.stderr


def test_a_refused_token_is_exit_3_and_impossible_faults_exit_2_changing_nothing(tmp_path, served):
    box, info = served
    url = ["--url", box.base_url]
    stranger = tmp_path / "stranger.token"
    stranger.write_text("not-this-sandboxs-token\n")
    assert_refused(
        faults("set", *url, "--admin-token-file", str(stranger), "--p-fatal-503", "1"),
        3,
        "refused the admin token",
        str(stranger),
    )
    mine = ["--admin-token-file", str(box.admin_token_file)]
    assert_refused(
        faults("set", *url, *mine, "--p-fatal-503", "0.6", "--p-retryable-503", "0.6"), 2, "must not exceed 1"
    )
    assert_refused(faults("set", *url, *mine), 2, "capture-sync sandbox faults clear")
    assert info().status_code == 200


def test_an_unreachable_sandbox_is_exit_4_and_a_missing_token_exit_2(tmp_path, monkeypatch, served):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no token file for the port there
    box, _ = served
    kept = tmp_path / "kept.token"
    shutil.copy(box.admin_token_file, kept)
    assert box.stop(signal.SIGTERM) == 0
    assert_refused(
        faults("show", "--url", box.base_url), 2, "no admin token at", f"capture-sync sandbox serve --port {box.port}"
    )
    assert_refused(
        faults("show", "--url", box.base_url, "--admin-token-file", str(kept)),
        4,
        "did not answer",
        f"capture-sync sandbox serve --port {box.port}",
    )


def test_a_url_off_this_machine_is_refused_before_the_token_leaves_it(tmp_path):
    token = tmp_path / "t.token"
    token.write_text("secret-token\n")
    result = faults("show", "--url", "http://192.0.2.7:8765", "--admin-token-file", str(token))
    assert_refused(result, 2, "loopback")
    assert "secret-token" not in result.output


def test_serve_and_set_take_the_same_fault_options():
    def options(*command: str) -> set[str]:
        words = " ".join(runner.invoke(app, [*command, "--help"], terminal_width=200).output.split()).split()
        return {w.strip("│,") for w in words if w.startswith("--")} - {"--help", "--json", "--url"}

    serve, set_ = options("sandbox", "serve"), options("sandbox", "faults", "set")
    assert {"--p-429", "--retry-after-s", "--refuse-credentials", "--p-fatal-503", "--latency-ms"} <= set_
    assert set_ <= serve


def test_serve_starts_with_the_new_faults(tmp_path, sandbox_process):
    db = tmp_path / "box.sqlite3"
    with SandboxStore(db) as store:
        key, secret = store.create_client("rehearsal")
    headers = {"X-API-Key": key, "X-API-Secret": secret}
    throttled = sandbox_process(db=db, p_429=1, retry_after_s=3)
    answer = httpx.get(throttled.base_url + "/info", headers=headers)
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "3"
    throttled.stop()
    refusing = sandbox_process(db=db, refuse_credentials=True)
    assert httpx.get(refusing.base_url + "/info", headers=headers).status_code == 401


def test_serve_refuses_a_token_folder_that_is_a_link(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "capture-sync").symlink_to(elsewhere)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    result = runner.invoke(app, ["sandbox", "serve", "--port", "0", "--db", str(tmp_path / "box.sqlite3")])
    assert_refused(result, 2, "is not a folder of this user", "--admin-token-file")
    assert list(elsewhere.iterdir()) == []
