"""Issue 13 through the command line, against the sandbox over loopback: a cosmetic mapping edit is no
new work (point 3), and a 409 after a client-side timeout is never reported as settled (point 9)."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path

from connector.sandbox import Faults


def _draws(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.random() for _ in range(n)]


def test_a_mapping_edit_with_the_same_payload_and_a_re_exported_file_send_nothing(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(i) for i in range(1, 9)])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    assert kit.run("sync", "-c", str(config)).code == 0
    assert len(sandbox.store.captures()) == 8

    # The same mapping spelled another way, and the export written again (same rows, another order).
    text = config.read_text().replace('email = "Email"', 'email = { field = "Email" }')
    config.write_text(text.replace('first_name = "First"', 'first_name = { field = "First", transform = "strip" }'))
    contacts.unlink()
    kit.contacts(contacts, [kit.contact(i) for i in range(8, 0, -1)])
    again = kit.run("sync", "-c", str(config), "--log-level", "ERROR")
    assert again.code == 0, again.stderr
    assert len(sandbox.store.captures()) == 8, "a cosmetic mapping edit re-sent the records"
    assert re.search(r"unchanged\s+8", again.stdout), again.stdout


def test_a_409_after_a_client_timeout_is_blocked_and_status_says_so_with_the_way_out(
    kit, sandbox_factory, tmp_path: Path
) -> None:
    """The first request outlives the client's timeout; its retry under the same key meets 409 (the first
    one still running): spec 4.4 rule 3 blocks the batch. `status` must not call that settled."""
    # Draws: GET /info (fast), then the bulk request (slow); the retry meets the running claim first.
    seed = next(s for s in range(10_000) if [r < 0.5 for r in _draws(s, 2)] == [False, True])
    box = sandbox_factory(faults=Faults(p_latency_spike=0.5, spike_s=2.0, seed=seed))
    key, secret = box.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2)])
    config = str(kit.config(tmp_path, box.base_url, contacts, extra_capture="timeout_s = 0.5\n"))
    synced = kit.run("sync", "-c", config)
    assert synced.code == 5, (synced.stdout, synced.stderr)

    status = kit.run("status", "-c", config)
    assert "everything is settled" not in status.stdout
    assert "blocked" in status.stdout and "ledger list" in status.stdout
    as_json = json.loads(kit.run("status", "-c", config, "--json").stdout)
    assert as_json["settled"] is False and as_json["attention"]["blocked"] == 2

    entry = json.loads(kit.run("ledger", "list", "-c", config, "--state", "blocked", "--json").stdout.splitlines()[0])
    batch_key = json.loads(kit.run("ledger", "show", "-c", config, entry["key"], "--json").stdout)["batches"][-1]
    assert (
        f"ledger resolve -c {config} {batch_key} --requeue"
        in kit.run("ledger", "show", "-c", config, entry["key"]).stdout
    )
    shown = kit.run("ledger", "show", "-c", config, batch_key).stdout
    assert "timed out" in shown
    assert f"capture-sync ledger resolve -c {config} {batch_key} --requeue" in shown


def test_a_blocked_post_person_requeued_by_the_book_is_captured_once(kit, sandbox_factory, tmp_path: Path) -> None:
    """batch_size = 1: the request outlives the client's timeout, its retry meets 409, the entry is
    blocked. Once the first request has finished on the server, the operator follows `ledger show`:
    requeue, replay. The person is sent again under its same key, so the server answers with the
    earlier capture instead of capturing again."""
    seed = next(s for s in range(10_000) if [r < 0.5 for r in _draws(s, 4)] == [False, True, False, False])
    box = sandbox_factory(faults=Faults(p_latency_spike=0.5, spike_s=1.0, seed=seed))
    key, secret = box.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config_path = kit.config(tmp_path, box.base_url, contacts, extra_capture="timeout_s = 0.3\n")
    config_path.write_text(config_path.read_text().replace("batch_size = 10", "batch_size = 1"))
    config = str(config_path)
    assert kit.run("sync", "-c", config).code == 5
    entry = json.loads(kit.run("ledger", "list", "-c", config, "--state", "blocked", "--json").stdout.splitlines()[0])
    while box.store.idempotency_state(key, "person", entry["key"]) == "running":  # the server finishes it
        time.sleep(0.05)
    shown = kit.run("ledger", "show", "-c", config, entry["key"]).stdout
    assert "under its same key" in shown

    assert kit.run("ledger", "resolve", "-c", config, entry["key"], "--requeue").code == 0
    assert kit.run("replay", "-c", config).code == 0
    assert len(box.store.captures()) == 1
    assert [
        e["state"]
        for e in map(
            json.loads, kit.run("ledger", "list", "-c", config, "--state", "captured", "--json").stdout.splitlines()
        )
    ] == ["captured"]
