"""The status page in a real browser: Debian's headless Chromium loads it from a daemon started as a
user starts it, over loopback.

Setup: a 409 made the way `test_integrity_cli` makes it (the first bulk request outlives the
client's 0.5 s timeout, its retry under the same key meets the request still running: spec 4.4 rule
3 blocks the batch), then `run --http`. Oracle: the DOM Chromium built holds the source and the
exact command `ledger show` gives for that batch, and none of the blocked persons' emails.

Set CAPTURE_SYNC_STATUS_PAGE_PNG=docs/status-page.png to refresh the screenshot in docs/monitoring.md."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

from connector.sandbox import Faults

BROWSER_TIMEOUT_S = 60
PHONE = "412,1400"  # a phone's width in CSS pixels; tall enough for the whole page


def spike_pattern(seed: int, n: int) -> list[bool]:
    """Which of the sandbox's first `n` requests get a latency spike (p = 0.5) under `seed`."""
    rng = random.Random(seed)
    return [rng.random() < 0.5 for _ in range(n)]


def browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=True,
    )


def test_the_status_page_shows_the_sources_and_a_blocked_batch_with_its_recovery_command(
    kit, sandbox_factory, start_daemon, chromium: str, tmp_path: Path
) -> None:
    # GET /info is quick, the bulk request slow (the 409), then nothing slow for the daemon's own requests.
    seed = next(s for s in range(10_000) if spike_pattern(s, 12) == [False, True] + [False] * 10)
    box = sandbox_factory(faults=Faults(p_latency_spike=0.5, spike_s=2.0, seed=seed))
    key, secret = box.create_client("status-page-demo", rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2)])
    config = str(kit.config(tmp_path, box.base_url, contacts, schedule="every 1h", extra_capture="timeout_s = 0.5\n"))
    assert kit.run("sync", "-c", config).code == 5  # blocked
    entry = json.loads(kit.run("ledger", "list", "-c", config, "--state", "blocked", "--json").stdout.splitlines()[0])
    batch_key = json.loads(kit.run("ledger", "show", "-c", config, entry["key"], "--json").stdout)["batches"][-1]
    command = f"capture-sync ledger resolve -c {config} {batch_key} --requeue"
    assert command in kit.run("ledger", "show", "-c", config, batch_key).stdout  # the CLI's own words

    daemon = start_daemon(Path(config))
    daemon.poll(lambda: "signups" in daemon.get("/").text and daemon.get("/readyz").status_code == 200, "a ready page")

    dom = browser(chromium, tmp_path / "profile", "--dump-dom", daemon.url + "/").stdout
    assert "<b>signups</b>" in dom and "every 1h" in dom and "exit 5 (blocked)" in dom
    assert "Blocked entries (409)" in dom and batch_key in dom
    assert command in dom and command.replace("--requeue", "--dismiss") in dom
    assert "ada1@example.org" not in dom and "ada2@example.org" not in dom  # no contact data unless opted in
    assert secret not in dom

    png = tmp_path / "status-page.png"
    browser(
        chromium,
        tmp_path / "profile",
        f"--screenshot={png}",
        f"--window-size={PHONE}",
        "--hide-scrollbars",
        daemon.url + "/",
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    if target := os.environ.get("CAPTURE_SYNC_STATUS_PAGE_PNG"):
        shutil.copyfile(png, target)
    assert daemon.stop() == 0, daemon.log.read_text()
