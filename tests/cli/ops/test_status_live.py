"""`capture-sync status` beside a running daemon says the daemon's live state, one line of advice
each, with the command that fixes it (issue 26): paused, credentials refused, pending during an
outage, a source that cannot be read. Real processes throughout: the sandbox (`sandbox serve`), the
daemon (`capture-sync run`), and `status` and the steering commands as a user types them.

The daemon's source ticks yearly, so nothing runs but what the test asks for: `capture-sync sync`
beside the daemon is a pass run by the daemon, which returns once the pass has ended."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from connector.sandbox import SandboxStore

YEARLY = "0 0 1 1 *"


def _daemon_beside(kit, box, start_daemon, folder: Path, rows: int = 3) -> tuple[Path, Path]:
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("status-live", rate_limit=100_000)
    kit.credentials(folder, key, secret)
    contacts = folder / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, rows + 1)])
    config = kit.config(folder, box.base_url, contacts, schedule=YEARLY)
    start_daemon(config)
    return config, contacts


def _status(kit, config: Path) -> tuple[str, dict[str, Any]]:
    """The text `status` prints and its --json twin; the last advice lines of the text are the JSON's."""
    text = kit.run("status", "-c", str(config))
    assert text.code == 0, text.stderr
    as_json = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
    assert as_json["live"] is not None, "status did not reach the running daemon"
    assert text.stdout.splitlines()[-len(as_json["advice"]) :] == [a["text"] for a in as_json["advice"]]
    return text.stdout, as_json


def _pass_now(kit, config: Path, code: int) -> None:
    done = kit.run("sync", "-c", str(config))
    assert done.code == code, done.stdout + done.stderr
    assert "a capture-sync daemon holds" in done.stderr  # the daemon ran it, not this process


def test_paused_says_since_when_and_the_resume_command(kit, sandbox_process, start_daemon, tmp_path: Path) -> None:
    config, _ = _daemon_beside(kit, sandbox_process(), start_daemon, tmp_path)
    paused = kit.run("pause", "-c", str(config), "--source", "signups")
    assert paused.code == 0, paused.stdout + paused.stderr

    text, as_json = _status(kit, config)
    assert set(as_json["live"]["paused"]) == {"signups"}
    [advice] = as_json["advice"]
    assert advice["state"] == "paused"
    assert advice["text"].startswith("paused: signups since ")
    assert advice["text"].endswith(f"`capture-sync resume -c {config} --source signups` resumes it")
    assert "everything is settled" not in text


def test_credentials_refused_says_since_when_what_waits_and_which_sources_are_not_read(
    kit, sandbox_process, start_daemon, tmp_path: Path
) -> None:
    box = sandbox_process()
    config, _ = _daemon_beside(kit, box, start_daemon, tmp_path)
    box.set_faults(refuse_credentials=True)  # as a rotated secret the daemon does not hold yet
    _pass_now(kit, config, 3)

    text, as_json = _status(kit, config)
    assert as_json["live"]["health"]["auth"] is not None
    assert "everything is settled" not in text and "nothing to do" not in text
    [advice] = as_json["advice"]
    assert advice["state"] == "credentials_refused"
    assert advice["text"].startswith("the Capture API refuses the credentials since ")
    assert "these sources are not read: signups since " in advice["text"]
    assert "write a working pair into the credential files, then `kill -HUP " in advice["text"]
    assert (tmp_path / "api_secret").read_text().strip() not in text + json.dumps(as_json)


def test_pending_during_an_outage_says_the_daemon_resends_them_by_itself(
    kit, sandbox_process, start_daemon, tmp_path: Path
) -> None:
    box = sandbox_process()
    config, _ = _daemon_beside(kit, box, start_daemon, tmp_path)
    box.stop()  # the API goes away while the daemon runs
    _pass_now(kit, config, 4)

    text, as_json = _status(kit, config)
    assert as_json["live"]["health"]["outage"] is not None
    [advice] = as_json["advice"]
    assert advice["state"] == "outage"
    assert advice["text"].startswith("3 entries wait: the Capture API has not answered since ")
    assert "the daemon re-sends them by itself once it answers" in advice["text"]
    assert "replay" not in advice["text"]  # the daemon does it: no command to run
    assert "everything is settled" not in text


def test_a_source_that_cannot_be_read_is_named_with_why_and_since_when(
    kit, sandbox_process, start_daemon, tmp_path: Path
) -> None:
    config, contacts = _daemon_beside(kit, sandbox_process(), start_daemon, tmp_path)
    _pass_now(kit, config, 0)
    contacts.unlink()
    _pass_now(kit, config, 2)

    text, as_json = _status(kit, config)
    assert set(as_json["live"]["health"]["unread_sources"]) == {"signups"}
    [advice] = as_json["advice"]
    assert advice["state"] == "source_unreadable"
    assert advice["text"].startswith("not read: signups since ")
    assert advice["text"].endswith(
        f"fix it (`capture-sync check -c {config}` says what is wrong); the daemon reads it again on its next tick"
    )
    assert "everything is settled" not in text


def test_a_pause_left_for_the_next_daemon_is_said_without_one(kit, sandbox_process, tmp_path: Path) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("status-paused", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, box.base_url, contacts)
    assert kit.run("sync", "-c", str(config)).code == 0
    assert kit.run("pause", "-c", str(config)).code == 0  # no daemon: recorded in the ledger for the next one

    as_json = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
    assert as_json["live"] is None
    [advice] = as_json["advice"]
    assert advice["state"] == "paused"
    assert advice["text"].startswith("paused for the next daemon (every source, since ")
    assert advice["text"].endswith(f"until `capture-sync resume -c {config}`")


def test_a_blocked_batch_beside_the_daemon_says_to_stop_it_before_resolving(
    kit, sandbox_process, start_daemon, tmp_path: Path
) -> None:
    config, _ = _daemon_beside(kit, sandbox_process(), start_daemon, tmp_path)
    _pass_now(kit, config, 0)
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:  # a 409's outcome, put directly (as test_outage.py does)
        [key] = db.execute("SELECT key FROM batches").fetchone()
        db.execute("UPDATE batches SET state = 'blocked' WHERE key = ?", (key,))
        db.execute("UPDATE entries SET state = 'blocked' WHERE record_id = 'R2'")
    db.close()

    shown = kit.run("ledger", "show", "-c", str(config), key)
    assert shown.code == 0, shown.stderr
    assert "then stop the daemon (`ledger resolve` is refused while it holds the ledger) and either" in shown.stdout
    assert f"capture-sync ledger resolve -c {config} {key} --requeue" in shown.stdout
    _, as_json = _status(kit, config)
    [advice] = as_json["advice"]
    assert advice["state"] == "blocked" and "then stop the daemon" in advice["text"]
