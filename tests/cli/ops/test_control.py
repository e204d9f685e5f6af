"""Steering a running daemon (issue 26): `sync`, `replay`, `pause` and `resume` beside `capture-sync
run` reach it over its control socket and exit with the code of the work it did; the socket is the
daemon's user's alone; the HTTP control needs the bearer token from `[daemon] control_token_file`.

Every daemon here is a real `capture-sync run --http 127.0.0.1:0` against the sandbox on loopback.
Where a test needs the daemon quiet, its source's schedule is a yearly cron: nothing runs but what
the test asks for."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from connector.control import daemon_state
from connector.sandbox import Faults

YEARLY = "0 0 1 1 *"  # a cron tick the test never meets
NOBODY = 65534


def _emails(box) -> set[str]:
    return {p["data"].get("email") for p in box.store.persons()}


def _seed_for(outcomes: list[bool]) -> int:
    """A seed whose draws meet a non-retryable 503 (draw < 0.5) exactly where `outcomes` says True."""

    def draws(seed: int) -> list[bool]:
        rng = random.Random(seed)
        return [rng.random() < 0.5 for _ in outcomes]

    return next(s for s in range(10_000) if draws(s) == outcomes)


def _setup(kit, box, folder: Path, rows: int, schedule: str, extra: str = "") -> Path:
    key, secret = box.create_client("control-test", rate_limit=100_000)
    kit.credentials(folder, key, secret)
    contacts = folder / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, rows + 1)])
    config = kit.config(folder, box.base_url, contacts, schedule=schedule)
    if extra:
        config.write_text(config.read_text() + f"\n[daemon]\n{extra}\n")
    return config


def test_sync_beside_the_daemon_runs_a_pass_now_and_replay_sends_the_stalled_batch_at_once(
    kit, sandbox_factory, start_daemon, tmp_path: Path
) -> None:
    faults = Faults(seed=_seed_for([False, True]))  # armed below: GET /info passes, the bulk request meets the 503
    box = sandbox_factory(faults=faults)
    config = _setup(kit, box, tmp_path, 3, YEARLY)
    daemon = start_daemon(config)
    faults.p_fatal_503 = 0.5

    stalled = kit.run("sync", "-c", str(config), "--source", "signups")
    assert stalled.code == 4, stalled.stdout + stalled.stderr
    assert "a capture-sync daemon holds" in stalled.stderr and "Sync (by the daemon)" in stalled.stdout
    assert _emails(box) == set() and daemon.proc.poll() is None
    unknown = kit.run("sync", "-c", str(config), "--source", "nope")
    assert unknown.code == 2 and "no source named 'nope'" in unknown.stderr

    faults.p_fatal_503 = 0.0  # the API is well again; the sweep would leave the stalled batch (spec 4.4 rule 4)
    replayed = kit.run("replay", "-c", str(config), "--json")
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["kind"] == "replay" and report["exit_code"] == 0 and report["counts"]["captured"] == 3
    assert _emails(box) == {f"ada{n}@example.org" for n in range(1, 4)}
    status = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
    assert status["oldest_unsettled"] is None and status["by_state"]["captured"] == 3

    refused = kit.run("state", "reset", "-c", str(config), "--source", "signups")
    assert refused.code == 2
    assert "does not run beside it" in refused.stderr and "stop the daemon" in refused.stderr
    assert daemon.stop() == 0
    assert not (tmp_path / "ledger.sqlite3.control").exists()  # removed on a clean stop


def test_pause_holds_new_rows_back_across_a_restart_and_resume_sends_them(
    kit, sandbox, start_daemon, tmp_path: Path
) -> None:
    config = _setup(kit, sandbox, tmp_path, 2, "every 1s")
    daemon = start_daemon(config)
    daemon.poll(lambda: _emails(sandbox) == {"ada1@example.org", "ada2@example.org"}, "the first rows")

    paused = kit.run("pause", "-c", str(config), "--source", "signups")
    assert paused.code == 0, paused.stderr
    assert "paused source signups" in paused.stdout and "resume -c" in paused.stdout
    kit.contacts(tmp_path / "contacts.csv", [kit.contact(3), kit.contact(4)], header=False)
    held = lambda: daemon.log.read_text().count('"pass.held"')  # noqa: E731
    daemon.poll(lambda: held() >= 2, "two ticks held by the pause")
    assert len(sandbox.store.persons()) == 2
    assert daemon_state(tmp_path / "ledger.sqlite3")["paused"].keys() == {"signups"}
    daemon.proc.kill()  # SIGKILL: its socket stays behind, stale
    daemon.proc.wait()
    assert (tmp_path / "ledger.sqlite3.control").exists()

    again = start_daemon(config)  # the pause is in the ledger: the new daemon starts paused, on a new socket
    assert '"daemon.starts_paused"' in again.log.read_text()
    again.poll(lambda: again.log.read_text().count('"pass.held"') >= 1, "a tick held after the restart")
    assert len(sandbox.store.persons()) == 2

    resumed = kit.run("resume", "-c", str(config), "--source", "signups")
    assert resumed.code == 0 and "resumed signups: the daemon runs a pass of it now" in resumed.stdout
    again.poll(lambda: {"ada3@example.org", "ada4@example.org"} <= _emails(sandbox), "the held rows sent")
    assert daemon_state(tmp_path / "ledger.sqlite3")["paused"] == {}
    assert again.stop() == 0

    alone = kit.run("pause", "-c", str(config))  # no daemon: recorded for the next one
    assert alone.code == 0 and "the next `capture-sync run` on it starts paused" in alone.stdout
    assert kit.run("resume", "-c", str(config)).code == 0


@pytest.fixture
def reachable_folder() -> Iterator[Path]:
    """A folder another user may pass through (0711) but not list: pytest's own tmp folders are 0700,
    which would refuse another user before the socket's own mode is tried."""
    folder = Path(tempfile.mkdtemp(prefix="capture-sync-ctl-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder)


def _ask_as(uid: int, sock: Path) -> str:
    """Connect to `sock` as `uid` (a forked child that drops root: the venv's interpreter is not
    another user's to run) and ask for a pause; "EACCES", or the daemon's answer line."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect(str(sock))
                client.sendall(b'{"command": "pause", "args": {}}\n')
                line = client.makefile("rb").readline()
            except PermissionError:
                line = b"EACCES"
            os.write(write, line)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        out = fh.read()
    os.waitpid(pid, 0)
    return out.decode().strip()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another user")
def test_the_control_socket_is_0600_and_refuses_another_user(
    kit, sandbox, start_daemon, reachable_folder: Path
) -> None:
    config = _setup(kit, sandbox, reachable_folder, 1, YEARLY)
    daemon = start_daemon(config)
    ledger = reachable_folder / "ledger.sqlite3"
    sock = daemon.poll(
        lambda: ledger.with_name("ledger.sqlite3.control").exists() and ledger.with_name("ledger.sqlite3.control"),
        "the socket",
    )
    assert sock.stat().st_mode & 0o777 == 0o600

    assert _ask_as(NOBODY, sock) == "EACCES"  # the mode refuses first
    sock.chmod(0o666)  # and were the mode wrong, the daemon itself refuses by the peer's uid
    answer = json.loads(_ask_as(NOBODY, sock))
    assert answer["ok"] is False and answer["exit_code"] == 2
    assert f"you are uid {NOBODY}" in answer["error"] and "takes commands only from that user" in answer["error"]
    assert daemon_state(ledger)["paused"] == {}  # nothing was done
    assert '"control.refused"' in daemon.log.read_text()
    assert daemon.stop() == 0


def test_http_control_refuses_a_missing_or_wrong_token_and_acts_on_the_right_one(
    kit, sandbox, start_daemon, tmp_path: Path
) -> None:
    token = "s3cret-control-token"
    (tmp_path / "control_token").write_text(token + "\n")
    (tmp_path / "control_token").chmod(0o600)
    config = _setup(kit, sandbox, tmp_path, 1, YEARLY, 'control_token_file = "control_token"')
    daemon = start_daemon(config)
    ledger = tmp_path / "ledger.sqlite3"

    def post(path: str, auth: str | None, body: dict | None = None) -> httpx.Response:
        headers = {"Authorization": auth} if auth else {}
        return httpx.post(daemon.url + path, json=body or {}, headers=headers, timeout=30)

    for auth in (None, "Bearer not-the-token", f"Basic {token}"):
        refused = post("/control/pause", auth)
        assert refused.status_code == 401, auth
    assert daemon_state(ledger)["paused"] == {}  # nothing done
    assert token not in daemon.log.read_text()

    good = f"Bearer {token}"
    assert post("/control/nope", good).status_code == 404
    assert post("/control/pause", good, {"source": 3}).status_code == 400
    paused = post("/control/pause", good, {"source": "signups"})
    assert paused.status_code == 200 and paused.json()["paused"].keys() == {"signups"}
    assert daemon_state(ledger)["paused"].keys() == {"signups"}
    assert "paused since" in daemon.get("/").text  # the status page says it
    synced = post("/control/sync", good)
    assert synced.status_code == 200 and synced.json()["exit_code"] == 0 and len(sandbox.store.persons()) == 1
    assert post("/control/resume", good).json()["resumed"] == ["signups"]
    assert daemon.get("/readyz").status_code == 200  # reads stay open
    assert daemon.stop() == 0

    plain = tmp_path / "plain"
    plain.mkdir()
    other = start_daemon(_setup(kit, sandbox, plain, 1, YEARLY))
    assert httpx.post(other.url + "/control/pause", headers={"Authorization": good}, timeout=30).status_code == 405
    assert daemon_state(plain / "ledger.sqlite3")["paused"] == {}
    assert other.stop() == 0

    (tmp_path / "control_token").chmod(0o644)
    exposed = kit.run("run", "-c", str(config), "--http", "127.0.0.1:0")
    assert exposed.code == 2 and "chmod 600" in exposed.stderr and token not in exposed.stderr
