"""Issue 27 through the command line, against the sandbox over loopback: a record's older row read
again never wins or comes back (lookback, --full-refresh, a revert past a rejected version), a late
file is read whatever its place in the order, and a non-retryable answer waits for the operator."""

from __future__ import annotations

import asyncio
import csv
import os
import random
import re
from pathlib import Path

from connector.api import CaptureClient
from connector.config import load_config
from connector.ledger import Ledger
from connector.sandbox import Faults
from connector.scheduler import Daemon

FIELDS = ["id", "First", "Email", "ts"]


def _rows(path: Path, rows: list[tuple[str, str, int]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(FIELDS)
        for rid, first, ts in rows:
            writer.writerow([rid, first, f"{first.lower()}@example.org" if first else "", ts])


def _config(kit, folder: Path, base_url: str, path: str, extra: str = "") -> Path:
    config = kit.config(folder, base_url, folder / "unused.csv")
    text = config.read_text(encoding="utf-8").replace(f'path = "{folder / "unused.csv"}"', f"path = {path!r}")
    text = text.replace('last_name = "Last"\nemail = "Email"\nphone = "Phone"\n', 'email = "Email"\n')
    config.write_text(text.replace('primary_key = "id"\n', f'primary_key = "id"\n{extra}'), encoding="utf-8")
    return config


def _firsts(box, email_of: str | None = None) -> list[str]:
    """The first names the CRM was sent, in commit order (for one person when `email_of` is given)."""
    return [
        c["data"]["first_name"] for c in box.store.captures() if email_of is None or c["data"].get("email") == email_of
    ]


def _sync(kit, config: Path, *args: str):
    result = kit.run("sync", "-c", str(config), "--log-level", "ERROR", *args)
    assert result.code == 0, result.stdout + result.stderr
    return result


LOOKBACK = 'cursor = "ts"\ncursor_type = "number"\nlookback = 1000\n'


def test_an_append_only_export_read_again_with_lookback_captures_nothing_again(kit, sandbox, tmp_path: Path) -> None:
    """Record 1 appears twice in the log, its older row first: the newer row is what the CRM keeps,
    and neither row is sent again by later syncs of the unchanged file, nor by --full-refresh."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    export = tmp_path / "log.csv"
    _rows(export, [("1", "Old", 100), ("2", "Bob", 150), ("1", "New", 200)])
    config = _config(kit, tmp_path, sandbox.base_url, str(export), LOOKBACK)
    _sync(kit, config)
    assert sorted(_firsts(sandbox)) == ["Bob", "New"]  # one chunk: Old was superseded before it was sent
    for args in ((), (), ("--full-refresh", "--source", "signups")):
        again = _sync(kit, config, *args)
        assert sorted(_firsts(sandbox)) == ["Bob", "New"], again.stdout
        assert re.search(r"older\s+1", again.stdout) and re.search(r"unchanged\s+2", again.stdout), again.stdout
    assert {p["data"]["first_name"] for p in sandbox.store.persons()} == {"New", "Bob"}


def test_rows_of_one_record_far_apart_never_put_the_older_row_back(kit, sandbox, tmp_path: Path) -> None:
    """1,500 rows apart, the two rows of record 1 fall in different read chunks: the first sync sends
    Old then New (it cannot know better), and no later sync sends either again."""
    key, secret = sandbox.create_client(rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    export = tmp_path / "log.csv"
    filler = [(str(n), f"F{n}", 100 + n) for n in range(2, 1502)]
    _rows(export, [("1", "Old", 100), *filler, ("1", "New", 5000)])
    config = _config(kit, tmp_path, sandbox.base_url, str(export), LOOKBACK.replace("1000", "100000"))
    config.write_text(config.read_text().replace("batch_size = 10", "batch_size = 100"))
    _sync(kit, config)
    assert _firsts(sandbox, "new@example.org") + _firsts(sandbox, "old@example.org") in (["New"], ["New", "Old"])
    first_pass = len(sandbox.store.captures())
    for args in ((), (), ("--full-refresh", "--source", "signups")):
        result = _sync(kit, config, *args)
        assert len(sandbox.store.captures()) == first_pass, result.stdout
    record_1 = [c["data"]["first_name"] for c in sandbox.store.captures() if c["data"]["first_name"] in ("Old", "New")]
    assert record_1[-1] == "New" and record_1.count("New") == 1  # the older row never after the newer


def test_a_revert_past_a_rejected_version_sends_nothing(kit, sandbox, tmp_path: Path) -> None:
    """A (captured), B (rejected: no email), A again: the CRM holds A, so nothing is sent."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    export = tmp_path / "contacts.csv"
    config = _config(kit, tmp_path, sandbox.base_url, str(export))
    for email in ("ann@example.org", "", "ann@example.org"):
        export.write_text(f"id,First,Email,ts\n1,Ann,{email},1\n", encoding="utf-8")
        _sync(kit, config)
    assert _firsts(sandbox) == ["Ann"]
    assert sandbox.store.captures()[0]["data"]["email"] == "ann@example.org"


def _glob_config(kit, tmp_path: Path, box, order: str) -> tuple[Path, Path]:
    key, secret = box.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    folder = tmp_path / "exports"
    folder.mkdir()
    return _config(kit, tmp_path, box.base_url, str(folder / "*.csv"), f'order = "{order}"\n'), folder


def test_a_late_file_with_an_older_mtime_is_read(kit, sandbox, tmp_path: Path) -> None:
    config, folder = _glob_config(kit, tmp_path, sandbox, "mtime")
    staging = tmp_path / "staging"
    staging.mkdir()
    _rows(staging / "b.csv", [("b1", "Bea", 1)])  # exported first...
    os.utime(staging / "b.csv", ns=(1_000_000_000, 1_000_000_000))
    _rows(folder / "a.csv", [("a1", "Abe", 1)])
    _sync(kit, config)
    os.rename(staging / "b.csv", folder / "b.csv")  # ...moved in later, keeping its mtime (mv, rsync -t)
    _sync(kit, config)
    assert sorted(_firsts(sandbox)) == ["Abe", "Bea"]
    _sync(kit, config)
    assert len(sandbox.store.captures()) == 2  # and neither file is read again


def test_a_late_file_whose_name_sorts_first_is_read(kit, sandbox, tmp_path: Path) -> None:
    config, folder = _glob_config(kit, tmp_path, sandbox, "name")
    _rows(folder / "export-2.csv", [("x2", "Two", 1)])
    _sync(kit, config)
    _rows(folder / "export-1.csv", [("x1", "One", 1)])
    _sync(kit, config)
    assert sorted(_firsts(sandbox)) == ["One", "Two"]


def _seed_for(outcomes: list[bool]) -> int:
    """A seed whose draws meet a fatal 503 (draw < 0.5) exactly where `outcomes` says True."""
    return next(s for s in range(10_000) if [r < 0.5 for r in _random(s, len(outcomes))] == outcomes)


def _random(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.random() for _ in range(n)]


def test_a_non_retryable_503_is_not_re_sent_by_the_sweep_and_is_by_replay(kit, sandbox_factory, tmp_path: Path) -> None:
    """GET /info passes, the bulk request meets a 503 with retryable false: the batch stalls. The
    daemon's sweep leaves it (spec 4.4 rule 4); `replay` sends it; `retry_stalled_every` opts in."""
    faults = Faults(p_fatal_503=0.5, seed=_seed_for([False, True]))
    box = sandbox_factory(faults=faults)
    key, secret = box.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2)])
    config = kit.config(tmp_path, box.base_url, contacts)
    stalled = kit.run("sync", "-c", str(config), "--log-level", "ERROR")
    assert stalled.code == 4, stalled.stdout + stalled.stderr
    faults.p_fatal_503 = 0.0  # the API is well again; only an operator may decide the batch goes
    cfg = load_config(config)

    async def sweeps() -> tuple[int, int]:
        base_url, creds = cfg.api()
        async with CaptureClient(base_url, creds.api_key, creds.api_secret) as client:
            with Ledger(cfg.ledger_path) as ledger:
                daemon = Daemon(cfg, ledger, client, asyncio.Event())
                await daemon.sweep()
                after_sweep = len(box.store.captures())
                await daemon.retry_stalled()  # what `[daemon] retry_stalled_every` schedules
                return after_sweep, len(box.store.captures())

    try:
        after_sweep, after_opt_in = asyncio.run(sweeps())
    finally:
        cfg.close_sources()
    assert after_sweep == 0, "the retry sweep re-sent a batch refused with retryable: false"
    assert after_opt_in == 2


