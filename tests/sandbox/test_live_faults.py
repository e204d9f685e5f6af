"""A running sandbox's faults, changed through its admin endpoint (issue 26, "Rehearsing outages").

Setup: `capture-sync sandbox serve` as a real process on 127.0.0.1 with one API client. Oracle:
what the Capture API operations answer after each change, and GET /admin/faults; a refused admin
request (no token, a wrong one, impossible values) leaves the faults as they were.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from connector.sandbox import Faults, SandboxStore, create_app
from connector.sandbox.admin_access import ADMIN_PATH, default_token_file
from connector.sandbox.openapi import PREFIX
from connector.sandbox.process import SandboxProcess

ADA = {"name": "Ada", "email": "ada@example.org"}


@dataclass
class Rehearsal:
    """A sandbox process, its client's credentials, and its admin endpoint."""

    box: SandboxProcess
    key: str
    secret: str

    def admin(self, method: str, body: Any = None, *, raw: bytes | None = None) -> httpx.Response:
        token = self.box.admin_token_file.read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        return httpx.request(method, self.box.origin + ADMIN_PATH, json=body, content=raw, headers=headers)

    def faults(self) -> dict[str, Any]:
        response = self.admin("GET")
        assert response.status_code == 200, response.text
        return response.json()["data"]["faults"]

    def set(self, **faults: Any) -> None:
        self.box.set_faults(**faults)

    def api(self, method: str, path: str, body: Any = None, key: str | None = None) -> httpx.Response:
        headers = {"X-API-Key": self.key, "X-API-Secret": self.secret}
        if key is not None:
            headers["Idempotency-Key"] = key
        return httpx.request(method, self.box.base_url + path, json=body, headers=headers, timeout=30)


@pytest.fixture
def rehearsal(tmp_path: Path, sandbox_process) -> Rehearsal:
    db = tmp_path / "box.sqlite3"
    with SandboxStore(db) as store:
        key, secret = store.create_client("rehearsal", rate_limit=10_000)
    return Rehearsal(sandbox_process(db=db), key, secret)


def test_a_running_sandbox_starts_without_faults_and_answers_normally(rehearsal):
    faults = rehearsal.faults()
    assert not any(faults[name] for name in ("p_retryable_503", "p_fatal_503", "p_429", "refuse_credentials"))
    assert rehearsal.api("GET", "/info").status_code == 200


def test_each_fault_set_on_a_running_sandbox_answers_the_next_requests(rehearsal):
    rehearsal.set(p_retryable_503=1)
    retryable = rehearsal.api("POST", "/persons/bulk", {"persons": [ADA]}, key="b-1")
    assert retryable.status_code == 503 and retryable.json()["error"]["retryable"] is True

    rehearsal.set(p_retryable_503=0, p_fatal_503=1)
    fatal = rehearsal.api("POST", "/persons/bulk", {"persons": [ADA]}, key="b-1")
    assert fatal.status_code == 503 and fatal.json()["error"]["retryable"] is False

    rehearsal.set(p_fatal_503=0, p_429=1, retry_after_s=7)
    throttled = rehearsal.api("GET", "/info")
    assert throttled.status_code == 429 and throttled.headers["Retry-After"] == "7"
    assert throttled.json()["error"]["code"] == "rate_limited"

    rehearsal.set(p_429=0, refuse_credentials=True)
    refused = rehearsal.api("GET", "/info")
    assert refused.status_code == 401
    envelope = refused.json()
    assert envelope["success"] is False and envelope["error"]["code"] == "invalid_credentials"
    assert envelope["error"]["statusCode"] == 401 and envelope["error"]["name"] == "UnauthorizedError"

    with SandboxStore(rehearsal.box.db) as store:
        assert store.persons() == []  # nothing was captured through any of them


def test_added_latency_holds_each_request_at_least_that_long(rehearsal):
    rehearsal.set(latency_ms=400)
    started = time.monotonic()
    assert rehearsal.api("GET", "/info").status_code == 200
    assert time.monotonic() - started >= 0.4


def test_a_dropped_commit_loses_the_answer_but_keeps_the_capture(rehearsal):
    rehearsal.set(p_commit_drop=1)
    with pytest.raises(httpx.RemoteProtocolError):
        rehearsal.api("POST", "/persons/bulk", {"persons": [ADA]}, key="b-drop")
    with SandboxStore(rehearsal.box.db) as store:
        assert [p["identity"] for p in store.persons()] == ["email:ada@example.org"]


def test_clear_restores_normal_answers_and_keeps_the_stored_persons(rehearsal):
    first = rehearsal.api("POST", "/persons/bulk", {"persons": [ADA]}, key="b-1")
    assert first.status_code == 200
    rehearsal.set(p_fatal_503=1, latency_ms=20, refuse_credentials=True)
    cleared = rehearsal.admin("DELETE")
    assert cleared.status_code == 200 and cleared.json()["data"]["faults"] == rehearsal.faults()
    assert not any(v for k, v in rehearsal.faults().items() if k != "retry_after_s")
    replay = rehearsal.api("POST", "/persons/bulk", {"persons": [ADA]}, key="b-1")
    assert replay.status_code == 200 and replay.json()["data"]["idempotent_replay"] is True
    with SandboxStore(rehearsal.box.db) as store:
        assert len(store.persons()) == 1


def test_a_partial_change_keeps_the_other_faults(rehearsal):
    rehearsal.set(latency_ms=50, p_fatal_503=0.5, seed=3)
    answered = rehearsal.admin("PATCH", {"p_429": 0.25})
    assert answered.status_code == 200
    faults = rehearsal.faults()
    assert answered.json()["data"]["faults"] == faults
    assert (faults["latency_ms"], faults["p_fatal_503"], faults["seed"], faults["p_429"]) == (50, 0.5, 3, 0.25)


