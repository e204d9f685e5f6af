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
    listed = kit.run("ledger", "list", "-c", config, "--state", "rejected", "--json", "--limit", "10000")
    return [json.loads(x) for x in listed.stdout.splitlines()]


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


def _bad(n: int):
    from connector.ledger import Mapped

    return Mapped(f"R{n}", raw={"id": f"R{n}"}, reasons=("`email` is not valid",))


def _good(n: int):
    from connector.ledger import Mapped

    return Mapped(f"G{n}", payload=json.dumps({"name": f"P{n}", "email": f"p{n}@example.org"}))


def test_two_ledgers_feeding_one_file_each_keep_their_own_position(tmp_path: Path) -> None:
    """Two integrations (two processes: one process refuses it) name the same feed: each one's
    rejects reach it, once, though their entry ids overlap. Each commit is held by the feed as a
    sync holds it (`committing`: an empty ledger is marked as met before it gets its first entries)."""
    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    with Ledger(tmp_path / "eu.sqlite3") as eu, Ledger(tmp_path / "us.sqlite3") as us:
        feed.catch_up(eu)
        feed.catch_up(us)  # each pass start
        with feed.committing(eu):
            eu.enqueue("eu", "m", [*(_good(n) for n in range(50)), _bad(1)], None)
            feed.catch_up(eu)
        with feed.committing(us):
            us.enqueue("us", "m", [_bad(2), _bad(3)], None)
            feed.catch_up(us)
        with feed.committing(eu):
            eu.enqueue("eu", "m", [_bad(4)], None)
            feed.catch_up(eu)
        feed.catch_up(us)
        assert [(x["source"], x["record_id"]) for x in _lines(feed.path)] == [
            ("eu", "R1"),
            ("us", "R2"),
            ("us", "R3"),
            ("eu", "R4"),
        ]
        assert {x["ledger"] for x in _lines(feed.path)} == {eu.identity(), us.identity()}


def test_a_ledger_made_afresh_beside_an_old_feed_has_its_rejects_written(tmp_path: Path) -> None:
    """The ledger file was deleted (or a new PostgreSQL schema named): the old feed's position, far
    above the new ledger's ids, is another ledger's, and holds nothing back."""
    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    with Ledger(tmp_path / "old.sqlite3") as old:
        feed.catch_up(old)
        old.enqueue("s", "m", [*(_good(n) for n in range(50)), _bad(1)], None)
        feed.catch_up(old)
    (tmp_path / "old.sqlite3").unlink()
    with Ledger(tmp_path / "old.sqlite3") as new:
        feed.catch_up(new)  # the pass start
        new.enqueue("s", "m", [_bad(2)], None)
        feed.catch_up(new)
    assert [x["record_id"] for x in _lines(feed.path)] == ["R1", "R2"]


def test_a_position_above_the_ledger_is_logged_and_the_feed_goes_on_from_its_newest(tmp_path: Path, capsys) -> None:
    """A ledger put back from an older copy: its newest entry is below the feed's position. The feed
    says so (`rejects.position_ahead`) and goes on from the ledger's newest entry, so the ids the
    ledger gives again are written, not skipped."""
    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)
        ledger.enqueue("s", "m", [_bad(1)], None)
    import shutil

    shutil.copy(tmp_path / "l.sqlite3", tmp_path / "backup.sqlite3")
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)
        ledger.enqueue("s", "m", [_bad(2), _bad(3)], None)
        feed.catch_up(ledger)
    shutil.copy(tmp_path / "backup.sqlite3", tmp_path / "l.sqlite3")  # the older copy put back
    capsys.readouterr()
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)
        assert "rejects.position_ahead" in "".join(capsys.readouterr())  # structlog's console: stdout here
        ledger.enqueue("s", "m", [_bad(4)], None)
        feed.catch_up(ledger)
    assert [(x["record_id"], x["entry"]) for x in _lines(feed.path)] == [("R1", 1), ("R2", 2), ("R3", 3), ("R4", 2)]


def test_a_torn_write_is_cut_off_and_written_again_whole(tmp_path: Path, monkeypatch) -> None:
    """The disk fills part-way through a page: the next catch-up cuts the torn line off before it
    appends, so every line parses and each reject is in the feed once."""
    import errno
    import os

    from connector.delivery import RejectsFeed
    from connector.delivery import rejects as module
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    real = os.write
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)
        ledger.enqueue("s", "m", [_bad(1)], None)
        feed.catch_up(ledger)
        calls: list[int] = []

        def disk_full(fd: int, data) -> int:
            if not calls:
                calls.append(1)
                return real(fd, bytes(data)[:40])
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(module.os, "write", disk_full)
        ledger.enqueue("s", "m", [_bad(2), _bad(3)], None)
        feed.catch_up(ledger)
        monkeypatch.setattr(module.os, "write", real)
        ledger.enqueue("s", "m", [_bad(4)], None)
        feed.catch_up(ledger)
    assert [x["record_id"] for x in _lines(feed.path)] == ["R1", "R2", "R3", "R4"]


