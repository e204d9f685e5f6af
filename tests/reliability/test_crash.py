"""Effectively-once under SIGKILL: the connector is killed at random moments while the API fails.

2,000 records (10% invalid) are synced through `capture-sync sync` against the sandbox with 10%
retryable 503s and 10% commit-then-drop. The process is SIGKILLed at random moments, at least ten
times, then restarted (sync, then replay) until it exits 0. Afterwards: every valid record is in
the CRM exactly once, every invalid one is `rejected` with its reasons, and the ledger agrees
with the sandbox.
"""

from __future__ import annotations

import csv
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from connector.sandbox import Faults

RECORDS = 2_000
KILLS = 10


def write_contacts(path: Path, rng: random.Random) -> tuple[int, int]:
    valid = invalid = 0
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["id", "First", "Last", "Email", "Phone"])
        for i in range(RECORDS):
            kind = rng.random()
            if kind < 0.05:
                out.writerow([i, "Nomail", f"N{i}", "", ""])  # neither email nor phone
                invalid += 1
            elif kind < 0.10:
                out.writerow([i, "Bad", f"B{i}", f"bad{i}-at-example.com", ""])  # not an email
                invalid += 1
            else:
                out.writerow([i, "Valid", f"V{i}", f"valid{i}@example.com", f"+1202555{i:04d}"])
                valid += 1
    return valid, invalid


def write_config(folder: Path, base_url: str, contacts: Path) -> Path:
    config = folder / "capture-sync.toml"
    config.write_text(
        f"""
[capture]
base_url = "{base_url}"
batch_size = 20
concurrency = 3
timeout_s = 5

[capture.retry]
max_attempts = 12
max_elapsed_s = 60
initial_backoff_s = 0.01
max_backoff_s = 0.2

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "contacts"
type = "csv"
path = "{contacts}"
primary_key = "id"

[sources.mapping]
first_name = "First"
last_name = "Last"
email = "Email"
phone = "Phone"
""",
        encoding="utf-8",
    )
    return config


def started_runs(ledger: Path) -> int:
    if not ledger.exists():
        return 0
    db = sqlite3.connect(ledger, timeout=5)
    try:
        return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # schema not created yet
        return 0
    finally:
        db.close()


def cli(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("capture-sync")), *args]


def test_sigkill_at_random_moments_loses_nothing_and_doubles_nothing(sandbox_factory, tmp_path):
    rng = random.Random(20261122)
    box = sandbox_factory(faults=Faults(p_retryable_503=0.1, p_commit_drop=0.1, latency_s=0.05, seed=7))
    key, secret = box.create_client(rate_limit=100_000)
    valid, invalid = write_contacts(tmp_path / "contacts.csv", rng)
    config = write_config(tmp_path, box.base_url, tmp_path / "contacts.csv")
    env = {**os.environ, "CAPTURE_API_KEY": key, "CAPTURE_API_SECRET": secret}
    log = (tmp_path / "runs.log").open("ab")

    kills = 0
    for round_no in range(60):
        command = cli("sync" if round_no % 2 == 0 else "replay", "-c", str(config), "--log-level", "WARNING")
        runs_before = started_runs(tmp_path / "ledger.sqlite3")
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=tmp_path)
        if kills < KILLS:
            # Kill at a random moment of the run itself, not of the interpreter's start-up.
            while proc.poll() is None and started_runs(tmp_path / "ledger.sqlite3") == runs_before:
                time.sleep(0.01)
            try:
                code = proc.wait(timeout=rng.uniform(0.0, 1.2))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
        else:
            code = proc.wait(timeout=120)
        if kills >= KILLS and code == 0 and command[1] == "replay":
            break
        assert code in (0, 4), f"unexpected exit {code}; see {tmp_path / 'runs.log'}"
    else:
        raise AssertionError("never settled")
    assert kills >= KILLS

    # The CRM holds every valid record exactly once.
    per_key = box.store.capture_counts_by_person_key()
    assert len(per_key) == valid and set(per_key.values()) == {1}
    assert len(box.store.persons()) == valid
    assert set(box.store.creations_by_identity().values()) == {1}

    # The ledger agrees, and every invalid record is rejected with its reasons.
    db = sqlite3.connect(tmp_path / "ledger.sqlite3")
    states = dict(db.execute("SELECT state, count(*) FROM entries GROUP BY state").fetchall())
    assert states.get("captured", 0) + states.get("duplicate", 0) == valid
    assert states.get("rejected") == invalid
    assert set(states) <= {"captured", "duplicate", "rejected"}
    reasons = [r for (r,) in db.execute("SELECT last_error FROM entries WHERE state = 'rejected'")]
    assert all(r and ("email" in r) for r in reasons)
    # The kills really cut runs short (not only process start-up).
    killed_runs = db.execute("SELECT count(*) FROM runs WHERE finished_at IS NULL").fetchone()[0]
    assert killed_runs >= KILLS // 2
    ledger_ids = {r for (r,) in db.execute("SELECT person_id FROM entries WHERE state = 'captured'")}
    assert ledger_ids <= {p["id"] for p in box.store.persons()}
    db.close()
