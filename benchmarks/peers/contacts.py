"""The peers' job: one CSV of contacts whose phones come in mixed formats, the way exports do.

Every row is valid for every contender (a unique lower-case email, a phone `phonenumbers` holds
valid for the US), so all four must capture every row: a count below the row count is a loss, not
a validation choice. The columns are those of benchmarks/csv_read.py's MAPPING, so capture-sync
runs on it with the harness's config unchanged.
"""

from __future__ import annotations

import csv
from pathlib import Path

COLUMNS = ["id", "First", "Last", "Email", "Phone", "Company", "Plan"]

# Five spellings of one valid US number each; row i uses format i % 5 and line i % 10000.
_FORMATS = (
    "(415) 555-{line}",
    "415.555.{line}",
    "+1 415 555 {line}",
    "1-415-555-{line}",
    "415555{line}",
)


def phone(i: int) -> str:
    return _FORMATS[i % len(_FORMATS)].format(line=f"{i % 10000:04d}")


def generate(path: Path, rows: int) -> None:
    """Write `rows` contacts to `path` (overwritten)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(COLUMNS)
        for i in range(rows):
            plan = "pro" if i % 3 else "basic"
            out.writerow(
                [i, f"Person{i % 997}", f"Number{i}", f"person.{i}@example.com", phone(i), "Example, Inc.", plan]
            )
