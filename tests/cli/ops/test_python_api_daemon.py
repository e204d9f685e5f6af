"""The Python API beside a running daemon (`capture-sync run` holding the ledger): `sync` and
`replay` ask the daemon over its control socket and return its report, as the CLI does; what the
daemon cannot do for it is refused with the CLI's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector import ConfigError, ExitCode, replay, status, sync

YEARLY = "0 0 1 1 *"  # a cron tick the test never meets: nothing runs but what the test asks for


def test_sync_from_python_beside_the_daemon_is_run_by_the_daemon(
    kit, sandbox_factory, start_daemon, tmp_path: Path
) -> None:
    box = sandbox_factory()
    key, secret = box.create_client("api-daemon-test", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, 4)])
    config = kit.config(tmp_path, box.base_url, contacts, schedule=YEARLY)
    daemon = start_daemon(config)

    report = sync(config, sources="signups")

    assert report.exit_code is ExitCode.OK and report.captured == 3 and report.run_id is not None
    assert {p["data"]["email"] for p in box.store.persons()} == {f"ada{n}@example.org" for n in range(1, 4)}
    assert replay(config).exit_code is ExitCode.OK
    now = status(config)
    assert now.live is not None and now.settled  # the daemon's live state, asked over its socket
    with pytest.raises(ConfigError, match="does not run beside it"):
        sync(config, sources="signups", full_refresh=True)
    assert daemon.proc.poll() is None
