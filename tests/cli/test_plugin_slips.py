"""Issue 22: whatever a plugin yields, nothing is lost in silence. Each slip ends that source's read
as a plugin error (exit 6, one line naming the source, the position and the rule), every record
before it reaches the CRM, and the other sources are delivered. A record id the ledger cannot keep
is no slip (issue 24): the record is rejected saying why, and the read goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MODULE = '''
import datetime
from connector.source import BadRecord, Record, Source, SourceOptions


class SlipOptions(SourceOptions):
    count: int = 100
    slip: str = "none"
    at: int = 50


class Slippy(Source[SlipOptions]):
    """Records S1..S<count>, one of which breaks a rule of the contract."""

    Options = SlipOptions

    def read(self, state):
        opts = self.options
        for n in range((state or 0) + 1, opts.count + 1):
            data = {"First": f"p{n}", "Email": f"p{n}@example.com"}
            if n != opts.at or opts.slip == "none":
                yield Record(f"S{n}", data, n)
            elif opts.slip == "empty_id":
                yield Record("", data, n)
            elif opts.slip == "none_id":
                yield Record(None, data, n)
            elif opts.slip == "int_id":
                yield Record(n, data, n)
            elif opts.slip == "control_id":
                yield Record(f"S{n}\\x1b[2J", data, n)
            elif opts.slip == "list_data":
                yield Record(f"S{n}", [data], n)
            elif opts.slip == "datetime_state":
                yield Record(f"S{n}", data, {"at": datetime.datetime(2026, 1, 1)})
            elif opts.slip == "dict":
                yield {"id": f"S{n}", **data}
            elif opts.slip == "type_error":
                raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")
'''

CONFIG = """
[capture]
base_url = {base_url}
api_key_file = "api_key"
api_secret_file = "api_secret"
batch_size = 100

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "slippy"
type = "slippy_plugin:Slippy"
count = {count}
slip = "{slip}"
at = {at}

[sources.mapping]
first_name = "First"
email = "Email"

[[sources]]
name = "signups"
type = "csv"
path = "signups.csv"
primary_key = "id"

