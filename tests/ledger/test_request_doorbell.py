"""The leader's doorbell for operator commands on a shared PostgreSQL ledger (`_requests.Doorbell`,
LISTEN/NOTIFY): a request asked for its integration wakes it; a LISTEN connection the server ends
(a restart, a failover of the database) is made again, and the leader looks at the rows at once,
since the notifications sent meanwhile are gone. The slow poll is set to an hour here, so a wake-up
within the test's deadline can only be the notification's or the reconnection's."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from connector.ledger import Ledger, _requests

DEADLINE_S = 30.0


@pytest.fixture
def ledger(postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(_requests, "SAFETY_POLL_S", 3600.0)
    with Ledger(postgres_ledger_url, integration="crm") as opened:
        yield opened


def _listeners(url: str) -> list[int]:
    """The server pids of the sessions LISTENing for requests."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE query = %s", (f"LISTEN {_requests.CHANNEL}",)
        ).fetchall()
    return [r[0] for r in rows]


def test_a_request_wakes_the_leader_and_a_lost_listen_connection_is_made_again(
    ledger: Ledger, postgres_ledger_url: str
) -> None:
    store = ledger._store

    async def scenario() -> list[list[tuple[int, str, dict]]]:
        halt = asyncio.Event()
        seen = []
        async with _requests.Doorbell(store.target, "crm") as doorbell:
            with store.connection() as conn:
                _requests.ask(conn, "crm", "state", {})  # the asker's insert and NOTIFY
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)
            with store.connection() as conn:
                seen.append(_requests.take(conn, "crm", "leader"))

            for pid in _listeners(postgres_ledger_url):  # the server ends the LISTEN session
                with psycopg.connect(postgres_ledger_url, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            with store.connection() as conn:  # asked while nobody listens: this NOTIFY is lost
                _requests.ask(conn, "crm", "pause", {})
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)  # the broken connection ends the wait
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)  # listening anew: look at the rows now
            with store.connection() as conn:
                seen.append(_requests.take(conn, "crm", "leader"))

            with store.connection() as conn:  # and the new connection hears the next one
                _requests.ask(conn, "crm", "resume", {})
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)
            with store.connection() as conn:
                seen.append(_requests.take(conn, "crm", "leader"))

            halt.set()  # the lease ends: the wait ends with it
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)
        return seen

    seen = asyncio.run(scenario())
    assert [[command for _, command, _ in taken] for taken in seen] == [["state"], ["pause"], ["resume"]]
    assert _listeners(postgres_ledger_url) == []  # its connection closed with the leading


def _end_listen_sessions(url: str) -> None:
    for pid in _listeners(url):
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_listen_connection_that_fails_as_soon_as_made_is_not_made_again_in_a_loop(
    ledger: Ledger, postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[bool] = []

    async def pause(self: _requests.Doorbell, halt: asyncio.Event) -> None:
        pauses.append(halt.is_set())

    monkeypatch.setattr(_requests.Doorbell, "_pause", pause)

    async def scenario() -> None:
        halt = asyncio.Event()
        async with _requests.Doorbell(ledger._store.target, "crm") as doorbell:
            _end_listen_sessions(postgres_ledger_url)  # made, then gone before it could ring
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)
            assert len(pauses) == 1  # the poll's wait before connecting again
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)  # listening anew: look at the rows now
            with ledger._store.connection() as conn:
                _requests.ask(conn, "crm", "state", {})
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)  # heard: this connection works
            _end_listen_sessions(postgres_ledger_url)  # a working connection lost: made again at once
            await asyncio.wait_for(doorbell.rung(halt), DEADLINE_S)
            assert len(pauses) == 1

    asyncio.run(scenario())


def test_an_asker_whose_listen_the_server_refuses_polls(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    # A hot standby refuses LISTEN ("cannot execute LISTEN during recovery"); a bad channel name is
    # refused the same way, as a psycopg.Error after the connection was made.
    monkeypatch.setattr(_requests, "ANSWERS", "no such channel")
    with pytest.raises(_requests.NotTaken, match="no capture-sync daemon took `state`"):
        _requests.ask_leader(ledger._store, "state", {}, take_within_s=0.2)
