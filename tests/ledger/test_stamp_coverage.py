"""Every statement of the ledger that writes an entry's state stamps it with the run in hand (the
stamp is in each statement, not a trigger: see connector/ledger/_runs.py), so a write added later
without it fails here, not in a run report."""

from __future__ import annotations

import re
from pathlib import Path

LEDGER = Path(__file__).parents[2] / "connector" / "ledger"


def _statements() -> list[tuple[str, str]]:
    found = []
    for path in sorted(LEDGER.glob("*.py")):
        text = path.read_text()
        # adjacent string literals of one statement are joined, so a statement split over lines is one
        joined = re.sub(r'"\s*\n\s*f?"', "", text)
        for match in re.finditer(r"(UPDATE entries SET[^\n]*|INSERT INTO entries[^\n]*)", joined):
            found.append((path.name, match.group(1)))
    return found


def test_every_write_of_an_entry_state_carries_the_run_stamp():
    writes = [
        (name, sql)
        for name, sql in _statements()
        # a migration (_migrations.py) is no run's work: v10 turns in-flight entries pending without one
        if name != "_migrations.py" and ("INSERT" in sql or re.search(r"\bstate\s*=", sql.split("WHERE")[0]))
    ]
    assert len(writes) >= 8  # enqueue (2), settle, the members' verbs, requeue, resolve (3); claim writes none
    missing = [(name, sql) for name, sql in writes if "STAMP_SET" not in sql and "capture_run_in_hand()" not in sql]
    assert missing == []