def test_a_whole_line_without_its_newline_is_written_again_not_counted(tmp_path: Path, monkeypatch) -> None:
    """The write stopped just before a line's newline: the line parses but is cut off with the torn
    end, so it counts as not written."""
    import errno
    import os

    from connector.delivery import RejectsFeed
    from connector.delivery import rejects as module
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    real = os.write
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)

        calls: list[int] = []

        def all_but_the_newline(fd: int, data) -> int:
            if not calls:
                calls.append(1)
                return real(fd, bytes(data)[:-1])
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(module.os, "write", all_but_the_newline)
        ledger.enqueue("s", "m", [_bad(1)], None)
        feed.catch_up(ledger)
        monkeypatch.setattr(module.os, "write", real)
        feed.catch_up(ledger)
    assert [x["record_id"] for x in _lines(feed.path)] == ["R1"]


def test_the_feed_is_on_disk_before_its_position_and_the_position_before_its_rename(
    tmp_path: Path, monkeypatch
) -> None:
    """After a power loss the position must never name lines the disk lost: the feed is fsynced
    (once per page) before the position is written, and the position before it replaces the old one."""
    import os

    from connector.delivery import RejectsFeed
    from connector.delivery import rejects as module
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync " + Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append("replace " + Path(dst).name)
        real_replace(src, dst)

    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)
        ledger.enqueue("s", "m", [_bad(0)], None)
        feed.catch_up(ledger)  # the ledger met empty has entries: its mark goes (a position written)
        ledger.enqueue("s", "m", [_bad(n) for n in range(1, 6)], None)
        monkeypatch.setattr(module.os, "fsync", fsync)
        monkeypatch.setattr(module.os, "replace", replace)
        feed.catch_up(ledger)
    assert events == [
        "fsync rejects.jsonl",
        "fsync .rejects.jsonl.position.new",
        "replace .rejects.jsonl.position",
    ]


def test_a_pass_starting_while_another_commits_rejects_does_not_skip_them(tmp_path: Path) -> None:
    """A brand-new feed: a pass commits rejects and, before its catch-up, another pass starts. The
    feed's start point was taken before that commit (under the lock the commit holds), so the
    starting pass's catch-up writes them."""
    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        ledger.enqueue("s", "m", [_bad(1)], None)  # before the feed was turned on: history
        with feed.committing(ledger):
            ledger.enqueue("s", "m", [_bad(2)], None)
        feed.catch_up(ledger)  # the other pass's start
    assert [x["record_id"] for x in _lines(feed.path)] == ["R2"]


def test_two_configs_of_one_daemon_naming_one_rejects_file_are_refused(kit, sandbox, tmp_path: Path) -> None:
    configs = []
    for name in ("eu", "us"):
        folder = tmp_path / name
        folder.mkdir()
        config, _ = _setup(kit, sandbox, folder, f'rejects_file = "{tmp_path}/rejects.jsonl"')
        Path(config).write_text(
            Path(config).read_text().replace("[daemon]", f'[integration]\nname = "{name}"\n\n[daemon]')
        )
        configs.append(config)
    refused = kit.run("run", "--once", "-c", configs[0], "-c", configs[1])
    assert refused.code != 0
    assert "rejects_file" in refused.stderr and "rejects.jsonl" in refused.stderr


def test_a_ledger_is_told_apart_on_both_engines_and_a_copy_keeps_its_identity(
    tmp_path: Path, ledger_target: str | Path, postgres_ledger_url: str
) -> None:
    """The feed's positions are per ledger: a ledger has its identity from its creation on (schema v13),
    one made afresh a new one, and a `ledger copy` to PostgreSQL the identity of its source (its feed goes on)."""
    from connector.ledger import Ledger

    with Ledger(ledger_target) as ledger:
        first = ledger.identity()
        ledger.enqueue("s", "m", [_bad(1)], None)
        assert ledger.identity() == first != ""
    with Ledger(ledger_target) as ledger:
        assert ledger.identity() == first
    with Ledger(tmp_path / "other.sqlite3") as other:
        other.enqueue("s", "m", [_bad(1)], None)
        assert other.identity() not in ("", first)
        with Ledger(postgres_ledger_url, integration="copied") as copy:
            other.copy_to(copy)
            assert copy.identity() == other.identity()