def test_a_missing_or_wrong_admin_token_is_401_and_changes_nothing(rehearsal):
    rehearsal.set(p_fatal_503=0.5)
    token = rehearsal.box.admin_token_file.read_text().strip()
    refusals = [
        {},
        {"Authorization": "Bearer not-the-token"},
        {"Authorization": "Basic " + token},
        {"Authorization": "Bearer"},
    ]
    for method in ("GET", "PATCH", "DELETE"):
        for headers in refusals:
            body = {"p_fatal_503": 0} if method == "PATCH" else None
            refused = httpx.request(method, rehearsal.box.origin + ADMIN_PATH, json=body, headers=headers)
            assert refused.status_code == 401, (method, headers)
            assert refused.json()["success"] is False
            assert refused.json()["error"]["code"] in ("missing_admin_token", "invalid_admin_token")
    assert rehearsal.faults()["p_fatal_503"] == 0.5


IMPOSSIBLE = [
    {"p_fatal_503": 2},
    {"p_fatal_503": 0.6, "p_retryable_503": 0.6},
    {"p_429": 0.5, "p_fatal_503": 0.6},
    {"latency_ms": -5},
    {"retry_after_s": -1},
    {"p_429": "1"},
    {"refuse_credentials": "yes"},
    {"nonsense": 1},
    [{"p_fatal_503": 1}],
    b"{not json",
    b'{"latency_ms": NaN}',
]


def test_impossible_faults_are_400_and_change_nothing(rehearsal):
    rehearsal.set(latency_ms=10, p_retryable_503=0.3)
    before = rehearsal.faults()
    for body in IMPOSSIBLE:
        refused = rehearsal.admin("PATCH", raw=body) if isinstance(body, bytes) else rehearsal.admin("PATCH", body)
        assert refused.status_code == 400, body
        error = refused.json()["error"]
        assert refused.json()["success"] is False
        assert error["code"] in ("invalid_faults", "invalid_body", "invalid_json")
    assert rehearsal.faults() == before
    message = rehearsal.admin("PATCH", {"p_429": 0.5, "p_fatal_503": 0.6}).json()["error"]["message"]
    assert message == "p_retryable_503 + p_fatal_503 + p_429 must not exceed 1"


def test_the_token_file_is_private_named_by_the_port_and_removed_on_a_clean_stop(
    tmp_path, monkeypatch, sandbox_process
):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    box = sandbox_process(admin_token_file=None)
    token_file = box.admin_token_file
    assert token_file == runtime / "capture-sync" / f"sandbox-admin-{box.port}.token" == default_token_file(box.port)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    assert len(token_file.read_text().strip()) >= 32
    assert token_file.read_text().strip() not in box.log.read_text()
    assert box.stop(signal.SIGTERM) == 0
    assert not token_file.exists()


def test_without_a_runtime_dir_the_token_lives_in_a_per_user_folder_of_tmp(monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert default_token_file(8765) == Path(f"/tmp/capture-sync-{os.getuid()}/sandbox-admin-8765.token")


def test_a_link_planted_at_the_token_file_is_replaced_not_followed(tmp_path, sandbox_process):
    target, planted = tmp_path / "target", tmp_path / "admin.token"
    target.write_text("keep me\n")
    planted.symlink_to(target)
    box = sandbox_process(admin_token_file=planted)
    assert box.admin_token_file == planted and not planted.is_symlink()
    assert stat.S_IMODE(planted.stat().st_mode) == 0o600
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize(("client", "status"), [(("192.0.2.7", 5000), 403), (("127.0.0.1", 5000), 200)])
async def test_only_clients_on_the_sandbox_machine_are_answered(tmp_path, client, status):
    app = create_app(tmp_path / "box.sqlite3", admin_token="the-token")
    transport = httpx.ASGITransport(app=app, client=client)
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as http:
        answer = await http.patch(ADMIN_PATH, json={"p_fatal_503": 1}, headers={"Authorization": "Bearer the-token"})
        faults = app.state.faults.faults
    assert answer.status_code == status
    assert faults.p_fatal_503 == (1.0 if status == 200 else 0.0)
    app.state.store.close()


async def test_a_request_in_flight_keeps_the_faults_it_started_with(tmp_path):
    """The change lands between requests: a capture already running finishes under the faults it read
    when it started (its answer is not dropped after its commit); the next request meets the new ones."""
    started = asyncio.Event()

    class Noticed(Faults):
        def delay_s(self) -> float:  # called once the capture has read its faults, before it waits
            started.set()
            return 0.05

    app = create_app(tmp_path / "box.sqlite3", Noticed(), admin_token="the-token")
    key, secret = app.state.store.create_client("in-flight")
    credentials = {"X-API-Key": key, "X-API-Secret": secret}
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as http:
        in_flight = asyncio.create_task(
            http.post(
                PREFIX + "/persons/bulk", json={"persons": [ADA]}, headers={**credentials, "Idempotency-Key": "b-1"}
            )
        )
        await started.wait()
        changed = await http.patch(
            ADMIN_PATH,
            json={"p_commit_drop": 1, "refuse_credentials": True},
            headers={"Authorization": "Bearer the-token"},
        )
        assert changed.status_code == 200
        answered = await in_flight
        assert answered.status_code == 200 and len(answered.json()["data"]["successful"]) == 1
        assert (await http.get(PREFIX + "/info", headers=credentials)).status_code == 401
    app.state.store.close()
