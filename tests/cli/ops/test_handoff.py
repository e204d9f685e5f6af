"""A lease changing hands under load, over real processes: one PostgreSQL ledger, the sandbox (a
real HTTP server answering each request after a delay, so work is always in hand), `capture-sync
run` daemons as subprocesses.

- A hand-off to balance (a second daemon comes up while the first leads both integrations with
  work in flight and pending): the first stops, lets its requests in hand settle, releases, and the
  second takes the lease and resumes the integration's work at once, well within lease_s, not after
  the lease would have expired; every person is captured once.
- A write held up in the database for longer than lease_s: the leader's renewals go on beside it
  and it keeps its lease (before, the renewal waited for that write and the lease was lost).
- A zombie leader (SIGSTOPped with a request in hand for longer than lease_s, while a standby takes
  over, then SIGCONTed with no other daemon alive): the sandbox receives nothing from it until it
  takes the lease again under a new term, and the ledger refuses the write it still attempts.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from connector.sandbox import Faults

LEASE_S = 6  # renewals and tries every 2 s; a leader stops 1.2 s before its lease can pass
ROWS = 600  # per integration: at 10 persons per request, one request at a time, 0.2 s each: >= 12 s of sending
ZOMBIE_ROWS = 100  # one request at a time, 1 s each: a request is always in hand


def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            return conn.execute(sql, params).fetchall()
        except psycopg.errors.UndefinedTable:  # no daemon has opened the ledger yet
            return []


def holder_pid(url: str, integration: str) -> int | None:
    rows = query(
        url,
        "SELECT holder FROM capture_sync_ha.leases WHERE integration = %s AND expires_at > now()",
        (integration,),
    )
    return int(rows[0][0].split(":")[1]) if rows else None


def count(url: str, integration: str, where: str) -> int | None:
    rows = query(url, f'SELECT count(*) FROM "{integration}".entries WHERE {where}')
    return int(rows[0][0]) if rows else None


def unsettled(url: str, integration: str) -> int:
    left = count(url, integration, "state NOT IN ('captured', 'duplicate', 'rejected')")
    return ROWS if left is None else left


def poll(check: Callable[[], Any], what: str, deadline_s: float = 90) -> Any:
    deadline = time.monotonic() + deadline_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"not within {deadline_s} s: {what}"
        time.sleep(0.05)
    return value


class Arrivals:
    """ASGI middleware around the sandbox: the request log of captures (when each arrived, by the
    clock the database and the daemons share on this host), and how many are being answered."""

    def __init__(self, app: Any) -> None:
        self.app, self.lock, self.times, self.answering = app, threading.Lock(), list[float](), 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        with self.lock:
            self.times.append(time.time())
            self.answering += 1
        try:
            await self.app(scope, receive, send)
        finally:
            with self.lock:
                self.answering -= 1

    def since(self, at: float) -> list[float]:
        with self.lock:
            return [t for t in self.times if t >= at]


def integrations(kit, sandbox, tmp_path: Path, url: str, names: tuple[str, ...], rows: int = ROWS) -> list[str]:
    args = []
    for i, name in enumerate(names):
        folder = tmp_path / name
        folder.mkdir()
        key, secret = sandbox.store.create_client(name, rate_limit=100_000)
        kit.credentials(folder, key, secret)
        contacts = folder / "contacts.csv"
        kit.contacts(contacts, [kit.contact(n) for n in range(i * rows, (i + 1) * rows)])
        config = kit.config(folder, sandbox.base_url, contacts, schedule="every 1s", extra_capture="concurrency = 1\n")
        text = config.read_text().replace('[ledger]\npath = "ledger.sqlite3"', f"[ledger]\nurl = {json.dumps(url)}")
        config.write_text(
            f'[integration]\nname = "{name}"\n\n[daemon]\nlease_s = {LEASE_S}\nretry_sweep = "every 2s"\n\n' + text
        )
        args += ["-c", str(config)]
    return args


def start(kit, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(
            [str(kit.script), "run", *args, "--log-level", "DEBUG"], stdout=out, stderr=subprocess.STDOUT, env=kit.env()
        )


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def captured_once(sandbox, total: int) -> None:
    keys = [c["person_key"] for c in sandbox.store.captures()]
    assert len(keys) == total and len(set(keys)) == total  # nothing lost, nothing doubled


def test_a_hand_off_resumes_the_work_in_hand_at_once(
    kit, sandbox_factory, tmp_path: Path, postgres_ledger_url: str
) -> None:
    sandbox = sandbox_factory(faults=Faults(latency_s=0.2))
    url = postgres_ledger_url
    names = ("alpha", "beta")
    args = integrations(kit, sandbox, tmp_path, url, names)
    procs = [start(kit, args, tmp_path / "first.log")]
    try:
        first = procs[0].pid
        poll(lambda: all(holder_pid(url, n) == first for n in names), "the first daemon to lead both")
        poll(lambda: all(unsettled(url, n) < ROWS for n in names), "both integrations to be sending")
        procs.append(start(kit, args, tmp_path / "second.log"))
        second = procs[1].pid
        moved = poll(
            lambda: next((n for n in names if holder_pid(url, n) == second), None), "a lease handed to the second"
        )
        left = unsettled(url, moved)
        assert left > 0, "the hand-off came after the work was done: nothing to show"
        # Resumed by the new leader at once: not after the old lease would have expired (lease_s)
        # nor tens of seconds later, as before the fix.
        poll(lambda: unsettled(url, moved) < left, f"{moved}: the next batch settled by the new leader", LEASE_S)
        assert holder_pid(url, moved) == second
        poll(lambda: len(sandbox.store.captures()) == 2 * ROWS, "every person captured")
    finally:
        stop(procs)
    captured_once(sandbox, 2 * ROWS)
    assert '"lease.handed_back"' in (tmp_path / "first.log").read_text()


def test_a_zombie_leader_sends_nothing_after_its_lease_passed_and_its_write_is_refused(
    kit, sandbox_factory, tmp_path: Path, postgres_ledger_url: str
) -> None:
    wrapped: list[Arrivals] = []

    def wrap(app: Any) -> Arrivals:
        wrapped.append(Arrivals(app))
        return wrapped[0]

    sandbox = sandbox_factory(faults=Faults(latency_s=1.0), wrap=wrap)
    arrivals, url = wrapped[0], postgres_ledger_url
    args = integrations(kit, sandbox, tmp_path, url, ("alpha",), rows=ZOMBIE_ROWS)
    zombie = start(kit, args, tmp_path / "zombie.log")
    procs = [zombie]
    try:
        poll(lambda: holder_pid(url, "alpha") == zombie.pid, "the first daemon to lead")
        procs.append(start(kit, args, tmp_path / "standby.log"))
        standby = procs[1]
        poll(
            lambda: query(url, "SELECT 1 FROM capture_sync_ha.daemons WHERE holder LIKE %s", (f"%:{standby.pid}:%",)),
            "the standby's heartbeat",
        )
        # A batch written and not settled: its members are in flight.
        poll(lambda: query(url, """SELECT 1 FROM "alpha".batches WHERE state = 'open'"""), "a request in hand")
        zombie.send_signal(signal.SIGSTOP)
        poll(lambda: holder_pid(url, "alpha") == standby.pid, "the standby to take over", 3 * LEASE_S)
        standby.send_signal(signal.SIGKILL)  # from here on no other daemon sends
        standby.wait()
        poll(lambda: arrivals.answering == 0, "the sandbox to answer what it holds")
        woke = time.time()
        zombie.send_signal(signal.SIGCONT)
        # It stands by, and leads again (a new term) once the dead standby's lease has expired.
        poll(lambda: holder_pid(url, "alpha") == zombie.pid, "the zombie to lead again", 3 * LEASE_S)
        ((retaken,),) = query(
            url,
            "SELECT extract(epoch FROM max(taken_at))::float8 FROM capture_sync_ha.lease_history WHERE holder LIKE %s",
            (f"%:{zombie.pid}:%",),
        )
        assert retaken > woke
        outside = [t - woke for t in arrivals.since(woke) if t < retaken]
        assert not outside, f"the zombie sent {len(outside)} request(s) after its lease passed: {outside}"
        poll(lambda: len(sandbox.store.captures()) == ZOMBIE_ROWS, "every person captured")
    finally:
        stop(procs)
    captured_once(sandbox, ZOMBIE_ROWS)
    fenced = [
        json.loads(line)
        for line in (tmp_path / "zombie.log").read_text().splitlines()
        if line.startswith("{") and '"lease.fenced"' in line
    ]
    assert any("has passed from this daemon" in e["reason"] for e in fenced), "the ledger refused no write"


def test_a_write_held_up_in_the_database_does_not_cost_the_leader_its_lease(
    kit, sandbox_factory, tmp_path: Path, postgres_ledger_url: str
) -> None:
    """A settle that takes long (here: the ledger's entries locked by another session for longer
    than lease_s) holds the lease row's fence lock all along; the leader's renewals go on beside it,
    so the lease stays with the leader (one term) and no standby has to wait out its expiry."""
    sandbox = sandbox_factory(faults=Faults(latency_s=0.2))
    url = postgres_ledger_url
    args = integrations(kit, sandbox, tmp_path, url, ("alpha",))
    leader = start(kit, args, tmp_path / "leader.log")
    try:
        poll(lambda: holder_pid(url, "alpha") == leader.pid, "the daemon to lead")
        poll(lambda: count(url, "alpha", "state = 'captured'"), "the first batch settled")
        with psycopg.connect(url) as blocker:  # one transaction until the block ends
            blocker.execute('LOCK TABLE "alpha".entries IN EXCLUSIVE MODE')  # reads go on, writes wait
            poll(
                lambda: query(
                    url,
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE entries%%'",
                ),
                "a write of the leader held up",
            )
            ((expires,),) = query(url, "SELECT expires_at FROM capture_sync_ha.leases WHERE integration = 'alpha'")
            poll(
                lambda: query(
                    url,
                    "SELECT 1 FROM capture_sync_ha.leases WHERE integration = 'alpha' AND expires_at > %s",
                    (expires + timedelta(seconds=LEASE_S),),
                ),
                "the lease renewed past the moment it would have expired",
                3 * LEASE_S,
            )
        poll(lambda: len(sandbox.store.captures()) == ROWS, "every person captured")
    finally:
        stop([leader])
    captured_once(sandbox, ROWS)
    assert query(url, "SELECT token FROM capture_sync_ha.lease_history") == [(1,)]
    assert '"lease.lost"' not in (tmp_path / "leader.log").read_text().split('"stop requested"')[0]