@pytest.mark.parametrize("rotation", ["logrotate", "the consumer deletes FILE.1"])
def test_a_restored_ledgers_reissued_ids_are_written_after_the_feed_is_rotated(tmp_path: Path, rotation: str) -> None:
    """A ledger put back from an older copy gives its ids again while the feed's lines of those ids
    from before the restore are still there. Rotating the feed (logrotate's rename, or the feed's own
    rotation with the consumer deleting FILE.1) changes its inode and size, so the next catch-up reads
    the lines for a write its position missed: the old lines must not count. The position file keeps
    a floor per ledger (the newest id written before the restore) up to which the lines tell nothing."""
    import os
    import shutil

    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl", max_bytes=1)  # a file per line: FILE.1 .. FILE.3 rotated
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)
        ledger.enqueue("s", "m", [_bad(1)], None)
        feed.catch_up(ledger)
    shutil.copy(tmp_path / "l.sqlite3", tmp_path / "backup.sqlite3")
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        ledger.enqueue("s", "m", [_bad(2), _bad(3)], None)
        feed.catch_up(ledger)
    shutil.copy(tmp_path / "backup.sqlite3", tmp_path / "l.sqlite3")  # the older copy put back
    first = feed.path.with_name("rejects.jsonl.1")
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        feed.catch_up(ledger)  # the pass start: the position dropped to the ledger's newest, 1
        if rotation == "logrotate":
            os.replace(first, feed.path.with_name("rejects.jsonl.2"))
            os.replace(feed.path, first)
        else:
            first.unlink()
        ledger.enqueue("s", "m", [_bad(4), _bad(5)], None)
        feed.catch_up(ledger)
    files = [feed.path.with_name(f"rejects.jsonl.{n}") for n in (3, 2, 1)] + [feed.path]
    lines = [line for path in files if path.exists() for line in _lines(path)]
    assert [(x["record_id"], x["entry"]) for x in lines][-2:] == [("R4", 2), ("R5", 3)]


def test_a_commit_of_one_feed_does_not_hold_another_feeds_catch_up(tmp_path: Path) -> None:
    """Two integrations of one daemon have a feed each: one feed's commit and catch-up (its fsyncs)
    hold that feed alone, not every integration's chunk commits."""
    import threading

    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    eu, us = RejectsFeed(tmp_path / "eu.jsonl"), RejectsFeed(tmp_path / "us.jsonl")
    done = threading.Event()

    def other_integration() -> None:
        with Ledger(tmp_path / "us.sqlite3") as ledger:
            ledger.enqueue("us", "m", [_good(1)], None)
            with us.committing(ledger):
                ledger.enqueue("us", "m", [_bad(1)], None)
                us.catch_up(ledger)
        done.set()

    with Ledger(tmp_path / "eu.sqlite3") as ledger, eu.committing(ledger):
        thread = threading.Thread(target=other_integration)
        thread.start()
        assert done.wait(60), "the us feed waited for the eu feed's commit"
    thread.join()
    assert [x["record_id"] for x in _lines(us.path)] == ["R1"]


SHARER = """
import sys
from pathlib import Path
from connector.delivery import RejectsFeed
from connector.ledger import Ledger, Mapped

feed, ledger_path, name, go = RejectsFeed(Path(sys.argv[1])), sys.argv[2], sys.argv[3], Path(sys.argv[4])
with Ledger(ledger_path) as ledger:
    ledger.enqueue(name, "m", [Mapped("first", payload='{"name": "P", "email": "p@example.org"}')], None)
    feed.catch_up(ledger)
    while not go.exists():
        pass
    for n in range(40):
        ledger.enqueue(name, "m", [Mapped(f"R{n}", raw={"id": f"R{n}"}, reasons=("`email` is not valid",))], None)
        feed.catch_up(ledger)
    print(ledger.identity(), ledger.last_entry_id())
"""


@pytest.mark.parametrize("one_ledger", [False, True])
def test_two_processes_sharing_a_feed_keep_each_others_positions(tmp_path: Path, one_ledger: bool) -> None:
    """Two integrations' processes name one feed (one process refuses it, two cannot see each other):
    each one's position update reads the other's under a lock, so none is lost (a lost one would
    have the lines written again after the next rotation) and every reject is in the feed once. Or two
    processes of one ledger (`sync` beside the daemon): each reads the ledger without the lock, so
    under it each writes only what the other has not, and the other's newer position is not taken
    for a ledger put back from a copy."""
    import os
    import subprocess
    import sys

    feed = tmp_path / "rejects.jsonl"
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                SHARER,
                str(feed),
                str(tmp_path / f"{'l' if one_ledger else name}.sqlite3"),
                name,
                str(go),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("eu", "us")
    ]
    go.touch()
    newest = {}
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        assert "rejects.position_ahead" not in out
        identity, last = out.splitlines()[-1].split()  # structlog writes to stdout too
        newest[identity] = max(newest.get(identity, 0), int(last))
    lines = _lines(feed)
    assert sorted((x["source"], x["record_id"]) for x in lines) == sorted(
        (name, f"R{n}") for name in ("eu", "us") for n in range(40)
    )
    assert json.loads(feed.with_name(".rejects.jsonl.position").read_text())["ledgers"] == newest


