"""Leases of a PostgreSQL ledger (issue 23): one leader per integration at a time, expiry by the
database's clock, a token that grows on each takeover, and fencing: a daemon whose lease passed has
every write refused in the write's own transaction, and a takeover waits for a write in hand."""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest

from connector.ledger import Ledger, LedgerFenced, LedgerLocked, Mapped


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


def expire(url: str, integration: str) -> None:
    """What a lease_s of silence does: the lease ends (by the database's clock)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE capture_sync_ha.leases SET expires_at = now() WHERE integration = %s", (integration,))


def waiting_for_a_lock(url: str, statement: str) -> None:
    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            (statement + "%",),
        ).fetchone()[0]:
            assert time.monotonic() < deadline, f"{statement!r} never waited for the write"
            time.sleep(0.02)


def test_one_leader_at_a_time_and_a_takeover_fences_the_old_one(postgres_ledger_url: str) -> None:
    with (
        Ledger(postgres_ledger_url, integration="crm") as a_ledger,
        Ledger(postgres_ledger_url, integration="crm") as b_ledger,
    ):
        a, b = a_ledger.lease("daemon-a", 30), b_ledger.lease("daemon-b", 30)
        with pytest.raises(LedgerFenced):  # a standby writes nothing
            b_ledger.enqueue("signups", "m", [person(0)], None)
        assert a.take() == 1
        assert b.take() is None and b.token is None  # a leads: b stands by
        a_ledger.enqueue("signups", "m", [person(1)], None)
        assert a.renew() and a.take() == 1  # renewing keeps the token

        expire(postgres_ledger_url, "crm")  # a is paused or partitioned past its lease
        assert b.take() == 2
        with pytest.raises(LedgerFenced, match="has passed"):
            a_ledger.enqueue("signups", "m", [person(2)], None)  # the zombie's write is refused, wholly
        assert not a.renew() and a.token is None
        b_ledger.enqueue("signups", "m", [person(3)], None)
        assert b_ledger.status().by_state["pending"] == 2  # persons 1 and 3; never 2

        b.release()  # a clean stop: the lease ends now
        assert a.take() == 3
        with psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
            history = conn.execute("SELECT holder, token FROM capture_sync_ha.lease_history ORDER BY id").fetchall()
        assert history == [("daemon-a", 1), ("daemon-b", 2), ("daemon-a", 3)]


def test_a_one_shot_command_is_refused_while_a_daemon_leads(postgres_ledger_url: str) -> None:
    with (
        Ledger(postgres_ledger_url, integration="crm") as daemon,
        Ledger(postgres_ledger_url, integration="crm") as one_shot,
    ):
        lease = daemon.lease("daemon-a", 30)
        assert lease.take() == 1
        with pytest.raises(LedgerLocked, match="daemon-a leads integration crm"):
            one_shot.acquire_daemon_lock()
        lease.release()
        one_shot.acquire_daemon_lock()  # no leader now: the command runs, and no daemon takes over meanwhile
        assert lease.take() is None


def test_a_takeover_waits_for_the_write_in_hand_and_a_renewal_does_not(postgres_ledger_url: str) -> None:
    """The fence is read FOR KEY SHARE in the write's transaction: a takeover (which locks the row
    FOR UPDATE) commits after that write; the leader's own renewal (an UPDATE of the expiry) does
    not wait for it, so a slow settle never makes a renewal late."""
    with (
        Ledger(postgres_ledger_url, integration="crm") as a_ledger,
        Ledger(postgres_ledger_url, integration="crm") as b_ledger,
    ):
        a = a_ledger.lease("daemon-a", 30)
        assert a.take() == 1
        store = a_ledger._store
        took: list[int | None] = []
        with store.write(None) as db:  # a's write, fence checked, not yet committed
            db.execute("INSERT INTO pauses (source, since) VALUES (?, ?)", ("signups", 1.0))
            assert a.renew()  # at once, the write in hand or not (on this very thread)
            expire(postgres_ledger_url, "crm")  # then a is paused past its lease
            taker = threading.Thread(target=lambda: took.append(b_ledger.lease("daemon-b", 30).take()))
            taker.start()
            waiting_for_a_lock(postgres_ledger_url, "SELECT holder, token, expires_at")  # the takeover waits
            assert taker.is_alive() and not took
        taker.join()
        assert took == [2]
        assert a_ledger.paused() == {"signups": 1.0}  # a's write went in wholly, before the takeover


def test_the_fair_share_counts_live_daemons_and_live_integrations_only(postgres_ledger_url: str) -> None:
    """Balancing divides the integrations someone runs over the daemons alive now: a daemon whose
    heartbeat expired and a lease row nobody has taken for longer than lease_s count for nothing,
    and a daemon that stopped cleanly is off the live ones at once."""
    with (
        Ledger(postgres_ledger_url, integration="crm-a") as a_ledger,
        Ledger(postgres_ledger_url, integration="crm-b") as b_ledger,
    ):
        a, also_a = a_ledger.lease("daemon-a", 30), b_ledger.lease("daemon-a", 30)
        standby = a_ledger.lease("daemon-b", 30)  # runs crm-a
        assert a.take() == 1 and also_a.take() == 1  # daemon-a leads both
        standby.share()  # daemon-b's heartbeat: alive, leading nothing
        with psycopg.connect(postgres_ledger_url, autocommit=True) as conn:  # what a dead daemon left
            conn.execute("INSERT INTO capture_sync_ha.daemons VALUES ('daemon-dead', now() - interval '1 hour')")
            conn.execute(
                "INSERT INTO capture_sync_ha.leases VALUES ('crm-gone', 'daemon-dead', 4, "
                "now() - interval '1 hour', now() - interval '2 hours')"
            )
        assert a.share() == (2, 1, 0)  # leads 2; share: 2 integrations over 2 live daemons; b leads 0
        standby.forget()  # daemon-b stops cleanly
        assert a.share() == (2, 2, 2)  # alone now: both are its share


def test_a_lease_is_handed_back_only_to_a_daemon_that_runs_the_integration(postgres_ledger_url: str) -> None:
    """daemon-b is alive and leads nothing, but runs only crm-c: daemon-a, leading crm-a and crm-b,
    has nobody to hand them to (a lease handed back would stay untaken, then come back, again and
    again); once daemon-b runs crm-a too, crm-a may go to it."""
    with (
        Ledger(postgres_ledger_url, integration="crm-a") as a_ledger,
        Ledger(postgres_ledger_url, integration="crm-b") as b_ledger,
        Ledger(postgres_ledger_url, integration="crm-c") as c_ledger,
    ):
        a, also_a = a_ledger.lease("daemon-a", 30), b_ledger.lease("daemon-a", 30)
        assert a.take() == 1 and also_a.take() == 1
        c_ledger.lease("daemon-b", 30).share()  # daemon-b's heartbeat, for crm-c alone
        assert a.share() == (2, 1, 2) and also_a.share() == (2, 1, 2)  # nobody else runs crm-a or crm-b
        a_ledger.lease("daemon-b", 30).share()  # daemon-b runs crm-a too
        assert a.share() == (2, 1, 0) and also_a.share() == (2, 1, 2)


async def test_a_leader_past_its_local_deadline_sends_nothing_and_stands_by(postgres_ledger_url: str) -> None:
    """The send gate and the timer: the local deadline (monotonic, short of the database's expiry)
    stops the sending even when no renewal answered (a paused or partitioned daemon)."""
    import asyncio

    from connector.leadership import Leadership

    with Ledger(postgres_ledger_url, integration="crm") as ledger:
        leadership = Leadership(ledger.lease("daemon-a", 2.0), 2.0)
        lost: list[str] = []
        leadership.on_loss = lost.append
        with pytest.raises(LedgerFenced):
            leadership.gate()  # a standby sends nothing
        await leadership._round()
        assert leadership.leads and leadership.role.token == 1 and not leadership.halt.is_set()
        leadership.gate()  # within its lease: sends
        assert leadership.deadline - time.monotonic() <= 2.0 - leadership.margin_s
        await asyncio.wait_for(leadership.halt.wait(), 10)  # no renewal: the deadline passes
        assert lost == ["the lease was not renewed in time"] and not leadership.leads
        with pytest.raises(LedgerFenced):
            leadership.gate()
        with pytest.raises(LedgerFenced):
            ledger.enqueue("signups", "m", [person(1)], None)


def test_one_integration_closing_leaves_the_process_live_for_its_others(postgres_ledger_url: str) -> None:
    """daemon-a runs crm-a and crm-b in one process; crm-b closes (its config removed, or it failed)
    while crm-a runs on. daemon-a is still a live daemon running crm-a: daemon-b, which runs crm-a
    too, must count it (else daemon-a's leases look dead and the fair share is counted without it)."""
    with (
        Ledger(postgres_ledger_url, integration="crm-a") as a_ledger,
        Ledger(postgres_ledger_url, integration="crm-b") as b_ledger,
    ):
        a, also_a = a_ledger.lease("daemon-a", 30), b_ledger.lease("daemon-a", 30)
        standby = a_ledger.lease("daemon-b", 30)
        assert a.take() == 1 and also_a.take() == 1
        a.share(), also_a.share()  # daemon-a's heartbeats, for both
        assert standby.share() == (0, 1, 2)  # 2 integrations over 2 daemons; daemon-a leads 2 and runs crm-a
        also_a.release()
        also_a.forget()  # crm-b closes; crm-a's lease in daemon-a stays live
        assert standby.share() == (0, 1, 1)  # daemon-a still live, leading crm-a
        a.release()
        a.forget()  # the process's last integration: now daemon-a is off the live ones
        assert standby.share() == (0, 2, 0)


async def test_a_planned_hand_off_and_a_clean_stop_log_no_lost_lease(postgres_ledger_url: str) -> None:
    """`lease.lost` is the warning an operator is paged on: a lease that passed while the daemon led.
    Handing a lease back for balance (`lease.handed_back`) and giving it up on a clean stop are the
    daemon's own choice, and must not raise it."""
    from structlog.testing import capture_logs

    from connector.leadership import BALANCER, Leadership

    with (
        Ledger(postgres_ledger_url, integration="crm-a") as a_ledger,
        Ledger(postgres_ledger_url, integration="crm-b") as b_ledger,
        Ledger(postgres_ledger_url, integration="crm-a") as other_ledger,
    ):
        first, second = Leadership(a_ledger.lease("daemon-a", 30), 30), Leadership(b_ledger.lease("daemon-a", 30), 30)
        lost: list[str] = []
        first.on_loss = second.on_loss = lost.append
        with capture_logs() as logs:
            await first._round()
            await second._round()
            assert first.leads and second.leads
            other_ledger.lease("daemon-b", 30).share()  # a live daemon running crm-a, leading nothing
            BALANCER.next_release = 0.0
            await first._round()  # renews, then hands crm-a back: 2 leases against 0
            assert not first.leads and lost == ["handed back to balance the integrations over the live daemons"]
            await second.close()
            await first.close()
        events = [e["event"] for e in logs]
        assert events.count("lease.taken") == 2 and "lease.handed_back" in events and "lease.released" in events
        assert "lease.lost" not in events, logs
        assert len(lost) == 2 and not second.leads  # the daemon heard of both, to stand by
