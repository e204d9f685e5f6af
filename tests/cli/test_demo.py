"""`capture-sync demo`: its counts match the sample data and `status`, and a second run captures nothing new."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from connector.sandbox import SandboxStore

SAMPLE = Path(__file__).resolve().parents[2] / "connector" / "cli" / "sample-contacts.csv"
# Deliberately simpler than the mapper's validator: one @, no spaces or commas, a dot in the domain.
PLAIN_EMAIL = re.compile(r"^[^@\s,]+@[^@\s,]+\.[^@\s,]+$")


def expected_from_csv() -> dict[str, int]:
    rows = list(csv.DictReader(SAMPLE.open(encoding="utf-8")))
    valid, identities = 0, set()
    for row in rows:
        email, phone = row["Email"].strip(), row["Phone"].strip()
        if not row["First"].strip() or not (email or phone) or (email and not PLAIN_EMAIL.match(email)):
            continue
        valid += 1
        identities.add("email:" + email.lower() if email else "phone:" + re.sub(r"\D", "", phone))
    # Every valid row is listed in `successful` (captured); the CRM merges rows of the same person
    # (the same email in another case) into one person, which is its decision, not a `duplicate`.
    return {
        "read": len(rows),
        "captured": valid,
        "duplicate": 0,
        "rejected": len(rows) - valid,
        "failed": 0,
        "persons": len(identities),
    }


def summary_counts(stdout: str) -> dict[str, int]:
    counts = {}
    for name in ("captured", "duplicate", "rejected", "failed"):
        match = re.search(rf"^\W*{name}\W+(\d+)\b", stdout, re.MULTILINE)
        assert match, f"no {name} row in:\n{stdout}"
        counts[name] = int(match.group(1))
    read = re.search(r"(\d+) contacts read", stdout)
    assert read, stdout
    counts["read"] = int(read.group(1))
    return counts


def test_sample_has_the_cases_the_demo_is_about() -> None:
    rows = list(csv.DictReader(SAMPLE.open(encoding="utf-8")))
    emails = [r["Email"] for r in rows if r["Email"]]
    assert 900 <= len(rows) <= 1100
    assert len({e.lower() for e in emails}) < len(set(emails))  # same email, another case
    assert any(not r["Email"] and not r["Phone"] for r in rows)
    assert any(not PLAIN_EMAIL.match(e) for e in emails)


def test_demo_counts_match_the_sample_and_a_second_run_captures_nothing(kit, tmp_path: Path) -> None:
    expected = expected_from_csv()
    first = kit.run("demo", cwd=tmp_path)
    assert first.code == 0, first.stderr
    persons_expected = expected.pop("persons")
    assert summary_counts(first.stdout) == expected
    assert "needs `email` or `phone`" in first.stdout  # a top rejection reason
    folder = tmp_path / "capture-sync-demo"
    with SandboxStore(folder / "sandbox.sqlite3") as store:
        persons = len(store.persons())
    assert persons == persons_expected

    second = kit.run("demo", cwd=tmp_path)
    assert second.code == 0, second.stderr
    assert "Nothing new to capture" in second.stdout
    assert "Entries by source and state" in second.stdout  # status follows
    with SandboxStore(folder / "sandbox.sqlite3") as store:
        assert len(store.persons()) == persons
        assert sum(1 for c in store.captures()) == expected["captured"]


def test_the_demo_summary_counts_what_status_counts_in_the_same_words(kit, tmp_path: Path) -> None:
    """One word per meaning: the summary's rows are ledger states, and on a first run (a fresh
    ledger) each equals `status --json`'s count of that state."""
    demo = kit.run("demo", "--dir", str(tmp_path / "d"), cwd=tmp_path)
    assert demo.code == 0, demo.stderr
    summary = summary_counts(demo.stdout)
    status = kit.run("status", "-c", str(tmp_path / "d" / "capture-sync.toml"), "--json")
    assert status.code == 0, status.stderr
    by_state = json.loads(status.stdout)["by_state"]
    for state in ("captured", "duplicate", "rejected", "failed"):
        assert summary[state] == by_state[state], state
    assert summary["read"] == sum(by_state.values())
    assert not re.search(r"^\W*duplicates\W+\d", demo.stdout, re.MULTILINE)  # the state is `duplicate`
