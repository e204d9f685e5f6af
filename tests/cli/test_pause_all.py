"""A pause of everything (`capture-sync pause` without --source) holds the retry sweep too: what an
outage left unsettled is not re-sent until `resume`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from connector.api import CaptureClient
from connector.config import load_config
from connector.daemon_commands import ALL
from connector.ledger import Ledger
from connector.sandbox import Faults
from connector.scheduler import Daemon


def test_a_pause_of_everything_holds_the_sweep_and_resume_lets_it_send(kit, sandbox_factory, tmp_path: Path) -> None:
    faults = Faults(p_retryable_503=1.0)
    box = sandbox_factory(faults=faults)
    key, secret = box.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2)])
    config = kit.config(tmp_path, box.base_url, contacts)
    assert kit.run("sync", "-c", str(config), "--log-level", "ERROR").code == 4  # an outage leaves both unsettled
    assert kit.run("pause", "-c", str(config)).code == 0  # no daemon: recorded in the ledger
    faults.p_retryable_503 = 0.0
    cfg = load_config(config)

    async def sweeps() -> tuple[int, int]:
        base_url, creds = cfg.api()
        async with CaptureClient(base_url, creds.api_key, creds.api_secret) as client:
            with Ledger(cfg.ledger_path) as ledger:
                daemon = Daemon(cfg, ledger, client, asyncio.Event())
                daemon.paused = ledger.paused()  # as `serve` loads it
                assert ALL in daemon.paused
                await daemon.sweep()
                held = len(box.store.captures())
                await daemon.resume(None)
                await daemon.sweep()
                await asyncio.gather(*daemon._running)  # the pass `resume` started
                return held, len(box.store.captures())

    try:
        held, after = asyncio.run(sweeps())
    finally:
        cfg.close_sources()
    assert held == 0, "the sweep sent while everything was paused"
    assert after == 2
