"""Integrations sharing one PostgreSQL database: each keeps its ledger in a schema of its name, so
none sees another's entries, cursors, runs or pauses, and each has its own daemon lock and writer."""

from __future__ import annotations

import json

import pytest

from connector.ledger import Ledger, LedgerLocked, Mapped


def person(i: int) -> Mapped:
    return Mapped(str(i), payload=json.dumps({"name": f"Person {i}", "email": f"p{i}@example.com"}))


def test_integrations_in_one_database_never_see_each_other(postgres_ledger_url: str) -> None:
    with (
        Ledger(postgres_ledger_url, integration="crm-eu") as eu,
        Ledger(postgres_ledger_url, integration="crm.us") as us,
    ):
        eu.enqueue("signups", "m", [person(1), person(2)], {"offset": 2})
        run = eu.start_run("sync")
        eu.finish_run(run, {}, 0.0, 0)
        eu.pause("signups")
        us.enqueue("signups", "m", [person(3)], {"offset": 9})

        assert eu.status().by_state.get("pending") == 2 and us.status().by_state.get("pending") == 1
        assert eu.source_state("signups") == {"offset": 2} and us.source_state("signups") == {"offset": 9}
        assert [r.kind for r in eu.runs(10)] == ["sync"] and us.runs(10) == []
        assert list(eu.paused()) == ["signups"] and us.paused() == {}

    with Ledger(postgres_ledger_url, integration="crm-eu") as again:  # reopened: its own schema, as left
        assert again.status().by_state.get("pending") == 2
    with Ledger(postgres_ledger_url) as public:  # no integration: the database's public schema, untouched
        assert public.is_empty()


def test_each_integration_has_its_own_daemon_lock(postgres_ledger_url: str) -> None:
    with (
        Ledger(postgres_ledger_url, integration="a") as a,
        Ledger(postgres_ledger_url, integration="b") as b,
        Ledger(postgres_ledger_url, integration="a") as a_again,
    ):
        a.acquire_daemon_lock()
        b.acquire_daemon_lock()  # another integration: its own daemon may run beside a's
        with pytest.raises(LedgerLocked, match="already running"):
            a_again.acquire_daemon_lock()