[sources.mapping]
first_name = "First"
email = "Email"
"""

SLIPS = {
    "list_data": "a Record's data must be a mapping of fields, not a list",
    "datetime_state": "the state holds a datetime at state['at'], which JSON cannot hold",
    "dict": "read() yielded a dict, not a Record, a BadRecord or a Passed row",
    "type_error": "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
}


def _setup(kit, box, tmp_path: Path, slip: str, at: int, count: int) -> Path:
    key, secret = box.create_client(rate_limit=10_000)
    kit.credentials(tmp_path, key, secret)
    (tmp_path / "slippy_plugin.py").write_text(MODULE)
    (tmp_path / "signups.csv").write_text("id,First,Email\nR1,Ann,ann@example.org\n")
    config = tmp_path / "capture-sync.toml"
    config.write_text(CONFIG.format(base_url=json.dumps(box.base_url), slip=slip, at=at, count=count))
    return config


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_slip_is_one_line_exit_6_and_every_record_before_it_is_delivered(
    kit, sandbox, tmp_path: Path, slip: str
) -> None:
    config = _setup(kit, sandbox, tmp_path, slip, at=50, count=100)
    result = kit.run("sync", "-c", str(config))
    assert result.code == 6, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "sources.slippy" in line]
    assert len(lines) == 1, result.stderr
    assert "the read failed after 49 record(s)" in lines[0] and SLIPS[slip] in lines[0], lines[0]
    if slip != "type_error":
        assert "item 50 of the read" in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    emails = {p["data"]["email"] for p in sandbox.store.persons()}
    assert emails == {f"p{n}@example.com" for n in range(1, 50)} | {"ann@example.org"}


ID_REJECTIONS = {
    "empty_id": "a Record's id must be a non-empty string, not ''",
    "none_id": "a Record's id must be a non-empty string, not None",
    "int_id": "a Record's id must be a non-empty string, not a int",
    "control_id": "holds a control character",
}


@pytest.mark.parametrize("slip", sorted(ID_REJECTIONS))
def test_an_id_the_ledger_cannot_keep_is_a_rejection_saying_why_and_the_read_goes_on(
    kit, sandbox, tmp_path: Path, slip: str
) -> None:
    """No slip of the read: ended there, the read would stop at that record on every pass."""
    config = _setup(kit, sandbox, tmp_path, slip, at=50, count=100)
    result = kit.run("sync", "-c", str(config))
    assert result.code == 0, result.stdout + result.stderr
    assert "sources.slippy" not in result.stderr and "Traceback" not in result.stderr + result.stdout
    emails = {p["data"]["email"] for p in sandbox.store.persons()}
    assert emails == {f"p{n}@example.com" for n in range(1, 101) if n != 50} | {"ann@example.org"}
    listed = kit.run("ledger", "list", "--state", "rejected", "--json", "-c", str(config))
    assert listed.code == 0, listed.stderr
    (entry,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert ID_REJECTIONS[slip] in entry["last_error"] and "make the source yield one" in entry["last_error"]
    again = kit.run("sync", "-c", str(config))
    assert again.code == 0 and len(sandbox.store.captures()) == 100, again.stderr  # nothing re-read or re-sent


@pytest.mark.parametrize("at", [1000, 1001])
def test_a_state_json_cannot_hold_at_the_end_of_a_chunk_keeps_the_chunk_before_it(
    kit, sandbox, tmp_path: Path, at: int
) -> None:
    """Chunks hold 1,000 records: the slip is the chunk's last record, or the next chunk's first."""
    config = _setup(kit, sandbox, tmp_path, "datetime_state", at=at, count=1100)
    result = kit.run("sync", "-c", str(config))
    assert result.code == 6, result.stdout + result.stderr
    assert f"item {at} of the read" in result.stderr
    assert len(sandbox.store.persons()) == at - 1 + 1  # the records before it, and the csv's one
    fixed = config.read_text().replace('slip = "datetime_state"', 'slip = "none"')
    config.write_text(fixed)
    resumed = kit.run("sync", "-c", str(config))
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert len(sandbox.store.persons()) == 1100 + 1  # resumed after the last good record, nothing doubled
    assert len(sandbox.store.captures()) == 1100 + 1


def test_the_daemon_reports_the_slip_each_tick_and_keeps_serving_the_other_source(kit, sandbox, tmp_path: Path) -> None:
    """Ticks driven directly (what the scheduler calls), as in test_daemon_sources."""
    import asyncio

    from structlog.testing import capture_logs

    from connector.api import CaptureClient
    from connector.config import load_config
    from connector.ledger import Ledger
    from connector.scheduler import Daemon

    config = _setup(kit, sandbox, tmp_path, "list_data", at=3, count=5)
    cfg = load_config(config)
    signups = tmp_path / "signups.csv"

    async def main() -> list[list[str]]:
        base_url, creds = cfg.api()
        failures: list[list[str]] = []
        async with CaptureClient(base_url, creds.api_key, creds.api_secret) as client:
            with Ledger(cfg.ledger_path) as ledger:
                daemon = Daemon(cfg, ledger, client, asyncio.Event())
                for n in (2, 3):
                    signups.write_text(signups.read_text() + f"R{n},Ann{n},ann{n}@example.org\n")
                    with capture_logs() as events:
                        for job in cfg.jobs():
                            await daemon.sync_source(job)
                    failures.append([e["error"] for e in events if e["event"] == "source.failed"])
                    assert daemon.health.passes["slippy"].exit_code == 6
        return failures

    try:
        failures = asyncio.run(main())
    finally:
        cfg.close_sources()
    assert len(failures) == 2, failures  # one line on each tick, the slip named
    assert all(len(f) == 1 and "a Record's data must be a mapping of fields, not a list" in f[0] for f in failures), (
        failures
    )
    emails = {p["data"]["email"] for p in sandbox.store.persons()}
    assert emails == {"p1@example.com", "p2@example.com", "ann@example.org", "ann2@example.org", "ann3@example.org"}
