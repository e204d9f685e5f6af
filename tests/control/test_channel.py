"""The control channel's own promises, in-process: a ledger path too long for a Unix socket address
gets a short socket that `<ledger>.control` names; a socket left by a killed daemon is replaced;
stopping removes both; a request outside the table is refused with exit 2 and nothing run."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from connector.control import ControlServer, ask, daemon_state, find_socket, socket_path
from connector.control._commands import steer


class FakeDaemon:
    """What the table calls, recording the calls."""

    def __init__(self) -> None:
        self.paused: dict[str, float] = {}
        self.calls: list[str] = []

    def state(self) -> dict[str, Any]:
        return {"paused": dict(self.paused), "health": {}}

    async def pause(self, source: str | None) -> dict[str, float]:
        self.calls.append(f"pause {source}")
        self.paused[source or "*"] = 1.0
        return dict(self.paused)


async def _serve_and(ledger: Path, daemon: FakeDaemon, *requests: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    server = ControlServer(ledger, daemon)  # type: ignore[arg-type]  # the table's calls used here only
    await server.start()
    try:
        return [await asyncio.to_thread(ask, ledger, name, args, timeout_s=5) for name, args in requests]
    finally:
        await server.stop()


def test_a_ledger_path_too_long_for_a_socket_gets_a_short_one_that_its_control_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    ledger = deep / "ledger.sqlite3"
    short = socket_path(ledger)
    assert short.parent == tmp_path / "run" and len(os.fsencode(short)) <= 107

    daemon = FakeDaemon()
    [state, paused] = asyncio.run(_serve_and(ledger, daemon, ("state", {}), ("pause", {"source": "signups"})))
    assert state["ok"] and state["paused"] == {}
    assert paused["ok"] and paused["paused"] == {"signups": 1.0} and daemon.calls == ["pause signups"]
    assert not short.exists() and find_socket(ledger) is None  # both gone on stop
    assert daemon_state(ledger) is None  # no daemon: None, at once


def test_a_stale_socket_is_replaced_the_new_one_is_0600_and_unknown_requests_do_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    import socket

    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(ledger.with_name("ledger.sqlite3.control")))  # as a SIGKILLed daemon leaves it
    stale.close()
    daemon = FakeDaemon()

    async def go() -> list[dict[str, Any]]:
        server = ControlServer(ledger, daemon)  # type: ignore[arg-type]
        path = await server.start()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        try:
            return [
                await asyncio.to_thread(ask, ledger, name, args, timeout_s=5)
                for name, args in (("nope", {}), ("pause", {"sorce": "x"}), ("pause", {"source": 1}))
            ]
        finally:
            await server.stop()

    answers = asyncio.run(go())
    assert [a["exit_code"] for a in answers] == [2, 2, 2] and not any(a["ok"] for a in answers)
    assert "no command 'nope'" in answers[0]["error"] and "takes no argument 'sorce'" in answers[1]["error"]
    assert daemon.calls == []


class StandbyDaemon(FakeDaemon):
    """A daemon that stands by: every request is asked of the leader elsewhere, whose answer takes
    until `answer` is set (as a long remote `sync` does)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = threading.Event()
        self.asked_on: list[str] = []

    def leader_elsewhere(self):
        def ask_leader(name: str, args: dict[str, Any]) -> dict[str, Any]:
            self.asked_on.append(threading.current_thread().name)
            self.answer.wait(30)
            return {"ok": True, "command": name, "exit_code": 0}

        return ask_leader


def test_requests_waiting_on_the_leader_leave_the_ledgers_threads_free() -> None:
    daemon = StandbyDaemon()

    async def go() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))  # where claims and settles run
        waiting = [asyncio.ensure_future(steer(daemon, "state", {})) for _ in range(3)]  # type: ignore[arg-type]
        try:
            # A ledger call still runs while three requests wait for the leader's answer.
            assert await asyncio.wait_for(asyncio.to_thread(lambda: "claimed"), 10) == "claimed"
        finally:
            daemon.answer.set()
        return await asyncio.gather(*waiting)

    answers = asyncio.run(go())
    assert [a["ok"] for a in answers] == [True] * 3
    assert daemon.asked_on and all(n.startswith("capture-sync-ask-leader") for n in daemon.asked_on)
