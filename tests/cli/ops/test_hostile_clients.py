"""`run --http` against clients that mean harm, over real sockets on loopback: a page reading the
endpoints through a rebound DNS name (a foreign Host), and slowloris (connections that send part of
a request head and never finish it, or trickle it a byte at a time).

Oracle: a foreign Host gets 421 and nothing of the status page; every half-open connection is closed
by the daemon within its header timeout (2 s here) after it was opened; /healthz answers all along;
past the connection cap, the daemon's open files stay within the cap."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import httpx

HEADER_TIMEOUT_S = 2.0
SLACK_S = 1.5  # the loop's scheduling on a busy 2-core machine
PARTIAL_HEAD = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def _config(kit, box, tmp_path: Path, daemon: str) -> Path:
    key, secret = box.create_client("hostile-test")
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, box.base_url, contacts, schedule="every 1h")
    config.write_text(config.read_text() + f"\n[daemon]\n{daemon}\n")
    return config


def _open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _half_open(port: int, n: int) -> list[tuple[socket.socket, float]]:
    opened = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(PARTIAL_HEAD)
        opened.append((s, time.monotonic()))
    return opened


def _closed_by_peer(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1024) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_a_foreign_host_is_refused_and_known_names_are_served(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    daemon = start_daemon(_config(kit, sandbox, tmp_path, 'http_allowed_hosts = ["Status.Example.org"]'))

    def get(path: str, host: str) -> httpx.Response:
        return httpx.get(daemon.url + path, headers={"Host": host}, timeout=10)

    for foreign in (
        "rebound.attacker.example",
        f"rebound.attacker.example:{daemon.port}",
        "localhost.attacker.example",
        f"status.example.org.attacker.example:{daemon.port}",
        f"ada@127.0.0.1:{daemon.port}",
    ):
        for path in ("/", "/metrics", "/healthz", "/nowhere"):
            refused = get(path, foreign)
            assert refused.status_code == 421, (foreign, path, refused.text)
            assert "signups" not in refused.text and "capture_sync" not in refused.text
    for known in (
        f"127.0.0.1:{daemon.port}",
        f"localhost:{daemon.port}",
        "localhost",
        f"status.example.org:{daemon.port}",
        "STATUS.example.org.",
        f"[::1]:{daemon.port}",
        f"10.1.2.3:{daemon.port}",
    ):
        assert get("/healthz", known).status_code == 200, known
    assert get("/", "localhost").status_code == 200
    assert daemon.stop() == 0, daemon.log.read_text()


def test_half_open_connections_are_closed_within_the_header_timeout_while_healthz_answers(
    kit, sandbox, start_daemon, tmp_path: Path
) -> None:
    limits = f"http_header_timeout_s = {HEADER_TIMEOUT_S}\nhttp_max_connections = 400"  # the timeout, not the cap
    daemon = start_daemon(_config(kit, sandbox, tmp_path, limits))
    attack = _half_open(daemon.port, 200)
    trickler = socket.create_connection(("127.0.0.1", daemon.port), timeout=5)
    trickle_start, trickled = time.monotonic(), 0

    open_until: dict[int, float] = {}
    answers: list[float] = []
    deadline = time.monotonic() + HEADER_TIMEOUT_S + SLACK_S + 2
    while time.monotonic() < deadline and len(open_until) < len(attack):
        began = time.monotonic()
        assert daemon.get("/healthz").status_code == 200  # served beside 201 connections that never finish
        answers.append(time.monotonic() - began)
        if trickled < len(PARTIAL_HEAD) and not _closed_by_peer(trickler):
            trickler.sendall(PARTIAL_HEAD[trickled : trickled + 1])  # a byte now and then renews nothing
            trickled += 1
        for i, (s, opened) in enumerate(attack):
            if i not in open_until and _closed_by_peer(s):
                open_until[i] = time.monotonic() - opened
        time.sleep(0.1)

    assert len(open_until) == len(attack), f"{len(attack) - len(open_until)} half-open connections still open"
    assert min(open_until.values()) >= HEADER_TIMEOUT_S - 0.2 and max(open_until.values()) <= HEADER_TIMEOUT_S + SLACK_S
    assert max(answers) < 1.0, answers
    deadline = time.monotonic() + HEADER_TIMEOUT_S + SLACK_S
    while not _closed_by_peer(trickler) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert time.monotonic() - trickle_start <= HEADER_TIMEOUT_S + SLACK_S
    for s, _ in attack:
        s.close()
    trickler.close()
    assert daemon.stop() == 0, daemon.log.read_text()


def test_connections_past_the_cap_do_not_pile_up_as_open_files(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    daemon = start_daemon(_config(kit, sandbox, tmp_path, "http_header_timeout_s = 30\nhttp_max_connections = 20"))
    assert daemon.get("/healthz").status_code == 200
    before = _open_files(daemon.proc.pid)

    attack = _half_open(daemon.port, 150)
    assert daemon.get("/healthz").status_code == 200  # the oldest waiting connection made room for it
    time.sleep(0.3)
    assert _open_files(daemon.proc.pid) <= before + 20 + 2
    assert sum(_closed_by_peer(s) for s, _ in attack) >= 150 - 20
    for s, _ in attack:
        s.close()
    assert daemon.stop() == 0, daemon.log.read_text()
