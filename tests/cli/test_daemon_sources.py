"""`capture-sync run` and a broken source (issue 14): the other sources keep being delivered, the
broken one is reported in one line on each of its ticks (never a traceback), and it is read again by
itself once fixed. Ticks are driven directly (`Daemon.sync_source`, what the scheduler calls), so
the tests count lines per tick without waiting on a clock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from connector.api import CaptureClient
from connector.config import Config, load_config
from connector.delivery import SourceJob
from connector.ledger import Ledger
from connector.scheduler import Daemon
from connector.source import Record, Source, SourceOptions

LEADS = """
[[sources]]
name = "leads"
type = "csv"
path = "leads.csv"
primary_key = "id"

[sources.mapping]
first_name = "First"
email = "Email"
"""


@pytest.fixture(autouse=True)
def info_level(caplog: pytest.LogCaptureFixture) -> None:
    """The daemon's default level, whatever an earlier test in this process configured: at DEBUG a
    failing source's traceback is logged on purpose (-v), which these tests must not count."""
    caplog.set_level(logging.INFO, logger="capture_sync.delivery")


@dataclass
class Setup:
    config: Path
    cfg: Config
    signups: Path
    leads: Path  # not there at first


@pytest.fixture
def setup(kit, sandbox, tmp_path: Path) -> Iterator[Setup]:
    """Two csv sources, `signups` (one row) and `leads` (its file missing), against the sandbox."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    signups = tmp_path / "signups.csv"
    kit.contacts(signups, [kit.contact(1)])
    config = kit.config(tmp_path, sandbox.base_url, signups)
    with config.open("a", encoding="utf-8") as fh:
        fh.write(LEADS)
    cfg = load_config(config)
    yield Setup(config, cfg, signups, tmp_path / "leads.csv")
    cfg.close_sources()


def with_daemon(cfg: Config, scenario: Callable[[Daemon], Awaitable[None]]) -> None:
    async def main() -> None:
        base_url, creds = cfg.api()
        async with CaptureClient(base_url, creds.api_key, creds.api_secret) as client:
            with Ledger(cfg.ledger_path) as ledger:
                await scenario(Daemon(cfg, ledger, client, asyncio.Event()))

    asyncio.run(main())


async def tick(daemon: Daemon, jobs: list[SourceJob]) -> list[dict[str, Any]]:
    """One tick of each source, in order; the log events it produced."""
    with capture_logs() as events:
        for job in jobs:
            await daemon.sync_source(job)
    return events


def lines(events: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    assert not [e for e in events if e.get("exc_info") or "pass failed" in e["event"]]  # one line, no traceback
    return [e for e in events if e["event"] == event]


def emails(sandbox) -> set[str]:
    return {p["data"].get("email") for p in sandbox.store.persons()}


def test_a_missing_file_is_one_line_per_tick_while_the_other_source_is_delivered_until_it_appears(
    kit, sandbox, setup: Setup
) -> None:
    async def scenario(daemon: Daemon) -> None:
        for n in (1, 2):
            if n == 2:
                kit.contacts(setup.signups, [kit.contact(2)], header=False)
            reports = lines(await tick(daemon, setup.cfg.jobs()), "source.unavailable")
            assert [r["source"] for r in reports] == ["leads"]
            assert f"no file matches '{setup.leads}'" in reports[0]["reason"]
            assert emails(sandbox) == {f"ada{i}@example.org" for i in range(1, n + 1)}
        kit.contacts(setup.leads, [kit.contact(3)])
        assert not lines(await tick(daemon, setup.cfg.jobs()), "source.unavailable")

    with_daemon(setup.cfg, scenario)
    assert emails(sandbox) == {"ada1@example.org", "ada2@example.org", "ada3@example.org"}
    assert len(sandbox.store.captures()) == 3  # nothing doubled, however many ticks ran


class Flaky(Source[SourceOptions]):
    """Records F0, F1, ... from `rows`; the read raises on reaching `breaks_at` until it is mended."""

    Options = SourceOptions

    def __init__(self, rows: list[dict[str, str]], breaks_at: int | None) -> None:
        super().__init__("flaky", SourceOptions())
        self.rows, self.breaks_at = rows, breaks_at

    def read(self, state: Any | None) -> Iterator[Record]:
        for i in range(state or 0, len(self.rows)):
            if i == self.breaks_at:
                raise RuntimeError("connection dropped")
            yield Record(f"F{i}", self.rows[i], i + 1)


def test_a_source_failing_mid_read_keeps_what_it_gave_is_one_line_per_tick_and_resumes_once_mended(
    kit, sandbox, setup: Setup
) -> None:
    kit.contacts(setup.leads, [kit.contact(2)])
    source = Flaky([kit.contact(n) for n in range(10, 16)], breaks_at=3)
    jobs = [SourceJob("flaky", source, setup.cfg.jobs()[0].mapping), *setup.cfg.jobs()]

    async def scenario(daemon: Daemon) -> None:
        for _ in range(2):
            failures = lines(await tick(daemon, jobs), "source.failed")
            assert [(f["source"], f["error"]) for f in failures] == [("flaky", "RuntimeError: connection dropped")]
            assert emails(sandbox) == {f"ada{n}@example.org" for n in (1, 2, 10, 11, 12)}
        source.breaks_at = None
        assert not lines(await tick(daemon, jobs), "source.failed")

    with_daemon(setup.cfg, scenario)
    assert emails(sandbox) == {f"ada{n}@example.org" for n in (1, 2, *range(10, 16))}
    assert len(sandbox.store.captures()) == 8


def test_run_once_delivers_the_readable_sources_and_exits_2_naming_the_missing_one(kit, sandbox, setup: Setup) -> None:
    result = kit.run("run", "--once", "-c", str(setup.config))
    assert result.code == 2, result.stderr
    assert f"source 'leads': no file matches '{setup.leads}'" in result.stderr
    assert emails(sandbox) == {"ada1@example.org"}


def test_a_column_gone_while_the_daemon_runs_is_one_line_per_tick_and_nothing_of_that_source_is_sent(
    kit, sandbox, setup: Setup
) -> None:
    setup.leads.write_text("id,First,E-mail\nL1,Lin,lin@example.org\n", encoding="utf-8")

    async def scenario(daemon: Daemon) -> None:
        for _ in range(2):
            reports = lines(await tick(daemon, setup.cfg.jobs()), "source.misconfigured")
            assert len(reports) == 1
            assert reports[0]["problems"] == [
                "sources.leads.mapping.email: the source has no column 'Email'; did you mean 'E-mail'?"
            ]

    with_daemon(setup.cfg, scenario)
    assert emails(sandbox) == {"ada1@example.org"}
