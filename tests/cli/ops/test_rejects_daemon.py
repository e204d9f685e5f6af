"""The rejects feed works for the daemon as for `sync`: a row refused by the mapping in a daemon's
pass becomes a masked line of `[daemon] rejects_file`, naming the run that rejected it."""

from __future__ import annotations

import json
import stat
from pathlib import Path


def test_the_daemon_appends_its_rejects_to_the_feed(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    kit.credentials(tmp_path, *sandbox.create_client(rate_limit=10_000))
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2, Email="ada.two@@example.org", Phone="+15551230188")])
    config = kit.config(tmp_path, sandbox.base_url, contacts, schedule="every 1s")
    config.write_text(config.read_text() + '\n[daemon]\nrejects_file = "rejects.jsonl"\n')
    feed = tmp_path / "rejects.jsonl"

    daemon = start_daemon(config)
    text = daemon.poll(lambda: feed.exists() and feed.read_text(), "the reject in the feed")
    assert daemon.stop() == 0
    [line] = [json.loads(x) for x in text.splitlines()]
    runs = json.loads(kit.run("runs", "list", "-c", str(config), "--json").stdout)["runs"]
    assert line["run"] in {r["id"] for r in runs if r["counts"]["rejected"] == 1}
    assert (line["source"], line["record_id"], line["data"]["Phone"]) == ("signups", "R2", "+1 *** *** **88")
    assert "ada.two" not in text and "5551230188" not in text
    assert stat.S_IMODE(feed.stat().st_mode) == 0o600