def test_a_ledger_with_history_met_after_an_empty_one_has_its_history_left_out(tmp_path: Path) -> None:
    """The feed met an empty ledger (a new installation): that ledger's rejects are all written, from
    its first. A ledger with history that the feed meets later (another integration's process) starts
    at its newest entry, as on any feed that already holds a ledger: the empty ledger's mark is gone
    once that ledger has entries."""
    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    with Ledger(tmp_path / "new.sqlite3") as new:
        feed.catch_up(new)  # empty
        new.enqueue("new", "m", [_bad(1)], None)
        feed.catch_up(new)
    with Ledger(tmp_path / "old.sqlite3") as old:
        old.enqueue("old", "m", [_bad(2)], None)  # before the feed met it: history
        feed.catch_up(old)
        old.enqueue("old", "m", [_bad(3)], None)
        feed.catch_up(old)
    assert [x["record_id"] for x in _lines(feed.path)] == ["R1", "R3"]


HOLDER = """
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.kill(os.getpid(), signal.SIGSTOP)  # stopped while holding the feed's lock
"""


def test_a_process_stopped_holding_the_feeds_lock_does_not_stop_a_syncs_commits(kit, sandbox, tmp_path: Path) -> None:
    """Another integration's process sharing the feed is stopped (SIGSTOP) while it holds `.FILE.lock`:
    the sync still commits every chunk (its rejects in the ledger, `rejects.busy` logged), and once
    the lock is free the next pass writes them all to the feed, each once."""
    import subprocess
    import sys
    import time

    config, contacts = _setup(kit, sandbox, tmp_path, 'rejects_file = "rejects.jsonl"', rows=2)
    assert kit.run("sync", "-c", config).code == 0  # the feed has met the ledger: R2, R3
    feed = tmp_path / "rejects.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / ".rejects.jsonl.lock")])
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{holder.pid}/stat").read_text().split(")")[-1].split()[0] != "T":  # stopped: holds it
            assert time.monotonic() < deadline and holder.poll() is None, "the holder did not take the lock"
            time.sleep(0.01)
        # 2,500 rejects: three chunks of 1,000 (the first waits LOCK_WAIT, the next do not), three pages
        kit.contacts(contacts, [kit.contact(n, **BAD) for n in range(4, 2504)], header=False)
        synced = kit.run("sync", "-c", config)  # CLI_TIMEOUT_S bounds it: a stalled commit would time out
        assert synced.code == 0, synced.stderr
        assert "rejects.busy" in synced.stdout + synced.stderr
        assert len(_rejected(kit, config)) == 2502  # every chunk committed
        assert [x["record_id"] for x in _lines(feed)] == ["R2", "R3"]
    finally:
        holder.kill()  # SIGKILL ends a stopped process too; its lock goes with it
        holder.wait()
    assert kit.run("sync", "-c", config).code == 0  # the next pass catches up
    lines = _lines(feed)
    assert [x["record_id"] for x in lines] == [f"R{n}" for n in range(2, 2504)]
    assert [x["key"] for x in lines] == [e["key"] for e in _rejected(kit, config)]


def test_a_new_ledgers_first_commit_with_the_lock_held_elsewhere_goes_on_and_its_rejects_follow(
    tmp_path: Path, capsys
) -> None:
    """The feed has not met the ledger and another process holds its lock: the commit does not wait
    for it (after `LOCK_WAIT`, `rejects.busy`), yet the start point stays the one from before that
    commit, so once the lock is free the next catch-up writes the commit's rejects, not the history."""
    import fcntl
    import os

    from connector.delivery import RejectsFeed
    from connector.ledger import Ledger

    feed = RejectsFeed(tmp_path / "rejects.jsonl")
    other = os.open(feed.lock_file, os.O_RDWR | os.O_CREAT, 0o600)  # another open file: flock conflicts
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        ledger.enqueue("s", "m", [_bad(1)], None)  # before the feed was turned on: history
        try:
            fcntl.flock(other, fcntl.LOCK_EX)
            feed.catch_up(ledger)  # the pass's start
            with feed.committing(ledger):
                ledger.enqueue("s", "m", [_bad(2)], None)
                feed.catch_up(ledger)
            assert not feed.path.exists()
        finally:
            os.close(other)
        ledger.enqueue("s", "m", [_bad(3)], None)
        feed.catch_up(ledger)
    assert [x["record_id"] for x in _lines(feed.path)] == ["R2", "R3"]
    assert "rejects.busy" in capsys.readouterr().out
