"""`[daemon] rejects_file`: every rejected record of a sync as one JSON line, contact data masked unless
the operator opts in, the file private (0600, never through a link) and rotated by size.

Setup: a csv source whose bad rows carry a name, a phone and an email the mapping refuses. Oracle: the
ledger's own rejected entries (`ledger list --state rejected --json`) and the run ids of `runs list`."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import pytest

BAD = {"First": "Grace", "Last": "Hopper", "Email": "grace.hopper@@navy.example", "Phone": "+15551230177"}


def _setup(kit, sandbox, tmp_path: Path, daemon: str, rows: int = 2) -> tuple[str, Path]:
    key, secret = sandbox.create_client(rate_limit=10_000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), *(kit.contact(n, **BAD) for n in range(2, 2 + rows))])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    config.write_text(config.read_text() + f"\n[daemon]\n{daemon}\n")
    return str(config), contacts


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_rejected_record_is_a_masked_line_of_a_private_file(kit, sandbox, tmp_path: Path) -> None:
    config, _ = _setup(kit, sandbox, tmp_path, 'rejects_file = "rejects.jsonl"')
    synced = kit.run("sync", "-c", config)
    assert synced.code == 0, synced.stderr

    feed = tmp_path / "rejects.jsonl"
    assert stat.S_IMODE(feed.stat().st_mode) == 0o600
    lines = _lines(feed)
    entries = [
        json.loads(x)
        for x in kit.run("ledger", "list", "-c", config, "--state", "rejected", "--json").stdout.splitlines()
    ]
    [run] = json.loads(kit.run("runs", "list", "-c", config, "--json").stdout)["runs"]
    assert [(x["source"], x["record_id"], x["key"], x["run"]) for x in lines] == [
        ("signups", e["record_id"], e["key"], run["id"]) for e in entries
    ]
    assert len(lines) == 2 and all(x["reason"] and x["time"] for x in lines)
    text = feed.read_text()
    for value in ("Grace", "Hopper", "grace.hopper", "5551230177"):
        assert value not in text
    data = lines[0]["data"]
    assert (data["First"], data["Last"], data["Phone"]) == ("G***", "H***", "+1 *** *** **77")
    assert data["Email"].startswith("g***@") and data["id"] == "R2"

    again = kit.run("sync", "-c", config)  # the same rows read again are no new rejects
    assert again.code == 0 and len(_lines(feed)) == 2


def test_with_rejects_contact_data_the_lines_hold_the_record_as_read(kit, sandbox, tmp_path: Path) -> None:
    config, _ = _setup(kit, sandbox, tmp_path, 'rejects_file = "rejects.jsonl"\nrejects_contact_data = true')
    assert kit.run("sync", "-c", config).code == 0
    [first, _] = _lines(tmp_path / "rejects.jsonl")
    assert first["data"] == {"id": "R2", **BAD} and "`email` is not a valid email address" in first["reason"]


def test_the_feed_rotates_by_size_and_keeps_three(kit, sandbox, tmp_path: Path) -> None:
    config, contacts = _setup(
        kit, sandbox, tmp_path, 'rejects_file = "rejects.jsonl"\nrejects_max_bytes = 4096', rows=10
    )
    feed = tmp_path / "rejects.jsonl"
    written = []
    for round_ in range(6):
        if round_:
            kit.contacts(contacts, [kit.contact(100 * round_ + n, **BAD) for n in range(10)], header=False)
        assert kit.run("sync", "-c", config).code == 0
        written.append(len(_lines(feed)))
    rotated = [feed.with_name(f"rejects.jsonl.{n}") for n in (1, 2, 3)]
    assert all(p.exists() and stat.S_IMODE(p.stat().st_mode) == 0o600 for p in rotated)
    assert not feed.with_name("rejects.jsonl.4").exists()
    assert all(p.stat().st_size <= 4096 for p in (feed, *rotated))  # rotated line by line
    kept = [x["record_id"] for p in (*reversed(rotated), feed) for x in _lines(p)]
    every = [f"R{n}" for n in range(2, 12)] + [f"R{100 * r + n}" for r in range(1, 6) for n in range(10)]
    assert kept == every[-len(kept) :] and len(kept) > 30  # the newest, in order, none twice


@pytest.mark.parametrize("planted", ["link", "dangling link"])
def test_a_link_in_place_of_the_feed_is_not_followed_and_the_sync_goes_on(
    kit, sandbox, tmp_path: Path, planted: str
) -> None:
    config, _ = _setup(kit, sandbox, tmp_path, 'rejects_file = "rejects.jsonl"')
    target = tmp_path / "elsewhere.txt"
    if planted == "link":
        target.write_text("untouched\n")
    (tmp_path / "rejects.jsonl").symlink_to(target)
    synced = kit.run("sync", "-c", config)
    assert synced.code == 0, synced.stderr
    assert "rejects.unwritable" in synced.stderr and "symbolic link" in synced.stderr
    assert (target.read_text() if target.exists() else None) == ("untouched\n" if planted == "link" else None)


def _rejected(kit, config: str) -> list[dict]:
    listed = kit.run("ledger", "list", "-c", config, "--state", "rejected", "--json").stdout.splitlines()
    return [json.loads(x) for x in listed]


@pytest.mark.parametrize("point", ["before-rejects-write", "after-rejects-rotate", "after-rejects-write"])
def test_a_kill_between_the_commit_and_the_feed_leaves_every_reject_in_it_exactly_once(
    kit, sandbox, tmp_path: Path, point: str
) -> None:
    """SIGKILL at the failpoint, after the ledger committed the chunk's rejects: before the feed holds
    any of them, between a rotation and the lines after it, or after the lines and before the feed's
    position. The next sync writes what is missing, once."""
    config, contacts = _setup(
        kit, sandbox, tmp_path, 'rejects_file = "rejects.jsonl"\nrejects_max_bytes = 4096', rows=10
    )  # ten lines outgrow 4096 bytes: the chunk's write rotates once
    killed = kit.run("sync", "-c", config, env=kit.env(CAPTURE_SYNC_FAILPOINTS=f"{point}=1"))
    assert killed.code == -signal.SIGKILL, killed.stderr
    files = [tmp_path / f"rejects.jsonl{n}" for n in (".3", ".2", ".1", "")]  # oldest first
    assert len(_rejected(kit, config)) == 10  # committed before the kill
    if point == "before-rejects-write":
        assert not any(p.exists() for p in files)

    kit.contacts(contacts, [kit.contact(99, **BAD)], header=False)  # one more reject for the next run
    assert kit.run("sync", "-c", config).code == 0
    lines = [x for p in files if p.exists() for x in _lines(p)]
    assert [x["key"] for x in lines] == [e["key"] for e in _rejected(kit, config)]
    assert [x["record_id"] for x in lines] == [f"R{n}" for n in range(2, 12)] + ["R99"]
    assert [x["entry"] for x in lines] == sorted({x["entry"] for x in lines})  # each once, in order


def test_a_truncated_feed_gets_only_new_rejects_and_a_new_feed_not_the_history(kit, sandbox, tmp_path: Path) -> None:
    config, contacts = _setup(kit, sandbox, tmp_path, "", rows=2)
    assert kit.run("sync", "-c", config).code == 0  # two rejects before the feed is turned on
    Path(config).write_text(Path(config).read_text() + 'rejects_file = "rejects.jsonl"\n')
    feed = tmp_path / "rejects.jsonl"
    kit.contacts(contacts, [kit.contact(5, **BAD)], header=False)
    assert kit.run("sync", "-c", config).code == 0
    assert [x["record_id"] for x in _lines(feed)] == ["R5"]

    feed.write_text("")  # a script mailed the lines and emptied the file
    kit.contacts(contacts, [kit.contact(6, **BAD)], header=False)
    assert kit.run("sync", "-c", config).code == 0
    assert [x["record_id"] for x in _lines(feed)] == ["R6"]


def test_a_reject_of_a_source_no_longer_configured_has_every_field_masked_as_a_name(tmp_path: Path) -> None:
    """A crash left a source's rejects out of the feed, and the source left the config before the next
    pass: nothing tells which of its fields hold names any more, so every one is masked as one."""
    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger, Mapped

    feed = RejectsFeed(tmp_path / "rejects.jsonl", columns={"signups": {"first_name": ("First",)}})
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        feed.catch_up(ledger)  # a new feed: it starts here
        raw = {"First": "Grace", "Nick": "Amazing Grace", "Email": "grace@example.org"}
        for source in ("signups", "gone"):
            ledger.enqueue(source, "m", [Mapped("R1", raw=raw, reasons=("`email` is not valid",))], None)
        feed.catch_up(ledger)
    known, gone = _lines(feed.path)
    assert known["data"] == {"First": "G***", "Nick": "Amazing Grace", "Email": "g***@example.org"}
    assert gone["data"] == {"First": "G***", "Nick": "A*** G***", "Email": "g***"}
    assert (known["entry"], gone["entry"]) == (1, 2) and stat.S_IMODE(feed.position_file.stat().st_mode) == 0o600