def test_replay_sends_a_stalled_batch_and_the_daemon_schedules_no_stalled_retry_unless_told(
    kit, sandbox_factory, tmp_path: Path
) -> None:
    faults = Faults(p_fatal_503=0.5, seed=_seed_for([False, True]))
    box = sandbox_factory(faults=faults)
    key, secret = box.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, box.base_url, contacts)
    assert kit.run("sync", "-c", str(config), "--log-level", "ERROR").code == 4
    faults.p_fatal_503 = 0.0
    replayed = kit.run("replay", "-c", str(config), "--log-level", "ERROR")
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    assert len(box.store.captures()) == 1

    cfg = load_config(config)
    assert cfg.daemon.retry_stalled_every is None
    config.write_text(config.read_text() + '\n[daemon]\nretry_stalled_every = "every 7m"\n')
    assert load_config(config).daemon.retry_stalled_every == "every 7m"
    config.write_text(config.read_text().replace("every 7m", "sometimes"))
    checked = kit.run("check", "-c", str(config))
    assert checked.code == 2 and "daemon.retry_stalled_every" in checked.stderr


def test_ledger_resolve_is_refused_while_a_daemon_holds_the_ledger(kit, sandbox, tmp_path: Path) -> None:
    """Requeuing an open batch while the daemon sends it would put the same per-person keys into a
    second batch in flight: resolve takes the lock sync, replay and run hold."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    _sync(kit, config)
    entry_key = Ledger(tmp_path / "ledger.sqlite3").list_entries(limit=1)[0].key
    with Ledger(tmp_path / "ledger.sqlite3") as holder:
        holder.acquire_daemon_lock()
        refused = kit.run("ledger", "resolve", "-c", str(config), entry_key, "--dismiss")
    assert refused.code == 2
    assert "another capture-sync daemon is already running" in refused.stderr
