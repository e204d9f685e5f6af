"""Effectively-once under SIGKILL: the connector is killed at random moments while the API fails.

2,000 records (10% invalid) are synced through `capture-sync sync` against the sandbox with 10%
retryable 503s and 10% commit-then-drop. The process is SIGKILLed ten times at random moments of
its work, each kill cutting a run short, then restarted (sync, then replay) until it exits 0.
Afterwards: every valid record is in the CRM exactly once, every invalid one is `rejected` with
its reasons, and the ledger agrees with the sandbox. The same holds, on both engines, with every
other kill inside a group commit of settles (the `group-settle` failpoint).
"""

from __future__ import annotations

import random

import pytest

from connector.sandbox import Faults

RECORDS = 2_000
KILLS = 10


def test_sigkill_at_random_moments_loses_nothing_and_doubles_nothing(rel, sandbox_factory, tmp_path):
    rng = random.Random(20261122)
    box = sandbox_factory(faults=Faults(p_retryable_503=0.1, p_commit_drop=0.1, latency_s=0.05, seed=7))
    env = rel.client(box.store, rate_limit=100_000)
    population = rel.contacts(tmp_path / "contacts.csv", RECORDS, rng)
    config = rel.config(tmp_path, box.base_url, population.path)

    survived = rel.until_settled(config, env, rng, kills=KILLS, sandbox_db=box.store.db_path)

    assert survived.timer_kills >= KILLS
    rel.assert_effectively_once(box.store, population, tmp_path / "ledger.sqlite3")
    # Every kill cut a run short (not a process already past the end of its run).
    assert rel.count(tmp_path / "ledger.sqlite3", "SELECT count(*) FROM runs WHERE finished_at IS NULL") >= KILLS


def test_sigkill_on_a_postgresql_ledger_loses_nothing_and_doubles_nothing(
    rel, sandbox_factory, tmp_path, postgres_ledger_url
):
    """The same, shorter, with the ledger in PostgreSQL: a killed process's transaction is rolled back
    by the server, its daemon lock released with its session, and the next run resumes its batches."""
    rng = random.Random(20261127)
    box = sandbox_factory(faults=Faults(p_retryable_503=0.1, p_commit_drop=0.1, latency_s=0.05, seed=8))
    env = rel.client(box.store, rate_limit=100_000)
    population = rel.contacts(tmp_path / "contacts.csv", RECORDS // 4, rng)
    config = rel.config(tmp_path, box.base_url, population.path, ledger_url=postgres_ledger_url)

    survived = rel.until_settled(
        config, env, rng, kills=KILLS // 2, sandbox_db=box.store.db_path, ledger=postgres_ledger_url
    )

    assert survived.timer_kills >= KILLS // 2
    rel.assert_effectively_once(box.store, population, postgres_ledger_url)
    assert rel.count(postgres_ledger_url, "SELECT count(*) FROM runs WHERE finished_at IS NULL") >= KILLS // 2
    assert not (tmp_path / "ledger.sqlite3").exists()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_kill_inside_a_group_settle_loses_nothing_and_doubles_nothing(
    rel, sandbox_factory, tmp_path, request, engine
):
    """Killed by the failpoint inside a group commit (between two answered batches' writes, before the
    COMMIT) every other kill: the group's batches stay open and are resent under their keys and
    bodies; the CRM answers them from its idempotency store, so nothing is lost and nothing doubled.
    Six workers on a slow API make the answers overlap the settles, so groups form."""
    rng = random.Random(20261127 if engine == "sqlite" else 20261128)
    box = sandbox_factory(faults=Faults(p_retryable_503=0.05, p_commit_drop=0.1, latency_s=0.05, seed=9))
    env = rel.client(box.store, rate_limit=100_000)
    population = rel.contacts(tmp_path / "contacts.csv", RECORDS // 2, rng)
    ledger = tmp_path / "ledger.sqlite3" if engine == "sqlite" else request.getfixturevalue("postgres_ledger_url")
    config = rel.config(
        tmp_path,
        box.base_url,
        population.path,
        batch_size=10,
        concurrency=6,
        ledger_url=None if engine == "sqlite" else ledger,
    )

    survived = rel.until_settled(
        config, env, rng, kills=4, failpoints=("group-settle",), sandbox_db=box.store.db_path, ledger=ledger
    )

    assert survived.failpoint_kills.get("group-settle", 0) >= 2, survived
    rel.assert_effectively_once(box.store, population, ledger)
